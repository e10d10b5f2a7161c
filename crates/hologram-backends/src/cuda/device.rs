//! Finding the CUDA libraries and the device, and saying precisely what is missing.
//!
//! cudarc loads libcuda, NVRTC and cuBLAS at run time and panics if a library (or one of its
//! symbols) is missing, so every library is probed here first, with `is_culib_present()` and a
//! check of each symbol the backend calls; a missing piece becomes a
//! [`BackendError::Unavailable`] with a reason, never a panic.

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::{result as drv, CudaContext, DriverError};

use crate::error::{BackendError, Result};

/// Driver entry points the backend calls (through cudarc), checked before the first call.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamQuery",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemHostGetDevicePointer_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemsetD8Async",
    "cuMemsetD8_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuFuncGetAttribute",
    "cuLaunchKernel",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
];

/// NVRTC entry points the backend calls.
pub(crate) const NVRTC_SYMBOLS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcDestroyProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
];

/// cuBLAS entry points the backend calls.
const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasGemmStridedBatchedEx",
];

/// Whether libcuda and NVRTC load here, each `Err` with a reason.
#[derive(Debug, Clone)]
pub(crate) struct Libraries {
    pub driver: std::result::Result<(), String>,
    pub nvrtc: std::result::Result<(), String>,
}

/// Probes libcuda and NVRTC once per process.
pub(crate) fn libraries() -> &'static Libraries {
    static LIBS: OnceLock<Libraries> = OnceLock::new();
    LIBS.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the library names; `culib` is called
        // only once the library is known to load, so it cannot panic.
        let driver = if unsafe { sys::is_culib_present() } {
            // SAFETY: the library loads (checked just above); the symbol is only looked up, never
            // called or read, so its type does not matter.
            missing_symbol(DRIVER_SYMBOLS, |s| unsafe {
                sys::culib().get::<*const ()>(s.as_bytes()).is_ok()
            })
            .map_or(Ok(()), |s| {
                Err(format!(
                    "the NVIDIA driver is too old for this build: libcuda has no {s}; install a CUDA 13 driver"
                ))
            })
        } else {
            Err("libcuda.so.1 not found (no NVIDIA driver)".to_string())
        };
        // SAFETY: as for libcuda above.
        let nvrtc = if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            // SAFETY: as for libcuda's symbols.
            missing_symbol(NVRTC_SYMBOLS, |s| unsafe {
                cudarc::nvrtc::sys::culib().get::<*const ()>(s.as_bytes()).is_ok()
            })
            .map_or(Ok(()), |s| {
                Err(format!(
                    "the NVRTC library has no {s}; install NVRTC 12 or 13"
                ))
            })
        } else {
            Err("NVRTC library not found (libnvrtc.so.13: install the CUDA toolkit or `pip install nvidia-cuda-nvrtc`, and add its lib folder to LD_LIBRARY_PATH)".to_string())
        };
        Libraries { driver, nvrtc }
    })
}

/// Whether cuBLAS loads here (probed on first use: it is large, and only GEMM needs it).
pub(crate) fn cublas() -> &'static std::result::Result<(), String> {
    static CUBLAS: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    CUBLAS.get_or_init(|| {
        // SAFETY: as in `libraries`.
        if unsafe { cudarc::cublas::sys::is_culib_present() } {
            // SAFETY: as for libcuda's symbols in `libraries`.
            missing_symbol(CUBLAS_SYMBOLS, |s| unsafe {
                cudarc::cublas::sys::culib()
                    .get::<*const ()>(s.as_bytes())
                    .is_ok()
            })
            .map_or(Ok(()), |s| Err(format!("cuBLAS has no {s}")))
        } else {
            Err("cuBLAS library not found (libcublas.so.13)".to_string())
        }
    })
}

fn missing_symbol(names: &[&'static str], present: impl Fn(&str) -> bool) -> Option<&'static str> {
    names.iter().copied().find(|s| !present(s))
}

/// The number of CUDA devices, or why CUDA cannot run here (no driver, no device).
pub(crate) fn device_count() -> Result<usize> {
    if let Err(e) = &libraries().driver {
        return Err(unavailable(e.clone()));
    }
    if let Err(e) = drv::init() {
        return match e.0 {
            sys::CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
            _ => Err(unavailable(describe("cuInit failed", e))),
        };
    }
    drv::device::get_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| unavailable(describe("cuDeviceGetCount", e)))
}

/// A driver error as text: `what: CUDA_ERROR_NAME (description)`.
pub(crate) fn describe(what: &str, e: DriverError) -> String {
    let name = e
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{what}: {name} ({text})")
}

/// A driver error as a [`BackendError::Device`].
pub(crate) fn device_error(what: &str) -> impl Fn(DriverError) -> BackendError + '_ {
    move |e| BackendError::Device(describe(what, e))
}

/// `HOLOGRAM_CUDA_STREAM`: `non-blocking` makes the backend's stream one that runs beside the
/// legacy default stream (read when a device opens).
pub const STREAM_ENV: &str = "HOLOGRAM_CUDA_STREAM";

/// The device the backend runs on, with its primary context and the backend's stream.
pub(crate) struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: sys::CUstream,
    /// True when `stream` synchronizes implicitly with the legacy default stream (the default:
    /// PyTorch's default stream is the legacy one, so work handed to and from it needs no
    /// event handshake; see [`Device::ordered_by_legacy`]).
    pub blocking: bool,
    pub name: String,
    pub major: i32,
    pub minor: i32,
    pub sms: u32,
    pub memory: u64,
    pub max_threads: u32,
    pub driver_version: i32,
}

// SAFETY: the raw stream handle is only used through the driver API, which is thread-safe; the
// context is made current on the calling thread before each use.
unsafe impl Send for Device {}
// SAFETY: as for `Send`: no field is mutated after `open`.
unsafe impl Sync for Device {}

/// See [`Device::ordered_by_legacy`]: `ours` is the device's stream, `blocking` how it was made.
fn ordered_by_legacy(
    ours: sys::CUstream,
    blocking: bool,
    producer: sys::CUstream,
    consumer: sys::CUstream,
) -> bool {
    // CU_STREAM_LEGACY is the handle 0x1; the driver reads a null handle as the legacy stream
    // too (the per-thread default stream, 0x2, does not order blocking streams).
    let legacy = |s: sys::CUstream| matches!(s as usize, 0 | 1);
    blocking && ((producer == ours && legacy(consumer)) || (consumer == ours && legacy(producer)))
}

fn unavailable(reason: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        backend: "cuda".into(),
        reason: reason.into(),
    }
}

impl Device {
    /// Opens the device `HOLOGRAM_CUDA_DEVICE` names (default 0) after checking the libraries.
    pub(crate) fn open() -> Result<Device> {
        Device::open_at(None)
    }

    /// Opens device `ordinal` (`None`: `HOLOGRAM_CUDA_DEVICE`, default 0) after checking the
    /// libraries.
    pub(crate) fn open_at(ordinal: Option<usize>) -> Result<Device> {
        let libs = libraries();
        let mut missing: Vec<&str> = Vec::new();
        if let Err(e) = &libs.driver {
            missing.push(e);
        }
        if let Err(e) = &libs.nvrtc {
            missing.push(e);
        }
        if !missing.is_empty() {
            return Err(unavailable(missing.join("; ")));
        }
        let asked = ordinal;
        let ordinal: usize = match (ordinal, std::env::var("HOLOGRAM_CUDA_DEVICE")) {
            (Some(o), _) => o,
            (None, Ok(v)) => v.trim().parse().map_err(|_| {
                unavailable(format!("HOLOGRAM_CUDA_DEVICE={v} is not a device number"))
            })?,
            (None, Err(_)) => 0,
        };
        if let Err(e) = drv::init() {
            return Err(unavailable(match e.0 {
                sys::CUresult::CUDA_ERROR_NO_DEVICE => "no CUDA device".to_string(),
                _ => describe("cuInit failed", e),
            }));
        }
        let count =
            drv::device::get_count().map_err(|e| unavailable(describe("cuDeviceGetCount", e)))?;
        if count <= 0 {
            return Err(unavailable("no CUDA device"));
        }
        if ordinal >= count as usize {
            let which = match asked {
                Some(_) => format!("cuda:{ordinal} was asked for"),
                None => format!("HOLOGRAM_CUDA_DEVICE={ordinal}"),
            };
            return Err(unavailable(format!(
                "{which}, but there are only {count} CUDA devices (cuda:0 to cuda:{})",
                count - 1
            )));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| unavailable(describe("creating the CUDA context", e)))?;
        let attr = |a: Attr| {
            ctx.attribute(a)
                .map_err(|e| unavailable(describe("cuDeviceGetAttribute", e)))
        };
        let major = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let sms = attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as u32;
        let max_threads = attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?.max(1) as u32;
        let name = ctx.name().unwrap_or_else(|_| "NVIDIA GPU".into());
        let memory = ctx.total_mem().unwrap_or(0) as u64;
        let mut driver_version = 0;
        // SAFETY: writes one int.
        let _ = unsafe { sys::cuDriverGetVersion(&mut driver_version) };
        let blocking = match std::env::var(STREAM_ENV) {
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "blocking" => true,
                "non-blocking" | "nonblocking" => false,
                _ => {
                    return Err(unavailable(format!(
                        "{STREAM_ENV}={v} is neither 'blocking' nor 'non-blocking'"
                    )))
                }
            },
            Err(_) => true,
        };
        let kind = if blocking {
            drv::stream::StreamKind::Default
        } else {
            drv::stream::StreamKind::NonBlocking
        };
        let stream = drv::stream::create(kind)
            .map_err(|e| unavailable(describe("creating a CUDA stream", e)))?;
        Ok(Device {
            ctx,
            stream,
            blocking,
            name,
            major,
            minor,
            sms,
            memory,
            max_threads,
            driver_version,
        })
    }

    /// True when work queued on `producer` before work queued on `consumer` already runs first
    /// without an event: one of them is this device's blocking stream and the other the legacy
    /// default stream (the null handle or `CU_STREAM_LEGACY`), which waits for every blocking
    /// stream of its context before each of its operations and is waited for by them after.
    pub(crate) fn ordered_by_legacy(
        &self,
        producer: sys::CUstream,
        consumer: sys::CUstream,
    ) -> bool {
        ordered_by_legacy(self.stream, self.blocking, producer, consumer)
    }

    /// Makes the context current on this thread (cheap when it already is).
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(device_error("making the CUDA context current"))
    }

    /// `sm_90` and the like.
    pub(crate) fn arch(&self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }

    /// Waits for everything on the backend's stream, at most `limit` (`None`: as long as it
    /// takes). `Ok(false)` when the limit passed first.
    pub(crate) fn sync_within(&self, limit: Option<std::time::Duration>) -> Result<bool> {
        use std::time::{Duration, Instant};
        let Some(limit) = limit else {
            self.sync()?;
            return Ok(true);
        };
        let start = Instant::now();
        loop {
            // SAFETY: the stream belongs to this device and lives as long as it.
            match unsafe { sys::cuStreamQuery(self.stream) } {
                sys::CUresult::CUDA_SUCCESS => return Ok(true),
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                other => {
                    return Err(BackendError::Device(describe(
                        "a kernel or copy failed on the GPU (the CUDA context may be unusable now)",
                        DriverError(other),
                    )))
                }
            }
            let waited = start.elapsed();
            if waited >= limit {
                return Ok(false);
            }
            // Stay close for 20 ms, as the driver's own wait does by default (it spins), so short
            // work is seen at once; longer work is looked at every 100 µs (under 1% of it).
            if waited < Duration::from_millis(20) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Waits for everything on the backend's stream.
    pub(crate) fn sync(&self) -> Result<()> {
        // SAFETY: the stream belongs to this device and lives as long as it.
        unsafe { drv::stream::synchronize(self.stream) }.map_err(|e| {
            BackendError::Device(describe(
                "a kernel or copy failed on the GPU (the CUDA context may be unusable now)",
                e,
            ))
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the stream was created by `open` and is destroyed once, here.
            let _ = unsafe { drv::stream::destroy(self.stream) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(h: usize) -> sys::CUstream {
        h as sys::CUstream
    }

    #[test]
    fn only_a_blocking_stream_and_the_legacy_stream_order_each_other_implicitly() {
        let ours = handle(0x7f00_1000);
        let other = handle(0x7f00_2000);
        for legacy in [handle(0), handle(1)] {
            assert!(ordered_by_legacy(ours, true, ours, legacy));
            assert!(ordered_by_legacy(ours, true, legacy, ours));
            assert!(!ordered_by_legacy(ours, false, ours, legacy));
            assert!(!ordered_by_legacy(ours, false, legacy, ours));
            // Another stream and the legacy one: not ours to vouch for.
            assert!(!ordered_by_legacy(ours, true, other, legacy));
            assert!(!ordered_by_legacy(ours, true, legacy, other));
        }
        // The per-thread default stream and other streams need the event.
        assert!(!ordered_by_legacy(ours, true, ours, handle(2)));
        assert!(!ordered_by_legacy(ours, true, handle(2), ours));
        assert!(!ordered_by_legacy(ours, true, ours, other));
    }
}
