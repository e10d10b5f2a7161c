//! `hologram info`

use crate::error::CliError;

pub fn run() -> Result<(), CliError> {
    outln!("hologram {}", env!("CARGO_PKG_VERSION"))?;
    outln!("backends:")?;
    for a in hologram_core::availability() {
        match &a.status {
            Ok(info) => {
                let mem = info
                    .memory_bytes
                    .map(|b| format!(", {:.1} GiB", b as f64 / (1u64 << 30) as f64))
                    .unwrap_or_default();
                let driver = info
                    .driver
                    .as_ref()
                    .map(|d| format!(", driver {d}"))
                    .unwrap_or_default();
                outln!(
                    "  {:<7} available    {} [{}{mem}{driver}]",
                    a.backend.name(),
                    info.name,
                    info.arch
                )?;
            }
            Err(reason) => outln!("  {:<7} unavailable  {reason}", a.backend.name())?,
        }
    }
    #[cfg(feature = "wgpu")]
    print_wgpu_adapters()?;
    let chosen = hologram_core::Executor::new_auto()?;
    let why = match std::env::var("HOLOGRAM_BACKEND") {
        Ok(v) if !v.trim().is_empty() => format!("HOLOGRAM_BACKEND={v}"),
        _ => "best available; set HOLOGRAM_BACKEND to override".to_string(),
    };
    outln!("default: {} ({why})", chosen.backend_type())?;
    Ok(())
}

/// Every Metal, Vulkan and DX12 adapter wgpu sees (software ones are used only on request).
#[cfg(feature = "wgpu")]
fn print_wgpu_adapters() -> Result<(), CliError> {
    let adapters = hologram_backends::wgpu::adapter::list_adapters();
    outln!("wgpu adapters:")?;
    if adapters.is_empty() {
        outln!("  none (no Metal, Vulkan or DX12 driver was found)")?;
    }
    for a in adapters {
        let note = if a.software {
            format!(
                "; software, used only with {}=1",
                hologram_backends::wgpu::adapter::ALLOW_SOFTWARE_ENV
            )
        } else {
            String::new()
        };
        outln!(
            "  {:<7} {} [{}, driver {}{note}]",
            a.backend.to_lowercase(),
            a.name,
            a.device_type,
            a.driver
        )?;
    }
    Ok(())
}
