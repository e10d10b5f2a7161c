//! Host memory for the CPU backend: zeroed, 64-byte aligned allocations.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::any::Any;
use std::ptr::NonNull;

use crate::backend::DeviceMemory;
use crate::error::{BackendError, Result};

/// Alignment of every allocation (a cache line; enough for any element type and SIMD loads).
pub const ALIGN: usize = 64;

/// One host allocation.
pub struct CpuMemory {
    ptr: NonNull<u8>,
    size: usize,
    layout: Layout,
}

// SAFETY: the allocation is plain bytes owned by this value; concurrent access is coordinated by
// the backend (copies and launches on the CPU are synchronous, and kernels' own data races are
// documented as undefined results, as on GPUs).
unsafe impl Send for CpuMemory {}
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
        Ok(CpuMemory { ptr, size, layout })
    }

    /// Start of the allocation.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for CpuMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
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
