//! Page-locked host blocks lent for device-to-host reads into new host arrays.
//!
//! A read into pageable memory (a fresh NumPy array) goes through the driver's own staging
//! buffers, one chunk after another, at about half the bus's speed; a read into page-locked
//! memory is one DMA. Allocating page-locked memory costs far more than a read
//! (`cuMemHostAlloc` locks every page), so blocks come from a pool: a block goes back to it
//! when the array that holds it is freed, and the next read of that size class reuses it.
//! The pool holds at most [`PINNED_ENV`] MiB (lent and idle together); past that, reads fall
//! back to the caller's own memory.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use super::memory::Pinned;
use crate::error::{BackendError, Result};
use crate::host_buffer::HostBuffer;

/// Caps the page-locked memory the pool holds, in MiB (`0` turns lending off).
pub const PINNED_ENV: &str = "HOLOGRAM_CUDA_PINNED_MB";
/// The cap without [`PINNED_ENV`].
const DEFAULT_LIMIT_MB: usize = 1024;
/// Reads smaller than this go straight to the caller's memory: the driver's pageable path is
/// as fast there, and a NumPy array over a lent block costs a few microseconds more to make.
pub(crate) const MIN_LENT: usize = 256 << 10;
/// Reads larger than this use the backend's chunked staging: a block this size held by one
/// array is as much page-locked memory as one array should hold.
pub(crate) const MAX_LENT: usize = 256 << 20;

/// The pool's cap in bytes, from [`PINNED_ENV`].
pub(crate) fn limit_from_env() -> Result<usize> {
    match std::env::var(PINNED_ENV) {
        Err(_) => Ok(DEFAULT_LIMIT_MB << 20),
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .map(|mb| mb.saturating_mul(1 << 20))
            .map_err(|_| BackendError::Unavailable {
                backend: "cuda".into(),
                reason: format!(
                    "{PINNED_ENV}={v} is not a whole number of MiB (0 turns pinned reads off)"
                ),
            }),
    }
}

/// The size class of a read of `len` bytes (blocks are reused within a class).
fn class_of(len: usize) -> usize {
    len.next_power_of_two()
}

#[derive(Default)]
struct Blocks {
    /// Idle blocks by size.
    idle: BTreeMap<usize, Vec<Pinned>>,
    /// Lent blocks by address.
    lent: BTreeMap<usize, Pinned>,
    /// Bytes of idle and lent blocks.
    held: usize,
}

/// The pool of one device's context.
pub(crate) struct PinnedPool {
    ctx: Arc<CudaContext>,
    limit: usize,
    blocks: Mutex<Blocks>,
}

impl PinnedPool {
    pub(crate) fn new(ctx: Arc<CudaContext>, limit: usize) -> PinnedPool {
        PinnedPool {
            ctx,
            limit,
            blocks: Mutex::new(Blocks::default()),
        }
    }

    fn blocks(&self) -> MutexGuard<'_, Blocks> {
        // A panic while the lock was held leaves consistent maps (each step is one insert or
        // remove), so a poisoned lock is taken over.
        self.blocks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A block of at least `len` bytes (its first `len` lent), or `None` when `len` is outside
    /// what the pool lends or the pool is at its cap.
    pub(crate) fn lend(self: &Arc<Self>, len: usize) -> Option<HostBuffer> {
        if !(MIN_LENT..=MAX_LENT).contains(&len) {
            return None;
        }
        let class = class_of(len);
        let mut b = self.blocks();
        let block = match b.idle.get_mut(&class).and_then(Vec::pop) {
            Some(block) => block,
            None => {
                // Idle blocks of other classes make room first (largest first).
                while b.held + class > self.limit {
                    let largest = *b.idle.keys().next_back()?;
                    let freed = b.idle.get_mut(&largest).and_then(Vec::pop);
                    if b.idle.get(&largest).is_some_and(Vec::is_empty) {
                        b.idle.remove(&largest);
                    }
                    if freed.is_some() {
                        b.held -= largest;
                    }
                }
                self.ctx.bind_to_thread().ok()?;
                let block = Pinned::new(&self.ctx, class, sys::CU_MEMHOSTALLOC_PORTABLE).ok()?;
                b.held += class;
                block
            }
        };
        let ptr = NonNull::new(block.ptr)?;
        b.lent.insert(block.ptr as usize, block);
        let pool = Arc::clone(self);
        // SAFETY: the block is lent to this buffer alone until it comes back through the
        // closure, and stays allocated (owned by `lent`) until then.
        Some(unsafe { HostBuffer::new(ptr, len, Box::new(move |p, _| pool.give_back(p))) })
    }

    fn give_back(&self, ptr: NonNull<u8>) {
        let mut b = self.blocks();
        if let Some(block) = b.lent.remove(&(ptr.as_ptr() as usize)) {
            b.idle.entry(block.len).or_default().push(block);
        }
    }

    /// True when `[ptr, ptr + len)` lies in a lent block (a copy there needs no staging).
    pub(crate) fn lends(&self, ptr: *const u8, len: usize) -> bool {
        let at = ptr as usize;
        let b = self.blocks();
        b.lent
            .range(..=at)
            .next_back()
            .is_some_and(|(&start, block)| at + len <= start + block.len)
    }

    /// Frees the idle blocks.
    pub(crate) fn release_idle(&self) {
        let mut b = self.blocks();
        let idle = std::mem::take(&mut b.idle);
        b.held -= idle.iter().map(|(size, v)| size * v.len()).sum::<usize>();
        drop(b);
        drop(idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_share_a_class_with_reads_up_to_the_next_power_of_two() {
        assert_eq!(class_of(MIN_LENT), MIN_LENT);
        assert_eq!(class_of(MIN_LENT + 1), 2 * MIN_LENT);
        assert_eq!(class_of(4 << 20), 4 << 20);
        assert_eq!(class_of(MAX_LENT), MAX_LENT);
    }
}
