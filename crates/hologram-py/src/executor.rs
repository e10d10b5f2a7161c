//! `hologram._native.Executor`

use hologram_core::{availability, availability_of, BackendType, DType, Executor, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{to_py, IntoPy, PyRes, ValidationError};
use crate::tensor::PyTensor;

/// Parses a dtype name (`f32`, `float32`, `bool`, ...).
pub fn dtype(name: &str) -> PyRes<DType> {
    DType::parse(name).py()
}

/// Runs `f` without the GIL (long work must not block other Python threads).
pub fn nogil<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> hologram_core::Result<T> + Send,
) -> PyRes<T> {
    py.detach(f).py()
}

/// Elements of work on the CPU backend below which a call keeps the GIL: the work takes less
/// time than releasing and re-taking the GIL (about 0.1-0.3 µs, more when other threads wait
/// for it), so releasing it would only slow the call. 2^15 f32 elements take several µs.
pub const KEEP_GIL_BELOW_ELEMENTS: usize = 1 << 15;

/// Runs `f`, releasing the GIL unless the work is short: under
/// [`KEEP_GIL_BELOW_ELEMENTS`] elements on the CPU backend, which runs it synchronously. On a
/// GPU backend a call may wait for the device, so it always releases the GIL.
pub fn run<T: Send>(
    py: Python<'_>,
    exec: &Executor,
    elements: usize,
    f: impl FnOnce() -> hologram_core::Result<T> + Send,
) -> PyRes<T> {
    if elements < KEEP_GIL_BELOW_ELEMENTS && exec.backend_type() == BackendType::Cpu {
        f().py()
    } else {
        nogil(py, f)
    }
}

/// The elements a call on `tensors` works through: the largest tensor, or pending expression
/// a tensor would run first.
pub fn work(tensors: &[&Tensor]) -> usize {
    tensors
        .iter()
        .map(|t| t.numel().max(t.pending_elements()))
        .max()
        .unwrap_or(0)
}

/// Runs kernels on one backend; owns its caching allocator and kernel cache.
#[pyclass(name = "Executor", module = "hologram._native", frozen)]
pub struct PyExecutor {
    pub e: Executor,
}

#[pymethods]
impl PyExecutor {
    /// Makes this executor's later work wait for everything queued so far on the CUDA stream
    /// `stream` (an integer handle), without blocking the host. No-op off CUDA.
    fn order_after_stream(&self, py: Python<'_>, stream: u64) -> PyRes<()> {
        let exec = self.e.clone();
        py.detach(|| exec.interop().map_or(Ok(()), |i| i.order_after(stream)))
            .map_err(|e| to_py(e.into()))
    }

    /// Makes later work on the CUDA stream `stream` wait for everything queued so far on this
    /// executor, without blocking the host. No-op off CUDA.
    fn order_before_stream(&self, py: Python<'_>, stream: u64) -> PyRes<()> {
        let exec = self.e.clone();
        py.detach(|| exec.interop().map_or(Ok(()), |i| i.order_before(stream)))
            .map_err(|e| to_py(e.into()))
    }

    /// `backend`: `auto` (HOLOGRAM_BACKEND, else CUDA, a GPU, else the CPU), `cpu`, `cuda`,
    /// `cuda:N` (the N-th GPU), `metal`, `vulkan` or `dx12`. Raises BackendUnavailableError
    /// saying why a backend cannot run.
    #[new]
    #[pyo3(signature = (backend = "auto"))]
    fn new(backend: &str) -> PyRes<Self> {
        let e = Executor::on(backend).py()?;
        Ok(PyExecutor { e })
    }

    /// The device: `cuda:1`, `cpu:0`, ...
    #[getter]
    fn device(&self) -> String {
        self.e.device().to_string()
    }

    /// Which of the backend's devices (the CUDA device ordinal; 0 elsewhere).
    #[getter]
    fn device_index(&self) -> usize {
        self.e.device().index
    }

    /// The backend's name (`cpu`, `cuda`, ...).
    #[getter]
    fn backend(&self) -> &'static str {
        self.e.backend_type().name()
    }

    /// The device: name, architecture, memory, compute units, driver.
    fn info<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        let i = self.e.info();
        let d = PyDict::new(py);
        d.set_item("backend", self.e.backend_type().name())?;
        d.set_item("name", i.name)?;
        d.set_item("arch", i.arch)?;
        d.set_item("memory_bytes", i.memory_bytes)?;
        d.set_item("compute_units", i.compute_units)?;
        d.set_item("driver", i.driver)?;
        d.set_item("host_memory", self.e.capabilities().host_memory)?;
        Ok(d)
    }

    /// Allocator, kernel-cache, backend (compiles, disk cache, code bytes, library vs generic
    /// launches) and launch counters.
    fn stats<'py>(&self, py: Python<'py>) -> PyRes<Bound<'py, PyDict>> {
        let a = self.e.allocator_stats();
        let k = self.e.kernel_cache_stats();
        let d = PyDict::new(py);
        d.set_item("allocations", a.allocations)?;
        d.set_item("cache_hits", a.cache_hits)?;
        d.set_item("device_allocations", a.device_allocations)?;
        d.set_item("bytes_in_use", a.bytes_in_use)?;
        d.set_item("bytes_reserved", a.bytes_reserved)?;
        d.set_item("bytes_cached", a.bytes_cached)?;
        d.set_item("peak_reserved", a.peak_reserved)?;
        d.set_item("kernels_compiled", k.compiles)?;
        d.set_item("kernel_cache_hits", k.hits)?;
        d.set_item("launch_cache_hits", k.launch_hits)?;
        d.set_item("launches", self.e.launch_count())?;
        let b = self.e.stats().backend;
        d.set_item("backend_compiles", b.compiles)?;
        d.set_item("backend_memory_hits", b.memory_hits)?;
        d.set_item("disk_cache_hits", b.disk_hits)?;
        d.set_item("disk_cache_writes", b.disk_writes)?;
        d.set_item("code_bytes", b.code_bytes)?;
        d.set_item("library_launches", b.library_launches)?;
        d.set_item("generic_launches", b.generic_launches)?;
        Ok(d)
    }

    /// Returns cached free memory to the device.
    fn empty_cache(&self) {
        self.e.empty_cache()
    }

    /// Waits for all submitted work (the CPU backend's work is done when its call returns:
    /// there the GIL is kept, like any call with no work).
    fn synchronize(&self, py: Python<'_>) -> PyRes<()> {
        let e = &self.e;
        run(py, e, 0, || e.synchronize())
    }

    /// A tensor holding a copy of `nbytes` bytes at host `address` (C order), which `owner`
    /// (a NumPy array) keeps valid during the call.
    fn tensor_from_address(
        &self,
        py: Python<'_>,
        address: usize,
        nbytes: usize,
        shape: Vec<usize>,
        dtype: &str,
        owner: Py<PyAny>,
    ) -> PyRes<PyTensor> {
        let dt = self::dtype(dtype)?;
        // SAFETY: `owner` keeps the memory alive for the whole call.
        let bytes = unsafe { host_bytes(address, nbytes)? };
        let e = self.e.clone();
        let t = nogil(py, move || Tensor::from_bytes(&e, bytes, &shape, dt))?;
        drop(owner);
        Ok(PyTensor { t })
    }

    /// A tensor filled with `value`.
    fn full(&self, py: Python<'_>, shape: Vec<usize>, value: f64, dtype: &str) -> PyRes<PyTensor> {
        let dt = self::dtype(dtype)?;
        let e = self.e.clone();
        Ok(PyTensor {
            t: nogil(py, move || Tensor::full(&e, &shape, value, dt))?,
        })
    }

    /// `start, start + step, ...` below `stop`.
    fn arange(&self, start: f64, stop: f64, step: f64, dtype: &str) -> PyRes<PyTensor> {
        Ok(PyTensor {
            t: Tensor::arange(&self.e, start, stop, step, self::dtype(dtype)?).py()?,
        })
    }

    /// Uniform [0, 1) (or standard normal with `normal`) numbers, reproducible for a seed.
    #[pyo3(signature = (shape, seed, dtype, normal = false))]
    fn random(&self, shape: Vec<usize>, seed: u64, dtype: &str, normal: bool) -> PyRes<PyTensor> {
        let dt = self::dtype(dtype)?;
        let t = if normal {
            Tensor::randn(&self.e, &shape, seed, dt)
        } else {
            Tensor::rand(&self.e, &shape, seed, dt)
        };
        Ok(PyTensor { t: t.py()? })
    }

    /// Runs a program: `grid` and `block` are 1-3 ints; `args` maps every parameter name to a
    /// Tensor/Buffer (buffer parameters, which must be contiguous) or a number (scalars).
    /// `bounds_checks=False` is a promise that the program stays inside its buffers (see
    /// `hologram.Executor.run`).
    #[pyo3(signature = (program, grid, block, args, bounds_checks = true))]
    fn run(
        &self,
        py: Python<'_>,
        program: &crate::program::PyProgram,
        grid: Vec<u32>,
        block: Vec<u32>,
        args: &Bound<'_, PyDict>,
        bounds_checks: bool,
    ) -> PyRes<()> {
        crate::program::run(py, &self.e, program, grid, block, args, bounds_checks)
    }

    fn __repr__(&self) -> String {
        format!(
            "Executor(backend='{}', device='{}')",
            self.e.backend_type(),
            self.e.info().name
        )
    }
}

/// The bytes at a host address (from `numpy.ndarray.ctypes.data`).
///
/// # Safety
/// `address..address + nbytes` must be readable host memory for the lifetime `'a`.
pub unsafe fn host_bytes<'a>(address: usize, nbytes: usize) -> PyRes<&'a [u8]> {
    if address == 0 && nbytes > 0 {
        return Err(ValidationError::new_err("null data address"));
    }
    if nbytes == 0 {
        return Ok(&[]);
    }
    // SAFETY: per the function's contract.
    Ok(unsafe { std::slice::from_raw_parts(address as *const u8, nbytes) })
}

/// The number of CUDA GPUs on this host (0 without a driver or GPU).
#[pyfunction]
pub fn cuda_device_count() -> usize {
    hologram_core::cuda_device_count()
}

/// The pool the CPU backend's parallel work runs on: `"rayon"`, or `"openmp:<path>"` once it
/// shares the process's OpenMP threads (see [`share_openmp_threads`]).
#[pyfunction]
pub fn cpu_thread_pool() -> String {
    pool_name(hologram_backends::cpu::thread_pool())
}

/// Runs the CPU backend's parallel work on the OpenMP runtime already loaded in this process
/// (PyTorch's), if any, instead of rayon's pool: the two pools would take the cores from each
/// other. Loads nothing; `HOLOGRAM_CPU_POOL=rayon` keeps rayon's pool. Returns the pool in use.
#[pyfunction]
pub fn share_openmp_threads() -> String {
    pool_name(hologram_backends::cpu::share_openmp_threads())
}

/// The BLAS library the CPU backend's f32/f64 GEMMs run through once the process's OpenMP
/// threads are shared (PyTorch's MKL, in `libtorch_cpu`), or `None` (the `gemm` crate).
#[pyfunction]
pub fn cpu_blas() -> Option<String> {
    hologram_backends::cpu::blas_library()
}

fn pool_name(pool: hologram_backends::cpu::ThreadPool) -> String {
    match pool {
        hologram_backends::cpu::ThreadPool::Rayon => "rayon".into(),
        hologram_backends::cpu::ThreadPool::OpenMp(path) => format!("openmp:{path}"),
    }
}

/// Every backend with its device or why it is unavailable: `[(name, available, detail)]`.
#[pyfunction]
pub fn backends() -> Vec<(String, bool, String)> {
    availability()
        .into_iter()
        .map(|a| match a.status {
            Ok(info) => (a.backend.name().to_string(), true, info.name),
            Err(reason) => (a.backend.name().to_string(), false, reason),
        })
        .collect()
}

/// Whether one backend (`cpu`, `cuda`, `vulkan`, ...) can run here: `(available, detail)`,
/// the device name or why not. Opens only that backend.
#[pyfunction]
pub fn backend_status(name: &str) -> PyRes<(bool, String)> {
    let kind = name.parse::<BackendType>().py()?;
    Ok(match availability_of(kind).status {
        Ok(info) => (true, info.name),
        Err(reason) => (false, reason),
    })
}

/// The backend `Executor('auto')` would pick.
#[pyfunction]
pub fn default_backend() -> PyRes<&'static str> {
    Ok(Executor::new_auto().py()?.backend_type().name())
}
