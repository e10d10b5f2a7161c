//! The whole conformance suite on the wgpu backend through Vulkan. In CI that is Mesa's
//! lavapipe (a software Vulkan driver; `scripts/test.sh` installs it), which this test allows
//! explicitly; on a machine with a GPU, the hardware adapter is preferred.
//!
//! Programs the adapter cannot run are listed below with the reason. Every other program must
//! pass, with the same results as the CPU backend.

use hologram_backends::wgpu::adapter::{AdapterOptions, Api};
use hologram_backends::{Backend, WgpuBackend};
use hologram_conformance::Outcome;

/// Rejected on every adapter: WGSL and Vulkan's GLSL.std.450 have no f64 transcendental
/// functions (exp, log, sin, pow...), so kernels using them are `Unsupported`.
const UNSUPPORTED: &[(&str, &str)] = &[("transc_f64", "f64 exp"), ("transc_special", "f64 exp")];

/// Rejected only on adapters without 64-bit shader features (`SHADER_INT64`, `SHADER_F64`,
/// `SHADER_INT64_ATOMIC_ALL_OPS`); lavapipe and NVIDIA's Vulkan driver have them.
const NEEDS_64_BIT_FEATURES: &[&str] = &["64-bit", "f64 arithmetic"];

fn open() -> Option<WgpuBackend> {
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    match WgpuBackend::with_options(&opts) {
        Ok(b) => Some(b),
        Err(e) => {
            if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") {
                eprintln!("skipping the wgpu conformance test: {e}");
                return None;
            }
            panic!(
                "no Vulkan adapter for the wgpu conformance test: {e}\n\
                 install Mesa's lavapipe (apt-get install mesa-vulkan-drivers libvulkan1; \
                 scripts/test.sh does) or set HOLOGRAM_WGPU_TESTS=skip"
            );
        }
    }
}

#[test]
fn conformance_suite_on_wgpu_vulkan() {
    let Some(backend) = open() else { return };
    let suite =
        hologram_conformance::Suite::load(hologram_conformance::default_dir()).expect("load suite");
    let report = suite.run(&backend);
    println!("{}", report.summary());
    let mut problems = Vec::new();
    for r in &report.results {
        let listed = UNSUPPORTED.iter().find(|(n, _)| *n == r.name);
        match (&r.outcome, listed) {
            (Outcome::Unsupported(why), Some((_, reason))) => {
                if !why.contains(reason) {
                    problems.push(format!(
                        "{}: unsupported for '{why}', listed as '{reason}'",
                        r.name
                    ));
                }
            }
            (Outcome::Unsupported(why), None) => {
                if !NEEDS_64_BIT_FEATURES.iter().any(|f| why.contains(f)) {
                    problems.push(format!("{}: unexpectedly unsupported: {why}", r.name));
                }
            }
            (Outcome::Failed(why), _) => problems.push(format!("{}: FAILED: {why}", r.name)),
            (Outcome::Passed, Some(_)) => {
                problems.push(format!("{}: passed but is listed as unsupported", r.name))
            }
            (Outcome::Passed, None) => {}
        }
    }
    assert!(
        problems.is_empty(),
        "on {}:\n{}\n\n{}",
        backend.info().name,
        problems.join("\n"),
        report.summary()
    );
}
