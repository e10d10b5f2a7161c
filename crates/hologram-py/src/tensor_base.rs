//! `hologram._native.TensorBase`: the native base class of `hologram.Tensor`.
//!
//! `hologram.Tensor` is a Python class (most of its API is Python), but its hottest calls, the
//! arithmetic operators, comparisons, unary math, `realize`, `sum` and `item`, are this class's
//! native methods and number slots: `a + b` runs one native call, with no Python frame and no
//! attribute writes around it. Each result is a new `hologram.Tensor` (made as this class, then
//! given `hologram.Tensor` as its class), whatever the class of the operands; `realize` returns
//! the tensor itself, which stands for its stored result from then on.

use hologram_core::{BinaryFn, Tensor, UnaryFn};
use hologram_isa::CmpOp;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use std::sync::OnceLock;

use crate::errors::{IntoPy, PyRes};
use crate::tensor::{binary_with, compare_with, PyTensor};

/// The native tensor a `hologram.Tensor` stands for (its `_t`), and the native half of its
/// methods. Made by `hologram.Tensor(data, dtype=None, device=None)`: a native tensor is taken
/// as it is, anything else goes through `hologram.asarray`.
#[pyclass(
    name = "TensorBase",
    module = "hologram._native",
    frozen,
    subclass,
    weakref
)]
pub struct PyTensorBase {
    /// The native tensor's value as made (a Rust struct here, not a Python object), so the
    /// methods of [`PyTensor`] run on it without a copy.
    t: PyTensor,
    /// The stored tensor `realize` made of `t`: from then on this object stands for it, so
    /// `realize` returns the object itself and a realized tensor is stored wherever it is passed.
    stored: OnceLock<PyTensor>,
    /// The native tensor object (`_t`) of `t`, made on first use: operators and `realize`
    /// never need it.
    native: PyOnceLock<Py<PyTensor>>,
    /// The native tensor object of `stored`, made on first use.
    native_stored: PyOnceLock<Py<PyTensor>>,
}

impl PyTensorBase {
    /// The native tensor this object stands for now.
    fn current(&self) -> &PyTensor {
        self.stored.get().unwrap_or(&self.t)
    }

    /// The core tensor.
    pub(crate) fn tensor(&self) -> &Tensor {
        &self.current().t
    }

    fn holding(t: Tensor) -> PyTensorBase {
        PyTensorBase {
            t: PyTensor { t },
            stored: OnceLock::new(),
            native: PyOnceLock::new(),
            native_stored: PyOnceLock::new(),
        }
    }

    /// The native object of the tensor this object stands for, if made.
    fn current_native<'a>(&'a self, py: Python<'_>) -> Option<&'a Py<PyTensor>> {
        match self.stored.get() {
            Some(_) => self.native_stored.get(py),
            None => self.native.get(py),
        }
    }

    fn of_native(py: Python<'_>, native: Bound<'_, PyTensor>) -> PyTensorBase {
        let made = PyTensorBase::holding(native.get().t.clone());
        let _ = made.native.set(py, native.unbind());
        made
    }
}

/// `hologram.tensor.Tensor`, looked up once.
fn public_class(py: Python<'_>) -> PyRes<&Bound<'_, PyType>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CLASS.import(py, "hologram.tensor", "Tensor")
}

/// A new `hologram.Tensor` for the result of an op.
fn public(py: Python<'_>, t: hologram_core::Result<Tensor>) -> PyRes<Bound<'_, PyAny>> {
    public_of(py, Ok(PyTensor { t: t.py()? }))
}

/// `hologram.Tensor` of a native result (as the methods of [`PyTensor`] return them): made as
/// this class, then given the Python subclass as its class, which costs less than calling it.
/// The first result goes through Python's own `__class__` assignment, which checks that the
/// two classes have the same layout (the subclass adds no fields); later ones make the same
/// switch without the checks and the audit event (about 330 instructions per result, in a tiny
/// op's `(x + 1).realize()` of about 7,000, profiled with callgrind).
fn public_of(py: Python<'_>, t: PyRes<PyTensor>) -> PyRes<Bound<'_, PyAny>> {
    static CHECKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let made = Bound::new(py, PyTensorBase::holding(t?.t))?.into_any();
    let class = public_class(py)?;
    if CHECKED.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: `made` is a new object of this class that nothing else references yet, and
        // Python accepted the assignment of `class` to an object of this class before (the
        // branch below), so the layouts agree. As `object.__class__`'s setter does, the new
        // type (a heap type) gains the instance's reference and the old one loses it.
        unsafe {
            let obj = made.as_ptr();
            let old = pyo3::ffi::Py_TYPE(obj);
            pyo3::ffi::Py_INCREF(class.as_ptr());
            (*obj).ob_type = class.as_ptr().cast();
            pyo3::ffi::Py_DECREF(old.cast());
        }
    } else {
        made.setattr(pyo3::intern!(py, "__class__"), class)?;
        CHECKED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(made)
}

impl PyTensorBase {
    fn binary<'py>(
        &self,
        py: Python<'py>,
        f: BinaryFn,
        other: &Bound<'py, PyAny>,
        reverse: bool,
    ) -> PyRes<Bound<'py, PyAny>> {
        public(py, binary_with(self.tensor(), f, other, reverse)?)
    }

    fn unary<'py>(&self, py: Python<'py>, f: UnaryFn) -> PyRes<Bound<'py, PyAny>> {
        public(py, self.tensor().unary(f))
    }
}

#[pymethods]
impl PyTensorBase {
    #[new]
    #[pyo3(signature = (data, dtype = None, device = None))]
    fn new(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyRes<Self> {
        if dtype.is_none() && device.is_none() {
            if let Ok(t) = data.cast::<PyTensor>() {
                return Ok(PyTensorBase::of_native(py, t.clone()));
            }
            if let Ok(b) = data.cast::<PyTensorBase>() {
                let b = b.get();
                let made = PyTensorBase::holding(b.tensor().clone());
                if let Some(n) = b.current_native(py) {
                    let _ = made.native.set(py, n.clone_ref(py));
                }
                return Ok(made);
            }
        }
        // Arrays, lists, numbers, or a conversion: what `hologram.asarray` makes of them.
        static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let asarray = ASARRAY.import(py, "hologram.tensor", "asarray")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", dtype)?;
        kwargs.set_item("device", device)?;
        let made = asarray.call((data,), Some(&kwargs))?;
        let inner = made.getattr(pyo3::intern!(py, "_t"))?;
        Ok(PyTensorBase::of_native(py, inner.cast_into::<PyTensor>()?))
    }

    /// The native tensor.
    #[getter]
    fn _t(&self, py: Python<'_>) -> PyRes<Py<PyTensor>> {
        let (cache, t) = match self.stored.get() {
            Some(stored) => (&self.native_stored, stored),
            None => (&self.native, &self.t),
        };
        cache
            .get_or_try_init(py, || Py::new(py, t.clone()))
            .map(|n| n.clone_ref(py))
    }

    /// Runs any pending expression; returns this tensor, stored from now on.
    fn realize<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        let me = slf.get();
        if me.stored.get().is_none() {
            // Two threads may both get here: the expression still runs once (the core tensor
            // keeps its result), and the first result set is the one kept.
            let stored = me.t.realize(py)?;
            let _ = me.stored.set(stored);
        }
        Ok(slf.clone().into_any())
    }

    /// The one element as a Python bool, int or float (by dtype).
    fn item<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.current().value(py)
    }

    /// The sum over ``axis`` (None: every axis; an int or a sequence of ints).
    #[pyo3(signature = (axis = None, keepdims = false))]
    fn sum<'py>(
        &self,
        py: Python<'py>,
        axis: Option<&Bound<'py, PyAny>>,
        keepdims: bool,
    ) -> PyRes<Bound<'py, PyAny>> {
        public_of(py, self.current().reduce(py, "sum", axis, keepdims))
    }

    fn __add__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Add, o, false)
    }

    fn __radd__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Add, o, true)
    }

    fn __sub__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Sub, o, false)
    }

    fn __rsub__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Sub, o, true)
    }

    fn __mul__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Mul, o, false)
    }

    fn __rmul__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Mul, o, true)
    }

    fn __mod__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Rem, o, false)
    }

    fn __and__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::And, o, false)
    }

    fn __or__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Or, o, false)
    }

    fn __xor__<'py>(&self, py: Python<'py>, o: &Bound<'py, PyAny>) -> PyRes<Bound<'py, PyAny>> {
        self.binary(py, BinaryFn::Xor, o, false)
    }

    fn __richcmp__<'py>(
        &self,
        py: Python<'py>,
        o: &Bound<'py, PyAny>,
        op: CompareOp,
    ) -> PyRes<Bound<'py, PyAny>> {
        let c = match op {
            CompareOp::Eq => CmpOp::Eq,
            CompareOp::Ne => CmpOp::Ne,
            CompareOp::Lt => CmpOp::Lt,
            CompareOp::Le => CmpOp::Le,
            CompareOp::Gt => CmpOp::Gt,
            CompareOp::Ge => CmpOp::Ge,
        };
        public(py, compare_with(self.tensor(), c, o)?)
    }

    fn __neg__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Neg)
    }

    fn __abs__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Abs)
    }

    fn __invert__<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Not)
    }

    // Element-wise math as methods (`x.exp()`), each one native call.

    fn abs<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Abs)
    }

    fn sqrt<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Sqrt)
    }

    fn rsqrt<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Rsqrt)
    }

    fn exp<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Exp)
    }

    fn log<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Log)
    }

    fn sin<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Sin)
    }

    fn cos<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Cos)
    }

    fn tan<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Tan)
    }

    fn tanh<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Tanh)
    }

    fn sigmoid<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Sigmoid)
    }

    fn relu<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Relu)
    }

    fn gelu<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Gelu)
    }

    fn silu<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Silu)
    }

    fn erf<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Erf)
    }

    fn floor<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Floor)
    }

    fn ceil<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Ceil)
    }

    fn round<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Round)
    }

    fn trunc<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Trunc)
    }

    fn square<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Square)
    }

    fn reciprocal<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyAny>> {
        self.unary(py, UnaryFn::Recip)
    }
}
