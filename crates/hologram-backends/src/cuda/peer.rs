//! The GPUs of this host, and copies from one GPU's memory to another's.
//!
//! A copy between two CUDA backends runs on the source backend's stream after the work queued
//! so far on both streams, and the destination's later work waits for it; the host does not
//! wait. Where the two GPUs can reach each other's memory (NVLink or PCIe peer access), peer
//! access is turned on once per pair and the copy goes directly; elsewhere the driver stages it
//! through host memory.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::result as drv;
use cudarc::driver::sys;

use super::backend::CudaBackend;
use super::collective::cuda_of;
use super::device::{describe, device_error, Device};
use super::memory::CudaMemory;
use crate::backend::{Backend, BufferArg};
use crate::error::{BackendError, Result};

/// The number of CUDA GPUs on this host (0 when the driver sees none), or
/// [`BackendError::Unavailable`] without a driver.
pub fn device_count() -> Result<usize> {
    super::device::device_count()
}

/// Whether GPU `from` can read and write GPU `to`'s memory directly (`cuDeviceCanAccessPeer`).
pub fn can_access_peer(from: usize, to: usize) -> Result<bool> {
    if from == to {
        return Ok(true);
    }
    let count = device_count()?;
    if from >= count || to >= count {
        return Err(BackendError::InvalidArgument {
            kernel: "peer copy".into(),
            reason: format!("cuda:{from} and cuda:{to}: this host has {count} GPUs"),
        });
    }
    let dev = |o: usize| {
        drv::device::get(o as i32).map_err(|e| BackendError::Device(describe("cuDeviceGet", e)))
    };
    let (a, b) = (dev(from)?, dev(to)?);
    let mut can = 0;
    // SAFETY: writes one int; both devices exist (checked above).
    let status = unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(BackendError::Device(describe(
            "cuDeviceCanAccessPeer",
            cudarc::driver::DriverError(status),
        )));
    }
    Ok(can != 0)
}

/// Turns on `from`'s access to `to`'s memory once per pair and process, where the hardware
/// allows it; a failure only means the copy is staged through the host.
fn enable_peer_access(from: &Device, to: &Device) {
    static DONE: OnceLock<Mutex<HashSet<(usize, usize)>>> = OnceLock::new();
    let pair = (from.ctx.ordinal(), to.ctx.ordinal());
    let mut done = DONE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if !done.insert(pair) {
        return;
    }
    if !matches!(can_access_peer(pair.0, pair.1), Ok(true)) {
        tracing::debug!(
            "cuda:{} cannot reach cuda:{} directly; copies go through the host",
            pair.0,
            pair.1
        );
        return;
    }
    if from.bind().is_err() {
        return;
    }
    // SAFETY: both contexts are live primary contexts; the current one is `from`'s.
    let status = unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) };
    if !matches!(
        status,
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    ) {
        tracing::debug!(
            ?status,
            "cuCtxEnablePeerAccess failed; copies go through the host"
        );
    }
}

/// Makes work queued later on `consumer`'s stream wait for the work queued so far on
/// `producer`'s (the two may be on different GPUs), without blocking the host.
pub(crate) fn order(producer: &Device, consumer: &Device) -> Result<()> {
    if producer.stream == consumer.stream {
        return Ok(());
    }
    // The event belongs to the producer's context (it is recorded on its stream); the
    // consumer's stream may wait on an event of another context.
    producer.bind()?;
    let event = drv::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
        .map_err(device_error("cuEventCreate"))?;
    // SAFETY: the event was just created in the producer's context and recorded on its live
    // stream; the consumer's stream is live. Destroying the event after the wait is queued is
    // allowed (the driver releases it once the wait is done).
    let result = unsafe {
        drv::event::record(event, producer.stream).and_then(|()| {
            drv::stream::wait_event(
                consumer.stream,
                event,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        })
    }
    .map_err(device_error("ordering one GPU's stream after another's"));
    // SAFETY: destroyed once; see above.
    let _ = unsafe { drv::event::destroy(event) };
    result
}

fn cuda_memory<'a>(arg: &'a BufferArg, what: &str) -> Result<&'a CudaMemory> {
    arg.memory
        .as_any()
        .downcast_ref::<CudaMemory>()
        .ok_or_else(|| BackendError::ForeignBuffer(format!("the {what} is not CUDA memory")))
}

/// Copies `src` (memory of `src_backend`) into `dst` (memory of `dst_backend`, as long as
/// `src`), GPU to GPU. Stream-ordered on both sides; see the module documentation.
pub fn copy_between(
    src_backend: &dyn Backend,
    src: &BufferArg,
    dst_backend: &dyn Backend,
    dst: &BufferArg,
) -> Result<()> {
    let (s, d) = (cuda_of(src_backend)?, cuda_of(dst_backend)?);
    if src.len != dst.len {
        return Err(BackendError::InvalidArgument {
            kernel: "peer copy".into(),
            reason: format!("{} bytes cannot be copied into {} bytes", src.len, dst.len),
        });
    }
    crate::launch::check_range(src.offset, src.len, src.memory.size())?;
    crate::launch::check_range(dst.offset, dst.len, dst.memory.size())?;
    let (sm, dm) = (
        cuda_memory(src, "source")?,
        cuda_memory(dst, "destination")?,
    );
    for (m, b, what) in [(sm, s, "source"), (dm, d, "destination")] {
        if m.ordinal() != b.device_ordinal() as usize {
            return Err(BackendError::ForeignBuffer(format!(
                "the {what} lives on cuda:{}, its executor runs on cuda:{}",
                m.ordinal(),
                b.device_ordinal()
            )));
        }
    }
    if src.len == 0 {
        return Ok(());
    }
    copy_on(s, sm, src.offset, d, dm, dst.offset, src.len)
}

fn copy_on(
    s: &CudaBackend,
    sm: &CudaMemory,
    src_offset: usize,
    d: &CudaBackend,
    dm: &CudaMemory,
    dst_offset: usize,
    len: usize,
) -> Result<()> {
    s.check_usable()?;
    d.check_usable()?;
    let (sd, dd) = (s.device(), d.device());
    if sd.ctx.ordinal() != dd.ctx.ordinal() {
        enable_peer_access(sd, dd);
    }
    // Earlier work on the destination (which may still read or write `dst`) goes first.
    order(dd, sd)?;
    sd.bind()?;
    let (from, to) = (
        sm.address() + src_offset as u64,
        dm.address() + dst_offset as u64,
    );
    // SAFETY: both ranges lie inside live allocations of the two contexts (checked by the
    // caller); the copy is queued on the source's live stream.
    let status = unsafe {
        sys::cuMemcpyPeerAsync(to, dd.ctx.cu_ctx(), from, sd.ctx.cu_ctx(), len, sd.stream)
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(BackendError::Device(describe(
            "cuMemcpyPeerAsync",
            cudarc::driver::DriverError(status),
        )));
    }
    // The destination's later work sees the copied bytes.
    order(sd, dd)
}
