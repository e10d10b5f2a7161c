//! Every conformance program still passes in canonical form, and canonicalization never grows one.

#[test]
fn conformance_suite_passes_in_canonical_form() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let mut suite = hologram_conformance::Suite::load(&dir).expect("load suite");
    let (mut before, mut after) = (0, 0);
    for case in &mut suite.cases {
        let (canon, red) = hologram_compiler::canonicalize(&case.kernel);
        assert!(red.after <= red.before, "{} grew", case.name);
        before += red.before;
        after += red.after;
        case.kernel = std::sync::Arc::new(canon);
    }
    let report = suite.run(&hologram_backends::CpuBackend::new());
    println!("{}", report.summary());
    println!(
        "canonical form: {before} -> {after} instructions over {} programs",
        suite.cases.len()
    );
    assert!(report.all_passed(), "{}", report.summary());
}
