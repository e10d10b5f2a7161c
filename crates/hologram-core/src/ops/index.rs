//! Indexing by another tensor's values: gather, scatter, scatter-add and index-select, with
//! PyTorch's semantics (indexes of any integer dtype, any strides; an index outside the axis is
//! an out-of-bounds error, never a wrong element).

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_isa::semantics::Value;
use hologram_isa::Type;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::generated_kernel;
use crate::kernels::index::{gather_program, scatter_program, ScatterMode};
use crate::tensor::layout::axis as norm_axis;
use crate::tensor::Tensor;

fn u32_of(v: usize, what: &str) -> Result<KernelArg> {
    u32::try_from(v)
        .map(|v| KernelArg::Scalar(Value::U32(v)))
        .map_err(|_| Error::ShapeMismatch(format!("{what} ({v}) does not fit 32 bits")))
}

fn check_index(index: &Tensor) -> Result<Type> {
    match index.dtype() {
        DType::I64 | DType::I32 | DType::U32 | DType::I16 | DType::U16 | DType::I8 | DType::U8 => {
            Ok(index.dtype().storage())
        }
        d => Err(Error::TypeMismatch(format!(
            "indexes must be integers, got {d}"
        ))),
    }
}

impl Tensor {
    /// `out[c] = self[c with c[axis] = index[c]]`: the output has the index's shape, which must
    /// have the rank of `self` and fit it on every other axis (PyTorch's `gather`).
    pub fn gather(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        self.check_same_executor(index)?;
        let rank = self.rank();
        let axis = norm_axis(axis, rank)?;
        let it = check_index(index)?;
        if index.rank() != rank
            || (0..rank).any(|d| d != axis && index.shape()[d] > self.shape()[d])
        {
            return Err(Error::ShapeMismatch(format!(
                "gather along axis {axis}: index {:?} does not fit {:?}",
                index.shape(),
                self.shape()
            )));
        }
        let out = Tensor::uninit(&self.exec, index.shape(), self.dtype)?;
        let n = index.numel();
        if n == 0 {
            return Ok(out);
        }
        let (xs, xl) = self.storage()?;
        let (is, il) = index.storage()?;
        let (os, _) = out.storage()?;
        let mut args = vec![
            KernelArg::Buffer(xs.arg(0, xs.bytes)),
            KernelArg::Buffer(is.arg(0, is.bytes)),
            KernelArg::Buffer(os.arg(0, os.bytes)),
        ];
        args.push(u32_of(n, "the number of indexes")?);
        args.push(u32_of(self.shape()[axis], "the axis length")?);
        args.push(u32_of(il.offset, "an offset")?);
        args.push(u32_of(xl.offset, "an offset")?);
        for d in 0..rank {
            args.push(u32_of(index.shape()[d], "a dimension")?);
            args.push(u32_of(il.strides[d], "a stride")?);
            args.push(u32_of(xl.strides[d], "a stride")?);
        }
        let program = gather_program(rank, axis, self.dtype.storage(), it);
        let kernel = self.exec.compile(&generated_kernel(program, false)?)?;
        self.exec
            .launch(&kernel, &LaunchConfig::for_elements(n as u64, 256), &args)?;
        Ok(out)
    }

    /// Rows (or slices along `axis`) picked by a 1-D index: `out` has `self`'s shape with the
    /// axis replaced by the index's length (PyTorch's `index_select`, an embedding lookup).
    pub fn index_select(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        let rank = self.rank();
        let axis = norm_axis(axis, rank)?;
        if index.rank() != 1 {
            return Err(Error::ShapeMismatch(format!(
                "index_select takes a 1-D index, got shape {:?}",
                index.shape()
            )));
        }
        let mut shape = self.shape().to_vec();
        shape[axis] = index.shape()[0];
        let mut view = vec![1isize; rank];
        view[axis] = index.shape()[0] as isize;
        let idx = index.reshape(&view)?.expand(&shape)?;
        self.gather(axis as isize, &idx)
    }

    /// A copy of `self` with `src[c]` stored at `c with c[axis] = index[c]` for every element
    /// `c` of the index (PyTorch's `scatter`; with duplicate indexes one of the values wins).
    /// `src` is broadcast to the index's shape.
    pub fn scatter(&self, axis: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        self.scatter_with(axis, index, src, ScatterMode::Set)
    }

    /// A copy of `self` with `src[c]` added at `c with c[axis] = index[c]` (PyTorch's
    /// `scatter_add`). Additions to one element happen in an unspecified order (atomics).
    pub fn scatter_add(&self, axis: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        if matches!(self.dtype, DType::F16 | DType::BF16) {
            // No 16-bit float atomics: accumulate in f32.
            let wide = self.cast(DType::F32)?;
            let s = src.cast(DType::F32)?;
            return wide
                .scatter_with(axis, index, &s, ScatterMode::Add)?
                .cast(self.dtype);
        }
        self.scatter_with(axis, index, src, ScatterMode::Add)
    }

    fn scatter_with(
        &self,
        axis: isize,
        index: &Tensor,
        src: &Tensor,
        mode: ScatterMode,
    ) -> Result<Tensor> {
        self.check_same_executor(index)?;
        self.check_same_executor(src)?;
        let rank = self.rank();
        let axis = norm_axis(axis, rank)?;
        let it = check_index(index)?;
        if index.rank() != rank
            || (0..rank).any(|d| d != axis && index.shape()[d] > self.shape()[d])
        {
            return Err(Error::ShapeMismatch(format!(
                "scatter along axis {axis}: index {:?} does not fit {:?}",
                index.shape(),
                self.shape()
            )));
        }
        let value = self.dtype.storage();
        if mode == ScatterMode::Add
            && !matches!(
                value,
                Type::F32 | Type::F64 | Type::I32 | Type::U32 | Type::I64 | Type::U64
            )
        {
            return Err(Error::TypeMismatch(format!(
                "scatter_add is not supported for {}",
                self.dtype
            )));
        }
        // A fresh contiguous copy the kernel writes into (never `self`'s own storage).
        let out = Tensor::uninit(&self.exec, self.shape(), self.dtype)?;
        self.copy_into(&out)?;
        let n = index.numel();
        if n == 0 {
            return Ok(out);
        }
        // A source at least as large as the index on every axis is read where the index is
        // (PyTorch's rule); a smaller one is broadcast to the index's shape.
        let covers = src.rank() == rank && (0..rank).all(|d| src.shape()[d] >= index.shape()[d]);
        let src = if covers {
            src.cast(self.dtype)?.realize()?
        } else {
            src.broadcast_to(index.shape())?
                .cast(self.dtype)?
                .realize()?
        };
        let (os, ol) = out.storage()?;
        let (is, il) = index.storage()?;
        let (ss, sl) = src.storage()?;
        let mut args = vec![
            KernelArg::Buffer(os.arg(0, os.bytes)),
            KernelArg::Buffer(is.arg(0, is.bytes)),
            KernelArg::Buffer(ss.arg(0, ss.bytes)),
        ];
        args.push(u32_of(n, "the number of indexes")?);
        args.push(u32_of(self.shape()[axis], "the axis length")?);
        args.push(u32_of(il.offset, "an offset")?);
        args.push(u32_of(ol.offset, "an offset")?);
        for d in 0..rank {
            args.push(u32_of(index.shape()[d], "a dimension")?);
            args.push(u32_of(il.strides[d], "a stride")?);
            args.push(u32_of(ol.strides[d], "a stride")?);
        }
        args.push(u32_of(sl.offset, "an offset")?);
        for d in 0..rank {
            args.push(u32_of(sl.strides[d], "a stride")?);
        }
        let program = scatter_program(rank, axis, value, it, mode);
        let kernel = self.exec.compile(&generated_kernel(program, false)?)?;
        self.exec
            .launch(&kernel, &LaunchConfig::for_elements(n as u64, 256), &args)?;
        Ok(out)
    }
}
