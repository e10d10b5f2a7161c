//! 2-D max pooling over the last two axes (PyTorch's `max_pool2d` and its backward): one kernel
//! reads each output's window straight from the input, padding, dilation and `ceil_mode`
//! handled by bounds, and writes the maxima and, only when asked, their flat indices in each
//! plane (i64); the backward kernel gathers, for each input element, the gradients of the
//! outputs whose index names it (no atomics, deterministic). See
//! [`hologram_compiler::patterns::pool_templates`] for the kernels and PyTorch's NaN and tie
//! rules they follow.

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_compiler::patterns::pool_templates::{self, PoolOp, PoolPattern};
use hologram_isa::semantics::Value;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Window size, stride, padding and dilation (each `[y, x]`) and the output rounding of a max
/// pooling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaxPool2d {
    /// Window size.
    pub kernel: [usize; 2],
    /// Step between windows.
    pub stride: [usize; 2],
    /// Implicit -∞ added on each side (at most half the dilated window).
    pub padding: [usize; 2],
    /// Step between window taps.
    pub dilation: [usize; 2],
    /// Round the output size up (a last window may start inside the right padding).
    pub ceil_mode: bool,
}

impl MaxPool2d {
    /// Windows of `kernel` with stride `kernel`, no padding or dilation (PyTorch's defaults).
    pub fn new(kernel: [usize; 2]) -> MaxPool2d {
        MaxPool2d {
            kernel,
            stride: kernel,
            padding: [0, 0],
            dilation: [1, 1],
            ceil_mode: false,
        }
    }

    /// PyTorch's output length of one axis of `len` elements (`d` is 0 for y, 1 for x).
    fn out_len(&self, len: usize, d: usize) -> Result<usize> {
        let (k, s, p, dil) = (
            self.kernel[d] as i64,
            self.stride[d] as i64,
            self.padding[d] as i64,
            self.dilation[d] as i64,
        );
        if k == 0 || s == 0 || dil == 0 {
            return Err(Error::ShapeMismatch(format!(
                "max_pool2d: kernel {:?}, stride {:?} and dilation {:?} must be positive",
                self.kernel, self.stride, self.dilation
            )));
        }
        let span = dil * (k - 1) + 1;
        if 2 * p > span {
            return Err(Error::ShapeMismatch(format!(
                "max_pool2d: padding {:?} must be at most half the (dilated) window {:?}",
                self.padding, self.kernel
            )));
        }
        let round = if self.ceil_mode { s - 1 } else { 0 };
        let mut out = (len as i64 + 2 * p - span + round).div_euclid(s) + 1;
        if self.ceil_mode && (out - 1) * s >= len as i64 + p {
            out -= 1;
        }
        if out < 1 {
            return Err(Error::ShapeMismatch(format!(
                "max_pool2d: the window {:?} (dilation {:?}, padding {:?}) does not fit an input of {len} elements",
                self.kernel, self.dilation, self.padding
            )));
        }
        Ok(out as usize)
    }

    /// The output size `[ho, wo]` for an input plane of `[h, w]`.
    pub fn output_size(&self, h: usize, w: usize) -> Result<[usize; 2]> {
        Ok([self.out_len(h, 0)?, self.out_len(w, 1)?])
    }

    /// The kernel's scalar parameters after its buffers: `total`, `xoff`, (`ioff`,) then the
    /// geometry in [`pool_templates::POOL_GEOMETRY`]'s order.
    fn args(
        &self,
        offsets: &[usize],
        total: usize,
        plane: [usize; 2],
        out: [usize; 2],
    ) -> Result<Vec<KernelArg>> {
        let mut vals = vec![total];
        vals.extend_from_slice(offsets);
        vals.extend([
            plane[0],
            plane[1],
            self.kernel[0],
            self.kernel[1],
            self.stride[0],
            self.stride[1],
            self.padding[0],
            self.padding[1],
            self.dilation[0],
            self.dilation[1],
            out[0],
            out[1],
        ]);
        vals.iter()
            .map(|&v| {
                u32::try_from(v)
                    .map(|v| KernelArg::Scalar(Value::U32(v)))
                    .map_err(|_| {
                        Error::ShapeMismatch(format!(
                            "max_pool2d of a {plane:?} plane: {v} does not fit 32 bits"
                        ))
                    })
            })
            .collect()
    }
}

/// The leading dimensions and `[h, w]` of a pooled tensor (rank 3 or 4).
fn split_planes(shape: &[usize], what: &str) -> Result<(Vec<usize>, [usize; 2])> {
    if !(3..=4).contains(&shape.len()) {
        return Err(Error::ShapeMismatch(format!(
            "{what} takes a [C, H, W] or [N, C, H, W] tensor, got {shape:?}"
        )));
    }
    let r = shape.len();
    Ok((shape[..r - 2].to_vec(), [shape[r - 2], shape[r - 1]]))
}

fn check_float(dtype: DType, what: &str) -> Result<()> {
    if dtype.storage().is_float() {
        Ok(())
    } else {
        Err(Error::TypeMismatch(format!(
            "{what} runs on float tensors, got {dtype}"
        )))
    }
}

impl Tensor {
    /// Max pooling over the last two axes of a `[C, H, W]` or `[N, C, H, W]` float tensor:
    /// the window maxima and, with `indices`, each maximum's flat index `y·W + x` in its plane
    /// (i64), as PyTorch's `max_pool2d_with_indices` (a NaN wins, the first maximum wins ties).
    pub fn max_pool2d(&self, p: &MaxPool2d, indices: bool) -> Result<(Tensor, Option<Tensor>)> {
        check_float(self.dtype, "max_pool2d")?;
        let (lead, [h, w]) = split_planes(self.shape(), "max_pool2d")?;
        let [ho, wo] = p.output_size(h, w)?;
        let mut shape = lead.clone();
        shape.extend([ho, wo]);
        let y = Tensor::uninit(&self.exec, &shape, self.dtype)?;
        let idx = if indices {
            Some(Tensor::uninit(&self.exec, &shape, DType::I64)?)
        } else {
            None
        };
        let total = y.numel();
        if total == 0 {
            return Ok((y, idx));
        }
        let (xs, xl) = self.contiguous()?.storage()?;
        let (ys, _) = y.storage()?;
        let mut args = vec![
            KernelArg::Buffer(xs.arg(0, xs.bytes)),
            KernelArg::Buffer(ys.arg(0, ys.bytes)),
        ];
        if let Some(idx) = &idx {
            let (is, _) = idx.storage()?;
            args.push(KernelArg::Buffer(is.arg(0, is.bytes)));
        }
        args.extend(p.args(&[xl.offset], total, [h, w], [ho, wo])?);
        // Input element indexes are u32 in the kernel.
        u32::try_from(xl.offset + self.numel()).map_err(|_| {
            Error::ShapeMismatch(format!(
                "max_pool2d of {:?}: too many elements",
                self.shape()
            ))
        })?;
        let op = if indices {
            PoolOp::MaxWithIndices
        } else {
            PoolOp::Max
        };
        let kernel = self.exec.compile(&pool_templates::kernel(&PoolPattern {
            op,
            storage: self.dtype.storage(),
        })?)?;
        self.exec.launch(
            &kernel,
            &LaunchConfig::for_elements(total as u64, 256),
            &args,
        )?;
        Ok((y, idx))
    }

    /// The input gradient of [`Tensor::max_pool2d`]: each element of `grad` (the output's
    /// gradient) added at the input position `indices` names, for an input of `input_shape`.
    pub fn max_pool2d_backward(
        grad: &Tensor,
        indices: &Tensor,
        input_shape: &[usize],
        p: &MaxPool2d,
    ) -> Result<Tensor> {
        grad.check_same_executor(indices)?;
        check_float(grad.dtype, "max_pool2d_backward")?;
        let (lead, [h, w]) = split_planes(input_shape, "max_pool2d_backward")?;
        let [ho, wo] = p.output_size(h, w)?;
        let mut out_shape = lead.clone();
        out_shape.extend([ho, wo]);
        if grad.shape() != out_shape.as_slice() || indices.shape() != out_shape.as_slice() {
            return Err(Error::ShapeMismatch(format!(
                "max_pool2d_backward of a {input_shape:?} input: the gradient {:?} and indices {:?} must be {out_shape:?}",
                grad.shape(),
                indices.shape()
            )));
        }
        if !indices.dtype.storage().is_int() {
            return Err(Error::TypeMismatch(format!(
                "max_pool2d_backward: indices must be integers, got {}",
                indices.dtype
            )));
        }
        let dx = Tensor::uninit(&grad.exec, input_shape, grad.dtype)?;
        let total = dx.numel();
        if total == 0 {
            return Ok(dx);
        }
        let (gs, gl) = grad.contiguous()?.storage()?;
        let indices = if indices.dtype == DType::I64 {
            indices.clone()
        } else {
            indices.cast(DType::I64)?
        };
        let (is, il) = indices.contiguous()?.storage()?;
        let (ds, _) = dx.storage()?;
        let mut args = vec![
            KernelArg::Buffer(gs.arg(0, gs.bytes)),
            KernelArg::Buffer(is.arg(0, is.bytes)),
            KernelArg::Buffer(ds.arg(0, ds.bytes)),
        ];
        args.extend(p.args(&[gl.offset, il.offset], total, [h, w], [ho, wo])?);
        let kernel = grad.exec.compile(&pool_templates::kernel(&PoolPattern {
            op: PoolOp::MaxBackward,
            storage: grad.dtype.storage(),
        })?)?;
        grad.exec.launch(
            &kernel,
            &LaunchConfig::for_elements(total as u64, 256),
            &args,
        )?;
        Ok(dx)
    }
}
