//! A plan's own memory: while a plan is recorded, the recording thread's allocations come from an
//! arena instead of the executor's shared free lists. Blocks freed during the recording go back
//! to the arena and are reused by later allocations of the same recording (so a plan's peak
//! memory is that of the live values, not of every value it makes); blocks freed later (an output
//! the caller drops) also go back to the arena, never to the shared lists, so nothing outside the
//! plan can get memory the plan's replays write.

use std::sync::{Arc, Mutex, MutexGuard};

use hologram_backends::{Backend, Memory};

use super::{class_bytes, class_for, Block, NUM_CLASSES};
use crate::error::Result;

#[derive(Default)]
struct State {
    free: Vec<Vec<Memory>>,
    /// Bytes held from the device.
    reserved: u64,
    /// Most bytes held at once.
    peak: u64,
    /// Blocks holding constants the recording uploaded (by address): kept for the plan, never
    /// reused for another value, so the plan may read the constant where it is.
    pinned: std::collections::HashSet<usize>,
    /// Pinned blocks given back.
    kept: Vec<Memory>,
}

fn key(m: &Memory) -> usize {
    Arc::as_ptr(m) as *const u8 as usize
}

/// Device memory owned by one plan.
pub(crate) struct Arena {
    backend: Arc<dyn Backend>,
    state: Mutex<State>,
}

impl Arena {
    pub fn new(backend: Arc<dyn Backend>) -> Arena {
        Arena {
            backend,
            state: Mutex::new(State {
                free: vec![Vec::new(); NUM_CLASSES],
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A block of at least `bytes` bytes, reused from this arena's free blocks when one fits.
    pub fn allocate(self: &Arc<Self>, bytes: usize) -> Result<Block> {
        let class = class_for(bytes);
        if let Some(k) = class {
            if let Some(memory) = self.lock().free[k].pop() {
                return Ok(Block {
                    memory,
                    class,
                    requested: bytes,
                    arena: Some(self.clone()),
                });
            }
        }
        let size = class.map(class_bytes).unwrap_or(bytes);
        let memory = self.backend.allocate(size)?;
        let mut st = self.lock();
        st.reserved += size as u64;
        st.peak = st.peak.max(st.reserved);
        Ok(Block {
            memory,
            class,
            requested: bytes,
            arena: Some(self.clone()),
        })
    }

    /// Takes a block back (oversized blocks stay reserved too: the plan may need them again).
    pub fn release(&self, memory: Memory, class: Option<usize>) {
        let mut st = self.lock();
        if st.pinned.contains(&key(&memory)) {
            st.kept.push(memory);
        } else if let Some(k) = class {
            st.free[k].push(memory);
        }
    }

    /// Keeps `memory` (a block of this arena a constant was uploaded to) from later values.
    pub fn pin(&self, memory: &Memory) {
        self.lock().pinned.insert(key(memory));
    }

    /// True when `memory` was pinned.
    pub fn is_pinned(&self, memory: &Memory) -> bool {
        self.lock().pinned.contains(&key(memory))
    }

    /// Bytes held from the device now, and at most.
    pub fn bytes(&self) -> (u64, u64) {
        let st = self.lock();
        (st.reserved, st.peak)
    }
}
