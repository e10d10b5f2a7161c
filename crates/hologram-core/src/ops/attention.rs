//! Scaled dot-product attention and its backward op, on every backend: batched GEMMs that read
//! the strided `[B, H, L, D]` views in place (see [`super::gemm_views`]) around one fused row
//! kernel (scaled, optionally causal softmax forward; `scale · P ⊙ (dP − rowsum(dP ⊙ P))`
//! backward). Outputs are written `[B, L, H, D]`-contiguous and returned as `[B, H, L, D]`
//! views, so merging the heads back (`transpose(1, 2)` and a reshape) is free.

use hologram_backends::{GemmPrecision, KernelArg};
use hologram_compiler::patterns::softmax_templates::RowOp;
use hologram_isa::semantics::Value;

use super::gemm_views::gemm_views;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::rows;
use crate::tensor::Tensor;

/// What [`Tensor::attention`] returns: the output, and the probabilities when asked for
/// (the backward op needs them).
#[derive(Debug, Clone)]
pub struct Attention {
    /// `softmax(scale · Q·Kᵀ) · V`, `[B, H, Lq, Dv]` (a view of `[B, Lq, H, Dv]` storage).
    pub output: Tensor,
    /// The probabilities `P`, `[B, H, Lq, Lk]` contiguous (masked entries 0).
    pub probs: Option<Tensor>,
}

/// The gradients [`Tensor::attention_backward`] returns, each a `[B, H, L, D]` view of
/// `[B, L, H, D]` storage.
#[derive(Debug, Clone)]
pub struct AttentionGrads {
    /// Gradient of the queries.
    pub dq: Tensor,
    /// Gradient of the keys.
    pub dk: Tensor,
    /// Gradient of the values.
    pub dv: Tensor,
}

/// A `[B, H, L, D]` tensor written `[B, L, H, D]`-contiguous.
fn heads_view(like: &Tensor, b: usize, h: usize, l: usize, d: usize) -> Result<Tensor> {
    Tensor::uninit(like.executor(), &[b, l, h, d], like.dtype())?.permute(&[0, 2, 1, 3])
}

/// The row kernels' scale argument, in their compute type.
fn scale_arg(dtype: DType, scale: f64) -> KernelArg {
    KernelArg::Scalar(if dtype == DType::F64 {
        Value::F64(scale)
    } else {
        Value::F32(scale as f32)
    })
}

/// Checks `q [B, H, Lq, D]`, `k [B, H, Lk, D]`, `v [B, H, Lk, Dv]`: one executor, one float
/// dtype.
fn check(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<()> {
    q.check_same_executor(k)?;
    q.check_same_executor(v)?;
    if q.rank() != 4 || k.rank() != 4 || v.rank() != 4 {
        return Err(Error::ShapeMismatch(format!(
            "attention takes [batch, heads, length, dim] queries, keys and values, not {:?}, {:?} and {:?}; add the missing dimensions with unsqueeze",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let float = matches!(
        q.dtype(),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16
    );
    if !float || k.dtype() != q.dtype() || v.dtype() != q.dtype() {
        return Err(Error::TypeMismatch(format!(
            "attention takes float queries, keys and values of one dtype, not {}, {} and {}; cast first",
            q.dtype(),
            k.dtype(),
            v.dtype()
        )));
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs[..2] != ks[..2] || ks[..3] != vs[..3] || qs[3] != ks[3] {
        return Err(Error::ShapeMismatch(format!(
            "attention of queries {qs:?}, keys {ks:?} and values {vs:?}: batch and heads must agree, keys and values must have one length, queries and keys one dimension"
        )));
    }
    Ok(())
}

impl Tensor {
    /// Scaled dot-product attention `softmax(scale · Q·Kᵀ [causal mask]) · V` over
    /// `[B, H, L, D]` queries (`self`), keys and values of any strides (read in place). With
    /// `causal`, query `i` sees keys `j <= i` (torch's `is_causal`). `save_probs` keeps the
    /// probabilities for [`Tensor::attention_backward`].
    pub fn attention(
        &self,
        k: &Tensor,
        v: &Tensor,
        causal: bool,
        scale: f64,
        precision: GemmPrecision,
        save_probs: bool,
    ) -> Result<Attention> {
        let q = self;
        check(q, k, v)?;
        let (b, h, lq) = (q.shape()[0], q.shape()[1], q.shape()[2]);
        let (lk, dv) = (k.shape()[2], v.shape()[3]);
        if b * h * lq * dv == 0 || lk == 0 {
            // No keys: every output row is an empty sum.
            let output = Tensor::zeros(q.executor(), &[b, h, lq, dv], q.dtype())?;
            let probs = save_probs
                .then(|| Tensor::zeros(q.executor(), &[b, h, lq, lk], q.dtype()))
                .transpose()?;
            return Ok(Attention { output, probs });
        }
        let output = heads_view(q, b, h, lq, dv)?;
        let scores = Tensor::uninit(q.executor(), &[b, h, lq, lk], q.dtype())?;
        gemm_views(q, &k.transpose(2, 3)?, &scores, 1.0, precision)?;
        let probs = Tensor::uninit(q.executor(), &[b, h, lq, lk], q.dtype())?;
        let (op, mut extra) = if causal {
            (
                RowOp::CausalAttentionSoftmax,
                vec![scale_arg(q.dtype(), scale)],
            )
        } else {
            (RowOp::AttentionSoftmax, vec![scale_arg(q.dtype(), scale)])
        };
        if causal {
            let qlen = u32::try_from(lq).map_err(|_| {
                Error::ShapeMismatch(format!("{lq} queries are too many for attention"))
            })?;
            extra.push(KernelArg::Scalar(Value::U32(qlen)));
        }
        rows::run_into(op, &[&scores], &probs, &extra)?;
        drop(scores);
        gemm_views(&probs, v, &output, 1.0, precision)?;
        Ok(Attention {
            output,
            probs: save_probs.then_some(probs),
        })
    }

    /// The gradients of [`Tensor::attention`] (queries `self`, keys `k`, values `v`, the saved
    /// probabilities `probs` and the output's gradient `grad`, any strides), with the forward
    /// op's `scale`.
    pub fn attention_backward(
        &self,
        k: &Tensor,
        v: &Tensor,
        probs: &Tensor,
        grad: &Tensor,
        scale: f64,
        precision: GemmPrecision,
    ) -> Result<AttentionGrads> {
        let q = self;
        check(q, k, v)?;
        let (b, h, lq, d) = (q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3]);
        let (lk, dv) = (k.shape()[2], v.shape()[3]);
        if probs.shape() != [b, h, lq, lk]
            || grad.shape() != [b, h, lq, dv]
            || probs.dtype() != q.dtype()
            || grad.dtype() != q.dtype()
        {
            return Err(Error::ShapeMismatch(format!(
                "attention backward: probabilities {} {:?} and output gradient {} {:?} do not fit queries {:?}, keys {:?} and values {:?} of {}",
                probs.dtype(),
                probs.shape(),
                grad.dtype(),
                grad.shape(),
                q.shape(),
                k.shape(),
                v.shape(),
                q.dtype()
            )));
        }
        q.check_same_executor(probs)?;
        q.check_same_executor(grad)?;
        if b * h * lq * lk == 0 {
            let z = |l: usize, d: usize| Tensor::zeros(q.executor(), &[b, h, l, d], q.dtype());
            return Ok(AttentionGrads {
                dq: z(lq, d)?,
                dk: z(lk, d)?,
                dv: z(lk, dv)?,
            });
        }
        let (dq, dk, dvt) = if lq == lk && d == dv {
            // The three gradients side by side in one [B, L, 3, H, D] buffer: the layout of the
            // fused q/k/v projection they flow back into, so concatenating them there
            // (`Tensor::cat_views`) takes no copy.
            let all = Tensor::uninit(q.executor(), &[b, lq, 3, h, d], q.dtype())?;
            let part = |i: usize| -> Result<Tensor> {
                all.slice(2, i, i + 1, 1)?
                    .squeeze(2)?
                    .permute(&[0, 2, 1, 3])
            };
            (part(0)?, part(1)?, part(2)?)
        } else {
            (
                heads_view(q, b, h, lq, d)?,
                heads_view(q, b, h, lk, d)?,
                heads_view(q, b, h, lk, dv)?,
            )
        };
        // dV = Pᵀ·dO, dP = dO·Vᵀ, dS = scale · P ⊙ (dP − rowsum(dP ⊙ P)), dQ = dS·K, dK = dSᵀ·Q.
        gemm_views(&probs.transpose(2, 3)?, grad, &dvt, 1.0, precision)?;
        let dp = Tensor::uninit(q.executor(), &[b, h, lq, lk], q.dtype())?;
        gemm_views(grad, &v.transpose(2, 3)?, &dp, 1.0, precision)?;
        let ds = Tensor::uninit(q.executor(), &[b, h, lq, lk], q.dtype())?;
        let probs = probs.contiguous()?;
        rows::run_into(
            RowOp::AttentionSoftmaxBackward,
            &[&probs, &dp],
            &ds,
            &[scale_arg(q.dtype(), scale)],
        )?;
        drop(dp);
        gemm_views(&ds, k, &dq, 1.0, precision)?;
        gemm_views(&ds.transpose(2, 3)?, q, &dk, 1.0, precision)?;
        Ok(AttentionGrads { dq, dk, dv: dvt })
    }
}
