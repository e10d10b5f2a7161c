//! Neural-network ops built from fused element-wise kernels and reductions: softmax,
//! log-softmax, layer norm, and the backward ops autograd needs.

use hologram_compiler::patterns::softmax_templates::RowOp;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::rows;
use crate::tensor::layout::axis as norm_axis;
use crate::tensor::Tensor;

impl Tensor {
    /// Softmax along `axis` (max-subtracted, so large inputs do not overflow). Over the last
    /// axis of a float tensor this is one fused kernel; otherwise a composition of reductions and
    /// element-wise ops.
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        let a = norm_axis(axis, self.rank())? as isize;
        if let Some(y) = self.fused_rows(RowOp::Softmax, a, None)? {
            return Ok(y);
        }
        let m = self.max(&[a], true)?;
        let e = self.sub(&m)?.exp()?;
        let s = e.sum(&[a], true)?;
        e.div(&s)
    }

    /// Log-softmax along `axis` (fused over the last axis of a float tensor, like
    /// [`Tensor::softmax`]).
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        let a = norm_axis(axis, self.rank())? as isize;
        if let Some(y) = self.fused_rows(RowOp::LogSoftmax, a, None)? {
            return Ok(y);
        }
        let m = self.max(&[a], true)?;
        let shifted = self.sub(&m)?;
        let lse = shifted.exp()?.sum(&[a], true)?.log()?;
        shifted.sub(&lse)
    }

    /// The fused row kernel `op` when it applies: a float tensor, `axis` the last one, and for
    /// the backward ops a gradient of the same shape and dtype (the CPU backend recognizes the
    /// kernel and runs it as a native loop). Empty float tensors give an empty result on every
    /// backend.
    fn fused_rows(&self, op: RowOp, axis: isize, grad: Option<&Tensor>) -> Result<Option<Tensor>> {
        let last = axis as usize + 1 == self.rank();
        let float = matches!(
            self.dtype,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16
        );
        let matching = grad.is_none_or(|g| {
            g.shape() == self.shape() && g.dtype == self.dtype && g.exec.same_as(&self.exec)
        });
        if float && matching && self.numel() == 0 {
            // Nothing to compute (the composed form would reduce over an empty axis).
            return Tensor::zeros(&self.exec, self.shape(), self.dtype).map(Some);
        }
        if !(last && float && matching) {
            return Ok(None);
        }
        match self.fused_last_axis(op, grad) {
            // A backend without an instruction the kernel needs (f64 exp on WGSL): compose.
            Err(Error::Backend(hologram_backends::BackendError::Unsupported { .. })) => Ok(None),
            r => r.map(Some),
        }
    }

    /// Runs the fused row kernel `op` over the last axis on any backend (what
    /// [`Tensor::softmax`], [`Tensor::log_softmax`] and their backward ops use on GPUs): `self`
    /// is the input (forward) or the softmax output `y` (backward, with its gradient `grad` of
    /// the same shape and dtype). Float tensors of rank 1 or more; empty ones give an empty
    /// result.
    pub fn fused_last_axis(&self, op: RowOp, grad: Option<&Tensor>) -> Result<Tensor> {
        if !matches!(
            self.dtype,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16
        ) || self.rank() == 0
        {
            return Err(Error::TypeMismatch(format!(
                "{op:?} needs a float tensor of rank 1 or more, not a rank-{} {}",
                self.rank(),
                self.dtype
            )));
        }
        if op.is_attention() {
            return Err(Error::ShapeMismatch(format!(
                "{op:?} takes a scale (and a query length): use Tensor::attention"
            )));
        }
        if op.is_backward() != grad.is_some() {
            return Err(Error::ShapeMismatch(format!(
                "{op:?} takes {} gradient",
                if op.is_backward() { "a" } else { "no" }
            )));
        }
        if let Some(g) = grad {
            self.check_same_executor(g)?;
            if g.shape() != self.shape() || g.dtype != self.dtype {
                return Err(Error::ShapeMismatch(format!(
                    "{op:?}: gradient {} {:?} for an output {} {:?}",
                    g.dtype,
                    g.shape(),
                    self.dtype,
                    self.shape()
                )));
            }
        }
        if self.numel() == 0 {
            return Tensor::zeros(&self.exec, self.shape(), self.dtype);
        }
        let inputs: Vec<&Tensor> = std::iter::once(self).chain(grad).collect();
        rows::run(op, &inputs)
    }

    /// Layer normalization over the last `normalized_dims` dimensions, with optional elementwise
    /// affine `weight` and `bias` (shaped like those dimensions).
    pub fn layer_norm(
        &self,
        normalized_dims: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        Ok(self
            .layer_norm_with_stats(normalized_dims, weight, bias, eps)?
            .0)
    }

    pub(crate) fn last_axes(&self, k: usize) -> Result<Vec<isize>> {
        if k == 0 || k > self.rank() {
            return Err(Error::ShapeMismatch(format!(
                "cannot normalize over the last {k} dimensions of a rank-{} tensor",
                self.rank()
            )));
        }
        Ok(((self.rank() - k)..self.rank())
            .map(|a| a as isize)
            .collect())
    }

    /// Gradient of ReLU: `grad · (x > 0)`.
    pub fn relu_backward(&self, grad: &Tensor) -> Result<Tensor> {
        let mask = self.gt(0.0)?;
        Tensor::where_(&mask, grad, &grad.mul(0.0)?)
    }

    /// Gradient of sigmoid given its output `y = sigmoid(x)`: `grad · y · (1 - y)`.
    pub fn sigmoid_backward(y: &Tensor, grad: &Tensor) -> Result<Tensor> {
        grad.mul(y)?.mul(&y.rbinary(crate::BinaryFn::Sub, 1.0)?)
    }

    /// Gradient of tanh given its output `y`: `grad · (1 - y²)`.
    pub fn tanh_backward(y: &Tensor, grad: &Tensor) -> Result<Tensor> {
        grad.mul(&y.square()?.rbinary(crate::BinaryFn::Sub, 1.0)?)
    }

    /// Gradient of exact GELU at `x`: `grad · (Φ(x) + x·φ(x))`.
    pub fn gelu_backward(&self, grad: &Tensor) -> Result<Tensor> {
        let cdf = self
            .mul(std::f64::consts::FRAC_1_SQRT_2)?
            .erf()?
            .add(1.0)?
            .mul(0.5)?;
        let pdf = self
            .square()?
            .mul(-0.5)?
            .exp()?
            .mul(1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
        grad.mul(&cdf.add(&self.mul(&pdf)?)?)
    }

    /// Gradient of SiLU at `x`: `grad · s · (1 + x·(1 - s))` with `s = sigmoid(x)`.
    pub fn silu_backward(&self, grad: &Tensor) -> Result<Tensor> {
        let s = self.sigmoid()?.realize()?;
        let inner = self.mul(&s.rbinary(crate::BinaryFn::Sub, 1.0)?)?.add(1.0)?;
        grad.mul(&s)?.mul(&inner)
    }

    /// Gradient of softmax along `axis` given its output `y`: `y · (grad - Σ grad·y)` (one fused
    /// kernel over the last axis of float tensors of one shape).
    pub fn softmax_backward(y: &Tensor, grad: &Tensor, axis: isize) -> Result<Tensor> {
        let a = norm_axis(axis, y.rank())? as isize;
        if let Some(dx) = y.fused_rows(RowOp::SoftmaxBackward, a, Some(grad))? {
            return Ok(dx);
        }
        let dot = grad.mul(y)?.sum(&[a], true)?;
        y.mul(&grad.sub(&dot)?)
    }

    /// Gradient of log-softmax along `axis` given its output `y`: `grad - exp(y) · Σ grad` (fused
    /// like [`Tensor::softmax_backward`]).
    pub fn log_softmax_backward(y: &Tensor, grad: &Tensor, axis: isize) -> Result<Tensor> {
        let a = norm_axis(axis, y.rank())? as isize;
        if let Some(dx) = y.fused_rows(RowOp::LogSoftmaxBackward, a, Some(grad))? {
            return Ok(dx);
        }
        let s = grad.sum(&[a], true)?;
        grad.sub(&y.exp()?.mul(&s)?)
    }

    /// Gradients of layer norm over the last `normalized_dims` dimensions: returns
    /// `(dx, dweight, dbias)` (the last two are None without an affine weight).
    pub fn layer_norm_backward(
        &self,
        grad: &Tensor,
        normalized_dims: usize,
        weight: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let axes = self.last_axes(normalized_dims)?;
        let n: usize = self.shape()[self.rank() - normalized_dims..]
            .iter()
            .product();
        let mean = self.mean(&axes, true)?;
        let centered = self.sub(&mean)?.realize()?;
        let var = centered.square()?.mean(&axes, true)?;
        let rstd = var.add(eps)?.rsqrt()?.realize()?;
        let xhat = centered.mul(&rstd)?.realize()?;
        let g = match weight {
            Some(w) => grad.mul(w)?.realize()?,
            None => grad.clone(),
        };
        // dx = rstd/n · (n·g - Σg - xhat·Σ(g·xhat))
        let sum_g = g.sum(&axes, true)?;
        let sum_gx = g.mul(&xhat)?.sum(&axes, true)?;
        let dx = g
            .mul(n as f64)?
            .sub(&sum_g)?
            .sub(&xhat.mul(&sum_gx)?)?
            .mul(&rstd)?
            .div(n as f64)?;
        let (dw, db) = if weight.is_some() {
            let batch_axes: Vec<isize> = (0..self.rank() - normalized_dims)
                .map(|a| a as isize)
                .collect();
            let dw = grad.mul(&xhat)?.sum(&batch_axes, false)?;
            let db = grad.sum(&batch_axes, false)?;
            (Some(dw), Some(db))
        } else {
            (None, None)
        };
        Ok((dx, dw, db))
    }

    /// Gradient of a reduction's output broadcast back to the input's shape: for `sum` and
    /// `mean` over `axes`, the gradient of every input element.
    pub fn reduce_backward(
        grad: &Tensor,
        input_shape: &[usize],
        axes: &[isize],
        keepdim: bool,
        mean: bool,
    ) -> Result<Tensor> {
        let rank = input_shape.len();
        let mut axes: Vec<usize> = axes
            .iter()
            .map(|&a| norm_axis(a, rank))
            .collect::<Result<_>>()?;
        if axes.is_empty() {
            axes = (0..rank).collect();
        }
        let mut g = grad.clone();
        if !keepdim {
            let mut shape: Vec<isize> = Vec::with_capacity(rank);
            let mut it = grad.shape().iter();
            for d in 0..rank {
                if axes.contains(&d) {
                    shape.push(1);
                } else {
                    shape.push(*it.next().unwrap_or(&1) as isize);
                }
            }
            g = g.reshape(&shape)?;
        }
        let g = g.broadcast_to(input_shape)?;
        if mean {
            let count: usize = axes.iter().map(|&a| input_shape[a]).product();
            g.mul(1.0 / count as f64)
        } else {
            g.mul(1.0)
        }
    }

    /// `self` as floats (f32 for integer and bool tensors).
    pub(crate) fn as_float(&self) -> Result<Tensor> {
        if self.dtype.is_float() {
            Ok(self.clone())
        } else {
            self.cast(DType::F32)
        }
    }
}
