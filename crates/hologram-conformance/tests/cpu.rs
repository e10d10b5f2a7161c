//! The whole conformance suite on the CPU backend.

#[test]
fn conformance_suite_passes_on_cpu() {
    let suite =
        hologram_conformance::Suite::load(hologram_conformance::default_dir()).expect("load suite");
    let report = suite.run(&hologram_backends::CpuBackend::new());
    println!("{}", report.summary());
    assert!(
        report.unsupported().is_empty(),
        "the CPU backend supports every program"
    );
    assert!(report.all_passed(), "{}", report.summary());
}
