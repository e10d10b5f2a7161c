//! `hologram._native.Tensor`: the core tensor, its ops, and host views.

use hologram_core::{BinaryFn, DType, ReduceOp, Tensor, UnaryFn};
use hologram_isa::CmpOp;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::errors::{IntoPy, PyRes, ValidationError};
use crate::executor::{dtype, host_bytes, nogil, run, work, PyExecutor};

/// An n-dimensional array on an executor's device. Element-wise ops are recorded lazily and
/// fused into one kernel when the result is needed.
#[pyclass(name = "Tensor", module = "hologram._native", frozen)]
#[derive(Clone)]
pub struct PyTensor {
    pub t: Tensor,
}

/// A tensor or a number.
pub enum Operand {
    Tensor(Tensor),
    Number(f64),
}

/// `numbers.Number`, looked up once.
fn number_type(py: Python<'_>) -> PyRes<&Bound<'_, pyo3::types::PyType>> {
    static NUMBER: pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>> = pyo3::sync::PyOnceLock::new();
    NUMBER.import(py, "numbers", "Number")
}

/// The right-hand side of an op: a native tensor, a `hologram.Tensor` (its `_t`), or a
/// number (Python's, NumPy's, a bool). The common cases are checked first and cheaply: a failed
/// conversion attempt would build an exception object.
pub fn operand(obj: &Bound<'_, PyAny>) -> PyRes<Operand> {
    use pyo3::types::{PyBool, PyFloat, PyInt};
    // Exact Python numbers first: one pointer comparison each, and an int read as an integer
    // (its float conversion would make a float object).
    if let Ok(f) = obj.cast_exact::<PyFloat>() {
        return Ok(Operand::Number(f.value()));
    }
    if obj.is_exact_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            // Rounded to nearest, ties to even, as Python's `float(i)`.
            return Ok(Operand::Number(i as f64));
        }
    }
    if let Ok(t) = obj.cast::<crate::tensor_base::PyTensorBase>() {
        return Ok(Operand::Tensor(t.get().tensor().clone()));
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(Operand::Tensor(t.get().t.clone()));
    }
    if obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyInt>() {
        return Ok(Operand::Number(obj.extract::<f64>()?));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Operand::Number(if b.is_true() { 1.0 } else { 0.0 }));
    }
    let py = obj.py();
    if let Ok(inner) = obj.getattr(pyo3::intern!(py, "_t")) {
        if let Ok(t) = inner.cast::<PyTensor>() {
            return Ok(Operand::Tensor(t.get().t.clone()));
        }
    }
    if obj.is_instance(number_type(py)?)? {
        if let Ok(v) = obj.extract::<f64>() {
            return Ok(Operand::Number(v));
        }
        if let Ok(v) = obj.call_method0(pyo3::intern!(py, "__float__")) {
            return Ok(Operand::Number(v.extract::<f64>()?));
        }
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "unsupported operand {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

fn unary_fn(name: &str) -> PyRes<UnaryFn> {
    UnaryFn::from_name(name)
        .ok_or_else(|| ValidationError::new_err(format!("unknown unary op '{name}'")))
}

fn binary_fn(name: &str) -> PyRes<BinaryFn> {
    BinaryFn::from_name(name)
        .ok_or_else(|| ValidationError::new_err(format!("unknown binary op '{name}'")))
}

fn cmp_op(name: &str) -> PyRes<CmpOp> {
    CmpOp::from_name(name)
        .ok_or_else(|| ValidationError::new_err(format!("unknown comparison '{name}'")))
}

fn reduce_op(name: &str) -> PyRes<ReduceOp> {
    // argmax/argmin have their own methods (they return indices).
    ReduceOp::from_name(name)
        .filter(|op| !matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin))
        .ok_or_else(|| ValidationError::new_err(format!("unknown reduction '{name}'")))
}

/// The op names `Tensor.unary`, `Tensor.binary` and `Tensor.reduce` accept (with aliases), from
/// the core's one table: `{"unary": [...], "binary": [...], "reduce": [...]}`.
#[pyfunction]
pub fn op_names(py: Python<'_>) -> PyRes<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "unary",
        UnaryFn::ALL.iter().map(|f| f.name()).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "binary",
        BinaryFn::ALL.iter().map(|f| f.name()).collect::<Vec<_>>(),
    )?;
    let reductions = ReduceOp::ALL
        .iter()
        .filter(|op| !matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin));
    d.set_item("reduce", reductions.map(|op| op.name()).collect::<Vec<_>>())?;
    Ok(d)
}

fn wrap(t: hologram_core::Result<Tensor>) -> PyRes<PyTensor> {
    Ok(PyTensor { t: t.py()? })
}

/// `t OP other`, or `other OP t` with `reverse`; `other` is a tensor or a number (see
/// [`operand`]). The op is recorded, not run.
pub(crate) fn binary_with(
    t: &Tensor,
    f: BinaryFn,
    other: &Bound<'_, PyAny>,
    reverse: bool,
) -> PyRes<hologram_core::Result<Tensor>> {
    Ok(match (operand(other)?, reverse) {
        (Operand::Tensor(o), false) => t.binary(f, &o),
        (Operand::Tensor(o), true) => o.binary(f, t),
        (Operand::Number(v), false) => t.binary(f, v),
        (Operand::Number(v), true) => t.rbinary(f, v),
    })
}

/// `t CMP other` (a bool tensor, recorded); `other` as in [`binary_with`].
pub(crate) fn compare_with(
    t: &Tensor,
    c: CmpOp,
    other: &Bound<'_, PyAny>,
) -> PyRes<hologram_core::Result<Tensor>> {
    Ok(match operand(other)? {
        Operand::Tensor(o) => t.compare(c, &o),
        Operand::Number(v) => t.compare(c, v),
    })
}

/// NumPy's typestr for a dtype (None for bf16, which NumPy lacks).
pub fn typestr(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::BF16 => return None,
    })
}

#[pymethods]
impl PyTensor {
    /// Size of each dimension.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.shape())
    }

    /// Element type name (`f32`, `bool`, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.t.dtype().name()
    }

    /// Element strides.
    #[getter]
    fn strides(&self) -> Vec<usize> {
        self.t.strides().to_vec()
    }

    /// Number of elements.
    #[getter]
    fn numel(&self) -> usize {
        self.t.numel()
    }

    /// True when dense and row-major.
    #[getter]
    fn is_contiguous(&self) -> bool {
        self.t.is_contiguous()
    }

    /// True while an element-wise expression is pending.
    #[getter]
    fn is_lazy(&self) -> bool {
        self.t.is_lazy()
    }

    /// The executor the tensor lives on.
    #[getter]
    fn executor(&self) -> PyExecutor {
        PyExecutor {
            e: self.t.executor().clone(),
        }
    }

    /// Copies `nbytes` bytes at host `address` (C order, exactly the tensor's size) into the
    /// tensor; `owner` (a NumPy array) keeps the memory valid during the call.
    fn write_from_address(
        &self,
        py: Python<'_>,
        address: usize,
        nbytes: usize,
        owner: Py<PyAny>,
    ) -> PyRes<()> {
        // SAFETY: `owner` keeps the memory alive for the whole call.
        let bytes = unsafe { host_bytes(address, nbytes)? };
        let _keep = owner;
        let t = self.t.clone();
        run(py, self.t.executor(), work(&[&t]), move || {
            t.write_bytes(bytes)
        })
    }

    /// Copies the elements in C order into `nbytes` bytes of host memory at `address` (exactly
    /// the tensor's size); `owner` (a NumPy array) keeps that memory valid during the call.
    fn read_into_address(
        &self,
        py: Python<'_>,
        address: usize,
        nbytes: usize,
        owner: Py<PyAny>,
    ) -> PyRes<()> {
        if address == 0 && nbytes > 0 {
            return Err(crate::errors::ValidationError::new_err("null data address"));
        }
        let _keep = owner;
        let t = self.t.clone();
        let out: &mut [u8] = if nbytes == 0 {
            &mut []
        } else {
            // SAFETY: `owner` keeps `nbytes` writable bytes at `address` alive for the whole
            // call, and nothing else touches them while the GIL is released (the array is new).
            unsafe { std::slice::from_raw_parts_mut(address as *mut u8, nbytes) }
        };
        run(py, self.t.executor(), work(&[&self.t]), move || {
            t.read_bytes(out)
        })
    }

    /// The elements in C order as bytes (a copy).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyBytes>> {
        let t = self.t.clone();
        let bytes = run(py, self.t.executor(), work(&[&t]), move || t.to_bytes())?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// NumPy's `__array_interface__` for a zero-copy view of host memory, or None when the
    /// memory is not host memory (or the dtype has no NumPy type).
    fn host_array_interface<'py>(&self, py: Python<'py>) -> PyRes<Option<Bound<'py, PyDict>>> {
        let Some(ts) = typestr(self.t.dtype()) else {
            return Ok(None);
        };
        if !self.t.executor().capabilities().host_memory {
            return Ok(None);
        }
        let t = self.t.clone();
        let (ptr, host) = run(py, self.t.executor(), work(&[&t]), move || t.data_ptr())?;
        if !host {
            return Ok(None);
        }
        let size = self.t.dtype().size();
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, self.t.shape())?)?;
        d.set_item("typestr", ts)?;
        d.set_item("data", (ptr as usize, false))?;
        let strides: Vec<usize> = self.t.strides().iter().map(|s| s * size).collect();
        d.set_item("strides", PyTuple::new(py, strides)?)?;
        Ok(Some(d))
    }

    /// Runs any pending expression.
    pub(crate) fn realize(&self, py: Python<'_>) -> PyRes<PyTensor> {
        let t = &self.t;
        Ok(PyTensor {
            t: run(py, t.executor(), work(&[t]), || t.realize())?,
        })
    }

    /// A contiguous copy (or itself).
    fn contiguous(&self, py: Python<'_>) -> PyRes<PyTensor> {
        let t = &self.t;
        Ok(PyTensor {
            t: run(py, t.executor(), work(&[t]), || t.contiguous())?,
        })
    }

    /// Copies (broadcast and converted) into `out`, any view.
    fn copy_into(&self, py: Python<'_>, out: &PyTensor) -> PyRes<()> {
        let (t, o) = (&self.t, &out.t);
        run(py, t.executor(), work(&[t, o]), || t.copy_into(o))
    }

    /// Runs the pending expressions of several tensors; those of one shape over shared inputs
    /// as one kernel (see `Tensor::realize_all`).
    #[staticmethod]
    fn realize_all(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>) -> PyRes<()> {
        let ts: Vec<Tensor> = tensors.iter().map(|t| t.t.clone()).collect();
        let Some(first) = ts.first() else {
            return Ok(());
        };
        let exec = first.executor().clone();
        let refs: Vec<&Tensor> = ts.iter().collect();
        let elements = work(&refs);
        run(py, &exec, elements, || Tensor::realize_all(&refs))
    }

    /// Overwrites each destination with its new value, every new value computed from the old
    /// ones (a parallel assignment; see `Tensor::assign_all`): `new` and `dst` are lists of the
    /// same length.
    #[staticmethod]
    fn assign_all(
        py: Python<'_>,
        new: Vec<PyRef<'_, PyTensor>>,
        dst: Vec<PyRef<'_, PyTensor>>,
    ) -> PyRes<()> {
        if new.len() != dst.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "assign_all needs as many new values as destinations ({} and {})",
                new.len(),
                dst.len()
            )));
        }
        let pairs: Vec<(Tensor, Tensor)> = new
            .iter()
            .zip(&dst)
            .map(|(n, d)| (n.t.clone(), d.t.clone()))
            .collect();
        let Some((first, _)) = pairs.first() else {
            return Ok(());
        };
        let exec = first.executor().clone();
        let elements = pairs.iter().map(|(n, d)| work(&[n, d])).sum();
        run(py, &exec, elements, || Tensor::assign_all(&pairs))
    }

    /// The one element as a Python number of its dtype: bool, int (integers exactly) or float.
    pub(crate) fn value<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        let t = &self.t;
        let bytes = run(py, t.executor(), work(&[t]), || {
            if t.numel() != 1 {
                return Err(hologram_core::Error::ShapeMismatch(format!(
                    "item() needs one element, the tensor has shape {:?}",
                    t.shape()
                )));
            }
            t.to_bytes()
        })?;
        let mut w = [0u8; 8];
        let size = bytes.len().min(8);
        w[..size].copy_from_slice(&bytes[..size]);
        let (lo2, lo4, all) = (
            [w[0], w[1]],
            [w[0], w[1], w[2], w[3]],
            u64::from_le_bytes(w),
        );
        Ok(match t.dtype() {
            DType::Bool => pyo3::types::PyBool::new(py, w[0] != 0)
                .to_owned()
                .into_any(),
            DType::U8 => w[0].into_pyobject(py)?.into_any(),
            DType::I8 => (w[0] as i8).into_pyobject(py)?.into_any(),
            DType::I16 => i16::from_le_bytes(lo2).into_pyobject(py)?.into_any(),
            DType::U16 => u16::from_le_bytes(lo2).into_pyobject(py)?.into_any(),
            DType::I32 => i32::from_le_bytes(lo4).into_pyobject(py)?.into_any(),
            DType::U32 => u32::from_le_bytes(lo4).into_pyobject(py)?.into_any(),
            DType::I64 => (all as i64).into_pyobject(py)?.into_any(),
            DType::U64 => all.into_pyobject(py)?.into_any(),
            DType::F16 => half::f16::from_le_bytes(lo2)
                .to_f64()
                .into_pyobject(py)?
                .into_any(),
            DType::BF16 => half::bf16::from_le_bytes(lo2)
                .to_f64()
                .into_pyobject(py)?
                .into_any(),
            DType::F32 => (f32::from_le_bytes(lo4) as f64)
                .into_pyobject(py)?
                .into_any(),
            DType::F64 => f64::from_bits(all).into_pyobject(py)?.into_any(),
        })
    }

    /// The one element as a float.
    fn item(&self, py: Python<'_>) -> PyRes<f64> {
        let t = &self.t;
        run(py, t.executor(), work(&[t]), || t.item())
    }

    fn unary(&self, name: &str) -> PyRes<PyTensor> {
        wrap(self.t.unary(unary_fn(name)?))
    }

    /// `self OP other`, or `other OP self` with `reverse`; `other` is a tensor (native or
    /// `hologram.Tensor`) or a number.
    #[pyo3(signature = (name, other, reverse = false))]
    fn binary(&self, name: &str, other: &Bound<'_, PyAny>, reverse: bool) -> PyRes<PyTensor> {
        wrap(binary_with(&self.t, binary_fn(name)?, other, reverse)?)
    }

    fn compare(&self, name: &str, other: &Bound<'_, PyAny>) -> PyRes<PyTensor> {
        wrap(compare_with(&self.t, cmp_op(name)?, other)?)
    }

    #[staticmethod]
    fn where_(cond: &PyTensor, a: &PyTensor, b: &PyTensor) -> PyRes<PyTensor> {
        wrap(Tensor::where_(&cond.t, &a.t, &b.t))
    }

    fn cast(&self, dtype: &str) -> PyRes<PyTensor> {
        wrap(self.t.cast(self::dtype(dtype)?))
    }

    #[pyo3(signature = (lo = None, hi = None))]
    fn clip(&self, lo: Option<f64>, hi: Option<f64>) -> PyRes<PyTensor> {
        wrap(self.t.clip(lo, hi))
    }

    /// Reduces over `axes`: None (every axis), one axis, or a sequence of axes.
    #[pyo3(signature = (op, axes = None, keepdim = false))]
    pub(crate) fn reduce(
        &self,
        py: Python<'_>,
        op: &str,
        axes: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
    ) -> PyRes<PyTensor> {
        let axes: Vec<isize> = match axes {
            None => Vec::new(),
            Some(a) if a.is_none() => Vec::new(),
            Some(a) => match a.extract::<isize>() {
                Ok(one) => vec![one],
                Err(_) => a.extract::<Vec<isize>>()?,
            },
        };
        let (t, op) = (&self.t, reduce_op(op)?);
        Ok(PyTensor {
            t: run(py, t.executor(), work(&[t]), || {
                t.reduce(op, &axes, keepdim)
            })?,
        })
    }

    #[pyo3(signature = (axis = None, keepdim = false, minimum = false))]
    fn argmax(
        &self,
        py: Python<'_>,
        axis: Option<isize>,
        keepdim: bool,
        minimum: bool,
    ) -> PyRes<PyTensor> {
        let t = &self.t;
        Ok(PyTensor {
            t: run(py, t.executor(), work(&[t]), || {
                if minimum {
                    t.argmin(axis, keepdim)
                } else {
                    t.argmax(axis, keepdim)
                }
            })?,
        })
    }

    #[pyo3(signature = (other, tf32 = false))]
    fn matmul(&self, py: Python<'_>, other: &PyTensor, tf32: bool) -> PyRes<PyTensor> {
        let (a, b) = (self.t.clone(), other.t.clone());
        let p = precision(tf32);
        Ok(PyTensor {
            t: nogil(py, move || a.matmul_with(&b, p))?,
        })
    }

    fn softmax(&self, py: Python<'_>, axis: isize) -> PyRes<PyTensor> {
        let t = &self.t;
        Ok(PyTensor {
            t: run(py, t.executor(), work(&[t]), || t.softmax(axis))?,
        })
    }

    fn log_softmax(&self, py: Python<'_>, axis: isize) -> PyRes<PyTensor> {
        let t = &self.t;
        Ok(PyTensor {
            t: run(py, t.executor(), work(&[t]), || t.log_softmax(axis))?,
        })
    }

    #[pyo3(signature = (normalized_dims, weight = None, bias = None, eps = 1e-5))]
    fn layer_norm(
        &self,
        py: Python<'_>,
        normalized_dims: usize,
        weight: Option<&PyTensor>,
        bias: Option<&PyTensor>,
        eps: f64,
    ) -> PyRes<PyTensor> {
        let (t, w, b) = (
            self.t.clone(),
            weight.map(|w| w.t.clone()),
            bias.map(|b| b.t.clone()),
        );
        Ok(PyTensor {
            t: nogil(py, move || {
                t.layer_norm(normalized_dims, w.as_ref(), b.as_ref(), eps)
            })?,
        })
    }

    /// `loss(self, target)` for `mse`, `cross_entropy`, `binary_cross_entropy`.
    fn loss(&self, py: Python<'_>, name: &str, target: &PyTensor) -> PyRes<PyTensor> {
        let (t, y, name) = (self.t.clone(), target.t.clone(), name.to_string());
        Ok(PyTensor {
            t: nogil(py, move || match name.as_str() {
                "mse" => t.mse_loss(&y),
                "cross_entropy" => t.cross_entropy(&y),
                "binary_cross_entropy" => t.binary_cross_entropy(&y),
                other => Err(hologram_core::Error::InvalidArgument(format!(
                    "unknown loss '{other}'"
                ))),
            })?,
        })
    }

    /// Gradients: `relu`, `gelu`, `silu` (of the input), `sigmoid`, `tanh` (of the output).
    fn activation_backward(&self, name: &str, grad: &PyTensor) -> PyRes<PyTensor> {
        let (t, g) = (&self.t, &grad.t);
        wrap(match name {
            "relu" => t.relu_backward(g),
            "gelu" => t.gelu_backward(g),
            "silu" => t.silu_backward(g),
            "sigmoid" => Tensor::sigmoid_backward(t, g),
            "tanh" => Tensor::tanh_backward(t, g),
            other => {
                return Err(ValidationError::new_err(format!(
                    "no backward for '{other}'"
                )))
            }
        })
    }

    /// Gradient of softmax (or log-softmax with `log`) given its output `self`.
    #[pyo3(signature = (grad, axis, log = false))]
    fn softmax_backward(
        &self,
        py: Python<'_>,
        grad: &PyTensor,
        axis: isize,
        log: bool,
    ) -> PyRes<PyTensor> {
        let (y, g) = (self.t.clone(), grad.t.clone());
        Ok(PyTensor {
            t: nogil(py, move || {
                if log {
                    Tensor::log_softmax_backward(&y, &g, axis)
                } else {
                    Tensor::softmax_backward(&y, &g, axis)
                }
            })?,
        })
    }

    /// Scaled dot-product attention of `[B, H, L, D]` queries (`self`), keys and values (any
    /// strides, read in place): `(output, probabilities or None)`; the probabilities are kept
    /// only with `save_probs` (the backward op needs them).
    #[pyo3(signature = (k, v, causal, scale, tf32 = false, save_probs = false))]
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        py: Python<'_>,
        k: &PyTensor,
        v: &PyTensor,
        causal: bool,
        scale: f64,
        tf32: bool,
        save_probs: bool,
    ) -> PyRes<(PyTensor, Option<PyTensor>)> {
        let (q, k, v) = (self.t.clone(), k.t.clone(), v.t.clone());
        let p = precision(tf32);
        let a = nogil(py, move || {
            q.attention(&k, &v, causal, scale, p, save_probs)
        })?;
        Ok((PyTensor { t: a.output }, a.probs.map(|t| PyTensor { t })))
    }

    /// `(dq, dk, dv)` of [`attention`](Self::attention) from its saved probabilities and the
    /// output's gradient.
    #[pyo3(signature = (k, v, probs, grad, scale, tf32 = false))]
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        &self,
        py: Python<'_>,
        k: &PyTensor,
        v: &PyTensor,
        probs: &PyTensor,
        grad: &PyTensor,
        scale: f64,
        tf32: bool,
    ) -> PyRes<(PyTensor, PyTensor, PyTensor)> {
        let (q, k, v, pr, g) = (
            self.t.clone(),
            k.t.clone(),
            v.t.clone(),
            probs.t.clone(),
            grad.t.clone(),
        );
        let p = precision(tf32);
        let r = nogil(py, move || q.attention_backward(&k, &v, &pr, &g, scale, p))?;
        Ok((
            PyTensor { t: r.dq },
            PyTensor { t: r.dk },
            PyTensor { t: r.dv },
        ))
    }

    /// `(dx, dweight, dbias)` of layer norm over the last `normalized_dims` dims.
    #[pyo3(signature = (grad, normalized_dims, weight = None, eps = 1e-5))]
    fn layer_norm_backward(
        &self,
        py: Python<'_>,
        grad: &PyTensor,
        normalized_dims: usize,
        weight: Option<&PyTensor>,
        eps: f64,
    ) -> PyRes<(PyTensor, Option<PyTensor>, Option<PyTensor>)> {
        let (x, g, w) = (self.t.clone(), grad.t.clone(), weight.map(|w| w.t.clone()));
        let (dx, dw, db) = nogil(py, move || {
            x.layer_norm_backward(&g, normalized_dims, w.as_ref(), eps)
        })?;
        Ok((
            PyTensor { t: dx },
            dw.map(|t| PyTensor { t }),
            db.map(|t| PyTensor { t }),
        ))
    }

    /// Gradient of mean cross-entropy (logits `self`) or BCE (probabilities `self`).
    fn loss_backward(
        &self,
        py: Python<'_>,
        name: &str,
        target: &PyTensor,
        grad: f64,
    ) -> PyRes<PyTensor> {
        let (t, y, name) = (self.t.clone(), target.t.clone(), name.to_string());
        Ok(PyTensor {
            t: nogil(py, move || match name.as_str() {
                "cross_entropy" => t.cross_entropy_backward(&y, grad),
                "binary_cross_entropy" => t.binary_cross_entropy_backward(&y, grad),
                other => Err(hologram_core::Error::InvalidArgument(format!(
                    "no backward for loss '{other}'"
                ))),
            })?,
        })
    }

    /// Broadcasts a reduction's gradient back to `input_shape`.
    #[staticmethod]
    fn reduce_backward(
        grad: &PyTensor,
        input_shape: Vec<usize>,
        axes: Vec<isize>,
        keepdim: bool,
        mean: bool,
    ) -> PyRes<PyTensor> {
        wrap(Tensor::reduce_backward(
            &grad.t,
            &input_shape,
            &axes,
            keepdim,
            mean,
        ))
    }

    /// `(y, mean, rstd)`: layer norm over the last `normalized_dims` dims with its statistics
    /// (fused into one kernel on GPU backends).
    #[pyo3(signature = (normalized_dims, weight = None, bias = None, eps = 1e-5))]
    fn layer_norm_stats(
        &self,
        py: Python<'_>,
        normalized_dims: usize,
        weight: Option<&PyTensor>,
        bias: Option<&PyTensor>,
        eps: f64,
    ) -> PyRes<(PyTensor, PyTensor, PyTensor)> {
        let (x, w, b) = (
            self.t.clone(),
            weight.map(|w| w.t.clone()),
            bias.map(|b| b.t.clone()),
        );
        let (y, m, r) = nogil(py, move || {
            x.layer_norm_with_stats(normalized_dims, w.as_ref(), b.as_ref(), eps)
        })?;
        Ok((PyTensor { t: y }, PyTensor { t: m }, PyTensor { t: r }))
    }

    /// `(dx, dweight, dbias)` of layer norm from the statistics of `layer_norm_stats`.
    #[pyo3(signature = (grad, normalized_dims, mean, rstd, weight = None))]
    fn layer_norm_backward_stats(
        &self,
        py: Python<'_>,
        grad: &PyTensor,
        normalized_dims: usize,
        mean: &PyTensor,
        rstd: &PyTensor,
        weight: Option<&PyTensor>,
    ) -> PyRes<(PyTensor, Option<PyTensor>, Option<PyTensor>)> {
        let (x, g, m, r, w) = (
            self.t.clone(),
            grad.t.clone(),
            mean.t.clone(),
            rstd.t.clone(),
            weight.map(|w| w.t.clone()),
        );
        let (dx, dw, db) = nogil(py, move || {
            x.layer_norm_backward_with_stats(&g, normalized_dims, w.as_ref(), &m, &r)
        })?;
        Ok((
            PyTensor { t: dx },
            dw.map(|t| PyTensor { t }),
            db.map(|t| PyTensor { t }),
        ))
    }

    /// 2-D convolution (NCHW) with `weight` `[Cout, C/groups, kh, kw]` and optional `bias`.
    #[allow(clippy::too_many_arguments)] // torch's conv2d signature
    #[pyo3(signature = (weight, bias, stride, padding, dilation, groups, tf32 = false))]
    fn conv2d(
        &self,
        py: Python<'_>,
        weight: &PyTensor,
        bias: Option<&PyTensor>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        tf32: bool,
    ) -> PyRes<PyTensor> {
        let p = hologram_core::ops::Conv2d {
            stride,
            padding,
            dilation,
            groups,
            precision: precision(tf32),
        };
        let (x, w, b) = (self.t.clone(), weight.t.clone(), bias.map(|b| b.t.clone()));
        Ok(PyTensor {
            t: nogil(py, move || x.conv2d(&w, b.as_ref(), &p))?,
        })
    }

    /// `(dx, dweight, dbias)` of `conv2d` (each only where `want` asks).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (grad, weight, stride, padding, dilation, groups, want, tf32 = false))]
    fn conv2d_backward(
        &self,
        py: Python<'_>,
        grad: &PyTensor,
        weight: &PyTensor,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        want: [bool; 3],
        tf32: bool,
    ) -> PyRes<(Option<PyTensor>, Option<PyTensor>, Option<PyTensor>)> {
        let p = hologram_core::ops::Conv2d {
            stride,
            padding,
            dilation,
            groups,
            precision: precision(tf32),
        };
        let (x, g, w) = (self.t.clone(), grad.t.clone(), weight.t.clone());
        let (dx, dw, db) = nogil(py, move || x.conv2d_backward(&g, &w, &p, want))?;
        let wrap = |t: Option<Tensor>| t.map(|t| PyTensor { t });
        Ok((wrap(dx), wrap(dw), wrap(db)))
    }

    /// `(values, indices)` of a 2-D max pooling over the last two axes (indices, i64 flat
    /// positions in each plane, only when `indices` asks for them; else `None`).
    #[allow(clippy::too_many_arguments)]
    fn max_pool2d(
        &self,
        py: Python<'_>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
        indices: bool,
    ) -> PyRes<(PyTensor, Option<PyTensor>)> {
        let p = hologram_core::ops::MaxPool2d {
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode,
        };
        let x = self.t.clone();
        let (y, i) = nogil(py, move || x.max_pool2d(&p, indices))?;
        Ok((PyTensor { t: y }, i.map(|t| PyTensor { t })))
    }

    /// The input gradient of `max_pool2d` for an input of `input_shape`, this tensor being the
    /// output's gradient.
    #[allow(clippy::too_many_arguments)]
    fn max_pool2d_backward(
        &self,
        py: Python<'_>,
        indices: &PyTensor,
        input_shape: Vec<usize>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> PyRes<PyTensor> {
        let p = hologram_core::ops::MaxPool2d {
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode,
        };
        let (g, i) = (self.t.clone(), indices.t.clone());
        Ok(PyTensor {
            t: nogil(py, move || {
                Tensor::max_pool2d_backward(&g, &i, &input_shape, &p)
            })?,
        })
    }

    /// Random numbers (uniform in [0, 1), or standard normal) seeded by the value of this
    /// one-element integer tensor.
    fn rand_seeded(&self, shape: Vec<usize>, normal: bool, dtype: &str) -> PyRes<PyTensor> {
        let d = DType::parse(dtype).py()?;
        wrap(Tensor::rand_seeded(&self.t, &shape, normal, d))
    }

    /// `out[c] = self[c with c[axis] = index[c]]` (PyTorch's gather).
    fn gather(&self, axis: isize, index: &PyTensor) -> PyRes<PyTensor> {
        wrap(self.t.gather(axis, &index.t))
    }

    /// Slices along `axis` picked by a 1-D index (an embedding lookup).
    fn index_select(&self, axis: isize, index: &PyTensor) -> PyRes<PyTensor> {
        wrap(self.t.index_select(axis, &index.t))
    }

    /// A copy with `src` stored (or added, with `add`) where `index` points along `axis`.
    fn scatter(&self, axis: isize, index: &PyTensor, src: &PyTensor, add: bool) -> PyRes<PyTensor> {
        wrap(if add {
            self.t.scatter_add(axis, &index.t, &src.t)
        } else {
            self.t.scatter(axis, &index.t, &src.t)
        })
    }

    fn reshape(&self, shape: Vec<isize>) -> PyRes<PyTensor> {
        wrap(self.t.reshape(&shape))
    }

    fn permute(&self, dims: Vec<usize>) -> PyRes<PyTensor> {
        wrap(self.t.permute(&dims))
    }

    fn transpose(&self, a: isize, b: isize) -> PyRes<PyTensor> {
        wrap(self.t.transpose(a, b))
    }

    fn slice(&self, dim: isize, start: usize, end: usize, step: usize) -> PyRes<PyTensor> {
        wrap(self.t.slice(dim, start, end, step))
    }

    fn expand(&self, shape: Vec<usize>) -> PyRes<PyTensor> {
        wrap(self.t.expand(&shape))
    }

    fn unsqueeze(&self, dim: isize) -> PyRes<PyTensor> {
        wrap(self.t.unsqueeze(dim))
    }

    fn squeeze(&self, dim: isize) -> PyRes<PyTensor> {
        wrap(self.t.squeeze(dim))
    }

    /// The tensors joined along `axis`; with `view_if_adjacent`, the view covering them when
    /// they are adjacent views of one buffer (see `Tensor::cat_views`).
    #[staticmethod]
    #[pyo3(signature = (tensors, axis, view_if_adjacent = false))]
    fn cat(
        py: Python<'_>,
        tensors: Vec<PyRef<'_, PyTensor>>,
        axis: isize,
        view_if_adjacent: bool,
    ) -> PyRes<PyTensor> {
        let ts: Vec<Tensor> = tensors.iter().map(|t| t.t.clone()).collect();
        Ok(PyTensor {
            t: nogil(py, move || {
                let refs = ts.iter().collect::<Vec<_>>();
                if view_if_adjacent {
                    Tensor::cat_views(&refs, axis)
                } else {
                    Tensor::cat(&refs, axis)
                }
            })?,
        })
    }

    /// A copy on another executor (GPU to GPU between CUDA executors, else through the host).
    fn to_executor(&self, py: Python<'_>, exec: &PyExecutor) -> PyRes<PyTensor> {
        let (t, e) = (self.t.clone(), exec.e.clone());
        Ok(PyTensor {
            t: nogil(py, move || t.to_device(&e))?,
        })
    }

    /// `(address, is_host)` of element 0.
    fn data_ptr(&self, py: Python<'_>) -> PyRes<(u64, bool)> {
        let t = &self.t;
        run(py, t.executor(), work(&[t]), || t.data_ptr())
    }

    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
    ) -> PyRes<Bound<'py, PyAny>> {
        // The consumer reads on `stream`: order it after our queued work (CUDA), so the
        // exchange is safe without blocking the host. None or -1 asks for no ordering.
        let consumer = match stream {
            Some(s) if !s.is_none() => s.extract::<i64>().ok().filter(|&v| v >= 0),
            _ => None,
        };
        let out = crate::dlpack::export(py, &self.t)?;
        if let Some(c) = consumer {
            let exec = self.t.executor().clone();
            if let Some(interop) = exec.interop().filter(|i| i.dlpack_stream().is_some()) {
                py.detach(|| interop.order_before(c as u64))
                    .map_err(|e| crate::errors::to_py(e.into()))?;
            }
        }
        Ok(out)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        crate::dlpack::device_of(&self.t)
    }

    fn __repr__(&self) -> String {
        format!(
            "Tensor(shape={:?}, dtype={}, backend={})",
            self.t.shape(),
            self.t.dtype(),
            self.t.executor().backend_type()
        )
    }
}

/// The GEMM precision a `tf32` flag asks for.
fn precision(tf32: bool) -> hologram_backends::GemmPrecision {
    if tf32 {
        hologram_backends::GemmPrecision::Tf32
    } else {
        hologram_backends::GemmPrecision::Exact
    }
}
