//! Random programs that once broke a canonicalization property, re-checked on every run.

mod common;

use hologram_backends::CpuBackend;

/// Seeds of `common::random_program` that failed before a fix.
const SEEDS: &[u64] = &[
    // not idempotent: `setp.gt a, b` and `setp.lt b, a` met only after operand ordering
    3386810962503256873,
];

#[test]
fn past_failures_stay_fixed() {
    let cpu = CpuBackend::new();
    for &seed in SEEDS {
        let text = common::random_program(seed);
        let kernel = hologram_isa::assemble(&text).expect("the generator makes valid programs");
        let (canon, red) = hologram_compiler::canonicalize(&kernel);
        assert!(
            red.after <= red.before,
            "seed {seed}: canonical form is longer"
        );
        assert!(
            common::run(&cpu, &kernel, seed) == common::run(&cpu, &canon, seed),
            "seed {seed}: results differ"
        );
        let printed = hologram_isa::print(&canon.to_program());
        let again = hologram_isa::print(&hologram_compiler::canonicalize(&canon).0.to_program());
        assert_eq!(
            again, printed,
            "seed {seed}: canonicalize is not idempotent\n--- original\n{text}"
        );
    }
}
