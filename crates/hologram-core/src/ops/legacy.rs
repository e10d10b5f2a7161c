//! The seed API's operation names on typed buffers, as a thin layer over tensor ops:
//! `ops::math::vector_add(&exec, &a, &b, &c, n)` and friends. Each call runs one fused kernel
//! that writes its result into the output buffer.

use crate::buffer::Buffer;
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::tensor::{Layout, Tensor};

/// A 1-D tensor view of the first `n` elements of a buffer (no copy).
pub fn view<T: Element>(exec: &Executor, buf: &Buffer<T>, n: usize) -> Result<Tensor> {
    if n > buf.len() {
        return Err(Error::LengthMismatch(format!(
            "n = {n} exceeds a buffer of {} elements",
            buf.len()
        )));
    }
    if !buf.executor().same_as(exec) {
        return Err(Error::DeviceMismatch(
            "the buffer belongs to another executor".into(),
        ));
    }
    let dtype = DType::from_type(T::TYPE)
        .ok_or_else(|| Error::TypeMismatch(format!("{} buffers", T::TYPE)))?;
    Ok(Tensor::stored(
        exec,
        dtype,
        Layout::contiguous(&[n]),
        buf.shared_storage().clone(),
    ))
}

fn store<T: Element>(exec: &Executor, result: &Tensor, out: &Buffer<T>, n: usize) -> Result<()> {
    result.copy_into(&view(exec, out, n)?)
}

/// Element-wise math: `c[i] = op(a[i], b[i])` for `i < n`.
pub mod math {
    use super::*;

    macro_rules! binary {
        ($($(#[$doc:meta])* $name:ident => $method:ident),*) => {$(
            $(#[$doc])*
            pub fn $name<T: Element>(exec: &Executor, a: &Buffer<T>, b: &Buffer<T>, c: &Buffer<T>, n: usize) -> Result<()> {
                store(exec, &view(exec, a, n)?.$method(&view(exec, b, n)?)?, c, n)
            }
        )*};
    }
    binary! {
        /// `c = a + b`
        vector_add => add,
        /// `c = a - b`
        vector_sub => sub,
        /// `c = a * b`
        vector_mul => mul,
        /// `c = a / b`
        vector_div => div,
        /// `c = min(a, b)`
        min => minimum,
        /// `c = max(a, b)`
        max => maximum
    }

    macro_rules! unary {
        ($($(#[$doc:meta])* $name:ident => $method:ident),*) => {$(
            $(#[$doc])*
            pub fn $name<T: Element>(exec: &Executor, a: &Buffer<T>, c: &Buffer<T>, n: usize) -> Result<()> {
                store(exec, &view(exec, a, n)?.$method()?, c, n)
            }
        )*};
    }
    unary! {
        /// `c = |a|`
        abs => abs,
        /// `c = -a`
        neg => neg,
        /// `c = max(a, 0)`
        relu => relu
    }

    /// `c = clamp(a, lo, hi)`
    pub fn clip<T: Element>(
        exec: &Executor,
        a: &Buffer<T>,
        c: &Buffer<T>,
        lo: f64,
        hi: f64,
        n: usize,
    ) -> Result<()> {
        store(exec, &view(exec, a, n)?.clip(Some(lo), Some(hi))?, c, n)
    }

    /// `c = a + s`
    pub fn scalar_add<T: Element>(
        exec: &Executor,
        a: &Buffer<T>,
        s: f64,
        c: &Buffer<T>,
        n: usize,
    ) -> Result<()> {
        store(exec, &view(exec, a, n)?.add(s)?, c, n)
    }

    /// `c = a * s`
    pub fn scalar_mul<T: Element>(
        exec: &Executor,
        a: &Buffer<T>,
        s: f64,
        c: &Buffer<T>,
        n: usize,
    ) -> Result<()> {
        store(exec, &view(exec, a, n)?.mul(s)?, c, n)
    }
}

/// Reductions of the first `n` elements into `out[0]`; each also returns the value.
pub mod reduce {
    use super::*;

    macro_rules! reduction {
        ($($(#[$doc:meta])* $name:ident => $method:ident),*) => {$(
            $(#[$doc])*
            pub fn $name<T: Element>(exec: &Executor, a: &Buffer<T>, out: &Buffer<T>, n: usize) -> Result<f64> {
                let r = view(exec, a, n)?.$method(&[], false)?.reshape(&[1])?;
                store(exec, &r, out, 1)?;
                r.item()
            }
        )*};
    }
    reduction! {
        /// Sum.
        sum => sum,
        /// Minimum.
        min => min,
        /// Maximum.
        max => max
    }
}

/// Activations: `c[i] = f(a[i])`; softmax over the first `n` elements.
pub mod activation {
    use super::*;

    macro_rules! act {
        ($($(#[$doc:meta])* $name:ident => $method:ident),*) => {$(
            $(#[$doc])*
            pub fn $name<T: Element>(exec: &Executor, a: &Buffer<T>, c: &Buffer<T>, n: usize) -> Result<()> {
                store(exec, &view(exec, a, n)?.$method()?, c, n)
            }
        )*};
    }
    act! {
        /// Logistic sigmoid.
        sigmoid => sigmoid,
        /// Hyperbolic tangent.
        tanh => tanh,
        /// Exact GELU.
        gelu => gelu
    }

    /// Softmax of the first `n` elements as one vector.
    pub fn softmax<T: Element>(
        exec: &Executor,
        a: &Buffer<T>,
        c: &Buffer<T>,
        n: usize,
    ) -> Result<()> {
        store(exec, &view(exec, a, n)?.softmax(-1)?, c, n)
    }
}

/// Losses into `out[0]`; each also returns the value.
pub mod loss {
    use super::*;

    /// `loss(pred, target)` over the first `n` elements, stored in `out[0]` and returned.
    fn elementwise_loss<T: Element>(
        exec: &Executor,
        pred: &Buffer<T>,
        target: &Buffer<T>,
        out: &Buffer<T>,
        n: usize,
        loss: fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<f64> {
        let r = loss(&view(exec, pred, n)?, &view(exec, target, n)?)?.reshape(&[1])?;
        store(exec, &r, out, 1)?;
        r.item()
    }

    /// Mean squared error of the first `n` elements.
    pub fn mse<T: Element>(
        exec: &Executor,
        pred: &Buffer<T>,
        target: &Buffer<T>,
        out: &Buffer<T>,
        n: usize,
    ) -> Result<f64> {
        elementwise_loss(exec, pred, target, out, n, Tensor::mse_loss)
    }

    /// Mean cross-entropy of `batch` rows of `classes` logits against class indexes (given as
    /// values of the logits' type).
    pub fn cross_entropy<T: Element>(
        exec: &Executor,
        logits: &Buffer<T>,
        targets: &Buffer<T>,
        out: &Buffer<T>,
        batch: usize,
        classes: usize,
    ) -> Result<f64> {
        let l =
            view(exec, logits, batch * classes)?.reshape(&[batch as isize, classes as isize])?;
        let t = view(exec, targets, batch)?.cast(DType::I64)?;
        let r = l.cross_entropy(&t)?.reshape(&[1])?;
        store(exec, &r, out, 1)?;
        r.item()
    }

    /// Mean binary cross-entropy of probabilities against 0/1 targets.
    pub fn binary_cross_entropy<T: Element>(
        exec: &Executor,
        pred: &Buffer<T>,
        target: &Buffer<T>,
        out: &Buffer<T>,
        n: usize,
    ) -> Result<f64> {
        elementwise_loss(exec, pred, target, out, n, Tensor::binary_cross_entropy)
    }
}

/// Matrix products on row-major buffers.
pub mod linalg {
    use super::*;

    /// `c[m×n] = a[m×k] · b[k×n]`
    pub fn gemm<T: Element>(
        exec: &Executor,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &Buffer<T>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        let at = view(exec, a, m * k)?.reshape(&[m as isize, k as isize])?;
        let bt = view(exec, b, k * n)?.reshape(&[k as isize, n as isize])?;
        store(exec, &at.matmul(&bt)?.reshape(&[-1])?, c, m * n)
    }

    /// `y[m] = a[m×n] · x[n]`
    pub fn matvec<T: Element>(
        exec: &Executor,
        a: &Buffer<T>,
        x: &Buffer<T>,
        y: &Buffer<T>,
        m: usize,
        n: usize,
    ) -> Result<()> {
        let at = view(exec, a, m * n)?.reshape(&[m as isize, n as isize])?;
        store(exec, &at.matmul(&view(exec, x, n)?)?, y, m)
    }
}

/// Copies and fills.
pub mod memory {
    use super::*;

    /// `dst[..n] = src[..n]`
    pub fn copy<T: Element>(
        exec: &Executor,
        src: &Buffer<T>,
        dst: &Buffer<T>,
        n: usize,
    ) -> Result<()> {
        store(exec, &view(exec, src, n)?, dst, n)
    }

    /// `buf[..n] = value`
    pub fn fill<T: Element>(exec: &Executor, buf: &Buffer<T>, value: f64, n: usize) -> Result<()> {
        let dt = DType::from_type(T::TYPE)
            .ok_or_else(|| Error::TypeMismatch(format!("{} buffers", T::TYPE)))?;
        Tensor::full(exec, &[n], value, dt)?.copy_into(&view(exec, buf, n)?)
    }
}
