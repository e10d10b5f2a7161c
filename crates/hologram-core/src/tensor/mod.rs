//! `Tensor`: a dtype, a shape with strides over device storage, on one executor. Element-wise
//! ops are recorded lazily and fused into one kernel when the result is needed.

mod assign;
pub(crate) mod expr;
pub(crate) mod fused;
pub mod layout;
pub(crate) mod lazy;
mod realize_all;
mod small_map;
mod views;

use std::sync::Arc;

use hologram_backends::HostBuffer;
use hologram_isa::semantics::Value;

pub use expr::{BinaryFn, UnaryFn};
pub use layout::Layout;
pub(crate) use lazy::{LazyTensor, Operand};

use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::storage::Storage;

/// Where a tensor's elements come from.
#[derive(Clone)]
pub(crate) enum Source {
    /// Elements in device memory, addressed by the layout.
    Stored(Arc<Storage>),
    /// An element-wise expression not yet run; its result is contiguous.
    Lazy(Arc<LazyTensor>),
}

/// An n-dimensional array on an executor's device.
///
/// ```
/// use hologram_core::{Executor, Tensor, DType};
/// let exec = Executor::cpu();
/// let a = Tensor::from_slice(&exec, &[1.0f32, -2.0, 3.0, -4.0], &[2, 2])?;
/// let b = Tensor::full(&exec, &[2], 0.5, DType::F32)?;
/// let c = a.add(&b)?.relu()?.mul(&b)?; // recorded lazily: one fused kernel
/// assert_eq!(c.to_vec::<f32>()?, vec![0.75, 0.0, 1.75, 0.0]);
/// # Ok::<(), hologram_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor {
    pub(crate) exec: Executor,
    pub(crate) dtype: DType,
    pub(crate) layout: Layout,
    pub(crate) src: Source,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({}, {:?}, {})",
            self.dtype,
            self.layout.shape,
            self.exec.backend_type()
        )
    }
}

fn bytes_of(shape: &[usize], dtype: DType) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::ShapeMismatch(format!("shape {shape:?} is too large")))
}

/// Fills up to this size are uploaded from the host instead of run as a kernel.
const SMALL_FILL_BYTES: usize = 4096;

impl Tensor {
    pub(crate) fn stored(
        exec: &Executor,
        dtype: DType,
        layout: Layout,
        storage: Arc<Storage>,
    ) -> Tensor {
        Tensor {
            exec: exec.clone(),
            dtype,
            layout,
            src: Source::Stored(storage),
        }
    }

    /// A tensor with uninitialized contiguous storage.
    pub(crate) fn uninit(exec: &Executor, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let bytes = bytes_of(shape, dtype)?;
        if shape.iter().product::<usize>() > u32::MAX as usize {
            return Err(Error::ShapeMismatch(format!(
                "{shape:?} has more than 2^32 elements, the most one tensor may hold"
            )));
        }
        let storage = Arc::new(Storage::new(exec, bytes)?);
        Ok(Tensor::stored(
            exec,
            dtype,
            Layout::contiguous(shape),
            storage,
        ))
    }

    /// A tensor from raw little-endian bytes in row-major order.
    pub fn from_bytes(
        exec: &Executor,
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
    ) -> Result<Tensor> {
        let want = bytes_of(shape, dtype)?;
        if bytes.len() != want {
            return Err(Error::LengthMismatch(format!(
                "{} bytes given for a {dtype} tensor of shape {shape:?}, which needs {want}",
                bytes.len()
            )));
        }
        let t = Tensor::uninit(exec, shape, dtype)?;
        if let Source::Stored(s) = &t.src {
            s.write(0, bytes)?;
        }
        Ok(t)
    }

    /// A tensor holding a copy of `data` with the given shape.
    pub fn from_slice<T: Element>(exec: &Executor, data: &[T], shape: &[usize]) -> Result<Tensor> {
        let dtype = DType::from_type(T::TYPE)
            .ok_or_else(|| Error::TypeMismatch(format!("{} has no tensor dtype", T::TYPE)))?;
        Tensor::from_bytes(exec, bytemuck::cast_slice(data), shape, dtype)
    }

    /// A tensor of `value` (converted to `dtype` by the `cvt` rules).
    pub fn full(exec: &Executor, shape: &[usize], value: f64, dtype: DType) -> Result<Tensor> {
        let v = lazy::scalar_value(value, dtype);
        let numel: usize = shape.iter().product();
        if numel * dtype.size() <= SMALL_FILL_BYTES {
            // Small fills (seeds, scalars) are uploaded: a fill kernel holds its value, so every
            // new value would compile a kernel.
            let bits = v.to_bits().to_le_bytes();
            let bytes: Vec<u8> = (0..numel)
                .flat_map(|_| bits[..dtype.size()].iter().copied())
                .collect();
            return Tensor::from_bytes(exec, &bytes, shape, dtype);
        }
        let out = Tensor::uninit(exec, shape, dtype)?;
        let lazy = LazyTensor::constant(v, dtype, shape);
        lazy::run_into(exec, &lazy, &out)?;
        Ok(out)
    }

    /// A tensor of zeros.
    pub fn zeros(exec: &Executor, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full(exec, shape, 0.0, dtype)
    }

    /// A tensor of ones.
    pub fn ones(exec: &Executor, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full(exec, shape, 1.0, dtype)
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Size of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.layout.shape
    }

    /// Element strides of each dimension.
    pub fn strides(&self) -> &[usize] {
        &self.layout.strides
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The executor the tensor lives on.
    pub fn executor(&self) -> &Executor {
        &self.exec
    }

    /// True when the elements are dense and row-major in storage.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// True while the tensor is an unevaluated element-wise expression.
    pub fn is_lazy(&self) -> bool {
        matches!(&self.src, Source::Lazy(l) if !l.is_done())
    }

    /// Elements of the pending element-wise expression this tensor would run first (0 when
    /// its elements are stored): a view of a pending expression runs all of it.
    pub fn pending_elements(&self) -> usize {
        match &self.src {
            Source::Lazy(l) if !l.is_done() => l.shape().iter().product(),
            _ => 0,
        }
    }

    /// Runs any pending element-wise expression; the result is stored.
    pub fn realize(&self) -> Result<Tensor> {
        match &self.src {
            Source::Stored(_) => Ok(self.clone()),
            Source::Lazy(l) => {
                let storage = l.materialize(&self.exec, self.dtype)?;
                Ok(Tensor::stored(
                    &self.exec,
                    self.dtype,
                    self.layout.clone(),
                    storage,
                ))
            }
        }
    }

    /// The storage and layout of the realized tensor.
    pub(crate) fn storage(&self) -> Result<(Arc<Storage>, Layout)> {
        let storage = match &self.src {
            Source::Stored(s) => s.clone(),
            Source::Lazy(l) => l.materialize(&self.exec, self.dtype)?,
        };
        Ok((storage, self.layout.clone()))
    }

    /// A contiguous tensor with the same elements (itself if already contiguous).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() && !self.is_lazy() {
            return self.realize();
        }
        let out = Tensor::uninit(&self.exec, self.shape(), self.dtype)?;
        self.copy_into(&out)?;
        Ok(out)
    }

    /// Copies the elements (broadcast to `out`'s shape, converted to its dtype) into `out`, which
    /// may be any view.
    pub fn copy_into(&self, out: &Tensor) -> Result<()> {
        self.check_same_executor(out)?;
        if let Source::Lazy(l) = &self.src {
            if self.dtype == out.dtype && self.shape() == out.shape() {
                // The pending expression itself runs into `out` (or, once run, its result is
                // copied there).
                return lazy::run_into(&self.exec, l, out);
            }
        }
        let src = self.broadcast_to(out.shape())?.cast(out.dtype)?;
        let lazy = Operand::of(&src)?.into_lazy(out.shape());
        lazy::run_into(&self.exec, &lazy, out)
    }

    /// Overwrites the elements with raw bytes in row-major order (exactly `numel * size` bytes):
    /// one direct copy into device memory when the tensor is a contiguous stored view, else a
    /// copy through a kernel.
    pub fn write_bytes(&self, bytes: &[u8]) -> Result<()> {
        let want = self.numel() * self.dtype.size();
        if bytes.len() != want {
            return Err(Error::LengthMismatch(format!(
                "{} bytes given for a {} tensor of shape {:?} ({want} bytes)",
                bytes.len(),
                self.dtype,
                self.shape()
            )));
        }
        if self.is_lazy() {
            return Err(Error::InvalidArgument(
                "cannot write into a pending expression; realize it first".into(),
            ));
        }
        if self.is_contiguous() {
            // Stored, or an expression that has run (its result is stored).
            let (s, layout) = self.storage()?;
            s.write(layout.offset * self.dtype.size(), bytes)
        } else {
            Tensor::from_bytes(&self.exec, bytes, self.shape(), self.dtype)?.copy_into(self)
        }
    }

    /// The elements in row-major order as raw bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.numel() * self.dtype.size()];
        self.read_bytes(&mut out)?;
        Ok(out)
    }

    /// Copies the elements in row-major order into `out`, which must hold exactly
    /// `numel * dtype size` bytes (one device-to-host copy for contiguous tensors).
    pub fn read_bytes(&self, out: &mut [u8]) -> Result<()> {
        let want = self.numel() * self.dtype.size();
        if out.len() != want {
            return Err(Error::LengthMismatch(format!(
                "{} bytes given to read a {} tensor of shape {:?} ({want} bytes)",
                out.len(),
                self.dtype,
                self.shape()
            )));
        }
        let t = self.contiguous()?;
        let (storage, layout) = t.storage()?;
        storage.read(layout.offset * self.dtype.size(), out)
    }

    /// Page-locked host memory for this tensor's elements, lent by the backend
    /// ([`Backend::pinned_host`](hologram_backends::Backend::pinned_host)): a
    /// [`Tensor::read_bytes`] into it is one DMA at the bus's speed, and the memory goes back
    /// to the backend's pool when the buffer is dropped. `None` where the backend lends none
    /// for this size (the CPU and wgpu backends, small or very large tensors, a pool at its
    /// cap). Asking runs nothing on the device.
    pub fn pinned_buffer(&self) -> Option<HostBuffer> {
        self.exec
            .backend()
            .pinned_host(self.numel() * self.dtype.size())
    }

    /// The elements in row-major order; `T` must match the dtype (`u8` for bool).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::TYPE != self.dtype.storage() {
            return Err(Error::TypeMismatch(format!(
                "cannot read a {} tensor as {}",
                self.dtype,
                T::TYPE
            )));
        }
        let bytes = self.to_bytes()?;
        let mut out = vec![T::zeroed(); self.numel()];
        bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&bytes);
        Ok(out)
    }

    /// The elements converted to f64, in row-major order (for tests and printing).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let bytes = self.to_bytes()?;
        let ty = self.dtype.storage();
        let size = ty.size_bytes();
        Ok(bytes
            .chunks_exact(size)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(c);
                let v = Value::from_bits(ty, u64::from_le_bytes(b));
                match hologram_isa::semantics::eval::cvt(v, hologram_isa::Type::F64) {
                    Some(Value::F64(x)) => x,
                    _ => f64::NAN,
                }
            })
            .collect())
    }

    /// The single element of a one-element tensor, as f64.
    pub fn item(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::ShapeMismatch(format!(
                "item() needs one element, the tensor has shape {:?}",
                self.shape()
            )));
        }
        Ok(self.to_f64_vec()?[0])
    }

    pub(crate) fn check_same_executor(&self, other: &Tensor) -> Result<()> {
        if self.exec.same_as(&other.exec) {
            Ok(())
        } else {
            Err(Error::DeviceMismatch(format!(
                "tensors on different executors ({} and {}); move one with to_executor()",
                self.exec.backend_type(),
                other.exec.backend_type()
            )))
        }
    }

    /// A tensor over memory imported from another library (zero-copy): the memory must hold
    /// every element the layout addresses.
    pub fn from_external(
        exec: &Executor,
        memory: hologram_backends::Memory,
        dtype: DType,
        layout: Layout,
    ) -> Result<Tensor> {
        if layout.span() * dtype.size() > memory.size() {
            return Err(Error::LengthMismatch(format!(
                "a {dtype} view of shape {:?} needs {} bytes, the memory holds {}",
                layout.shape,
                layout.span() * dtype.size(),
                memory.size()
            )));
        }
        Ok(Tensor::stored(
            exec,
            dtype,
            layout,
            Arc::new(Storage::external(exec, memory)),
        ))
    }

    /// The address of element 0 (a host pointer on the CPU, a device pointer on CUDA), for
    /// zero-copy export; the tensor is realized first.
    pub fn data_ptr(&self) -> Result<(u64, bool)> {
        let (storage, layout) = self.storage()?;
        let off = (layout.offset * self.dtype.size()) as u64;
        let m = storage.memory();
        if let Some(p) = m.host_ptr() {
            return Ok((p as u64 + off, true));
        }
        if let Some(p) = m.device_ptr() {
            return Ok((p + off, false));
        }
        Err(Error::DeviceMismatch(format!(
            "{} memory has no address other libraries can use; copy the tensor to the cpu \
             (or cuda) executor first",
            self.exec.backend_type()
        )))
    }

    /// The tensor's elements as a kernel argument (it must be contiguous).
    pub fn kernel_arg(&self) -> Result<hologram_backends::KernelArg> {
        if !self.is_contiguous() {
            return Err(Error::ShapeMismatch(
                "a kernel argument must be contiguous".into(),
            ));
        }
        let (storage, layout) = self.storage()?;
        let size = self.dtype.size();
        Ok(hologram_backends::KernelArg::Buffer(
            storage.arg(layout.offset * size, self.numel() * size),
        ))
    }

    /// A copy of this tensor on another executor (through host memory).
    pub fn to_executor(&self, exec: &Executor) -> Result<Tensor> {
        if self.exec.same_as(exec) {
            return Ok(self.clone());
        }
        Tensor::from_bytes(exec, &self.to_bytes()?, self.shape(), self.dtype)
    }
}
