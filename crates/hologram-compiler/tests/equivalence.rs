//! Canonical form computes the same bits as the original, is never longer, and is a fixed point.

mod common;

use hologram_backends::CpuBackend;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn canonical_form_gives_bit_identical_results(seed in any::<u64>()) {
        let text = common::random_program(seed);
        let kernel = hologram_isa::assemble(&text).map_err(|e| TestCaseError::fail(format!("generator made an invalid program: {e}\n{text}")))?;
        let (canon, red) = hologram_compiler::canonicalize(&kernel);
        prop_assert!(red.after <= red.before, "canonical form is longer: {} > {}", red.after, red.before);
        let cpu = CpuBackend::new();
        let before = common::run(&cpu, &kernel, seed);
        let after = common::run(&cpu, &canon, seed);
        prop_assert!(before == after, "results differ\n--- original\n{text}\n--- canonical\n{}", hologram_isa::print(&canon.to_program()));
        let (again, _) = hologram_compiler::canonicalize(&canon);
        prop_assert_eq!(hologram_isa::print(&again.to_program()), hologram_isa::print(&canon.to_program()), "canonicalize is not idempotent");
    }
}
