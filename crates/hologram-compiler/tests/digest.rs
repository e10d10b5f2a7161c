//! Digests ignore register names, label names and the operand order of commutative operations;
//! golden digests pin the canonical form across releases and platforms.

mod common;

use proptest::prelude::*;

/// Renames every register and label of a program text by a seed-dependent scheme.
fn rename(text: &str, seed: u64) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    let mut rng = common::Rng::new(seed);
    let salt = format!("q{}", rng.below(1000));
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            let mut name = String::new();
            while let Some(&n) = chars.peek() {
                if n.is_ascii_alphanumeric() || n == '_' || n == '.' {
                    name.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            if hologram_isa::Special::from_name(&name).is_some() {
                out.push_str(&name);
            } else {
                out.push_str(&format!(
                    "{salt}_{}",
                    name.chars().rev().collect::<String>()
                ));
            }
        }
    }
    // Labels: SKIPn / LOOPn -> other names.
    out.replace("SKIP", &format!("{salt}skip"))
        .replace("LOOP", &format!("{salt}again"))
}

/// Swaps the two operands of every `add`/`mul`/`min`/`max`/`and`/`or`/`xor` and of `setp.eq`.
fn swap_commutative(text: &str) -> String {
    text.lines()
        .map(|line| {
            let t = line.trim_start();
            let body = t
                .strip_prefix('@')
                .map(|r| r.split_once(' ').map(|x| x.1).unwrap_or(r))
                .unwrap_or(t);
            let op = body.split('.').next().unwrap_or("");
            let commutes = ["add", "mul", "min", "max", "and", "or", "xor"].contains(&op)
                || body.starts_with("setp.eq");
            if !commutes {
                return line.to_string();
            }
            let Some((head, rest)) = line.split_once(", ") else {
                return line.to_string();
            };
            let Some((a, b)) = rest.trim_end_matches(';').split_once(", ") else {
                return line.to_string();
            };
            format!("{head}, {b}, {a};")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn renaming_and_operand_order_do_not_change_the_digest(seed in any::<u64>()) {
        let text = common::random_program(seed);
        let a = hologram_isa::assemble(&text).unwrap();
        let variant = swap_commutative(&rename(&text, seed));
        let b = hologram_isa::assemble(&variant).map_err(|e| TestCaseError::fail(format!("{e}\n{variant}")))?;
        prop_assert_eq!(hologram_compiler::digest(&a), hologram_compiler::digest(&b));
    }
}

#[test]
fn setp_operands_flip_with_the_comparison() {
    let a = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n.param .u32 n\n    setp.lt.u32 %p, %gid, n;\n    selp.u32 %v, 1, 2, %p;\n    st.u32 y[%gid], %v;\n").unwrap();
    let b = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n.param .u32 n\n    setp.gt.u32 %q, n, %gid;\n    selp.u32 %w, 1, 2, %q;\n    st.u32 y[%gid], %w;\n").unwrap();
    assert_eq!(hologram_compiler::digest(&a), hologram_compiler::digest(&b));
}

/// Golden digests: changing the canonical form or the printer changes these, which would
/// invalidate every on-disk kernel cache; update them only deliberately.
#[test]
fn golden_digests() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/kernels");
    let golden = [
        (
            "saxpy.hasm",
            "a0e8621949ec3db71aafcfa2292f9dba7f49fe1186ad357d12000695e51bf7e7",
        ),
        (
            "block_sum.hasm",
            "22f1c401f5444bbce12a9fb41c54a761f808372c3bf51d4d815f2eb2699d115a",
        ),
        (
            "histogram.hasm",
            "71be55ac1d9f8a75297af9b11e69c1a92399f89aa97651ee86534f025b34bcaa",
        ),
        (
            "collatz.hasm",
            "ff6cbbaa8956298163f36aefa7eafbaccda3cacb6e443417157c1a99978e67c4",
        ),
    ];
    let mut report = String::new();
    let mut ok = true;
    for (file, want) in golden {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let k = hologram_isa::assemble(&text).unwrap();
        let got = hologram_compiler::digest(&k).to_string();
        report.push_str(&format!("(\"{file}\", \"{got}\"),\n"));
        ok &= got == want;
    }
    assert!(ok, "digests changed:\n{report}");
}

/// Seeds that once failed `renaming_and_operand_order_do_not_change_the_digest`.
const PAST_FAILURES: &[u64] = &[
    // a folded NaN took its sign from whichever operand came first
    10839391145235819361,
];

#[test]
fn past_failures_stay_fixed() {
    for &seed in PAST_FAILURES {
        let text = common::random_program(seed);
        let a = hologram_isa::assemble(&text).expect("valid program");
        let variant = swap_commutative(&rename(&text, seed));
        let b = hologram_isa::assemble(&variant).expect("valid variant");
        let (ca, cb) = (
            hologram_compiler::canonicalize(&a).0,
            hologram_compiler::canonicalize(&b).0,
        );
        assert_eq!(
            hologram_isa::print(&ca.to_program()),
            hologram_isa::print(&cb.to_program()),
            "seed {seed}\n--- original\n{text}\n--- variant\n{variant}"
        );
    }
}
