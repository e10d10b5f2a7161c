//! Layer norm with its statistics (mean and reciprocal standard deviation per normalized row),
//! and its backward from them: one fused row kernel each on GPU backends, composed of
//! reductions and element-wise kernels (native loops) on the CPU.

use crate::backend_type::BackendType;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::norm;
use crate::tensor::Tensor;

impl Tensor {
    /// `(y, mean, rstd)`: layer norm over the last `normalized_dims` dimensions (times `weight`
    /// plus `bias`, each shaped like those dimensions, when given), and the statistics of every
    /// normalized row, shaped like `self` with the normalized dimensions of size 1, in f32 for
    /// 16-bit inputs.
    pub fn layer_norm_with_stats(
        &self,
        normalized_dims: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let axes = self.last_axes(normalized_dims)?;
        let cols: usize = self.shape()[self.rank() - normalized_dims..]
            .iter()
            .product();
        let mut stat_shape: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        for a in &axes {
            stat_shape[*a as usize] = 1;
        }
        if self.fused_norm() && cols > 0 {
            let zeros;
            let wb = match (weight, bias) {
                (Some(w), Some(b)) => Some((w, b)),
                (Some(w), None) => {
                    zeros = Tensor::zeros(&self.exec, w.shape(), w.dtype())?;
                    Some((w, &zeros))
                }
                (None, Some(b)) => {
                    let y = self.layer_norm_with_stats(normalized_dims, None, None, eps)?;
                    return Ok((y.0.add(b)?, y.1, y.2));
                }
                (None, None) => None,
            };
            let (y, mean, rstd) = norm::forward(self, cols, wb, eps)?;
            return Ok((y, mean.reshape(&stat_shape)?, rstd.reshape(&stat_shape)?));
        }
        let x = self.as_float()?;
        let mean = x.mean(&axes, true)?;
        let d = x.sub(&mean)?;
        let var = d.square()?.mean(&axes, true)?;
        let rstd = var.add(eps)?.rsqrt()?;
        let mut y = d.mul(&rstd)?;
        if let Some(w) = weight {
            y = y.mul(w)?;
        }
        if let Some(b) = bias {
            y = y.add(b)?;
        }
        Ok((y.cast(self.dtype)?, mean, rstd))
    }

    /// `(dx, dweight, dbias)` of layer norm over the last `normalized_dims` dimensions of
    /// `self` (the forward input), from the gradient of its output and the `mean` and `rstd`
    /// of [`Tensor::layer_norm_with_stats`]. `dweight` and `dbias` are given when `weight` is.
    pub fn layer_norm_backward_with_stats(
        &self,
        grad: &Tensor,
        normalized_dims: usize,
        weight: Option<&Tensor>,
        mean: &Tensor,
        rstd: &Tensor,
    ) -> Result<(Tensor, Option<Tensor>, Option<Tensor>)> {
        let axes = self.last_axes(normalized_dims)?;
        let cols: usize = self.shape()[self.rank() - normalized_dims..]
            .iter()
            .product();
        let batch_axes: Vec<isize> = (0..self.rank() - normalized_dims)
            .map(|a| a as isize)
            .collect();
        let xhat = self.sub(mean)?.mul(rstd)?;
        let grads = |xhat: &Tensor| -> Result<(Option<Tensor>, Option<Tensor>)> {
            Ok(match weight {
                Some(_) => (
                    Some(grad.mul(xhat)?.sum(&batch_axes, false)?),
                    Some(grad.sum(&batch_axes, false)?),
                ),
                None => (None, None),
            })
        };
        if self.fused_norm() && cols > 0 {
            let dx = norm::backward(self, grad, cols, weight, mean, rstd)?;
            let (dw, db) = grads(&xhat)?;
            return Ok((dx, dw, db));
        }
        let g = match weight {
            Some(w) => grad.mul(w)?,
            None => grad.clone(),
        };
        let n = cols as f64;
        let mg = g.sum(&axes, true)?.div(n)?;
        let mgx = g.mul(&xhat)?.sum(&axes, true)?.div(n)?;
        let dx = g.sub(&mg)?.sub(&xhat.mul(&mgx)?)?.mul(rstd)?;
        let (dw, db) = grads(&xhat)?;
        Ok((dx.cast(self.dtype)?, dw, db))
    }

    /// True when layer norm runs as the fused row kernels: a float tensor on a GPU backend
    /// (the CPU runs the composed form as native loops).
    fn fused_norm(&self) -> bool {
        self.exec.backend_type() != BackendType::Cpu
            && matches!(
                self.dtype,
                DType::F32 | DType::F64 | DType::F16 | DType::BF16
            )
    }
}
