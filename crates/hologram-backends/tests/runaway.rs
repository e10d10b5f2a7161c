//! Runaway launches end with an error, and the backend stays usable (tests/common/runaway.rs),
//! on the CPU and, with the `wgpu` feature, on Vulkan (lavapipe in CI). CUDA runs the same
//! checks in cuda_gpu.rs.

mod common {
    pub mod runaway;
}

#[test]
fn runaway_launches_on_the_cpu() {
    common::runaway::runaway_launches_end_with_errors(&hologram_backends::CpuBackend::new());
    common::runaway::runaway_launches_end_with_errors(
        &hologram_backends::CpuBackend::interpreter_only(),
    );
}

#[cfg(feature = "wgpu")]
#[test]
fn runaway_launches_on_wgpu_vulkan() {
    use hologram_backends::wgpu::adapter::{AdapterOptions, Api};
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    match hologram_backends::WgpuBackend::with_options(&opts) {
        Ok(b) => common::runaway::runaway_launches_end_with_errors(&b),
        Err(e) if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") => {
            eprintln!("skipped: {e}")
        }
        Err(e) => {
            panic!("no Vulkan adapter: {e} (install lavapipe or set HOLOGRAM_WGPU_TESTS=skip)")
        }
    }
}
