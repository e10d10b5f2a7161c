//! Losses, averaged over elements (or rows), as 0-d tensors.

use hologram_isa::CmpOp;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

impl Tensor {
    /// Mean squared error: `mean((self - target)²)`.
    pub fn mse_loss(&self, target: &Tensor) -> Result<Tensor> {
        self.sub(target)?.square()?.mean(&[], false)
    }

    /// Mean cross-entropy of `[N, C]` logits against `[N]` integer class indexes.
    pub fn cross_entropy(&self, targets: &Tensor) -> Result<Tensor> {
        if self.rank() != 2 || targets.rank() != 1 || targets.shape()[0] != self.shape()[0] {
            return Err(Error::ShapeMismatch(format!(
                "cross_entropy takes [N, C] logits and [N] targets, got {:?} and {:?}",
                self.shape(),
                targets.shape()
            )));
        }
        if targets.dtype().is_float() || targets.dtype() == DType::Bool {
            return Err(Error::TypeMismatch(format!(
                "targets must be integer class indexes, not {}",
                targets.dtype()
            )));
        }
        let onehot = self.one_hot_of(targets)?;
        self.log_softmax(1)?
            .mul(&onehot)?
            .sum(&[1], false)?
            .neg()?
            .mean(&[], false)
    }

    /// `[N, C]` one-hot rows (the logits' dtype) for `[N]` class indexes.
    pub(crate) fn one_hot_of(&self, targets: &Tensor) -> Result<Tensor> {
        let classes = self.shape()[1];
        let ids = Tensor::arange(&self.exec, 0.0, classes as f64, 1.0, DType::I64)?;
        targets
            .cast(DType::I64)?
            .unsqueeze(1)?
            .compare(CmpOp::Eq, &ids)?
            .cast(self.dtype)
    }

    /// Gradient of mean cross-entropy with respect to the logits: `(softmax - onehot) / N`.
    pub fn cross_entropy_backward(&self, targets: &Tensor, grad: f64) -> Result<Tensor> {
        let n = self.shape().first().copied().unwrap_or(1).max(1);
        self.softmax(1)?
            .sub(&self.one_hot_of(targets)?)?
            .mul(grad / n as f64)
    }

    /// Mean binary cross-entropy of probabilities against targets in [0, 1]; logs are clamped
    /// at -100, as in PyTorch.
    pub fn binary_cross_entropy(&self, target: &Tensor) -> Result<Tensor> {
        let p = self.as_float()?;
        let log_p = p.log()?.clip(Some(-100.0), None)?;
        let log_q = p
            .rbinary(crate::BinaryFn::Sub, 1.0)?
            .log()?
            .clip(Some(-100.0), None)?;
        let t = target.cast(p.dtype())?;
        let one_minus_t = t.rbinary(crate::BinaryFn::Sub, 1.0)?;
        t.mul(&log_p)?
            .add(&one_minus_t.mul(&log_q)?)?
            .neg()?
            .mean(&[], false)
    }

    /// Gradient of mean BCE with respect to the probabilities:
    /// `(p - t) / max(p·(1-p), 1e-12) / N`.
    pub fn binary_cross_entropy_backward(&self, target: &Tensor, grad: f64) -> Result<Tensor> {
        let p = self.as_float()?;
        let t = target.cast(p.dtype())?;
        let denom = p
            .mul(&p.rbinary(crate::BinaryFn::Sub, 1.0)?)?
            .clip(Some(1e-12), None)?;
        p.sub(&t)?
            .div(&denom)?
            .mul(grad / self.numel().max(1) as f64)
    }
}
