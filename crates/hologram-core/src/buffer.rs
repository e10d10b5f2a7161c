//! Typed device buffers that free themselves.

use std::marker::PhantomData;
use std::ops::Range;

use hologram_backends::{BufferArg, KernelArg, Memory};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::storage::Storage;

/// `len` elements of `T` in device memory, returned to the executor's allocator on drop.
pub struct Buffer<T: Element> {
    storage: std::sync::Arc<Storage>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer<{}>[{}] on {}",
            T::TYPE,
            self.len,
            self.storage.inner.backend_type
        )
    }
}

impl<T: Element> Buffer<T> {
    pub(crate) fn new(exec: &Executor, len: usize) -> Result<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::LengthMismatch(format!(
                "{len} elements of {} overflow the address space",
                T::TYPE
            ))
        })?;
        Ok(Buffer {
            storage: std::sync::Arc::new(Storage::new(exec, bytes)?),
            len,
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The executor the buffer belongs to.
    pub fn executor(&self) -> Executor {
        Executor {
            inner: self.storage.inner.clone(),
        }
    }

    /// The device allocation (it may be larger than the buffer).
    pub fn memory(&self) -> &Memory {
        self.storage.memory()
    }

    fn check_range(&self, range: &Range<usize>) -> Result<()> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::LengthMismatch(format!(
                "range {}..{} is outside a buffer of {} elements",
                range.start, range.end, self.len
            )));
        }
        Ok(())
    }

    /// Copies `data` into the whole buffer; `data.len()` must equal the buffer's length.
    pub fn write(&self, data: &[T]) -> Result<()> {
        if data.len() != self.len {
            return Err(Error::LengthMismatch(format!(
                "cannot write {} elements into a buffer of {}",
                data.len(),
                self.len
            )));
        }
        self.write_at(0, data)
    }

    /// Copies `data` into the buffer starting at element `offset`.
    pub fn write_at(&self, offset: usize, data: &[T]) -> Result<()> {
        self.check_range(&(offset..offset.saturating_add(data.len())))?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        Ok(self.storage.inner.backend.copy_in(
            self.memory(),
            offset * std::mem::size_of::<T>(),
            bytes,
        )?)
    }

    /// Copies the buffer into `out`; `out.len()` must equal the buffer's length.
    pub fn read_into(&self, out: &mut [T]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::LengthMismatch(format!(
                "cannot read a buffer of {} elements into {}",
                self.len,
                out.len()
            )));
        }
        self.read_range_into(0, out)
    }

    /// Copies elements `offset..offset + out.len()` into `out`.
    pub fn read_range_into(&self, offset: usize, out: &mut [T]) -> Result<()> {
        self.check_range(&(offset..offset.saturating_add(out.len())))?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        Ok(self.storage.inner.backend.copy_out(
            self.memory(),
            offset * std::mem::size_of::<T>(),
            bytes,
        )?)
    }

    /// The contents as a vector.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.read_into(&mut v)?;
        Ok(v)
    }

    /// Copies the contents of another buffer of the same length.
    pub fn copy_from(&self, src: &Buffer<T>) -> Result<()> {
        if src.len != self.len {
            return Err(Error::LengthMismatch(format!(
                "cannot copy {} elements into {}",
                src.len, self.len
            )));
        }
        Ok(self
            .storage
            .inner
            .backend
            .copy(src.memory(), 0, self.memory(), 0, self.size_bytes())?)
    }

    /// The shared storage (for tensor views of the buffer).
    pub(crate) fn shared_storage(&self) -> &std::sync::Arc<Storage> {
        &self.storage
    }

    /// The whole buffer as a launch argument.
    pub fn arg(&self) -> KernelArg {
        KernelArg::Buffer(BufferArg {
            memory: self.memory().clone(),
            offset: 0,
            len: self.size_bytes(),
        })
    }

    /// Elements `range` as a launch argument (the kernel sees `range.len()` elements).
    pub fn slice_arg(&self, range: Range<usize>) -> Result<KernelArg> {
        self.check_range(&range)?;
        let size = std::mem::size_of::<T>();
        Ok(KernelArg::Buffer(BufferArg {
            memory: self.memory().clone(),
            offset: range.start * size,
            len: range.len() * size,
        }))
    }
}
