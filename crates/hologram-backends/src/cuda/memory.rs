//! Device memory and host transfers.
//!
//! `allocate` hands out raw `cuMemAlloc` blocks (the caching allocator of `hologram-core` sits
//! above it). Copies run on the backend's stream, in order with launches. Host-to-device copies
//! return as soon as the source may be reused; device-to-host copies wait for earlier work.
//! Transfers of [`STAGING_THRESHOLD`] bytes or more go through two reusable pinned buffers in
//! chunks, so the CPU copy of one chunk overlaps the DMA of the other.

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{result as drv, CudaContext};

use super::device::{device_error, Device};
use crate::backend::{DeviceMemory, MemoryOwner};
use crate::error::{BackendError, Result};

/// Copies at least this large use the pinned staging buffers; smaller ones go straight to or
/// from the caller's pageable memory, which the driver stages itself at the bus's speed. The
/// size is where a fresh destination stops being recycled heap memory (glibc serves 32 MiB and
/// more with new mappings, whose first touch page-faults): on an H200, a direct device-to-host
/// copy into a fresh NumPy array ran at 12.9 GB/s for 4 MiB and 15.2 GB/s for 16 MiB (torch's
/// `.cpu()`: 12.5 and 15.2) but 3.7 GB/s at 64 MiB, where this path's overlap of DMA with the
/// host's copy and its page faults keeps about 12 GB/s. On an H100 a staged 4 MiB read took
/// 572 us against torch's 309 us.
pub const STAGING_THRESHOLD: usize = 32 << 20;
/// Size of each pinned staging buffer (one chunk).
const CHUNK: usize = 8 << 20;
/// Pinned buffers in flight.
const BUFFERS: usize = 2;
/// The smallest chunk a device-to-host copy is cut into (see [`out_chunk`]).
const MIN_OUT_CHUNK: usize = 512 << 10;

/// The chunk size of a staged device-to-host copy of `len` bytes: a quarter of the copy (at
/// least [`MIN_OUT_CHUNK`], at most a whole buffer), so that even the smallest staged copy is
/// four chunks and the host's copy of one chunk (page faults of a fresh destination included) overlaps the
/// DMA of the next. With one 8 MiB chunk the two ran one after the other: a 4 MiB read took
/// the DMA time plus the host copy time.
pub(crate) fn out_chunk(len: usize) -> usize {
    len.div_ceil(4)
        .next_multiple_of(64 << 10)
        .clamp(MIN_OUT_CHUNK, CHUNK)
}

/// One `cuMemAlloc` allocation, or device memory imported from another library (which keeps
/// it alive through its owner; it is not freed here).
pub struct CudaMemory {
    ptr: CUdeviceptr,
    size: usize,
    ctx: Arc<CudaContext>,
    imported: Option<MemoryOwner>,
}

impl CudaMemory {
    /// Allocates `bytes` (at least one byte is reserved, so every allocation has an address).
    pub(crate) fn new(dev: &Device, bytes: usize) -> Result<CudaMemory> {
        // SAFETY: plain allocation in the current context.
        let ptr = unsafe { drv::malloc_sync(bytes.max(1)) }.map_err(|e| match e.0 {
            sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => BackendError::OutOfMemory {
                bytes,
                device: dev.name.clone(),
            },
            _ => device_error("cuMemAlloc")(e),
        })?;
        Ok(CudaMemory {
            ptr,
            size: bytes,
            ctx: dev.ctx.clone(),
            imported: None,
        })
    }

    /// Wraps `bytes` of device memory at `address` owned elsewhere; `owner` lives as long as
    /// this value.
    ///
    /// # Safety
    /// As for [`Interop::import_memory`](crate::Interop::import_memory): `address..address +
    /// bytes` is memory of `dev`'s context, valid while `owner` lives.
    pub(crate) unsafe fn import(
        dev: &Device,
        address: u64,
        bytes: usize,
        owner: MemoryOwner,
    ) -> CudaMemory {
        CudaMemory {
            ptr: address,
            size: bytes,
            ctx: dev.ctx.clone(),
            imported: Some(owner),
        }
    }

    /// The device address of the first byte.
    pub fn address(&self) -> u64 {
        self.ptr
    }

    /// The CUDA device ordinal the memory lives on.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl Drop for CudaMemory {
    fn drop(&mut self) {
        if self.imported.is_none() && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `new`, freed once. cuMemFree waits for work using it.
            let _ = unsafe { drv::free_sync(self.ptr) };
        }
    }
}

impl DeviceMemory for CudaMemory {
    fn size(&self) -> usize {
        self.size
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn device_ptr(&self) -> Option<u64> {
        Some(self.ptr)
    }
}

/// The device address of a buffer argument's first byte: the argument must be CUDA memory, and
/// its range lies inside the allocation (checked against the allocation's own size, which a
/// `Memory` wrapper may report differently).
pub(crate) fn device_address(x: &crate::backend::BufferArg) -> Result<u64> {
    let m = x
        .memory
        .as_any()
        .downcast_ref::<CudaMemory>()
        .ok_or_else(|| BackendError::ForeignBuffer("not CUDA device memory".into()))?;
    crate::launch::check_buffer(x, DeviceMemory::size(m))?;
    Ok(m.address() + x.offset as u64)
}

/// Page-locked host memory from `cuMemHostAlloc`.
pub(crate) struct Pinned {
    pub ptr: *mut u8,
    pub len: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: a `Pinned` owns its allocation alone; freeing it binds its context on whichever
// thread drops it.
unsafe impl Send for Pinned {}

impl Pinned {
    /// Allocates `len` pinned bytes with `cuMemHostAlloc` flags.
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize, flags: u32) -> Result<Pinned> {
        // SAFETY: plain allocation in the current context.
        let ptr = unsafe { drv::malloc_host(len, flags) }.map_err(device_error("cuMemHostAlloc"))?
            as *mut u8;
        Ok(Pinned {
            ptr,
            len,
            ctx: ctx.clone(),
        })
    }

    /// The first `len` bytes as a slice.
    ///
    /// # Safety
    /// No DMA into or out of the buffer may be in flight.
    unsafe fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: `ptr` addresses `self.len` bytes of pinned memory owned by `self` (borrowed
        // mutably here), and no DMA is in flight (the contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.len)) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `new`, freed once.
            let _ = unsafe { drv::free_host(self.ptr as *mut _) };
        }
    }
}

/// Pieces of a chunk that threads copy out of a pinned buffer together.
const HOST_PIECE: usize = 256 << 10;

/// Copies a chunk between the caller's memory and a staging buffer, in [`HOST_PIECE`]s on
/// several threads: one thread's copy is slower than the DMA it overlaps (more so when a fresh
/// destination, a new NumPy array, takes a page fault per page).
fn host_copy(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    if dst.len() <= HOST_PIECE {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(HOST_PIECE)
        .zip(src.par_chunks(HOST_PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Two pinned buffers, each with an event marking when its last transfer finished.
pub(crate) struct Staging {
    bufs: Vec<Pinned>,
    events: Vec<sys::CUevent>,
    busy: Vec<bool>,
}

// SAFETY: the raw pointers are owned pinned buffers and driver events, used under a mutex.
unsafe impl Send for Staging {}

impl Staging {
    pub(crate) fn new(dev: &Device) -> Result<Staging> {
        let mut bufs = Vec::new();
        let mut events = Vec::new();
        for _ in 0..BUFFERS {
            bufs.push(Pinned::new(&dev.ctx, CHUNK, 0)?);
            events.push(
                drv::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                    .map_err(device_error("cuEventCreate"))?,
            );
        }
        Ok(Staging {
            bufs,
            events,
            busy: vec![false; BUFFERS],
        })
    }

    /// Waits until buffer `b`'s last transfer is done.
    fn settle(&mut self, b: usize) -> Result<()> {
        if self.busy[b] {
            // SAFETY: the event was recorded on the stream after the transfer.
            unsafe { drv::event::synchronize(self.events[b]) }
                .map_err(device_error("waiting for a staged copy"))?;
            self.busy[b] = false;
        }
        Ok(())
    }

    fn mark(&mut self, dev: &Device, b: usize) -> Result<()> {
        // SAFETY: event and stream are live.
        unsafe { drv::event::record(self.events[b], dev.stream) }
            .map_err(device_error("cuEventRecord"))?;
        self.busy[b] = true;
        Ok(())
    }

    /// Host to device through the pinned buffers; returns once every chunk is in a pinned buffer
    /// (the caller's slice may then be reused).
    pub(crate) fn copy_in(&mut self, dev: &Device, dst: CUdeviceptr, src: &[u8]) -> Result<()> {
        for (i, chunk) in src.chunks(CHUNK).enumerate() {
            let b = i % BUFFERS;
            self.settle(b)?;
            // SAFETY: the buffer is idle (settled) and holds CHUNK bytes.
            let buf = unsafe { self.bufs[b].slice_mut(chunk.len()) };
            // On several threads: one thread's copy into page-locked memory (about 10 GB/s)
            // was slower than the DMA it feeds.
            host_copy(buf, chunk);
            // SAFETY: the destination range was checked by the caller; the pinned source stays
            // untouched until the event recorded next has completed.
            unsafe { drv::memcpy_htod_async(dst + (i * CHUNK) as u64, &*buf, dev.stream) }
                .map_err(device_error("cuMemcpyHtoDAsync"))?;
            self.mark(dev, b)?;
        }
        Ok(())
    }

    /// Device to host through the pinned buffers, after all earlier work on the stream.
    pub(crate) fn copy_out(
        &mut self,
        dev: &Device,
        src: CUdeviceptr,
        dst: &mut [u8],
    ) -> Result<()> {
        let chunk = out_chunk(dst.len());
        let n = dst.len().div_ceil(chunk);
        let len_of = |i: usize| chunk.min(dst.len() - i * chunk);
        let lens: Vec<usize> = (0..n).map(len_of).collect();
        for (i, &len) in lens.iter().enumerate().take(BUFFERS) {
            self.fetch(dev, src + (i * chunk) as u64, i, len)?;
        }
        for i in 0..n {
            let b = i % BUFFERS;
            self.settle(b)?;
            // SAFETY: the transfer into the buffer has completed (settled).
            let buf = unsafe { self.bufs[b].slice_mut(lens[i]) };
            host_copy(&mut dst[i * chunk..i * chunk + lens[i]], buf);
            let next = i + BUFFERS;
            if next < n {
                self.fetch(dev, src + (next * chunk) as u64, next, lens[next])?;
            }
        }
        Ok(())
    }

    /// Starts the DMA of `len` bytes at `src` into buffer `i % BUFFERS`.
    fn fetch(&mut self, dev: &Device, src: CUdeviceptr, i: usize, len: usize) -> Result<()> {
        let b = i % BUFFERS;
        self.settle(b)?;
        // SAFETY: the buffer is idle; the source range was checked by the caller.
        let buf = unsafe { self.bufs[b].slice_mut(len) };
        // SAFETY: `buf` is pinned memory that stays allocated and untouched by the host until
        // `settle` waits for this copy's event; the source range was checked by the caller.
        unsafe { drv::memcpy_dtoh_async(buf, src, dev.stream) }
            .map_err(device_error("cuMemcpyDtoHAsync"))?;
        self.mark(dev, b)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(p) = self.bufs.first() {
            let _ = p.ctx.bind_to_thread();
        }
        for (b, e) in self.events.iter().enumerate() {
            if self.busy[b] {
                // SAFETY: waiting on a live event before the buffers go.
                let _ = unsafe { drv::event::synchronize(*e) };
            }
            // SAFETY: destroyed once.
            let _ = unsafe { drv::event::destroy(*e) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_chunks_reach_the_host_whole() {
        for len in [0, 1000, HOST_PIECE, HOST_PIECE + 1, 3 * HOST_PIECE + 17] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut dst = vec![0u8; len];
            host_copy(&mut dst, &src);
            assert_eq!(dst, src, "{len}");
        }
    }

    #[test]
    fn device_to_host_copies_are_cut_into_overlapping_chunks() {
        // The threshold copy is four chunks, so DMA and host copy overlap.
        assert_eq!(out_chunk(STAGING_THRESHOLD), 8 << 20);
        assert_eq!(STAGING_THRESHOLD.div_ceil(out_chunk(STAGING_THRESHOLD)), 4);
        // Chunks never exceed a buffer nor fall under the minimum.
        assert_eq!(out_chunk(1 << 30), CHUNK);
        assert_eq!(out_chunk(1000), MIN_OUT_CHUNK);
        for len in [
            STAGING_THRESHOLD,
            STAGING_THRESHOLD + 1,
            5_000_000,
            33 << 20,
            1 << 30,
        ] {
            let c = out_chunk(len);
            assert!((MIN_OUT_CHUNK..=CHUNK).contains(&c), "{len}: {c}");
            assert!(
                len.div_ceil(c) >= 4.min(len.div_ceil(MIN_OUT_CHUNK)),
                "{len}: {c}"
            );
        }
    }
}
