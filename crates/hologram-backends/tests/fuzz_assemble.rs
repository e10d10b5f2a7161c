//! A seeded fuzzer for `.hasm` input, run as an ordinary test with a bounded number of cases.
//!
//! Inputs are mutations of every conformance program (bit flips, token swaps, line deletions,
//! duplications and splices from other programs, huge literals, bytes that are not UTF-8, call
//! chains, deep nests, piles of declarations, subroutines falling into one another) and random
//! programs built from scratch. For each one:
//! - assembling never panics, and a rejection says where (`line:col:`);
//! - an accepted kernel prints and parses back to the same program;
//! - its canonical form printed and assembled again has the same digest (text -> kernel ->
//!   canonical form -> text -> same digest);
//! - the CPU backend compiles it, and the CUDA C and WGSL generators translate it (WGSL may
//!   refuse, with a reason, what WGSL or an adapter lacks).
//!
//! `HOLOGRAM_FUZZ_CASES` sets the number of cases (default 15,000, about half a minute in a debug
//! build), `HOLOGRAM_FUZZ_SEED` the seed. A failing case is written to the test's temporary
//! directory and its path printed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use hologram_backends::{Backend, CpuBackend};
use hologram_compiler::Canonical;
use hologram_isa::AsmError;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance")
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("tests/conformance exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "hasm"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            (
                name.unwrap_or_default(),
                std::fs::read(&p).expect("readable"),
            )
        })
        .collect()
}

/// Words to swap in: every token of the corpus, plus hostile ones.
fn dictionary(corpus: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut words: Vec<String> = corpus
        .iter()
        .flat_map(|(_, text)| {
            String::from_utf8_lossy(text)
                .split(|c: char| c.is_whitespace() || ",;[]:@!".contains(c))
                .filter(|w| !w.is_empty() && !w.starts_with("//"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    words.sort();
    words.dedup();
    words.extend(
        [
            "99999999999999999999999999999999999999999",
            "-170141183460469231731687303715884105729",
            "0xffffffffffffffffffffffffffffffffffffffffff",
            "1e999999",
            "-1e-999999",
            "0d7ff8000000000001",
            "0d",
            "nan",
            "-inf",
            "%tid.w",
            "%gid.x.y",
            "%",
            ".",
            "call",
            "ret",
            "barrier",
            "loop",
            ".kernel",
            ".shared .f64 big[4294967295]",
            ".scratch .u8 s[16385]",
            "\u{0}",
            "é",
            "\u{202e}",
        ]
        .map(String::from),
    );
    words
}

/// `depth` subroutines calling each other (past the call-depth limit when deep).
fn call_chain(depth: usize) -> String {
    let mut s = String::from("    call Z0;\n    exit;\n");
    for k in 0..depth {
        s.push_str(&format!("Z{k}:\n    add.u32 %zz, %zz, 1;\n"));
        if k + 1 < depth {
            s.push_str(&format!("    call Z{};\n", k + 1));
        }
        s.push_str("    ret;\n");
    }
    s
}

/// `depth` nested lane-dependent branches around a barrier or not.
fn nest(depth: usize, barrier: bool) -> String {
    let mut s = String::new();
    for d in 0..depth {
        s.push_str(&format!(
            "    setp.lt.u32 %zp, %tid.x, {d};\n@%zp bra ZE{d};\n"
        ));
    }
    if barrier {
        s.push_str("    barrier;\n");
    }
    for d in (0..depth).rev() {
        s.push_str(&format!("ZE{d}:\n"));
    }
    s
}

fn lines(text: &[u8]) -> Vec<Vec<u8>> {
    text.split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// One mutation of `text`.
fn mutate(rng: &mut Rng, text: &mut Vec<u8>, corpus: &[(String, Vec<u8>)], words: &[String]) {
    match rng.below(14) {
        0 if !text.is_empty() => {
            let i = rng.below(text.len());
            text[i] ^= 1 << rng.below(8);
        }
        1 | 2 => {
            // Swap a token for a dictionary word.
            let s = String::from_utf8_lossy(text).into_owned();
            let spans: Vec<(usize, usize)> = {
                let mut v = Vec::new();
                let mut start = None;
                for (i, c) in s.char_indices() {
                    let sep = c.is_whitespace() || ",;[]:".contains(c);
                    match (sep, start) {
                        (false, None) => start = Some(i),
                        (true, Some(st)) => {
                            v.push((st, i));
                            start = None;
                        }
                        _ => {}
                    }
                }
                v
            };
            if let Some(&(a, b)) = spans.get(rng.below(spans.len())) {
                let word = rng.pick(words);
                *text = format!("{}{}{}", &s[..a], word, &s[b..]).into_bytes();
            }
        }
        3 => {
            let mut l = lines(text);
            if !l.is_empty() {
                l.remove(rng.below(l.len()));
            }
            *text = l.concat();
        }
        4 => {
            let mut l = lines(text);
            if !l.is_empty() {
                let i = rng.below(l.len());
                let line = l[i].clone();
                let times = 1 + rng.below(4);
                for _ in 0..times {
                    l.insert(i, line.clone());
                }
            }
            *text = l.concat();
        }
        5 | 6 => {
            // Splice lines from another program.
            let other = lines(&rng.pick(corpus).1);
            let mut l = lines(text);
            if !other.is_empty() {
                let a = rng.below(other.len());
                let b = (a + 1 + rng.below(8)).min(other.len());
                let at = rng.below(l.len() + 1);
                for (k, line) in other[a..b].iter().enumerate() {
                    l.insert(at + k, line.clone());
                }
            }
            *text = l.concat();
        }
        7 => {
            // A huge literal or name.
            let len = 1 + rng.below(20_000);
            let big = match rng.below(4) {
                0 => "9".repeat(len),
                1 => format!("1{}", "e-".repeat(len)),
                2 => format!("0x{}", "f".repeat(len)),
                _ => format!("L{}", "x".repeat(len)),
            };
            let at = rng.below(text.len() + 1);
            text.splice(at..at, big.into_bytes());
        }
        8 => {
            // Bytes that may not be UTF-8.
            let at = rng.below(text.len() + 1);
            let junk: Vec<u8> = (0..1 + rng.below(4)).map(|_| rng.next() as u8).collect();
            text.splice(at..at, junk);
        }
        9 => {
            let depth = [3, 40, 64, 65, 300, 5000][rng.below(6)];
            text.extend(call_chain(depth).into_bytes());
        }
        10 => {
            let depth = 1 + rng.below(300);
            let barrier = rng.below(2) == 0;
            let at = {
                let l = lines(text);
                let cut = rng.below(l.len() + 1);
                l[..cut].concat().len()
            };
            text.splice(at..at, nest(depth, barrier).into_bytes());
        }
        11 => {
            // Many declarations after the `.kernel` line (past the limits, sometimes).
            let count = 1 + rng.below(1500);
            let decls: String = (0..count)
                .map(|k| match k % 3 {
                    0 => format!(".param .u32 zq{k}\n"),
                    1 => format!(".reg .u32 %zr{k}\n"),
                    _ => format!(".shared .u8 zs{k}[{}]\n", 1 + k % 64),
                })
                .collect();
            let at = text
                .iter()
                .position(|&b| b == b'\n')
                .map_or(text.len(), |i| i + 1);
            text.splice(at..at, decls.into_bytes());
        }
        12 => {
            // Subroutines that fall into one another: each body is the rest of the run.
            let count = 1 + rng.below(3000);
            let mut s = String::new();
            for k in 0..count {
                s.push_str(&format!("    call ZF{k};\n"));
            }
            s.push_str("    exit;\n");
            for k in 0..count {
                s.push_str(&format!("ZF{k}:\n    add.u32 %zf, %zf, 1;\n"));
            }
            s.push_str("    ret;\n");
            text.extend(s.into_bytes());
        }
        _ => {
            // Truncate.
            let keep = rng.below(text.len() + 1);
            text.truncate(keep);
        }
    }
}

/// A random program with branches, loops, calls and barriers.
fn random_program(rng: &mut Rng) -> Vec<u8> {
    let labels = 1 + rng.below(6);
    let mut s = String::from(
        ".kernel r\n.param .buf.u32 b .rw\n.param .u32 n\n.shared .u32 t[64]\n.reg .u32 %r0, %r1, %r2\n.reg .pred %p0, %p1\n",
    );
    let mut placed = vec![false; labels];
    for _ in 0..2 + rng.below(40) {
        if rng.below(4) == 0 {
            let i = rng.below(labels);
            if !placed[i] {
                placed[i] = true;
                s.push_str(&format!("L{i}:\n"));
            }
        }
        let r = |rng: &mut Rng| format!("%r{}", rng.below(3));
        let p = |rng: &mut Rng| format!("%p{}", rng.below(2));
        let l = |rng: &mut Rng| format!("L{}", rng.below(labels));
        if rng.below(5) == 0 {
            s.push_str(&format!(
                "@{}{} ",
                if rng.below(2) == 0 { "!" } else { "" },
                p(rng)
            ));
        }
        let inst = match rng.below(16) {
            0 => format!("mov.u32 {}, %tid.x", r(rng)),
            1 => format!("add.u32 {}, {}, {}", r(rng), r(rng), rng.below(9)),
            2 => format!("ld.u32 {}, b[{}]", r(rng), r(rng)),
            3 => format!("st.u32 b[%gid], {}", r(rng)),
            4 => format!("atom.add.u32 {}, t[3], 1", r(rng)),
            5 | 6 => format!("setp.lt.u32 {}, {}, n", p(rng), r(rng)),
            7 => format!("bra {}", l(rng)),
            8 => "ret".into(),
            9 => "exit".into(),
            10 => "barrier".into(),
            11 => format!("call {}", l(rng)),
            12 => format!("loop {}, {}", r(rng), l(rng)),
            13 => format!("selp.u32 {}, {}, 7, {}", r(rng), r(rng), p(rng)),
            14 => format!("st.u32 t[{}], {}", rng.below(64), r(rng)),
            _ => format!("mul.u32 {}, {}, {}", r(rng), r(rng), r(rng)),
        };
        s.push_str(&format!("    {inst};\n"));
    }
    for (i, was) in placed.iter().enumerate() {
        if !was {
            s.push_str(&format!("L{i}:\n"));
        }
    }
    s.into_bytes()
}

/// What happened to one input.
#[derive(Default)]
struct Tally {
    rejected: usize,
    accepted: usize,
}

/// Every property, for one input.
fn check(bytes: &[u8], tally: &mut Tally) {
    let kernel = match hologram_isa::assemble_bytes(bytes) {
        Ok(k) => k,
        Err(e) => {
            let msg = e.to_string();
            let mut parts = msg.splitn(3, ':');
            let (l, c) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
            assert!(number(l) && number(c), "an error without line:col: {msg}");
            if let AsmError::Parse(p) = &e {
                assert!(p.line >= 1 && p.col >= 1, "{msg}");
            }
            tally.rejected += 1;
            return;
        }
    };
    tally.accepted += 1;
    let text = std::str::from_utf8(bytes).expect("accepted text is UTF-8");
    // Printing and parsing round-trips.
    let program = hologram_isa::parse(text).expect("it assembled");
    let printed = hologram_isa::print(&program);
    assert_eq!(
        hologram_isa::parse(&printed).expect("printed text parses"),
        program
    );
    // Text -> kernel -> canonical form -> text -> same digest.
    let canonical = Canonical::new(&kernel).expect("a valid kernel canonicalizes");
    assert_eq!(canonical.digest(), hologram_compiler::digest(&kernel));
    let canonical_text = hologram_isa::print(&canonical.kernel().to_program());
    let again = hologram_isa::assemble(&canonical_text)
        .unwrap_or_else(|e| panic!("the canonical form does not assemble: {e}\n{canonical_text}"));
    assert_eq!(
        hologram_compiler::digest(&again),
        canonical.digest(),
        "canonicalizing the canonical form changed it:\n{canonical_text}"
    );
    // Every backend translates it.
    CpuBackend::new()
        .compile(&canonical)
        .expect("the CPU backend compiles every valid kernel");
    hologram_backends::cuda::codegen::generate(canonical.kernel(), &Default::default())
        .expect("CUDA C for every valid kernel");
    let wgsl_opts = hologram_backends::wgpu::codegen::CodegenOptions {
        int64: true,
        float64: true,
        int64_atomics: true,
        ..hologram_backends::wgpu::codegen::CodegenOptions::core([64, 1, 1])
    };
    // WGSL may refuse what WGSL or an adapter cannot do (f64 transcendentals, more buffer
    // types than bindings), saying what.
    if let Err(e) = hologram_backends::wgpu::codegen::generate(canonical.kernel(), &wgsl_opts) {
        let hologram_backends::wgpu::codegen::CodegenError::Unsupported(why) = &e;
        assert!(!why.is_empty(), "WGSL failed without a reason");
    }
}

#[test]
fn mutated_programs_are_handled_or_rejected_with_a_location() {
    let cases: usize = std::env::var("HOLOGRAM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15_000);
    let seed: u64 = std::env::var("HOLOGRAM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_1DEA);
    let corpus = corpus();
    assert!(corpus.len() > 50, "the conformance suite is missing");
    let words = dictionary(&corpus);
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::default();
    // Every conformance program as written, then mutated, then random ones.
    let inputs = (0..corpus.len() + cases).map(|i| {
        if i < corpus.len() {
            (corpus[i].0.clone(), corpus[i].1.clone())
        } else if i % 5 == 0 {
            (format!("random #{i}"), random_program(&mut rng))
        } else {
            let (name, base) = &corpus[(i * 7919) % corpus.len()];
            let mut text = base.clone();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut text, &corpus, &words);
            }
            (format!("mutant #{i} of {name}"), text)
        }
    });
    for (name, bytes) in inputs {
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&bytes, &mut tally)));
        if let Err(panic) = outcome {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let path = dir.join("fuzz_assemble_failure.hasm");
            let _ = std::fs::write(&path, &bytes);
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "{name} (seed {seed}) failed; the input is in {}:\n{why}",
                path.display()
            );
        }
    }
    eprintln!(
        "fuzz_assemble: {} accepted, {} rejected (seed {seed})",
        tally.accepted, tally.rejected
    );
    // The mix exercises both outcomes.
    assert!(
        tally.accepted > cases / 20 && tally.rejected > cases / 4,
        "accepted {} rejected {}",
        tally.accepted,
        tally.rejected
    );
}
