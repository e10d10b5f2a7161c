//! Device memory: one wgpu storage buffer per allocation, padded to 16 bytes (so every element
//! type can be bound and every copy can be done in whole 4-byte words).

use std::any::Any;
use std::sync::Arc;

use super::bind_groups::BindGroupCache;

use crate::backend::{DeviceMemory, Memory};
use crate::error::{BackendError, Result};

/// Allocation granularity in bytes.
pub const PAD: usize = 16;

/// One allocation.
pub struct WgpuMemory {
    pub(crate) buffer: ::wgpu::Buffer,
    size: usize,
    /// Identifies the backend instance that made it.
    pub(crate) owner: usize,
    /// The device's bind groups: those naming this buffer go when it is freed.
    groups: Arc<BindGroupCache>,
}

impl WgpuMemory {
    pub(crate) fn new(
        buffer: ::wgpu::Buffer,
        size: usize,
        owner: usize,
        groups: Arc<BindGroupCache>,
    ) -> Self {
        WgpuMemory {
            buffer,
            size,
            owner,
            groups,
        }
    }

    /// `m` as memory of the wgpu backend instance `owner`; a clear error for memory of another
    /// backend or another wgpu device.
    pub(crate) fn of(m: &Memory, owner: usize) -> Result<&WgpuMemory> {
        let mem = m
            .as_any()
            .downcast_ref::<WgpuMemory>()
            .ok_or_else(|| BackendError::ForeignBuffer("not wgpu memory".into()))?;
        if mem.owner != owner {
            return Err(BackendError::ForeignBuffer(
                "memory of another wgpu device".into(),
            ));
        }
        Ok(mem)
    }

    /// The padded size of the underlying buffer.
    pub fn padded_size(&self) -> u64 {
        self.buffer.size()
    }
}

impl Drop for WgpuMemory {
    fn drop(&mut self) {
        // Cached bind groups would keep the buffer (and its device memory) alive.
        self.groups.forget(&self.buffer);
    }
}

impl DeviceMemory for WgpuMemory {
    fn size(&self) -> usize {
        self.size
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The padded byte size of an allocation of `bytes`.
pub fn padded(bytes: usize) -> u64 {
    (bytes.max(1).div_ceil(PAD) * PAD) as u64
}

/// `[start, end)` rounded out to 4-byte words.
pub fn word_range(offset: usize, len: usize) -> (u64, u64) {
    let start = (offset / 4 * 4) as u64;
    let end = (offset + len).div_ceil(4) as u64 * 4;
    (start, end)
}
