//! Tensors to and from PyTorch through DLPack's C exchange table
//! (`torch.Tensor.__dlpack_c_exchange_api__`, DLPack 1.2+): C calls instead of a Python
//! `__dlpack__` call, a capsule and `torch.from_dlpack` per tensor, and the current CUDA stream
//! without a Python query. This is the per-call path of compiled torch graphs, where a small
//! model's whole replay costs a few of those Python round trips.
//!
//! The table's functions are called with the GIL held (they create and read Python objects);
//! none of them synchronizes: the one stream handshake per batch is ours.

use std::ffi::{c_void, CStr};
use std::sync::Mutex;

use hologram_core::{Executor, Tensor};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::dlpack::{
    self, delete_export, DLDataType, DLManagedTensorVersioned, DLPackVersion, DLTensor, Export,
    Import,
};
use crate::errors::{to_py, IntoPy, PyRes, ValidationError};
use crate::executor::{nogil, PyExecutor};
use crate::plan::PyPlan;
use crate::tensor::PyTensor;

const READ_ONLY: u64 = 1;

#[repr(C)]
struct ExchangeHeader {
    version: DLPackVersion,
    prev_api: *mut ExchangeHeader,
}

type FromPyObject = unsafe extern "C" fn(*mut c_void, *mut *mut DLManagedTensorVersioned) -> i32;
type ToPyObject = unsafe extern "C" fn(*mut DLManagedTensorVersioned, *mut *mut c_void) -> i32;
type ViewFromPyObject = unsafe extern "C" fn(*mut c_void, *mut DLTensor) -> i32;
type CurrentStream = unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> i32;

/// DLPack's `DLPackExchangeAPI` (dlpack.h 1.2+), field for field.
#[repr(C)]
struct ExchangeApi {
    header: ExchangeHeader,
    managed_tensor_allocator: *mut c_void,
    managed_tensor_from_py_object_no_sync: Option<FromPyObject>,
    managed_tensor_to_py_object_no_sync: Option<ToPyObject>,
    dltensor_from_py_object_no_sync: Option<ViewFromPyObject>,
    current_work_stream: Option<CurrentStream>,
}

const CAPSULE: &CStr = c"dlpack_exchange_api";

/// The layout a kept view was made for: a parameter whose data pointer, shape, strides and
/// dtype are unchanged is the same memory seen the same way.
#[derive(PartialEq)]
struct ViewKey {
    data: usize,
    byte_offset: u64,
    device: (i32, i32),
    dtype: DLDataType,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// PyTorch's exchange table for one executor: imports and exports with one stream handshake
/// per batch, and views of parameters kept from call to call.
#[pyclass(name = "TorchExchange", module = "hologram._native", frozen)]
pub struct PyTorchExchange {
    exec: Executor,
    api: *const ExchangeApi,
    /// The capsule that owns the table (torch keeps it for the process; held to be sure).
    _capsule: Py<PyAny>,
    /// Which inputs are parameters (kept), and the kept views, by position.
    kept: Mutex<Vec<Option<(ViewKey, Tensor)>>>,
    params: Vec<bool>,
    /// With `HOLOGRAM_EXCHANGE_PROFILE=1`: calls and seconds per phase of `run_first`.
    profile: Option<Mutex<[(u64, f64); PHASES.len()]>>,
}

/// The phases of [`PyTorchExchange::run_first`] its profile times.
const PHASES: [&str; 5] = ["import", "find", "replay", "release", "export"];

/// Times the phases of one call when profiling is on.
struct PhaseClock<'a> {
    profile: Option<&'a Mutex<[(u64, f64); PHASES.len()]>>,
    last: std::time::Instant,
}

impl PhaseClock<'_> {
    fn lap(&mut self, phase: usize) {
        if let Some(p) = self.profile {
            let now = std::time::Instant::now();
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            p[phase].0 += 1;
            p[phase].1 += (now - self.last).as_secs_f64();
            self.last = now;
        }
    }
}

// SAFETY: `api` points at a table of function pointers that torch allocates once per process
// and never frees or changes; it is only called with the GIL held.
unsafe impl Send for PyTorchExchange {}
// SAFETY: as for `Send`.
unsafe impl Sync for PyTorchExchange {}

impl PyTorchExchange {
    fn api(&self) -> &ExchangeApi {
        // SAFETY: checked non-null at construction; torch's table lives as long as the process.
        unsafe { &*self.api }
    }

    fn cuda_device(&self) -> Option<i32> {
        (self.exec.backend_type() == hologram_core::BackendType::Cuda)
            .then(|| self.exec.backend().device_ordinal() as i32)
    }

    /// Makes the executor's later work wait for torch's current stream (CUDA only).
    fn after_torch(&self) -> PyRes<()> {
        self.handshake(|i, stream| i.order_after(stream))
    }

    /// Makes torch's current stream wait for the executor's queued work (CUDA only).
    fn before_torch(&self) -> PyRes<()> {
        self.handshake(|i, stream| i.order_before(stream))
    }

    fn handshake(
        &self,
        order: impl FnOnce(&dyn hologram_backends::Interop, u64) -> hologram_backends::Result<()>,
    ) -> PyRes<()> {
        match (self.current_stream()?, self.exec.interop()) {
            (Some(stream), Some(i)) => order(i, stream).map_err(|e| to_py(e.into())),
            _ => Ok(()),
        }
    }

    /// Torch tensors of `ts`, after one handshake (torch waits for our queued work).
    fn export_many<'a>(
        &self,
        py: Python<'_>,
        ts: impl IntoIterator<Item = &'a Tensor>,
    ) -> PyRes<Vec<Py<PyAny>>> {
        self.before_torch()?;
        ts.into_iter().map(|t| self.export_one(py, t)).collect()
    }

    /// Torch's current stream on our device (CUDA only).
    fn current_stream(&self) -> PyRes<Option<u64>> {
        let (Some(device), Some(f)) = (self.cuda_device(), self.api().current_work_stream) else {
            return Ok(None);
        };
        let mut stream: *mut c_void = std::ptr::null_mut();
        // SAFETY: the table's function, called with the GIL held and a valid out pointer.
        if unsafe { f(dlpack::CUDA, device, &mut stream) } != 0 {
            return Err(Python::attach(PyErr::fetch));
        }
        Ok(Some(stream as u64))
    }

    /// The layout `x` has now, without taking a reference to its memory.
    fn view_key(&self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyRes<ViewKey> {
        let f = self
            .api()
            .dltensor_from_py_object_no_sync
            .ok_or_else(missing)?;
        let mut dl = std::mem::MaybeUninit::<DLTensor>::uninit();
        // SAFETY: a live object and an out pointer to a DLTensor; on success the DLTensor is
        // filled and its arrays stay valid while `x` lives (we copy them out at once).
        if unsafe { f(x.as_ptr() as *mut c_void, dl.as_mut_ptr()) } != 0 {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: filled by the successful call above.
        let dl = unsafe { dl.assume_init() };
        let ndim = dl.ndim.max(0) as usize;
        // SAFETY: DLPack: `shape` has `ndim` entries, `strides` too when not null.
        let shape = (0..ndim).map(|i| unsafe { *dl.shape.add(i) }).collect();
        let strides = if dl.strides.is_null() {
            Vec::new()
        } else {
            // SAFETY: as above.
            (0..ndim).map(|i| unsafe { *dl.strides.add(i) }).collect()
        };
        Ok(ViewKey {
            data: dl.data as usize,
            byte_offset: dl.byte_offset,
            device: (dl.device.device_type, dl.device.device_id),
            dtype: dl.dtype,
            shape,
            strides,
        })
    }

    /// A Hologram tensor of torch tensor `x`'s memory (zero-copy).
    fn import_one(&self, py: Python<'_>, x: &Bound<'_, PyAny>) -> PyRes<Tensor> {
        let f = self
            .api()
            .managed_tensor_from_py_object_no_sync
            .ok_or_else(missing)?;
        let mut m: *mut DLManagedTensorVersioned = std::ptr::null_mut();
        // SAFETY: a live object and an out pointer; on success we own `m`.
        if unsafe { f(x.as_ptr() as *mut c_void, &mut m) } != 0 || m.is_null() {
            return Err(PyErr::fetch(py));
        }
        let owner = Import(m);
        // SAFETY: `m` is the valid managed tensor `owner` owns.
        let (dl, flags, major) = unsafe { (&(*m).dl_tensor, (*m).flags, (*m).version.major) };
        if major != 1 {
            return Err(ValidationError::new_err(format!(
                "DLPack major version {major} is not supported (1 is)"
            )));
        }
        if flags & READ_ONLY != 0 {
            return Err(ValidationError::new_err(
                "the tensor's memory is read-only; pass a copy",
            ));
        }
        let cuda = self.cuda_device().map(|_| &self.exec);
        if cuda.is_some() && dl.device.device_type != dlpack::CUDA {
            return Err(ValidationError::new_err(
                "a host tensor given to a CUDA executor's exchange",
            ));
        }
        // SAFETY: the producer's DLTensor, kept allocated by `owner` (its deleter runs when
        // the imported memory is dropped).
        unsafe { dlpack::import_dl(dl, Box::new(owner), &self.exec, cuda) }
    }

    /// A torch tensor of Hologram tensor `t` (zero-copy; `t`'s storage stays alive with it).
    fn export_one(&self, py: Python<'_>, t: &Tensor) -> PyRes<Py<PyAny>> {
        let f = self
            .api()
            .managed_tensor_to_py_object_no_sync
            .ok_or_else(missing)?;
        let t = match t.is_lazy() {
            false => t.clone(),
            true => py.detach(|| t.realize()).py()?,
        };
        let (ptr, _host) = t.data_ptr().py()?;
        let (ctx, dl_tensor) = Export::describe(&t, ptr);
        let m = Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 1 },
            manager_ctx: ctx as *mut c_void,
            deleter: Some(delete_export::<DLManagedTensorVersioned>),
            flags: 0,
            dl_tensor,
        }));
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid managed tensor whose ownership passes to torch on success (torch
        // calls the deleter when its tensor dies); on failure it is still ours to delete.
        unsafe {
            if f(m, &mut out) != 0 || out.is_null() {
                let err = PyErr::fetch(py);
                delete_export(m);
                return Err(err);
            }
            Ok(Bound::from_owned_ptr(py, out as *mut ffi::PyObject).unbind())
        }
    }
}

fn missing() -> PyErr {
    ValidationError::new_err("PyTorch's DLPack exchange table lacks a function this path needs")
}

#[pymethods]
impl PyTorchExchange {
    /// `exchange`: `torch.Tensor.__dlpack_c_exchange_api__`; `params[i]`: input `i` is a
    /// parameter, whose view is kept while its memory and layout stay the same.
    #[new]
    #[pyo3(signature = (executor, exchange, params = None))]
    fn new(
        executor: &PyExecutor,
        exchange: &Bound<'_, PyAny>,
        params: Option<Vec<bool>>,
    ) -> PyRes<Self> {
        // SAFETY: checks that `exchange` is a capsule of that name before reading its pointer.
        let api = unsafe {
            let p = exchange.as_ptr();
            if ffi::PyCapsule_IsValid(p, CAPSULE.as_ptr()) != 1 {
                return Err(ValidationError::new_err(
                    "expected torch.Tensor.__dlpack_c_exchange_api__ (a dlpack_exchange_api capsule)",
                ));
            }
            ffi::PyCapsule_GetPointer(p, CAPSULE.as_ptr()) as *const ExchangeApi
        };
        // SAFETY: a non-null pointer from a valid capsule is the producer's table.
        if api.is_null() || unsafe { (*api).header.version.major } != 1 {
            return Err(ValidationError::new_err(
                "PyTorch's DLPack exchange table has another major version than 1",
            ));
        }
        let params = params.unwrap_or_default();
        Ok(PyTorchExchange {
            exec: executor.e.clone(),
            api,
            _capsule: exchange.clone().unbind(),
            kept: Mutex::new((0..params.len()).map(|_| None).collect()),
            params,
            profile: (std::env::var("HOLOGRAM_EXCHANGE_PROFILE").as_deref() == Ok("1"))
                .then(|| Mutex::new([(0, 0.0); PHASES.len()])),
        })
    }

    /// Hologram views of torch tensors `xs`; on CUDA the executor's later work first waits for
    /// torch's current stream (one handshake for the batch). Parameters' views are kept.
    fn import_all(&self, py: Python<'_>, xs: Vec<Bound<'_, PyAny>>) -> PyRes<Vec<PyTensor>> {
        self.after_torch()?;
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::with_capacity(xs.len());
        for (k, x) in xs.iter().enumerate() {
            if !self.params.get(k).copied().unwrap_or(false) {
                out.push(PyTensor {
                    t: self.import_one(py, x)?,
                });
                continue;
            }
            let key = self.view_key(py, x)?;
            if let Some((have, t)) = kept.get(k).and_then(Option::as_ref) {
                if *have == key {
                    out.push(PyTensor { t: t.clone() });
                    continue;
                }
            }
            let t = self.import_one(py, x)?;
            if let Some(slot) = kept.get_mut(k) {
                *slot = Some((key, t.clone()));
            }
            out.push(PyTensor { t });
        }
        Ok(out)
    }

    /// The per-call path of a compiled graph in one native call: imports `xs` (then appends
    /// `extra`), replays the first of `plans` that accepts them and whose outputs are free,
    /// and exports its outputs (`alias` as [`PyPlan::run`]). Returns `(index of the plan,
    /// torch outputs)`, or `None` when no plan can replay these inputs.
    #[pyo3(signature = (plans, xs, alias, extra = Vec::new()))]
    fn run_first(
        &self,
        py: Python<'_>,
        plans: Vec<PyRef<'_, PyPlan>>,
        xs: Vec<Bound<'_, PyAny>>,
        alias: Vec<bool>,
        extra: Vec<PyRef<'_, PyTensor>>,
    ) -> PyRes<Option<(usize, Vec<Py<PyAny>>)>> {
        let mut clock = PhaseClock {
            profile: self.profile.as_ref(),
            last: std::time::Instant::now(),
        };
        let mut inputs: Vec<Tensor> = self.import_all(py, xs)?.into_iter().map(|t| t.t).collect();
        inputs.extend(extra.iter().map(|t| t.t.clone()));
        clock.lap(0);
        let Some(k) = plans
            .iter()
            .position(|p| p.plan.accepts(&inputs) && p.plan.outputs_free())
        else {
            return Ok(None);
        };
        clock.lap(1);
        let plan = &plans[k].plan;
        let outs = nogil(py, || plan.run_with(&inputs, &alias))?;
        clock.lap(2);
        drop(inputs);
        clock.lap(3);
        let outs = self.export_many(py, &outs)?;
        clock.lap(4);
        Ok(Some((k, outs)))
    }

    /// With `HOLOGRAM_EXCHANGE_PROFILE=1` when this exchange was made: `{phase: (calls,
    /// seconds)}` of [`run_first`](Self::run_first) so far (import, find, replay, release,
    /// export); else `None`.
    fn profile(&self) -> Option<std::collections::HashMap<&'static str, (u64, f64)>> {
        let p = self
            .profile
            .as_ref()?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Some(PHASES.iter().copied().zip(p.iter().copied()).collect())
    }

    /// Torch tensors of Hologram tensors `ts`; on CUDA torch's current stream first waits for
    /// the executor's queued work (one handshake for the batch).
    fn export_all(&self, py: Python<'_>, ts: Vec<PyRef<'_, PyTensor>>) -> PyRes<Vec<Py<PyAny>>> {
        self.export_many(py, ts.iter().map(|t| &t.t))
    }
}
