//! `hologram._native`: the Rust side of the Python SDK. The `hologram` package wraps it.

// Every `unsafe` block says why it is sound (CI runs clippy with `-D warnings`).
#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

#[cfg(feature = "cuda")]
mod collective;
mod dlpack;
mod errors;
mod executor;
mod pinned;
mod plan;
mod program;
mod seed_ops;
mod tensor;
mod tensor_base;
mod torch_exchange;

use pyo3::prelude::*;

/// Imports an object with `__dlpack__` (NumPy, PyTorch, CuPy) without copying.
#[pyfunction]
#[pyo3(signature = (obj, cpu, cuda = None))]
fn from_dlpack(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    cpu: &executor::PyExecutor,
    cuda: Option<&executor::PyExecutor>,
) -> PyResult<tensor::PyTensor> {
    Ok(tensor::PyTensor {
        t: dlpack::import(py, obj, &cpu.e, cuda.map(|c| &c.e))?,
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<executor::PyExecutor>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<tensor_base::PyTensorBase>()?;
    m.add_class::<program::PyProgram>()?;
    m.add_class::<plan::PyRecording>()?;
    m.add_class::<plan::PyPlan>()?;
    m.add_class::<torch_exchange::PyTorchExchange>()?;
    m.add_class::<pinned::PyPinnedHostArray>()?;
    m.add_function(wrap_pyfunction!(executor::backends, m)?)?;
    m.add_function(wrap_pyfunction!(executor::default_backend, m)?)?;
    m.add_function(wrap_pyfunction!(executor::backend_status, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::op_names, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(pinned::read_pinned, m)?)?;
    m.add_function(wrap_pyfunction!(executor::cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(executor::cpu_thread_pool, m)?)?;
    m.add_function(wrap_pyfunction!(executor::cpu_blas, m)?)?;
    m.add_function(wrap_pyfunction!(executor::share_openmp_threads, m)?)?;
    #[cfg(feature = "cuda")]
    {
        m.add_class::<collective::PyCommunicator>()?;
        m.add_function(wrap_pyfunction!(collective::nccl_version, m)?)?;
        m.add_function(wrap_pyfunction!(collective::nccl_unique_id, m)?)?;
        m.add_function(wrap_pyfunction!(collective::nccl_group_start, m)?)?;
        m.add_function(wrap_pyfunction!(collective::nccl_group_end, m)?)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_submodule(&seed_ops::module(m.py())?)?;
    errors::register(m)
}
