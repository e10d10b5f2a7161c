//! The one name for a backend: what `HOLOGRAM_BACKEND`, the CLI, Python and every backend's
//! [`crate::Backend::kind`] say.

use std::fmt;
use std::str::FromStr;

use crate::error::BackendError;

/// A backend: the CPU, CUDA, or wgpu on one of its graphics APIs.
///
/// ```
/// use hologram_backends::BackendType;
///
/// let kind: BackendType = "Vulkan".parse()?;
/// assert_eq!(kind, BackendType::Vulkan);
/// assert!(kind.is_wgpu());
/// assert_eq!(kind.to_string(), "vulkan");
/// assert!("opencl".parse::<BackendType>().is_err());
/// # Ok::<(), hologram_backends::BackendError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendType {
    /// The host CPU (always available).
    Cpu,
    /// NVIDIA GPUs through CUDA.
    Cuda,
    /// Apple GPUs through Metal (wgpu), macOS only.
    Metal,
    /// GPUs through Vulkan (wgpu).
    Vulkan,
    /// GPUs through DirectX 12 (wgpu), Windows only.
    Dx12,
}

impl BackendType {
    /// Every backend type, in the order an automatic choice prefers them (the CPU last).
    pub const ALL: [BackendType; 5] = [
        BackendType::Cuda,
        BackendType::Metal,
        BackendType::Vulkan,
        BackendType::Dx12,
        BackendType::Cpu,
    ];

    /// The name used by `HOLOGRAM_BACKEND`, the CLI and Python.
    pub fn name(self) -> &'static str {
        match self {
            BackendType::Cpu => "cpu",
            BackendType::Cuda => "cuda",
            BackendType::Metal => "metal",
            BackendType::Vulkan => "vulkan",
            BackendType::Dx12 => "dx12",
        }
    }

    /// True for the APIs the wgpu backend runs on (Metal, Vulkan, DX12).
    pub fn is_wgpu(self) -> bool {
        matches!(
            self,
            BackendType::Metal | BackendType::Vulkan | BackendType::Dx12
        )
    }
}

impl fmt::Display for BackendType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendType {
    type Err = BackendError;

    /// Parses a backend name, ignoring case and surrounding space.
    fn from_str(s: &str) -> Result<Self, BackendError> {
        let lower = s.trim().to_ascii_lowercase();
        BackendType::ALL
            .into_iter()
            .find(|b| b.name() == lower)
            .ok_or_else(|| BackendError::UnknownBackend(s.to_string()))
    }
}
