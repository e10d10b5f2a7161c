//! The caching allocator: device memory served from 96 size classes with cached free lists, so
//! ops do not hit the driver's allocator on every call.

pub(crate) mod arena;
mod classes;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use hologram_backends::{Backend, BackendError, Memory};

pub use classes::{class_bytes, class_for, MIN_CLASS_BYTES, NUM_CLASSES};

use crate::error::Result;

/// Counters of the caching allocator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Allocation requests served.
    pub allocations: u64,
    /// Requests served from a free list.
    pub cache_hits: u64,
    /// Requests that went to the device.
    pub device_allocations: u64,
    /// Bytes requested by live buffers.
    pub bytes_in_use: u64,
    /// Bytes held from the device (live blocks plus cached free blocks).
    pub bytes_reserved: u64,
    /// Bytes held in free lists.
    pub bytes_cached: u64,
    /// Highest `bytes_reserved` seen.
    pub peak_reserved: u64,
}

/// A block handed out by the allocator.
#[derive(Clone)]
pub(crate) struct Block {
    pub memory: Memory,
    /// Size class, or None for a direct (oversized) allocation.
    pub class: Option<usize>,
    /// Bytes requested.
    pub requested: usize,
    /// The plan arena the block belongs to (it goes back there, not to the shared lists).
    pub arena: Option<Arc<arena::Arena>>,
}

struct State {
    free: Vec<Vec<Memory>>,
    stats: AllocatorStats,
}

/// Caching allocator over one backend.
pub(crate) struct CachingAllocator {
    backend: Arc<dyn Backend>,
    state: Mutex<State>,
    /// While a plan is recorded: the thread recording it and the plan's arena.
    arena: Mutex<Option<(ThreadId, Arc<arena::Arena>)>>,
    /// Whether `arena` is set (checked without locking on every allocation).
    arena_on: AtomicBool,
}

impl CachingAllocator {
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        CachingAllocator {
            backend,
            state: Mutex::new(State {
                free: vec![Vec::new(); NUM_CLASSES],
                stats: AllocatorStats::default(),
            }),
            arena: Mutex::new(None),
            arena_on: AtomicBool::new(false),
        }
    }

    /// Serves the current thread's allocations from `arena` (until [`Self::end_arena`]).
    pub fn begin_arena(&self, arena: Arc<arena::Arena>) {
        *self.arena.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::thread::current().id(), arena));
        self.arena_on.store(true, Ordering::SeqCst);
    }

    /// Stops serving allocations from the arena.
    pub fn end_arena(&self) {
        self.arena_on.store(false, Ordering::SeqCst);
        *self.arena.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn current_arena(&self) -> Option<Arc<arena::Arena>> {
        if !self.arena_on.load(Ordering::Relaxed) {
            return None;
        }
        let guard = self.arena.lock().unwrap_or_else(|p| p.into_inner());
        match &*guard {
            Some((thread, arena)) if *thread == std::thread::current().id() => Some(arena.clone()),
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked while holding it; the free lists
        // are still consistent (every update is a single push or pop).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A block of at least `bytes` bytes.
    pub fn allocate(&self, bytes: usize) -> Result<Block> {
        if let Some(arena) = self.current_arena() {
            return arena.allocate(bytes);
        }
        let class = class_for(bytes);
        {
            let mut st = self.lock();
            st.stats.allocations += 1;
            if let Some(k) = class {
                if let Some(memory) = st.free[k].pop() {
                    st.stats.cache_hits += 1;
                    st.stats.bytes_cached -= class_bytes(k) as u64;
                    st.stats.bytes_in_use += bytes as u64;
                    return Ok(Block {
                        memory,
                        class,
                        requested: bytes,
                        arena: None,
                    });
                }
            }
        }
        let size = class.map(class_bytes).unwrap_or(bytes);
        let memory = match self.backend.allocate(size) {
            Ok(m) => m,
            Err(BackendError::OutOfMemory { .. }) => {
                // Give cached blocks back to the device and try once more.
                self.empty_cache();
                self.backend.allocate(size)?
            }
            Err(e) => return Err(e.into()),
        };
        let mut st = self.lock();
        st.stats.device_allocations += 1;
        st.stats.bytes_in_use += bytes as u64;
        st.stats.bytes_reserved += size as u64;
        st.stats.peak_reserved = st.stats.peak_reserved.max(st.stats.bytes_reserved);
        Ok(Block {
            memory,
            class,
            requested: bytes,
            arena: None,
        })
    }

    /// Returns a block to its free list (direct allocations go back to the device; blocks of a
    /// plan's arena go back to the arena).
    pub fn release(&self, block: Block) {
        if let Some(arena) = block.arena {
            arena.release(block.memory, block.class);
            return;
        }
        let mut st = self.lock();
        st.stats.bytes_in_use -= block.requested as u64;
        match block.class {
            Some(k) => {
                st.stats.bytes_cached += class_bytes(k) as u64;
                st.free[k].push(block.memory);
            }
            None => st.stats.bytes_reserved -= block.memory.size() as u64,
        }
    }

    /// Frees every cached block.
    pub fn empty_cache(&self) {
        let mut st = self.lock();
        let freed: Vec<Memory> = st.free.iter_mut().flat_map(std::mem::take).collect();
        st.stats.bytes_reserved -= st.stats.bytes_cached;
        st.stats.bytes_cached = 0;
        drop(st);
        drop(freed);
    }

    pub fn stats(&self) -> AllocatorStats {
        self.lock().stats
    }
}
