//! Host memory for the CPU backend: zeroed, 64-byte aligned allocations, or memory imported
//! from another library (NumPy, PyTorch) and kept alive by its owner.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::any::Any;
use std::ptr::NonNull;

use crate::backend::{DeviceMemory, MemoryOwner};
use crate::error::{BackendError, Result};

/// Alignment of every allocation (a cache line; enough for any element type and SIMD loads).
pub const ALIGN: usize = 64;

enum Kind {
    Owned(Layout),
    Imported(#[allow(dead_code)] MemoryOwner),
}

/// One block of host memory.
pub struct CpuMemory {
    ptr: NonNull<u8>,
    size: usize,
    kind: Kind,
}

// SAFETY: the memory is plain bytes that no `&` or `&mut` reference ever covers; the backend
// reads and writes it through raw pointers only while it holds the process-wide device lock
// (`device_lock.rs`), and within a launch, threads that may meet use relaxed atomics of one
// size or do not run in parallel (`memops.rs`, `bind.rs`). Imported owners are Send + Sync.
unsafe impl Send for CpuMemory {}
// SAFETY: as for `Send`.
unsafe impl Sync for CpuMemory {}

impl CpuMemory {
    /// Allocates `size` zeroed bytes.
    pub fn new(size: usize) -> Result<Self> {
        let oom = || BackendError::OutOfMemory {
            bytes: size,
            device: "host".into(),
        };
        // Zero-sized allocations still get a unique, aligned block.
        let layout = Layout::from_size_align(size.max(1), ALIGN).map_err(|_| oom())?;
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(oom)?;
        Ok(CpuMemory {
            ptr,
            size,
            kind: Kind::Owned(layout),
        })
    }

    /// Wraps `size` bytes at `address` owned by `owner`.
    ///
    /// # Safety
    /// `address..address + size` must stay valid, writable host memory while `owner` lives.
    pub unsafe fn import(address: u64, size: usize, owner: MemoryOwner) -> Result<Self> {
        let ptr = NonNull::new(address as usize as *mut u8).ok_or_else(|| {
            BackendError::InvalidArgument {
                kernel: "import".into(),
                reason: "null host pointer".into(),
            }
        })?;
        Ok(CpuMemory {
            ptr,
            size,
            kind: Kind::Imported(owner),
        })
    }

    /// Start of the memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Size in bytes (the allocation's own, whatever a wrapper's `DeviceMemory::size` says).
    pub fn len(&self) -> usize {
        self.size
    }

    /// True for a zero-byte allocation.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

impl Drop for CpuMemory {
    fn drop(&mut self) {
        if let Kind::Owned(layout) = self.kind {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

impl DeviceMemory for CpuMemory {
    fn size(&self) -> usize {
        self.size
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.as_ptr())
    }
}
