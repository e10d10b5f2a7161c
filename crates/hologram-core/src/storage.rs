//! Untyped device memory owned by an executor, returned to its allocator on drop.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use hologram_backends::{BufferArg, Memory};

use crate::alloc::Block;
use crate::error::{Error, Result};
use crate::executor::{Executor, Inner};
use crate::plan::step::Step;

/// `bytes` bytes of device memory: a block of the caching allocator, or memory imported from
/// another library.
pub(crate) struct Storage {
    pub(crate) inner: Arc<Inner>,
    /// Taken only in `drop`.
    block: ManuallyDrop<Block>,
    pub(crate) bytes: usize,
    /// Imported memory goes back to its owner, not to the allocator.
    external: bool,
}

impl Storage {
    pub(crate) fn new(exec: &Executor, bytes: usize) -> Result<Self> {
        let block = exec.inner.allocator.allocate(bytes)?;
        Ok(Storage {
            inner: exec.inner.clone(),
            block: ManuallyDrop::new(block),
            bytes,
            external: false,
        })
    }

    /// Wraps imported memory.
    pub(crate) fn external(exec: &Executor, memory: Memory) -> Self {
        let bytes = memory.size();
        let block = Block {
            memory,
            class: None,
            requested: bytes,
            arena: None,
        };
        Storage {
            inner: exec.inner.clone(),
            block: ManuallyDrop::new(block),
            bytes,
            external: true,
        }
    }

    pub(crate) fn memory(&self) -> &Memory {
        &self.block.memory
    }

    /// `len` bytes at byte `offset` as a launch argument.
    pub(crate) fn arg(&self, offset: usize, len: usize) -> BufferArg {
        BufferArg {
            memory: self.block.memory.clone(),
            offset,
            len,
        }
    }

    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.inner.backend.copy_in(self.memory(), offset, data)?;
        let exec = Executor {
            inner: self.inner.clone(),
        };
        if exec.recording_here() {
            if let Some(arena) = &self.block.arena {
                arena.pin(self.memory());
            }
        }
        exec.record(|| Step::Upload {
            memory: self.memory().clone(),
            offset,
            data: data.into(),
        });
        Ok(())
    }

    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let exec = Executor {
            inner: self.inner.clone(),
        };
        if exec.recording_here() {
            return Err(Error::InvalidArgument(
                "device data was read on the host while a plan was being recorded (.item(), \
                 to_vec, numpy): a replay could not repeat that; read results after the plan runs"
                    .into(),
            ));
        }
        Ok(self.inner.backend.copy_out(self.memory(), offset, out)?)
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        // SAFETY: `block` is never used again after this.
        let block = unsafe { ManuallyDrop::take(&mut self.block) };
        if !self.external {
            self.inner.allocator.release(block);
        }
    }
}
