//! Device-to-host reads into page-locked memory that NumPy arrays then own.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use hologram_core::HostBuffer;

use crate::executor::{run, work};
use crate::tensor::{typestr, PyTensor};

/// Page-locked host memory holding a tensor's elements, lent by the backend: NumPy views it
/// through `__array_interface__` and keeps this object as the array's base, so the memory goes
/// back to the backend's pool when the array is freed.
#[pyclass(name = "PinnedHostArray", module = "hologram._native", frozen)]
pub struct PyPinnedHostArray {
    /// Kept for its memory (given back when this object goes).
    _buf: HostBuffer,
    /// The first byte, taken from the buffer's writable view: NumPy writes through it.
    address: usize,
    shape: Vec<usize>,
    typestr: &'static str,
}

#[pymethods]
impl PyPinnedHostArray {
    /// NumPy's array interface (version 3): C-ordered, writable.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", self.typestr)?;
        d.set_item("data", (self.address, false))?;
        Ok(d)
    }
}

/// The tensor's elements in page-locked memory lent by its backend (see
/// `Tensor::pinned_buffer`), or None where the backend lends none for this read (the caller then
/// reads into an array of its own). Only the read releases the GIL: a read the backend lends
/// nothing for (any small one) returns at once.
#[pyfunction]
pub fn read_pinned(py: Python<'_>, tensor: &PyTensor) -> PyResult<Option<PyPinnedHostArray>> {
    let t = &tensor.t;
    let Some(typestr) = typestr(t.dtype()) else {
        return Ok(None);
    };
    let Some(mut buf) = t.pinned_buffer() else {
        return Ok(None);
    };
    let bytes = buf.as_mut_slice();
    run(py, t.executor(), work(&[t]), || t.read_bytes(bytes))?;
    let address = buf.as_mut_slice().as_mut_ptr() as usize;
    Ok(Some(PyPinnedHostArray {
        _buf: buf,
        address,
        shape: t.shape().to_vec(),
        typestr,
    }))
}
