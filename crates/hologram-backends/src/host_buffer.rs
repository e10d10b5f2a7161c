//! Host memory a backend lends for device-to-host reads (see [`crate::Backend::pinned_host`]).

use std::fmt;
use std::ptr::NonNull;

/// Gives a lent buffer back to its lender (a pool) when the buffer is dropped.
pub type ReturnBuffer = Box<dyn FnOnce(NonNull<u8>, usize) + Send + Sync>;

/// `len` bytes of host memory lent by a backend (page-locked memory that its device copies into
/// at the bus's speed); it goes back to the backend when dropped. The bytes are the holder's
/// alone until then.
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
    give_back: Option<ReturnBuffer>,
}

// SAFETY: the buffer owns its bytes exclusively (the lender hands each block to one holder at a
// time), so it may move between threads and be read from several through `&self`.
unsafe impl Send for HostBuffer {}
// SAFETY: as above; `&self` only gives shared access to the bytes.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// A buffer of `len` bytes at `ptr`, given back through `give_back` when dropped.
    ///
    /// # Safety
    /// `ptr` must address `len` bytes of host memory that nothing else reads or writes until
    /// `give_back` runs.
    pub unsafe fn new(ptr: NonNull<u8>, len: usize, give_back: ReturnBuffer) -> HostBuffer {
        HostBuffer {
            ptr,
            len,
            give_back: Some(give_back),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` addresses `len` bytes owned by this buffer (the contract of `new`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostBuffer({} bytes at {:p})", self.len, self.ptr)
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Some(give_back) = self.give_back.take() {
            give_back(self.ptr, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_dropped_buffer_goes_back_once_with_its_bytes() {
        let returned = Arc::new(AtomicUsize::new(0));
        let mut block = vec![0u8; 64].into_boxed_slice();
        let ptr = NonNull::new(block.as_mut_ptr()).unwrap();
        let seen = returned.clone();
        let address = ptr.as_ptr() as usize;
        // SAFETY: `block` outlives the buffer and nothing else touches it meanwhile.
        let mut buf = unsafe {
            HostBuffer::new(
                ptr,
                64,
                Box::new(move |p, len| {
                    assert_eq!(p.as_ptr() as usize, address);
                    seen.fetch_add(len, Ordering::SeqCst);
                }),
            )
        };
        buf.as_mut_slice()[63] = 7;
        assert_eq!(buf.as_slice()[63], 7);
        drop(buf);
        assert_eq!(returned.load(Ordering::SeqCst), 64);
        assert_eq!(block[63], 7);
    }
}
