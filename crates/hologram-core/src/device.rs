//! Devices by name (`cpu`, `cuda`, `cuda:1`): executors on a chosen GPU, the device a tensor
//! lives on, and copies between GPUs.

use std::fmt;
use std::str::FromStr;

use hologram_backends::BackendError;

use crate::backend_type::BackendType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::tensor::Tensor;

/// A backend and which of its devices: `cuda:1` is the second GPU; `cuda` alone is `cuda:0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    /// The backend.
    pub backend: BackendType,
    /// Which of the backend's devices (the CUDA device ordinal; 0 for backends with one).
    pub index: usize,
}

impl Device {
    /// The `index`-th CUDA GPU.
    pub fn cuda(index: usize) -> Device {
        Device {
            backend: BackendType::Cuda,
            index,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.backend, self.index)
    }
}

impl FromStr for Device {
    type Err = Error;

    /// `cuda:1`, `cuda` (= `cuda:0`), `cpu`, `vulkan`, ...; only CUDA has more than one device.
    fn from_str(s: &str) -> Result<Device> {
        let text = s.trim();
        let (name, index) = match text.split_once(':') {
            Some((name, index)) => {
                let index = index.trim().parse::<usize>().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "'{text}': the device index after ':' must be a number, as in cuda:1"
                    ))
                })?;
                (name, Some(index))
            }
            None => (text, None),
        };
        let backend: BackendType = name.parse()?;
        match (backend, index) {
            (_, None) => Ok(Device { backend, index: 0 }),
            (BackendType::Cuda, Some(index)) => Ok(Device::cuda(index)),
            (_, Some(0)) => Ok(Device { backend, index: 0 }),
            (_, Some(i)) => Err(Error::InvalidArgument(format!(
                "'{text}': only CUDA has several devices; {backend} has device 0 only (not {i})"
            ))),
        }
    }
}

/// The number of CUDA GPUs on this host: 0 without a driver, without a GPU, or in a build
/// without CUDA support.
pub fn cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        hologram_backends::cuda::device_count().unwrap_or(0)
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

impl Executor {
    /// An executor on CUDA GPU `index` (`cuda:index`), or why it cannot run there (no driver, no
    /// such GPU, a build without CUDA).
    pub fn cuda(index: usize) -> Result<Executor> {
        #[cfg(feature = "cuda")]
        {
            match hologram_backends::cuda::CudaBackend::on_device(index) {
                Ok(b) => Ok(Executor::with_backend(
                    BackendType::Cuda,
                    std::sync::Arc::new(b),
                )),
                Err(hologram_backends::BackendError::Unavailable { reason, .. }) => {
                    Err(unavailable(format!("cuda:{index}"), reason))
                }
                Err(e) => Err(e.into()),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(unavailable(
                format!("cuda:{index}"),
                "this build of Hologram has no CUDA support (build with the 'cuda' feature)".into(),
            ))
        }
    }

    /// An executor on the device `name` names: `auto`, a backend (`cpu`, `cuda`, `vulkan`,
    /// ...), or a CUDA GPU by index (`cuda:1`).
    pub fn on(name: &str) -> Result<Executor> {
        if name.trim().eq_ignore_ascii_case("auto") {
            return Executor::new_auto();
        }
        let device: Device = name.parse()?;
        match device.backend {
            BackendType::Cuda if name.contains(':') => Executor::cuda(device.index),
            kind => Executor::new_with_backend(kind),
        }
    }

    /// The device this executor runs on (`cuda:1`, `cpu:0`, ...).
    pub fn device(&self) -> Device {
        Device {
            backend: self.backend_type(),
            index: self.backend().device_ordinal() as usize,
        }
    }
}

impl<T: crate::element::Element> crate::buffer::Buffer<T> {
    /// The device the buffer's elements live on.
    pub fn device(&self) -> Device {
        self.executor().device()
    }
}

impl Tensor {
    /// The device the tensor's elements live on.
    pub fn device(&self) -> Device {
        self.exec.device()
    }

    /// A copy of this tensor on `exec`: GPU to GPU when both executors are CUDA (directly
    /// where peer access allows, else staged by the driver), otherwise through host memory.
    pub fn to_device(&self, exec: &Executor) -> Result<Tensor> {
        if self.exec.same_as(exec) {
            return Ok(self.clone());
        }
        #[cfg(feature = "cuda")]
        if self.exec.backend_type() == BackendType::Cuda && exec.backend_type() == BackendType::Cuda
        {
            let src = self.contiguous()?;
            let out = Tensor::uninit(exec, self.shape(), self.dtype)?;
            let bytes = self.numel() * self.dtype.size();
            let (s, sl) = src.storage()?;
            let (d, dl) = out.storage()?;
            let size = self.dtype.size();
            hologram_backends::cuda::copy_between(
                self.exec.backend().as_ref(),
                &s.arg(sl.offset * size, bytes),
                exec.backend().as_ref(),
                &d.arg(dl.offset * size, bytes),
            )?;
            return Ok(out);
        }
        self.to_executor(exec)
    }
}

/// The error for a device that cannot run here, named as the user named it (`cuda:3`).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn unavailable(backend: String, reason: String) -> Error {
    Error::Backend(BackendError::Unavailable { backend, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse() {
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::cuda(1));
        assert_eq!("cuda".parse::<Device>().unwrap(), Device::cuda(0));
        assert_eq!(" CUDA:0 ".parse::<Device>().unwrap(), Device::cuda(0));
        assert_eq!(
            "cpu".parse::<Device>().unwrap(),
            Device {
                backend: BackendType::Cpu,
                index: 0
            }
        );
        assert_eq!(Device::cuda(3).to_string(), "cuda:3");
    }

    #[test]
    fn bad_device_names_say_why() {
        let e = "cuda:x".parse::<Device>().unwrap_err().to_string();
        assert!(e.contains("must be a number"), "{e}");
        let e = "cpu:2".parse::<Device>().unwrap_err().to_string();
        assert!(e.contains("only CUDA has several devices"), "{e}");
        assert!(matches!(
            "tpu:0".parse::<Device>(),
            Err(Error::Backend(BackendError::UnknownBackend(_)))
        ));
    }

    #[test]
    fn cpu_tensors_know_their_device() {
        let exec = Executor::cpu();
        let t = Tensor::from_slice(&exec, &[1.0f32, 2.0], &[2]).unwrap();
        assert_eq!(t.device().to_string(), "cpu:0");
        assert_eq!(exec.zeros::<f32>(4).unwrap().device(), t.device());
        let other = Executor::cpu();
        let moved = t.to_device(&other).unwrap();
        assert!(moved.executor().same_as(&other));
        assert_eq!(moved.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    }

    #[test]
    fn a_gpu_past_the_last_is_an_error_not_a_panic() {
        // No host has 10 000 GPUs: this fails on every machine, saying why.
        let e = Executor::cuda(10_000).unwrap_err();
        assert!(
            matches!(e, Error::Backend(BackendError::Unavailable { ref backend, .. }) if backend == "cuda:10000"),
            "{e}"
        );
        let e = Executor::on("cuda:10000").unwrap_err();
        assert!(
            matches!(e, Error::Backend(BackendError::Unavailable { .. })),
            "{e}"
        );
    }
}
