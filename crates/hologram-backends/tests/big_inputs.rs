//! Big and deep programs through every pass: parser, validator, canonicalization, pattern
//! recognition, printing and re-parsing (same digest), the CPU backend (compile and one launch),
//! the CUDA C and WGSL code generators. Each program must be handled (validated, or rejected with a
//! located error) without overflowing the stack; nothing is timed here (a quadratic pass shows
//! as a test that does not finish). `HOLOGRAM_BIG_INPUT_TIMES=1` prints how long each pass took.

use std::time::Instant;

use hologram_backends::{Backend, BufferArg, CpuBackend, KernelArg, LaunchConfig};
use hologram_compiler::Canonical;
use hologram_isa::semantics::Value;
use hologram_isa::{AsmError, MAX_CALL_DEPTH};

/// Runs `f`, printing its time when asked to.
fn pass<T>(name: &str, what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    if std::env::var_os("HOLOGRAM_BIG_INPUT_TIMES").is_some() {
        eprintln!(
            "{name:>24} {what:<12} {:>9.3} s",
            start.elapsed().as_secs_f64()
        );
    }
    out
}

const HEADER: &str = ".kernel big\n.param .buf.u32 y .rw\n.param .u32 n\n";

/// Every pass over `text`; returns the validation error if it is rejected.
fn every_pass(name: &str, text: &str) -> Option<AsmError> {
    let kernel = match pass(name, "assemble", || hologram_isa::assemble(text)) {
        Ok(k) => k,
        Err(e) => {
            // Rejected: the message must say where.
            let msg = e.to_string();
            let located = msg
                .split(':')
                .take(2)
                .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()));
            assert!(located, "{name}: error without line:col: {msg}");
            return Some(e);
        }
    };
    // Validation again, canonicalization and pattern recognition: what backends compile.
    let canonical = pass(name, "Canonical", || Canonical::new(&kernel))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let printed = pass(name, "print", || {
        hologram_isa::print(&canonical.kernel().to_program())
    });
    let again = pass(name, "reassemble", || hologram_isa::assemble(&printed))
        .unwrap_or_else(|e| panic!("{name}: the canonical form does not assemble: {e}"));
    // The canonical form is a fixed point: canonicalizing it again gives the same digest.
    let digest = pass(name, "digest", || hologram_compiler::digest(&again));
    assert_eq!(digest, canonical.digest(), "{name}: the digest changed");
    let cpu = CpuBackend::new();
    let compiled = pass(name, "cpu compile", || cpu.compile(&canonical))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    // One block of 32 lanes over a small buffer.
    let y = cpu.allocate(4 * 64).unwrap();
    let args = [
        KernelArg::Buffer(BufferArg::whole(y)),
        KernelArg::Scalar(Value::U32(32)),
    ];
    let launched = pass(name, "cpu launch", || {
        cpu.launch(&compiled, &LaunchConfig::linear(1, 32), &args)
    });
    if let Err(e) = launched {
        // Only a bounds error may stop these programs (none is expected).
        panic!("{name}: launch failed: {e}");
    }
    let cuda = pass(name, "cuda codegen", || {
        hologram_backends::cuda::codegen::generate(canonical.kernel(), &Default::default())
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(cuda.contains("extern \"C\" __global__"));
    let wgsl = pass(name, "wgsl codegen", || {
        hologram_backends::wgpu::codegen::generate(
            canonical.kernel(),
            &hologram_backends::wgpu::codegen::CodegenOptions::core([32, 1, 1]),
        )
    })
    .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    assert!(wgsl.wgsl.contains("@compute"));
    // An element-wise map also has CUDA's vectorized form.
    let cuda_map = hologram_backends::cuda::codegen::map::vectorizable(canonical.kernel())
        .map(|_| {
            let opts = hologram_backends::cuda::codegen::CodegenOptions {
                vector_map: true,
                ..Default::default()
            };
            pass(name, "cuda map", || {
                hologram_backends::cuda::codegen::generate(canonical.kernel(), &opts)
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        })
        .unwrap_or_default();
    // Whatever the program, the generated code nests shallowly: NVRTC and naga parse nested
    // blocks and expressions recursively, so deep nesting would move the stack overflow there.
    for (language, code) in [
        ("CUDA C", &cuda),
        ("vectorized CUDA C", &cuda_map),
        ("WGSL", &wgsl.wgsl),
    ] {
        let depth = nesting(code);
        assert!(depth <= 16, "{name}: the {language} nests {depth} deep");
    }
    None
}

/// How deep braces and parentheses nest in generated code.
fn nesting(code: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in code.chars() {
        match c {
            '{' | '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' | ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Subroutines `depth` deep, `chains` times over: each adds one and calls the next.
fn call_chains(chains: usize, depth: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("    mov.u32 %a, 0;\n");
    for c in 0..chains {
        s.push_str(&format!("    call C{c}_0;\n"));
    }
    s.push_str("    setp.lt.u32 %p, %gid, n;\n@%p st.u32 y[%gid], %a;\n    exit;\n");
    for c in 0..chains {
        for d in 0..depth {
            s.push_str(&format!("C{c}_{d}:\n    add.u32 %a, %a, {};\n", d + 1));
            if d + 1 < depth {
                s.push_str(&format!("    call C{c}_{};\n", d + 1));
            }
            s.push_str("    ret;\n");
        }
    }
    s
}

/// `count` labels, each a block that branches on a lane-dependent condition, forward and back
/// (a bounded loop), with a barrier after everything reconverges.
fn many_labels(count: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("    mov.u32 %a, 0;\n    mov.u32 %c, 3;\n");
    for k in 0..count {
        s.push_str(&format!("L{k}:\n    add.u32 %a, %a, %tid.x;\n"));
        s.push_str(&format!("    setp.lt.u32 %p, %a, {};\n", k % 97));
        s.push_str(&format!("@%p bra L{};\n", (k + 1 + k % 3).min(count)));
        if k % 1000 == 999 {
            s.push_str(&format!("    loop %c, L{};\n    mov.u32 %c, 3;\n", k - 5));
        }
    }
    s.push_str(&format!("L{count}:\n    barrier;\n"));
    s.push_str("    setp.lt.u32 %q, %gid, n;\n@%q st.u32 y[%gid], %a;\n");
    s
}

/// A straight element-wise map of `count` instructions over a few registers.
fn straight_map(count: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str(
        "    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.u32 %a, y[%gid];\n    mov.u32 %b, 7;\n",
    );
    for k in 0..count {
        match k % 4 {
            0 => s.push_str("    add.u32 %a, %a, %b;\n"),
            1 => s.push_str("    xor.u32 %b, %b, %a;\n"),
            2 => s.push_str("    mul.u32 %a, %a, 3;\n"),
            _ => s.push_str("    shr.u32 %b, %b, 1;\n"),
        }
    }
    s.push_str("    st.u32 y[%gid], %a;\n");
    s
}

/// `depth` loops nested in one another (each body runs once: the counters start at 1).
fn nested_loops(depth: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("    mov.u32 %a, 0;\n");
    for d in 0..depth {
        s.push_str(&format!("    mov.u32 %c{d}, 1;\nH{d}:\n"));
    }
    s.push_str("    add.u32 %a, %a, 1;\n");
    for d in (0..depth).rev() {
        s.push_str(&format!("    loop %c{d}, H{d};\n"));
    }
    s.push_str("    setp.lt.u32 %p, %gid, n;\n@%p st.u32 y[%gid], %a;\n");
    s
}

/// `depth` lane-dependent branches nested in one another, then a barrier where all rejoin.
fn nested_divergence(depth: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("    mov.u32 %a, 0;\n");
    for d in 0..depth {
        s.push_str(&format!(
            "    setp.lt.u32 %p, %tid.x, {};\n@%p bra E{d};\n    add.u32 %a, %a, 1;\n",
            d % 32
        ));
    }
    for d in (0..depth).rev() {
        s.push_str(&format!("E{d}:\n    add.u32 %a, %a, 2;\n"));
    }
    s.push_str("    barrier;\n    setp.lt.u32 %q, %gid, n;\n@%q st.u32 y[%gid], %a;\n");
    s
}

/// One subroutine with `rets` guarded returns, called from `sites` places.
fn many_returns_many_callers(rets: usize, sites: usize) -> String {
    let mut s = String::from(HEADER);
    s.push_str("    mov.u32 %a, 0;\n");
    for _ in 0..sites {
        s.push_str("    call F;\n");
    }
    s.push_str("    setp.lt.u32 %q, %gid, n;\n@%q st.u32 y[%gid], %a;\n    exit;\nF:\n");
    for k in 0..rets {
        s.push_str(&format!(
            "    add.u32 %a, %a, 1;\n    setp.gt.u32 %p, %a, {};\n@%p ret;\n",
            k + 10_000
        ));
    }
    s.push_str("    ret;\n");
    s
}

/// Every register the validator allows, live across many small blocks.
fn many_registers(blocks: usize) -> String {
    let regs = hologram_isa::MAX_REGISTERS - 8;
    let mut s = String::from(HEADER);
    // Loaded, not literal, so that nothing folds away.
    for r in 0..regs {
        s.push_str(&format!("    ld.u32 %r{r}, y[{}];\n", r % 32));
    }
    for b in 0..blocks {
        let r = b % regs;
        s.push_str(&format!(
            "B{b}:\n    add.u32 %r{r}, %r{r}, %r{};\n    setp.lt.u32 %p, %r{r}, 5;\n@%p bra B{};\n",
            (r + 1) % regs,
            (b + 2).min(blocks)
        ));
    }
    s.push_str(&format!("B{blocks}:\n    mov.u32 %s, 0;\n"));
    for r in 0..regs {
        s.push_str(&format!("    add.u32 %s, %s, %r{r};\n"));
    }
    s.push_str("    setp.lt.u32 %q, %gid, n;\n@%q st.u32 y[%gid], %s;\n");
    s
}

#[test]
fn deep_call_chains() {
    // At the limit: validates and runs.
    assert!(every_pass("chains 300x64", &call_chains(300, MAX_CALL_DEPTH as usize)).is_none());
    // Past it: a located error, whatever the depth.
    for depth in [MAX_CALL_DEPTH as usize + 1, 20_000, 50_000] {
        let err = every_pass(&format!("chain {depth}"), &call_chains(1, depth))
            .unwrap_or_else(|| panic!("a chain {depth} deep validated"));
        assert!(err.to_string().contains("calls nest"), "{err}");
    }
}

#[test]
fn a_hundred_thousand_labels() {
    assert!(every_pass("labels 1e5", &many_labels(100_000)).is_none());
}

#[test]
fn a_million_instructions() {
    assert!(every_pass("straight 1e6", &straight_map(1_000_000)).is_none());
}

#[test]
fn deep_nests_of_loops_and_branches() {
    assert!(every_pass("nested loops 2000", &nested_loops(2_000)).is_none());
    assert!(every_pass("nested branches 2e4", &nested_divergence(20_000)).is_none());
}

#[test]
fn many_returns_and_callers() {
    assert!(every_pass(
        "rets x callers 1e4",
        &many_returns_many_callers(10_000, 10_000)
    )
    .is_none());
}

#[test]
fn every_register_across_many_blocks() {
    assert!(every_pass("registers 4088 x 2e4", &many_registers(20_000)).is_none());
}

/// Adds `count` distinct literals to every element (as an element-wise map, or not, when
/// `interpreted`: reading `%tid.x` keeps it off the native map path).
fn distinct_literals(count: usize, interpreted: bool) -> String {
    let mut s = String::from(HEADER);
    s.push_str("    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.u32 %a, y[%gid];\n");
    if interpreted {
        s.push_str("    mov.u32 %t, %tid.x;\n    sub.u32 %a, %a, %t;\n    add.u32 %a, %a, %t;\n");
    }
    for k in 0..count {
        s.push_str(&format!("    add.u32 %a, %a, {};\n", 1000 + 7 * k));
        s.push_str(&format!("    xor.u32 %a, %a, {};\n", 3_000_000 + 11 * k));
    }
    s.push_str("    st.u32 y[%gid], %a;\n");
    s
}

#[test]
fn more_distinct_literals_than_constant_slots_compute_the_same() {
    let count = 3000;
    let expect = |x: u32| {
        (0..count as u32).fold(x, |a, k| {
            a.wrapping_add(1000 + 7 * k) ^ (3_000_000 + 11 * k)
        })
    };
    for interpreted in [false, true] {
        let text = distinct_literals(count, interpreted);
        let kernel = Canonical::assemble(&text).unwrap();
        let is_map = matches!(
            kernel.pattern(),
            Some(hologram_compiler::patterns::Pattern::Map(_))
        );
        assert_eq!(is_map, !interpreted);
        let cpu = CpuBackend::new();
        let compiled = cpu.compile(&kernel).unwrap();
        let n = 5000u32;
        let input: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2654435761)).collect();
        let y = cpu.allocate(4 * n as usize).unwrap();
        cpu.copy_in(&y, 0, bytemuck::cast_slice(&input)).unwrap();
        let args = [
            KernelArg::Buffer(BufferArg::whole(y.clone())),
            KernelArg::Scalar(Value::U32(n)),
        ];
        cpu.launch(&compiled, &LaunchConfig::for_elements(n as u64, 256), &args)
            .unwrap();
        let mut out = vec![0u32; n as usize];
        cpu.copy_out(&y, 0, bytemuck::cast_slice_mut(&mut out))
            .unwrap();
        for (i, (&o, &x)) in out.iter().zip(&input).enumerate() {
            assert_eq!(o, expect(x), "interpreted={interpreted} element {i}");
        }
    }
}
