//! A fuzz harness for `assemble`, bounded so that it runs in every `cargo test`: programs from
//! the conformance suite and from the random program generator, mutated at the byte, line and
//! token level (bit flips, deleted, duplicated and swapped lines, splices from other programs,
//! hostile tokens: calls, returns, huge literals, bad bytes, big declarations), go through
//! `assemble_bytes`. Each input must be either rejected with an error that carries a line and
//! column inside the text, or validated; a validated kernel prints and re-assembles to the same
//! kernel, and its canonical form prints and re-assembles to the same digest. Nothing may panic.
//!
//! The case count and seed are fixed (CI must not fail by chance); `PROPTEST_CASES` and
//! `PROPTEST_RNG_SEED` explore further, e.g.
//! `PROPTEST_CASES=100000 PROPTEST_RNG_SEED=7 cargo test --release -p hologram-compiler --test fuzz_assemble`.

use std::sync::OnceLock;

use hologram_compiler::Canonical;
use hologram_isa::{assemble, assemble_bytes, print, AsmError};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// Cases per run in CI: about 2 s in a debug build here (20,000 cases took 10 s).
const CASES: u32 = 4000;
/// Random programs added to the conformance suite as seeds.
const RANDOM_SEEDS: u64 = 48;

/// Seed programs: every conformance program and some generated ones.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .expect("the conformance folder")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "hasm"))
            .collect();
        paths.sort();
        let mut seeds: Vec<Vec<u8>> = paths
            .iter()
            .map(|p| std::fs::read(p).expect("a conformance program"))
            .collect();
        assert!(seeds.len() > 50, "too few conformance programs in {dir:?}");
        seeds.extend((0..RANDOM_SEEDS).map(|s| {
            hologram_conformance::random::RandomCase::generate(s)
                .text
                .into_bytes()
        }));
        seeds
    })
}

/// Text that hostile or careless edits put into programs.
const TOKENS: &[&str] = &[
    "call F;\nF:\n",
    "call F;\n",
    "F:\n",
    "ret;\n",
    "@%p ret;\n",
    "exit;\n",
    "barrier;\n",
    "bra L;\nL:\n",
    "loop %c, L;\n",
    "setp.lt.u32 %p, %tid.x, 3;\n@%p bra L;\n",
    "mov.u32 %c, 2;\n",
    "add.u32 %a, %a, %b;\n",
    "99999999999999999999999999999999",
    "-0x8000000000000001",
    "0x",
    "1e99999",
    "1e-",
    "nan",
    "-inf",
    "%tid.q",
    "%gid",
    ".shared .f64 s[4294967295]\n",
    ".scratch .u8 z[16385]\n",
    ".reg .u32 %q\n",
    ".param .buf.u32 extra .rw\n",
    ".kernel again\n",
    "\u{0}",
    "\u{e9}",
    "\x7f",
    ";",
    ",",
    "[",
    "]",
    ":",
    "@",
    "%",
    ".",
    "// comment\n",
    "\n",
];

/// Bytes that are not UTF-8 on their own.
const BAD_BYTES: &[&[u8]] = &[b"\x80", b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80"];

#[derive(Debug, Clone)]
enum Mutation {
    FlipBit(Index, u8),
    DeleteLine(Index),
    DuplicateLine(Index, Index),
    SwapLines(Index, Index),
    InsertToken(Index, Index),
    ReplaceWord(Index, Index),
    InsertBadBytes(Index, Index),
    Splice(Index, Index, Index),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    use Mutation as M;
    let i = || any::<Index>();
    prop_oneof![
        1 => (i(), 0u8..8).prop_map(|(a, b)| M::FlipBit(a, b)),
        1 => i().prop_map(M::DeleteLine),
        1 => (i(), i()).prop_map(|(a, b)| M::DuplicateLine(a, b)),
        1 => (i(), i()).prop_map(|(a, b)| M::SwapLines(a, b)),
        3 => (i(), i()).prop_map(|(a, b)| M::InsertToken(a, b)),
        2 => (i(), i()).prop_map(|(a, b)| M::ReplaceWord(a, b)),
        1 => (i(), i()).prop_map(|(a, b)| M::InsertBadBytes(a, b)),
        1 => (i(), i(), i()).prop_map(|(a, b, c)| M::Splice(a, b, c)),
        1 => i().prop_map(M::Truncate),
    ]
}

fn lines(text: &[u8]) -> Vec<Vec<u8>> {
    text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn join(lines: &[Vec<u8>]) -> Vec<u8> {
    lines.join(&b'\n')
}

/// Applies one mutation; positions are taken modulo the current size.
fn apply(text: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::FlipBit(at, bit) => {
            if !text.is_empty() {
                let i = at.index(text.len());
                text[i] ^= 1 << bit;
            }
        }
        Mutation::DeleteLine(at) => {
            let mut ls = lines(text);
            ls.remove(at.index(ls.len()));
            *text = join(&ls);
        }
        Mutation::DuplicateLine(from, to) => {
            let mut ls = lines(text);
            let line = ls[from.index(ls.len())].clone();
            ls.insert(to.index(ls.len() + 1), line);
            *text = join(&ls);
        }
        Mutation::SwapLines(a, b) => {
            let mut ls = lines(text);
            let (a, b) = (a.index(ls.len()), b.index(ls.len()));
            ls.swap(a, b);
            *text = join(&ls);
        }
        Mutation::InsertToken(at, token) => {
            let i = at.index(text.len() + 1);
            let token = TOKENS[token.index(TOKENS.len())].as_bytes();
            text.splice(i..i, token.iter().copied());
        }
        Mutation::ReplaceWord(at, token) => {
            // The word (a run of non-space bytes) around a position.
            if !text.is_empty() {
                let i = at.index(text.len());
                let space = |b: &u8| b.is_ascii_whitespace();
                let start = text[..i].iter().rposition(space).map_or(0, |p| p + 1);
                let end = text[i..]
                    .iter()
                    .position(space)
                    .map_or(text.len(), |p| i + p);
                let token = TOKENS[token.index(TOKENS.len())].trim_end().as_bytes();
                text.splice(start..end, token.iter().copied());
            }
        }
        Mutation::InsertBadBytes(at, which) => {
            let i = at.index(text.len() + 1);
            let bytes = BAD_BYTES[which.index(BAD_BYTES.len())];
            text.splice(i..i, bytes.iter().copied());
        }
        Mutation::Splice(other, from, to) => {
            let seeds = seeds();
            let other = lines(&seeds[other.index(seeds.len())]);
            let start = from.index(other.len());
            let take = &other[start..(start + 8).min(other.len())];
            let mut ls = lines(text);
            let at = to.index(ls.len() + 1);
            ls.splice(at..at, take.iter().cloned());
            *text = join(&ls);
        }
        Mutation::Truncate(at) => {
            let keep = at.index(text.len() + 1);
            text.truncate(keep);
        }
    }
}

/// The rejection points inside the text and its message starts with that position.
fn check_located(text: &[u8], e: &AsmError) -> Result<(), TestCaseError> {
    let message = e.to_string();
    let (line, col) = e.position();
    let prefix = format!("{line}:{col}: ");
    prop_assert!(
        message.starts_with(&prefix),
        "the message does not start with {prefix:?}: {message}"
    );
    let line_count = text.iter().filter(|&&b| b == b'\n').count() + 1;
    prop_assert!(
        line >= 1 && col >= 1 && line <= line_count,
        "position {line}:{col} is outside the text ({line_count} lines): {message}"
    );
    // The column is at most one past the end of its line (counted in characters where the line
    // is UTF-8, and never more than its bytes).
    let line_bytes = text.split(|&b| b == b'\n').nth(line - 1).unwrap_or(&[]);
    prop_assert!(
        col <= line_bytes.len() + 1,
        "column {col} is past the end of line {line} ({} bytes): {message}",
        line_bytes.len()
    );
    Ok(())
}

/// A validated kernel round-trips through text, and so does its canonical form, digest intact.
fn check_round_trip(kernel: &hologram_isa::Kernel) -> Result<(), TestCaseError> {
    let printed = print(&kernel.to_program());
    let again = assemble(&printed)
        .map_err(|e| TestCaseError::fail(format!("the printed kernel does not assemble: {e}")))?;
    prop_assert_eq!(
        &again,
        kernel,
        "printing and re-assembling changed the kernel"
    );
    let canonical = Canonical::new(kernel).map_err(|e| {
        TestCaseError::fail(format!("a validated kernel does not canonicalize: {e}"))
    })?;
    let canonical_text = print(&canonical.kernel().to_program());
    let reassembled = Canonical::assemble(&canonical_text).map_err(|e| {
        TestCaseError::fail(format!(
            "the canonical form does not assemble: {e}\n{canonical_text}"
        ))
    })?;
    prop_assert_eq!(
        reassembled.digest(),
        canonical.digest(),
        "the canonical form's digest changed through its text:\n{}",
        canonical_text
    );
    let from_text = Canonical::assemble(&printed)
        .map_err(|e| TestCaseError::fail(format!("Canonical::assemble rejects it: {e}")))?;
    prop_assert_eq!(from_text.digest(), canonical.digest());
    Ok(())
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn config() -> Config {
    Config {
        cases: env("PROPTEST_CASES").unwrap_or(CASES),
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(18)),
        // Found failures are reported with their mutations; the seeds live in this file.
        failure_persistence: None,
        ..Config::default()
    }
}

/// What the harness saw: the share of each outcome shows that the mutations reach both.
#[derive(Debug, Default)]
struct Outcomes {
    rejected: u32,
    validated: u32,
}

#[test]
fn mutated_programs_are_located_errors_or_round_trip() {
    let strategy = (any::<Index>(), prop::collection::vec(mutation(), 0..6));
    let outcomes = std::cell::RefCell::new(Outcomes::default());
    let mut runner = TestRunner::new(config());
    let result = runner.run(&strategy, |(seed, mutations)| {
        let seeds = seeds();
        let mut text = seeds[seed.index(seeds.len())].clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        match assemble_bytes(&text) {
            Err(e) => {
                check_located(&text, &e)?;
                outcomes.borrow_mut().rejected += 1;
            }
            Ok(kernel) => {
                check_round_trip(&kernel)?;
                outcomes.borrow_mut().validated += 1;
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let outcomes = outcomes.into_inner();
    eprintln!("{outcomes:?}");
    // Shrinking reruns cases, so the counts are at least the case count.
    let total = outcomes.rejected + outcomes.validated;
    assert!(total >= runner.config().cases, "{outcomes:?}");
    assert!(
        outcomes.rejected >= total / 20 && outcomes.validated >= total / 20,
        "the mutations should both break and keep programs often: {outcomes:?}"
    );
}

/// Every seed itself validates and round-trips (so the mutations start from valid programs).
#[test]
fn every_seed_round_trips() {
    for (i, seed) in seeds().iter().enumerate() {
        let kernel = assemble_bytes(seed).unwrap_or_else(|e| panic!("seed {i}: {e}"));
        check_round_trip(&kernel).unwrap_or_else(|e| panic!("seed {i}: {e}"));
    }
}
