//! `hologram.ops`: the seed API's operations on buffers (`vector_add(exec, a, b, c)` and
//! friends). Each is one native call that validates its arguments and runs the op; the Python
//! module only re-exports these functions, so a call does no Python-level work.

use std::borrow::Cow;

use hologram_core::{BackendType, BinaryFn, DType, ReduceOp, Tensor, UnaryFn};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::errors::{PyRes, ValidationError};
use crate::executor::{run, PyExecutor};
use crate::tensor::PyTensor;

/// The backend of `exec`: a `hologram.Executor` (its `_e`) or a native executor.
fn backend_of(exec: &Bound<'_, PyAny>) -> PyRes<BackendType> {
    if let Ok(e) = exec.cast::<PyExecutor>() {
        return Ok(e.get().e.backend_type());
    }
    if let Ok(inner) = exec.getattr(intern!(exec.py(), "_e")) {
        if let Ok(e) = inner.cast::<PyExecutor>() {
            return Ok(e.get().e.backend_type());
        }
    }
    Err(ValidationError::new_err(format!(
        "expected an Executor, got {}",
        type_name(exec)
    )))
}

/// The native tensor behind a buffer: a `hologram.Buffer` or `hologram.Tensor` (their `_t`),
/// or a native tensor.
fn tensor_of<'py>(buf: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyTensor>> {
    if let Ok(t) = buf.cast::<PyTensor>() {
        return Ok(t.clone());
    }
    if let Ok(inner) = buf.getattr(intern!(buf.py(), "_t")) {
        if let Ok(t) = inner.cast_into::<PyTensor>() {
            return Ok(t);
        }
    }
    Err(ValidationError::new_err(format!(
        "expected a Buffer, got {}",
        type_name(buf)
    )))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}

/// The native tensors of a call's buffers, checked to be on the executor's backend.
fn operands<'py, const N: usize>(
    exec: &Bound<'py, PyAny>,
    bufs: [&Bound<'py, PyAny>; N],
) -> PyRes<[Bound<'py, PyTensor>; N]> {
    let backend = backend_of(exec)?;
    let mut ts = Vec::with_capacity(N);
    for b in bufs {
        let t = tensor_of(b)?;
        if t.get().t.executor().backend_type() != backend {
            return Err(ValidationError::new_err(
                "the buffer belongs to another executor",
            ));
        }
        ts.push(t);
    }
    ts.try_into()
        .map_err(|_| crate::errors::HologramError::new_err("operand count mismatch"))
}

/// The element count of a call: `n`, or the smallest buffer when `n` is None.
fn count(n: Option<i64>, ts: &[&Tensor]) -> PyRes<usize> {
    let size = ts.iter().map(|t| t.numel()).min().unwrap_or(0);
    match n {
        None => Ok(size),
        Some(k) if k < 0 || k as usize > size => Err(ValidationError::new_err(format!(
            "n = {k} exceeds the buffers ({size} elements)"
        ))),
        Some(k) => Ok(k as usize),
    }
}

/// The first `k` elements of a buffer (itself when that is all of a 1-D buffer).
fn head(t: &Tensor, k: usize) -> hologram_core::Result<Cow<'_, Tensor>> {
    if t.rank() == 1 && t.numel() == k {
        Ok(Cow::Borrowed(t))
    } else {
        t.slice(0, 0, k, 1).map(Cow::Owned)
    }
}

macro_rules! binary_ops {
    ($($py:literal $fn_name:ident => $f:ident),* $(,)?) => {$(
        #[doc = concat!("``c = ", $py, "(a, b)`` element-wise over the first ``n`` elements.")]
        #[pyfunction(name = $py)]
        #[pyo3(signature = (exec, a, b, c, n = None))]
        fn $fn_name(
            py: Python<'_>,
            exec: &Bound<'_, PyAny>,
            a: &Bound<'_, PyAny>,
            b: &Bound<'_, PyAny>,
            c: &Bound<'_, PyAny>,
            n: Option<i64>,
        ) -> PyRes<()> {
            let [a, b, c] = operands(exec, [a, b, c])?;
    let (a, b, c) = (&a.get().t, &b.get().t, &c.get().t);
            let k = count(n, &[a, b, c])?;
            run(py, a.executor(), k, || {
                head(a, k)?.binary_into(BinaryFn::$f, &*head(b, k)?, &*head(c, k)?)
            })
        }
    )*};
}

binary_ops! {
    "vector_add" vector_add => Add,
    "vector_sub" vector_sub => Sub,
    "vector_mul" vector_mul => Mul,
    "vector_div" vector_div => Div,
    "min" minimum => Min,
    "max" maximum => Max,
}

macro_rules! unary_ops {
    ($($py:literal $fn_name:ident => $f:ident),* $(,)?) => {$(
        #[doc = concat!("``c = ", $py, "(a)`` element-wise over the first ``n`` elements.")]
        #[pyfunction(name = $py)]
        #[pyo3(signature = (exec, a, c, n = None))]
        fn $fn_name(
            py: Python<'_>,
            exec: &Bound<'_, PyAny>,
            a: &Bound<'_, PyAny>,
            c: &Bound<'_, PyAny>,
            n: Option<i64>,
        ) -> PyRes<()> {
            let [a, c] = operands(exec, [a, c])?;
    let (a, c) = (&a.get().t, &c.get().t);
            let k = count(n, &[a, c])?;
            run(py, a.executor(), k, || head(a, k)?.unary_into(UnaryFn::$f, &*head(c, k)?))
        }
    )*};
}

unary_ops! {
    "abs" abs => Abs,
    "neg" neg => Neg,
    "relu" relu => Relu,
    "sigmoid" sigmoid => Sigmoid,
    "tanh" tanh => Tanh,
    "gelu" gelu => Gelu,
    "silu" silu => Silu,
    "exp" exp => Exp,
    "log" log => Log,
    "sqrt" sqrt => Sqrt,
}

/// ``c = clamp(a, lo, hi)`` over the first ``n`` elements.
#[pyfunction]
#[pyo3(signature = (exec, a, c, lo, hi, n = None))]
fn clip(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    lo: f64,
    hi: f64,
    n: Option<i64>,
) -> PyRes<()> {
    let [a, c] = operands(exec, [a, c])?;
    let (a, c) = (&a.get().t, &c.get().t);
    let k = count(n, &[a, c])?;
    run(py, a.executor(), k, || {
        head(a, k)?
            .clip(Some(lo), Some(hi))?
            .copy_into(&*head(c, k)?)
    })
}

macro_rules! scalar_ops {
    ($($py:literal $fn_name:ident => $f:ident),* $(,)?) => {$(
        #[doc = concat!("``c = ", $py, "(a, scalar)`` over the first ``n`` elements.")]
        #[pyfunction(name = $py)]
        #[pyo3(signature = (exec, a, scalar, c, n = None))]
        fn $fn_name(
            py: Python<'_>,
            exec: &Bound<'_, PyAny>,
            a: &Bound<'_, PyAny>,
            scalar: f64,
            c: &Bound<'_, PyAny>,
            n: Option<i64>,
        ) -> PyRes<()> {
            let [a, c] = operands(exec, [a, c])?;
    let (a, c) = (&a.get().t, &c.get().t);
            let k = count(n, &[a, c])?;
            run(py, a.executor(), k, || head(a, k)?.binary_into(BinaryFn::$f, scalar, &*head(c, k)?))
        }
    )*};
}

scalar_ops! {
    "scalar_add" scalar_add => Add,
    "scalar_mul" scalar_mul => Mul,
}

/// Writes a one-element result to `out[0]` when an output buffer is given.
fn store_first(r: &Tensor, out: Option<&Tensor>) -> hologram_core::Result<()> {
    match out {
        Some(o) => r.reshape(&[1])?.copy_into(&*head(o, 1)?),
        None => Ok(()),
    }
}

/// The native tensors of a call with an optional output buffer.
#[allow(clippy::type_complexity)]
fn with_out<'py, const N: usize>(
    exec: &Bound<'py, PyAny>,
    bufs: [&Bound<'py, PyAny>; N],
    out: Option<&Bound<'py, PyAny>>,
) -> PyRes<([Bound<'py, PyTensor>; N], Option<Bound<'py, PyTensor>>)> {
    let ts = operands(exec, bufs)?;
    let out = match out {
        Some(o) => {
            let [o] = operands(exec, [o])?;
            Some(o)
        }
        None => None,
    };
    Ok((ts, out))
}

macro_rules! reductions {
    ($($py:literal $fn_name:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!("The ", $py, " of the first ``n`` elements (also written to ``out[0]`` if given).")]
        #[pyfunction(name = $py)]
        #[pyo3(signature = (exec, a, out = None, n = None))]
        fn $fn_name(
            py: Python<'_>,
            exec: &Bound<'_, PyAny>,
            a: &Bound<'_, PyAny>,
            out: Option<&Bound<'_, PyAny>>,
            n: Option<i64>,
        ) -> PyRes<f64> {
            let ([a], out) = with_out(exec, [a], out)?;
            let (a, out) = (&a.get().t, out.as_ref().map(|o| &o.get().t));
            let k = count(n, &[a])?;
            run(py, a.executor(), k, || {
                let r = head(a, k)?.reduce(ReduceOp::$op, &[], false)?;
                store_first(&r, out)?;
                r.item()
            })
        }
    )*};
}

reductions! {
    "sum" sum => Sum,
    "reduce_min" reduce_min => Min,
    "reduce_max" reduce_max => Max,
    "mean" mean => Mean,
}

/// ``c = softmax(a)`` over the first ``n`` elements.
#[pyfunction]
#[pyo3(signature = (exec, a, c, n = None))]
fn softmax(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    n: Option<i64>,
) -> PyRes<()> {
    let [a, c] = operands(exec, [a, c])?;
    let (a, c) = (&a.get().t, &c.get().t);
    let k = count(n, &[a, c])?;
    run(py, a.executor(), k, || {
        head(a, k)?.softmax(-1)?.copy_into(&*head(c, k)?)
    })
}

/// A buffer's first `rows * cols` elements as a row-major matrix.
fn matrix(t: &Tensor, rows: usize, cols: usize) -> hologram_core::Result<Tensor> {
    head(t, rows * cols)?.reshape(&[rows as isize, cols as isize])
}

/// ``c[m×n] = a[m×k] · b[k×n]`` on row-major buffers (cuBLAS on CUDA).
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the seed API's signature
fn gemm(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    m: usize,
    n: usize,
    k: usize,
) -> PyRes<()> {
    let [a, b, c] = operands(exec, [a, b, c])?;
    let (a, b, c) = (&a.get().t, &b.get().t, &c.get().t);
    if a.numel() < m * k || b.numel() < k * n || c.numel() < m * n {
        return Err(ValidationError::new_err(format!(
            "gemm {m}x{k} @ {k}x{n} does not fit the buffers ({}, {}, {})",
            a.numel(),
            b.numel(),
            c.numel()
        )));
    }
    crate::executor::nogil(py, move || {
        matrix(a, m, k)?
            .matmul(&matrix(b, k, n)?)?
            .reshape(&[-1])?
            .copy_into(&*head(c, m * n)?)
    })
}

/// ``y[m] = a[m×n] · x[n]``.
#[pyfunction]
fn matvec(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    m: usize,
    n: usize,
) -> PyRes<()> {
    let [a, x, y] = operands(exec, [a, x, y])?;
    let (a, x, y) = (&a.get().t, &x.get().t, &y.get().t);
    if a.numel() < m * n || x.numel() < n || y.numel() < m {
        return Err(ValidationError::new_err(format!(
            "matvec {m}x{n} @ {n} does not fit the buffers ({}, {}, {})",
            a.numel(),
            x.numel(),
            y.numel()
        )));
    }
    crate::executor::nogil(py, move || {
        matrix(a, m, n)?
            .matmul(&*head(x, n)?)?
            .copy_into(&*head(y, m)?)
    })
}

macro_rules! losses {
    ($($py:literal $fn_name:ident => $method:ident: $doc:literal),* $(,)?) => {$(
        #[doc = $doc]
        #[pyfunction(name = $py)]
        #[pyo3(signature = (exec, pred, target, out = None, n = None))]
        fn $fn_name(
            py: Python<'_>,
            exec: &Bound<'_, PyAny>,
            pred: &Bound<'_, PyAny>,
            target: &Bound<'_, PyAny>,
            out: Option<&Bound<'_, PyAny>>,
            n: Option<i64>,
        ) -> PyRes<f64> {
            let ([p, t], out) = with_out(exec, [pred, target], out)?;
            let (p, t, out) = (&p.get().t, &t.get().t, out.as_ref().map(|o| &o.get().t));
            let k = count(n, &[p, t])?;
            run(py, p.executor(), k, || {
                let r = head(p, k)?.$method(&*head(t, k)?)?;
                store_first(&r, out)?;
                r.item()
            })
        }
    )*};
}

losses! {
    "mse" mse => mse_loss:
        "Mean squared error of the first ``n`` elements (also written to ``out[0]``).",
    "binary_cross_entropy" binary_cross_entropy => binary_cross_entropy:
        "Mean binary cross-entropy of probabilities against 0/1 targets.",
}

/// Mean cross-entropy of ``batch`` rows of ``classes`` logits against class indexes.
#[pyfunction]
#[pyo3(signature = (exec, logits, targets, out = None, batch = None, classes = None))]
fn cross_entropy(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    logits: &Bound<'_, PyAny>,
    targets: &Bound<'_, PyAny>,
    out: Option<&Bound<'_, PyAny>>,
    batch: Option<usize>,
    classes: Option<usize>,
) -> PyRes<f64> {
    let ([l, t], out) = with_out(exec, [logits, targets], out)?;
    let (l, t, out) = (&l.get().t, &t.get().t, out.as_ref().map(|o| &o.get().t));
    let batch = batch.unwrap_or(t.numel());
    let classes = classes.unwrap_or(l.numel() / batch.max(1));
    if l.numel() < batch * classes || t.numel() < batch {
        return Err(ValidationError::new_err(format!(
            "cross_entropy of {batch} rows of {classes} classes does not fit the buffers ({}, {})",
            l.numel(),
            t.numel()
        )));
    }
    run(py, l.executor(), batch * classes, || {
        let r = matrix(l, batch, classes)?.cross_entropy(&head(t, batch)?.cast(DType::I64)?)?;
        store_first(&r, out)?;
        r.item()
    })
}

/// ``dst[:n] = src[:n]``.
#[pyfunction]
#[pyo3(signature = (exec, src, dst, n = None))]
fn copy(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    n: Option<i64>,
) -> PyRes<()> {
    let [s, d] = operands(exec, [src, dst])?;
    let (s, d) = (&s.get().t, &d.get().t);
    let k = count(n, &[s, d])?;
    run(py, s.executor(), k, || head(s, k)?.copy_into(&*head(d, k)?))
}

/// ``buf[:n] = value``.
#[pyfunction]
#[pyo3(signature = (exec, buf, value, n = None))]
fn fill(
    py: Python<'_>,
    exec: &Bound<'_, PyAny>,
    buf: &Bound<'_, PyAny>,
    value: f64,
    n: Option<i64>,
) -> PyRes<()> {
    let [b] = operands(exec, [buf])?;
    let b = &b.get().t;
    let k = count(n, &[b])?;
    run(py, b.executor(), k, || {
        Tensor::full(b.executor(), &[k], value, b.dtype())?.copy_into(&*head(b, k)?)
    })
}

/// The `seed_ops` submodule of `hologram._native`, which `hologram.ops` re-exports.
pub fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "seed_ops")?;
    for f in [
        wrap_pyfunction!(vector_add, &m)?,
        wrap_pyfunction!(vector_sub, &m)?,
        wrap_pyfunction!(vector_mul, &m)?,
        wrap_pyfunction!(vector_div, &m)?,
        wrap_pyfunction!(minimum, &m)?,
        wrap_pyfunction!(maximum, &m)?,
        wrap_pyfunction!(abs, &m)?,
        wrap_pyfunction!(neg, &m)?,
        wrap_pyfunction!(relu, &m)?,
        wrap_pyfunction!(sigmoid, &m)?,
        wrap_pyfunction!(tanh, &m)?,
        wrap_pyfunction!(gelu, &m)?,
        wrap_pyfunction!(silu, &m)?,
        wrap_pyfunction!(exp, &m)?,
        wrap_pyfunction!(log, &m)?,
        wrap_pyfunction!(sqrt, &m)?,
        wrap_pyfunction!(clip, &m)?,
        wrap_pyfunction!(scalar_add, &m)?,
        wrap_pyfunction!(scalar_mul, &m)?,
        wrap_pyfunction!(sum, &m)?,
        wrap_pyfunction!(reduce_min, &m)?,
        wrap_pyfunction!(reduce_max, &m)?,
        wrap_pyfunction!(mean, &m)?,
        wrap_pyfunction!(softmax, &m)?,
        wrap_pyfunction!(gemm, &m)?,
        wrap_pyfunction!(matvec, &m)?,
        wrap_pyfunction!(mse, &m)?,
        wrap_pyfunction!(binary_cross_entropy, &m)?,
        wrap_pyfunction!(cross_entropy, &m)?,
        wrap_pyfunction!(copy, &m)?,
        wrap_pyfunction!(fill, &m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(m)
}
