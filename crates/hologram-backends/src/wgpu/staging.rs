//! Reads from the device at the bus's speed: mapped staging buffers are kept in a pool (no
//! buffer is created per read), and a large read goes in chunks through two of them, so the GPU
//! copies one chunk while the host copies the one before out of its mapping.

use std::sync::Mutex;

use super::device::Gpu;
use crate::error::{BackendError, Result};

/// Bytes of one staging buffer (one chunk of a read).
const CHUNK: u64 = 16 << 20;

/// Staging buffers kept for later reads; more are made while reads run on several threads.
const KEEP: usize = 4;

/// Idle MAP_READ staging buffers of `CHUNK` bytes.
#[derive(Default)]
pub(crate) struct StagingPool {
    free: Mutex<Vec<::wgpu::Buffer>>,
}

impl StagingPool {
    fn take(&self, gpu: &Gpu) -> Result<::wgpu::Buffer> {
        if let Some(b) = self.free.lock().ok().and_then(|mut f| f.pop()) {
            return Ok(b);
        }
        gpu.scoped(
            || {
                gpu.device.create_buffer(&::wgpu::BufferDescriptor {
                    label: Some("hologram readback"),
                    size: CHUNK,
                    usage: ::wgpu::BufferUsages::MAP_READ | ::wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            },
            |msg, oom| {
                if oom {
                    BackendError::OutOfMemory {
                        bytes: CHUNK as usize,
                        device: gpu.info.name.clone(),
                    }
                } else {
                    BackendError::Device(format!("creating a readback buffer failed: {msg}"))
                }
            },
        )
    }

    fn give_back(&self, buffers: Vec<::wgpu::Buffer>) {
        if let Ok(mut f) = self.free.lock() {
            for b in buffers {
                if f.len() < KEEP {
                    f.push(b);
                }
            }
        }
    }
}

/// Copies `data` (a whole number of words) into `dst` at `offset` (a multiple of 4), after
/// every queued launch, without waiting. Large copies go in chunks, each submitted as soon as the
/// host has staged it, so the GPU copies one while the host stages the next.
pub(crate) fn write(gpu: &Gpu, dst: &::wgpu::Buffer, offset: u64, data: &[u8]) -> Result<()> {
    // Queued launches go first (`write_buffer` runs before the next submission's work).
    gpu.work.flush(gpu)?;
    let chunks = data.len().div_ceil(CHUNK as usize);
    for (i, chunk) in data.chunks(CHUNK as usize).enumerate() {
        gpu.queue
            .write_buffer(dst, offset + i as u64 * CHUNK, chunk);
        if i + 1 < chunks {
            gpu.queue.submit(std::iter::empty());
        }
    }
    gpu.work.wrote()
}

/// Submits the copy of `len` bytes of `src` at `offset` into `staging`.
fn copy_chunk(
    gpu: &Gpu,
    src: &::wgpu::Buffer,
    offset: u64,
    len: u64,
    staging: &::wgpu::Buffer,
) -> ::wgpu::SubmissionIndex {
    let mut enc = gpu
        .device
        .create_command_encoder(&::wgpu::CommandEncoderDescriptor::default());
    enc.copy_buffer_to_buffer(src, offset, staging, 0, len);
    gpu.queue.submit([enc.finish()])
}

/// How a read treats the error of a launch queued before it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchErrors {
    /// Returns it (`copy_out`, as a synchronization).
    Report,
    /// Leaves it for the next synchronization (a read inside `copy_in`).
    Keep,
}

/// Copies `dst.len()` bytes of `src` at `offset` (both multiples of 4) into `dst`, after all
/// work queued before.
pub(crate) fn read_into(
    gpu: &Gpu,
    src: &::wgpu::Buffer,
    offset: u64,
    dst: &mut [u8],
    errors: LaunchErrors,
) -> Result<()> {
    let len = dst.len() as u64;
    if len == 0 {
        return gpu.work.wait(gpu);
    }
    let chunks = len.div_ceil(CHUNK) as usize;
    let mut staging = Vec::with_capacity(2);
    for _ in 0..chunks.min(2) {
        match gpu.staging.take(gpu) {
            Ok(b) => staging.push(b),
            Err(e) => {
                gpu.staging.give_back(staging);
                return Err(e);
            }
        }
    }
    let result = read_chunks(gpu, src, offset, dst, &staging, errors);
    gpu.staging.give_back(staging);
    result
}

fn read_chunks(
    gpu: &Gpu,
    src: &::wgpu::Buffer,
    offset: u64,
    dst: &mut [u8],
    staging: &[::wgpu::Buffer],
    errors: LaunchErrors,
) -> Result<()> {
    let len = dst.len() as u64;
    let chunk = |i: usize| {
        let start = i as u64 * CHUNK;
        (start, CHUNK.min(len - start))
    };
    let record = |i: usize| -> Result<::wgpu::SubmissionIndex> {
        let (start, n) = chunk(i);
        gpu.scoped(
            || copy_chunk(gpu, src, offset + start, n, &staging[i % staging.len()]),
            |msg, _| BackendError::Device(format!("read-back failed: {msg}")),
        )
    };
    // The copies go after every queued launch; the wait behind them (which reads the launches'
    // error words) is then the only round trip before the first chunk can be mapped.
    gpu.work.flush(gpu)?;
    let mut copies = std::collections::VecDeque::new();
    for i in 0..staging.len() {
        copies.push_back(record(i)?);
    }
    match errors {
        LaunchErrors::Report => gpu.work.wait(gpu)?,
        LaunchErrors::Keep => gpu.work.wait_keeping_errors(gpu)?,
    }
    let chunks = dst.len().div_ceil(CHUNK as usize);
    for (i, out) in dst.chunks_mut(CHUNK as usize).enumerate() {
        let buffer = &staging[i % staging.len()];
        // Waits for this chunk's copy only: the next one runs while this one is copied out.
        let copied = copies.pop_front();
        gpu.map_then(buffer, chunk(i).1, copied, None, |bytes| {
            out.copy_from_slice(bytes)
        })?;
        if i + staging.len() < chunks {
            copies.push_back(record(i + staging.len())?);
        }
    }
    Ok(())
}
