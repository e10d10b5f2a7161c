//! The Vulkan backend the wgpu tests run on (lavapipe in CI, software adapters allowed).

/// A Vulkan backend, or None (with a message) when none opens and `HOLOGRAM_WGPU_TESTS=skip`;
/// without that variable a missing adapter fails the test.
pub fn backend() -> Option<hologram_backends::WgpuBackend> {
    use hologram_backends::wgpu::adapter::{AdapterOptions, Api};
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    match hologram_backends::WgpuBackend::with_options(&opts) {
        Ok(b) => Some(b),
        Err(e) if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => {
            panic!("no Vulkan adapter: {e} (install lavapipe or set HOLOGRAM_WGPU_TESTS=skip)")
        }
    }
}
