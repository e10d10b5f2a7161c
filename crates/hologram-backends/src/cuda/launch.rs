//! Launching generated kernels, and the device-side error record that reports out-of-bounds
//! accesses, barrier divergence and timeouts.
//!
//! Launches are asynchronous. The first lane that fails (out of bounds, lanes of a block at
//! different barriers, past the launch timeout) elects itself (atomic flag in device memory) to
//! write `{kind, kernel id, a, b, c}` into five words of host memory mapped into the device; the
//! backend reads them after the stream is synchronized (in `synchronize` and `copy_out`), turns
//! them into a [`BackendError`] ([`codegen::launch_error`]) and resets them. A second device
//! word tells the lanes of every launch to stop once one timed out. Launches that succeed cost
//! nothing extra: no copy, no event.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, CUdeviceptr};
use hologram_isa::Kernel;

use super::codegen;
use super::device::{describe, device_error, Device};
use super::memory::{device_address, CudaMemory, Pinned};
use crate::backend::{KernelArg, LaunchConfig};
use crate::error::{BackendError, Result};

/// The flag words: the error election, then the stop word (see the codegen's ABI).
const FLAG_BYTES: usize = 8;

/// The error flag and record shared by every launch of a backend.
pub(crate) struct ErrorRecord {
    flag: CudaMemory,
    host: Pinned,
    device_rec: CUdeviceptr,
}

// SAFETY: the pinned words are only read or written by the host after a stream synchronization,
// under the backend's guarantees; the device pointers are plain addresses.
unsafe impl Send for ErrorRecord {}
// SAFETY: as for `Send`.
unsafe impl Sync for ErrorRecord {}

impl ErrorRecord {
    pub(crate) fn new(dev: &Device) -> Result<ErrorRecord> {
        let flag = CudaMemory::new(dev, FLAG_BYTES)?;
        // SAFETY: the flag allocation holds FLAG_BYTES; synchronous so it is zero before any
        // launch.
        unsafe { drv::memset_d8_sync(flag.address(), 0, FLAG_BYTES) }
            .map_err(device_error("cuMemsetD8"))?;
        let host = Pinned::new(&dev.ctx, 5 * 8, sys::CU_MEMHOSTALLOC_DEVICEMAP)?;
        // SAFETY: 40 pinned bytes, 8-byte aligned (page-aligned allocation).
        unsafe { std::ptr::write_bytes(host.ptr, 0, 40) };
        let mut device_rec: CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP; writes one device pointer.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_rec, host.ptr as *mut c_void, 0) }
            .result()
            .map_err(device_error(
                "mapping the error record (cuMemHostGetDevicePointer)",
            ))?;
        Ok(ErrorRecord {
            flag,
            host,
            device_rec,
        })
    }

    /// Reads and clears the record after the stream was synchronized. Returns the error of the
    /// first out-of-bounds access since the last check, resolved with `kernel_of(id)`.
    pub(crate) fn take(
        &self,
        dev: &Device,
        kernel_of: impl Fn(u32) -> Option<Arc<Kernel>>,
    ) -> Result<()> {
        let words = self.host.ptr as *mut u64;
        // SAFETY: the device is idle for this record (the caller synchronized the stream).
        let first = unsafe { std::ptr::read_volatile(words) };
        if first == 0 {
            return Ok(());
        }
        let mut rec = [0u64; 5];
        for (i, r) in rec.iter_mut().enumerate() {
            // SAFETY: five words, as above.
            *r = unsafe { std::ptr::read_volatile(words.add(i)) };
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(words.add(i), 0) };
        }
        // Re-arm the flag and the stop word for later launches (ordered before them on the
        // stream).
        // SAFETY: FLAG_BYTES of the flag allocation.
        unsafe { drv::memset_d8_async(self.flag.address(), 0, FLAG_BYTES, dev.stream) }
            .map_err(device_error("cuMemsetD8Async"))?;
        let err = match kernel_of(rec[1] as u32) {
            Some(k) => codegen::launch_error(&k, &rec),
            None => None,
        };
        Err(err.unwrap_or_else(|| {
            BackendError::Device(format!(
                "a kernel failed on the GPU (error record {rec:?} of an unknown kernel)"
            ))
        }))
    }
}

/// CUDA's limits on launch geometry, beyond the shared checks.
pub(crate) fn check_geometry(kernel: &Kernel, config: &LaunchConfig) -> Result<()> {
    let [gx, gy, gz] = config.grid;
    let [bx, by, bz] = config.block;
    let bad = if gx > i32::MAX as u32 || gy > 65535 || gz > 65535 {
        Some(format!(
            "grid {:?} exceeds CUDA's limits (x < 2^31, y and z <= 65535)",
            config.grid
        ))
    } else if bx > 1024 || by > 1024 || bz > 64 {
        Some(format!(
            "block {:?} exceeds CUDA's limits (x, y <= 1024, z <= 64)",
            config.block
        ))
    } else {
        None
    };
    match bad {
        Some(reason) => Err(BackendError::InvalidLaunch {
            kernel: kernel.name.clone(),
            reason,
        }),
        None => Ok(()),
    }
}

/// The shape a kernel is launched in: the caller's, or a vectorized map's (which also takes the
/// caller's lane count, `total`, as its last argument).
pub(crate) struct Shape<'a> {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub total: Option<u64>,
    /// The launch timeout the lanes check (`None`: no limit).
    pub timeout: Option<std::time::Duration>,
    /// `codegen::divide::divisor_params` of the kernel: their multipliers follow `hg_tmo`.
    pub divisors: &'a [u32],
}

/// Launches `function` with `args` (already checked against `kernel`) on the stream.
pub(crate) fn launch(
    dev: &Device,
    function: sys::CUfunction,
    kernel: &Kernel,
    shape: &Shape<'_>,
    args: &[KernelArg],
    rec: &ErrorRecord,
    kernel_id: u32,
) -> Result<()> {
    // One u64 per entry parameter; the driver reads each parameter's size from its slot
    // (little-endian, so narrower scalars sit in the low bytes).
    let mut vals: Vec<u64> = Vec::with_capacity(2 * args.len() + 4);
    for (param, arg) in kernel.params.iter().zip(args) {
        match arg {
            KernelArg::Buffer(b) => {
                let elem = param.ty().size_bytes().max(1);
                vals.push(device_address(b)?);
                vals.push((b.len / elem) as u64);
            }
            KernelArg::Scalar(v) => vals.push(v.to_bits()),
        }
    }
    vals.push(rec.flag.address());
    vals.push(rec.device_rec);
    vals.push(kernel_id as u64);
    vals.push(
        shape
            .timeout
            .map_or(0, |t| t.as_nanos().clamp(1, u64::MAX as u128) as u64),
    );
    if !shape.divisors.is_empty() {
        vals.extend(codegen::divide::magic_arguments(shape.divisors, args));
    }
    if let Some(total) = shape.total {
        vals.push(total);
    }
    let mut ptrs: Vec<*mut c_void> = vals
        .iter_mut()
        .map(|v| v as *mut u64 as *mut c_void)
        .collect();
    let [gx, gy, gz] = shape.grid;
    let [bx, by, bz] = shape.block;
    // SAFETY: the parameter list matches the generated entry's signature (see codegen's ABI);
    // buffers were checked to lie inside live allocations; `vals` outlives the call.
    unsafe {
        drv::launch_kernel(
            function,
            (gx, gy, gz),
            (bx, by, bz),
            0,
            dev.stream,
            &mut ptrs,
        )
    }
    .map_err(|e| BackendError::InvalidLaunch {
        kernel: kernel.name.clone(),
        reason: describe("cuLaunchKernel", e),
    })
}
