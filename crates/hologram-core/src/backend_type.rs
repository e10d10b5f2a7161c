//! Choosing a backend: names, availability, and the automatic choice.

use std::sync::Arc;

pub use hologram_backends::BackendType;
use hologram_backends::{Backend, BackendError, CpuBackend, DeviceInfo};

use crate::error::{Error, Result};

/// Whether a backend can run here, and on what device (or why not).
#[derive(Debug, Clone)]
pub struct Availability {
    /// The backend.
    pub backend: BackendType,
    /// Its device, or the reason it cannot run.
    pub status: std::result::Result<DeviceInfo, String>,
}

/// Opens a backend, or says why it cannot run here.
pub(crate) fn open(kind: BackendType) -> Result<Arc<dyn Backend>> {
    let unavailable = |reason: &str| {
        Error::Backend(BackendError::Unavailable {
            backend: kind.name().into(),
            reason: reason.into(),
        })
    };
    match kind {
        BackendType::Cpu => Ok(Arc::new(CpuBackend::new())),
        #[cfg(feature = "cuda")]
        BackendType::Cuda => Ok(Arc::new(hologram_backends::cuda::CudaBackend::new()?)),
        #[cfg(not(feature = "cuda"))]
        BackendType::Cuda => Err(unavailable(
            "this build of Hologram has no CUDA support (build with the 'cuda' feature)",
        )),
        BackendType::Metal if !cfg!(target_os = "macos") => Err(unavailable(
            "Metal exists only on macOS; on this machine use cuda, vulkan or cpu",
        )),
        BackendType::Dx12 if !cfg!(target_os = "windows") => Err(unavailable(
            "DirectX 12 exists only on Windows; on this machine use cuda, vulkan or cpu",
        )),
        #[cfg(feature = "wgpu")]
        BackendType::Metal | BackendType::Vulkan | BackendType::Dx12 => open_wgpu(kind),
        #[cfg(not(feature = "wgpu"))]
        BackendType::Metal | BackendType::Vulkan | BackendType::Dx12 => Err(unavailable(
            "this build of Hologram has no wgpu support (build with the 'wgpu' feature)",
        )),
    }
}

/// Every backend with its device or the reason it is unavailable (this opens every backend;
/// [`availability_of`] checks one).
pub fn availability() -> Vec<Availability> {
    BackendType::ALL.into_iter().map(availability_of).collect()
}

/// Whether one backend can run here, opening only that backend (asking about CUDA does not
/// start the Vulkan loader).
pub fn availability_of(backend: BackendType) -> Availability {
    Availability {
        backend,
        status: open(backend).map(|b| b.info()).map_err(|e| match e {
            Error::Backend(BackendError::Unavailable { reason, .. }) => reason,
            other => other.to_string(),
        }),
    }
}

/// The backend `new_auto` picks: `HOLOGRAM_BACKEND` if set (and not `auto`), else CUDA, then a
/// hardware Metal/Vulkan/DX12 adapter, then the CPU.
pub(crate) fn open_auto() -> Result<(BackendType, Arc<dyn Backend>)> {
    if let Ok(name) = std::env::var("HOLOGRAM_BACKEND") {
        if !name.trim().is_empty() && !name.trim().eq_ignore_ascii_case("auto") {
            let kind: BackendType = name.parse()?;
            return Ok((kind, open(kind)?));
        }
    }
    for kind in BackendType::ALL {
        if let Ok(b) = open(kind) {
            return Ok((kind, b));
        }
    }
    Ok((BackendType::Cpu, open(BackendType::Cpu)?))
}

/// Opens the wgpu backend on Metal, Vulkan or DX12: hardware adapters only, unless
/// `HOLOGRAM_WGPU_ALLOW_SOFTWARE=1` allows a software one (lavapipe, WARP).
#[cfg(feature = "wgpu")]
fn open_wgpu(kind: BackendType) -> Result<Arc<dyn Backend>> {
    use hologram_backends::wgpu::adapter::Api;
    let api = match kind {
        BackendType::Metal => Api::Metal,
        BackendType::Dx12 => Api::Dx12,
        _ => Api::Vulkan,
    };
    match hologram_backends::WgpuBackend::new(api) {
        Ok(b) => Ok(Arc::new(b)),
        // Named as asked for: "vulkan", not wgpu's own name for the API.
        Err(BackendError::Unavailable { reason, .. }) => {
            Err(Error::Backend(BackendError::Unavailable {
                backend: kind.name().into(),
                reason,
            }))
        }
        Err(e) => Err(e.into()),
    }
}
