//! `hologram._native.Communicator` and the NCCL functions: collectives across the GPUs of one
//! host (the `hologram.distributed` module wraps them).

use hologram_core::collective::{self, Communicator, ReduceOp, UniqueId};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{IntoPy, PyRes, ValidationError};
use crate::executor::PyExecutor;
use crate::tensor::PyTensor;

fn reduce_op(name: &str) -> PyRes<ReduceOp> {
    ReduceOp::parse(name).ok_or_else(|| {
        ValidationError::new_err(format!(
            "unknown reduction '{name}' (expected sum, mean, prod, max or min)"
        ))
    })
}

/// The loaded NCCL's version (`'2.21.5'`); raises BackendUnavailableError without NCCL.
#[pyfunction]
pub fn nccl_version() -> PyRes<String> {
    collective::nccl_version().py()
}

/// A new NCCL unique id (128 bytes): make it once, on rank 0, and pass it to every rank.
#[pyfunction]
pub fn nccl_unique_id<'py>(py: Python<'py>) -> PyRes<Bound<'py, PyBytes>> {
    let id = py
        .detach(|| UniqueId::new().map_err(hologram_core::Error::from))
        .py()?;
    Ok(PyBytes::new(py, &id.to_bytes()))
}

/// Starts an NCCL group: the collectives of several ranks issued by one thread run together
/// once `nccl_group_end` is called (`hologram.distributed.group()` pairs the two).
#[pyfunction]
pub fn nccl_group_start() -> PyRes<()> {
    hologram_backends::cuda::collective::group_start()
        .map_err(hologram_core::Error::from)
        .py()
}

/// Ends the group `nccl_group_start` began.
#[pyfunction]
pub fn nccl_group_end(py: Python<'_>) -> PyRes<()> {
    py.detach(|| {
        hologram_backends::cuda::collective::group_end().map_err(hologram_core::Error::from)
    })
    .py()
}

/// One rank of an NCCL communicator on a CUDA executor.
#[pyclass(name = "Communicator", module = "hologram._native", frozen)]
pub struct PyCommunicator {
    c: Communicator,
}

#[pymethods]
impl PyCommunicator {
    /// Rank `rank` of `size`, one process (or thread) per GPU; blocks until every rank joined
    /// with the same `unique_id` (the bytes of `nccl_unique_id()` made by rank 0).
    #[new]
    fn new(
        py: Python<'_>,
        executor: &PyExecutor,
        unique_id: &[u8],
        rank: usize,
        size: usize,
    ) -> PyRes<Self> {
        let id = UniqueId::from_bytes(unique_id)
            .map_err(hologram_core::Error::from)
            .py()?;
        let e = executor.e.clone();
        let c = py
            .detach(move || Communicator::init_rank(&e, &id, rank, size))
            .py()?;
        Ok(PyCommunicator { c })
    }

    /// One communicator per executor (each on its own GPU), all driven by this process; issue
    /// the ranks' calls inside `nccl_group_start()` .. `nccl_group_end()`.
    #[staticmethod]
    fn init_all(py: Python<'_>, executors: Vec<PyRef<'_, PyExecutor>>) -> PyRes<Vec<Self>> {
        let execs: Vec<_> = executors.iter().map(|e| e.e.clone()).collect();
        let comms = py.detach(move || Communicator::init_all(&execs)).py()?;
        Ok(comms.into_iter().map(|c| PyCommunicator { c }).collect())
    }

    /// This rank.
    #[getter]
    fn rank(&self) -> usize {
        self.c.rank()
    }

    /// The number of ranks.
    #[getter]
    fn size(&self) -> usize {
        self.c.size()
    }

    /// The executor this rank runs on.
    #[getter]
    fn executor(&self) -> PyExecutor {
        PyExecutor {
            e: self.c.executor().clone(),
        }
    }

    /// Combines every rank's `tensor` with `op` (`sum`, `mean`, `prod`, `max`, `min`) into it,
    /// in place; queued on the executor's stream.
    #[pyo3(signature = (tensor, op = "sum"))]
    fn all_reduce(&self, py: Python<'_>, tensor: &PyTensor, op: &str) -> PyRes<()> {
        let op = reduce_op(op)?;
        py.detach(|| self.c.all_reduce(&tensor.t, op)).py()
    }

    /// Overwrites every rank's `tensor` with rank `root`'s, in place.
    #[pyo3(signature = (tensor, root = 0))]
    fn broadcast(&self, py: Python<'_>, tensor: &PyTensor, root: usize) -> PyRes<()> {
        py.detach(|| self.c.broadcast(&tensor.t, root)).py()
    }

    /// Every rank's `tensor` stacked along the first axis in rank order.
    fn all_gather(&self, py: Python<'_>, tensor: &PyTensor) -> PyRes<PyTensor> {
        let t = py.detach(|| self.c.all_gather(&tensor.t)).py()?;
        Ok(PyTensor { t })
    }

    /// This rank's block (first axis split in `size` blocks) of every rank's `tensor`
    /// combined with `op`.
    #[pyo3(signature = (tensor, op = "sum"))]
    fn reduce_scatter(&self, py: Python<'_>, tensor: &PyTensor, op: &str) -> PyRes<PyTensor> {
        let op = reduce_op(op)?;
        let t = py.detach(|| self.c.reduce_scatter(&tensor.t, op)).py()?;
        Ok(PyTensor { t })
    }

    /// Raises the error an earlier collective ran into asynchronously, if any.
    fn check_async_error(&self) -> PyRes<()> {
        self.c.async_error().py()
    }

    fn __repr__(&self) -> String {
        format!(
            "Communicator(rank {} of {}, {})",
            self.c.rank(),
            self.c.size(),
            self.c.executor().device()
        )
    }
}
