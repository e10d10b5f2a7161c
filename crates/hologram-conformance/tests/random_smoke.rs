//! Random programs (src/random) are valid, and the CPU's paths agree on them: the native loops
//! and the interpreter, on the canonical form and on the program as written. The full
//! differential run over every backend is tests/differential.rs.

use std::sync::Arc;

use hologram_backends::{Backend, CpuBackend};
use hologram_compiler::Canonical;
use hologram_conformance::random::{compare, compare_each, RandomCase};

#[test]
fn random_programs_are_valid_and_the_cpu_paths_agree() {
    let native = CpuBackend::new();
    let interp = CpuBackend::interpreter_only();
    let mut failures = Vec::new();
    for seed in 0..200u64 {
        let rc = RandomCase::generate(seed);
        let case = rc.case().unwrap_or_else(|e| panic!("{e}\n{}", rc.text));
        let backends: [&dyn Backend; 2] = [&native, &interp];
        for d in compare(&case, &backends) {
            failures.push(format!("seed {seed}: interpreter: {}", d.what));
        }
        let mut written = case.clone();
        written.canonical = Canonical::as_written(&case.kernel).expect("as written");
        written.kernel = Arc::clone(&case.kernel);
        let d = compare_each(&[(&case, &native as &dyn Backend), (&written, &interp)]);
        failures.extend(
            d.into_iter()
                .map(|d| format!("seed {seed}: as written: {}", d.what)),
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
