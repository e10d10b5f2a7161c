//! DLPack: zero-copy exchange with NumPy, PyTorch and CuPy (host and CUDA memory).

use std::ffi::{c_void, CStr};

use hologram_core::{DType, Executor, Tensor};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::{IntoPy, PyRes, ValidationError};

pub(crate) const CPU: i32 = 1;
pub(crate) const CUDA: i32 = 2;
const CUDA_HOST: i32 = 3;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
pub(crate) struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

/// DLPack 1.x's managed tensor (what the C exchange table hands over and takes).
#[repr(C)]
pub(crate) struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

const NAME: &CStr = c"dltensor";
const USED: &CStr = c"used_dltensor";

pub(crate) fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::Bool => (6, 8),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => (0, d.size() as u8 * 8),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => (1, d.size() as u8 * 8),
        DType::F16 | DType::F32 | DType::F64 => (2, d.size() as u8 * 8),
        DType::BF16 => (4, 16),
    };
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

fn from_dl_dtype(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (6, 8) | (1, 1) => DType::Bool,
        (0, 8) => DType::I8,
        (0, 16) => DType::I16,
        (0, 32) => DType::I32,
        (0, 64) => DType::I64,
        (1, 8) => DType::U8,
        (1, 16) => DType::U16,
        (1, 32) => DType::U32,
        (1, 64) => DType::U64,
        (2, 16) => DType::F16,
        (2, 32) => DType::F32,
        (2, 64) => DType::F64,
        (4, 16) => DType::BF16,
        _ => return None,
    })
}

/// The DLPack device of a tensor's memory.
pub fn device_of(t: &Tensor) -> (i32, i32) {
    match t.executor().backend_type() {
        hologram_core::BackendType::Cuda => (CUDA, t.executor().backend().device_ordinal() as i32),
        _ => (CPU, 0),
    }
}

/// What an exported DLManagedTensor keeps alive.
pub(crate) struct Export {
    _tensor: Tensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

impl Export {
    /// The context of an export of the stored tensor `t` (its data at address `ptr`), leaked
    /// for the managed tensor to own, and the DLTensor describing `t`, whose shape and strides
    /// point into that context. Free the context with `Box::from_raw` (the deleters do).
    pub(crate) fn describe(t: &Tensor, ptr: u64) -> (*mut Export, DLTensor) {
        let ctx = Box::into_raw(Box::new(Export {
            shape: t.shape().iter().map(|&d| d as i64).collect(),
            strides: t.strides().iter().map(|&s| s as i64).collect(),
            _tensor: t.clone(),
        }));
        // SAFETY: `ctx` is valid and uniquely owned until a deleter frees it.
        let (shape, strides) = unsafe { ((*ctx).shape.as_mut_ptr(), (*ctx).strides.as_mut_ptr()) };
        let (device_type, device_id) = device_of(t);
        let dl = DLTensor {
            data: ptr as usize as *mut c_void,
            device: DLDevice {
                device_type,
                device_id,
            },
            ndim: t.rank() as i32,
            dtype: dl_dtype(t.dtype()),
            shape,
            strides,
            byte_offset: 0,
        };
        (ctx, dl)
    }
}

/// The deleter of our exports (either kind of managed tensor).
pub(crate) unsafe extern "C" fn delete_export<T: Managed>(m: *mut T) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` and its context were made by an export with Box::into_raw (`Export::describe`
    // and the managed tensor's box), and the consumer calls the deleter once.
    unsafe {
        drop(Box::from_raw((*m).context() as *mut Export));
        drop(Box::from_raw(m));
    }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with our capsule; only an unconsumed capsule still owns the
    // tensor (a consumer renames it to "used_dltensor" and calls the deleter itself).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

/// Exports a tensor as a `dltensor` capsule (its storage stays alive until the consumer is
/// done). Pending expressions are evaluated first.
pub fn export<'py>(py: Python<'py>, t: &Tensor) -> PyRes<Bound<'py, PyAny>> {
    let t = py.detach(|| t.realize()).py()?;
    let (ptr, _host) = py.detach(|| t.data_ptr()).py()?;
    let (ctx, dl_tensor) = Export::describe(&t, ptr);
    let managed = Box::new(DLManagedTensor {
        dl_tensor,
        manager_ctx: ctx as *mut c_void,
        deleter: Some(delete_export::<DLManagedTensor>),
    });
    let m = Box::into_raw(managed);
    // SAFETY: a new capsule owning `m` (freed by the destructor unless a consumer takes it).
    unsafe {
        let cap = ffi::PyCapsule_New(m as *mut c_void, NAME.as_ptr(), Some(capsule_destructor));
        if cap.is_null() {
            delete_export(m);
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}

/// A DLPack managed tensor (unversioned or versioned): its producer's deleter and context.
pub(crate) trait Managed: Sized {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    fn context(&self) -> *mut c_void;
}

impl Managed for DLManagedTensor {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }
}

impl Managed for DLManagedTensorVersioned {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn context(&self) -> *mut c_void {
        self.manager_ctx
    }
}

/// Keeps an imported managed tensor alive; calls its deleter (with the GIL) when dropped.
pub(crate) struct Import<T: Managed>(pub *mut T);

// SAFETY: the pointer is only used to call the producer's deleter, under the GIL.
unsafe impl<T: Managed> Send for Import<T> {}
// SAFETY: as for `Send`: shared references never touch the pointer.
unsafe impl<T: Managed> Sync for Import<T> {}

impl<T: Managed> Drop for Import<T> {
    fn drop(&mut self) {
        let m = self.0;
        Python::attach(|_| {
            // SAFETY: we own the managed tensor (a consumed capsule's, or one handed to us by
            // an exchange table) and call its deleter once.
            unsafe {
                if let Some(d) = (*m).deleter() {
                    d(m);
                }
            }
        });
    }
}

/// Imports anything with `__dlpack__` (NumPy, PyTorch, CuPy) without copying: host memory
/// onto `cpu`, CUDA memory onto `cuda` (which must be given for CUDA tensors).
pub fn import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    cpu: &Executor,
    cuda: Option<&Executor>,
) -> PyRes<Tensor> {
    // A capsule (what torch.utils.dlpack.to_dlpack hands over) is taken as it is, without
    // looking up `__dlpack__` on it: the failed lookup raises and clears an AttributeError,
    // about half a microsecond of every call that imports an input.
    // SAFETY: `obj` is a live Python object.
    let capsule = unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } != 0;
    let cap = if !capsule && obj.hasattr("__dlpack__")? {
        // A CUDA producer orders its queued work before our stream when told which it is.
        let on_cuda = obj.hasattr("__dlpack_device__")?
            && obj
                .call_method0("__dlpack_device__")?
                .extract::<(i32, i32)>()
                .is_ok_and(|(t, _)| t == CUDA);
        match cuda
            .and_then(|e| e.interop().and_then(|i| i.dlpack_stream()))
            .filter(|_| on_cuda)
        {
            Some(stream) => {
                let kwargs = pyo3::types::PyDict::new(py);
                kwargs.set_item("stream", stream)?;
                obj.call_method("__dlpack__", (), Some(&kwargs))?
            }
            None => obj.call_method0("__dlpack__")?,
        }
    } else {
        obj.clone()
    };
    // SAFETY: the capsule API is used as DLPack specifies: take the pointer of an unconsumed
    // "dltensor" capsule and rename it, after which we own the managed tensor.
    let m = unsafe {
        let p = cap.as_ptr();
        if ffi::PyCapsule_IsValid(p, NAME.as_ptr()) != 1 {
            return Err(ValidationError::new_err(
                "from_dlpack needs an object with __dlpack__ (or an unused DLPack capsule)",
            ));
        }
        let m = ffi::PyCapsule_GetPointer(p, NAME.as_ptr()) as *mut DLManagedTensor;
        if m.is_null() || ffi::PyCapsule_SetName(p, USED.as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        m
    };
    let owner = Import(m);
    // SAFETY: `m` is a valid DLManagedTensor owned by `owner`.
    let dl = unsafe { &(*m).dl_tensor };
    // SAFETY: `dl` is the producer's description of memory that `owner` keeps allocated.
    unsafe { import_dl(dl, Box::new(owner), cpu, cuda) }
}

/// A tensor of the memory `dl` describes, on `cpu` (host memory) or `cuda` (device memory).
///
/// # Safety
/// `dl` must be a valid DLTensor (DLPack's rules: `shape` and, when not null, `strides` have
/// `ndim` entries) whose memory is allocated, writable and readable for as long as `owner`
/// lives.
pub(crate) unsafe fn import_dl(
    dl: &DLTensor,
    owner: hologram_backends::MemoryOwner,
    cpu: &Executor,
    cuda: Option<&Executor>,
) -> PyRes<Tensor> {
    let dtype = from_dl_dtype(dl.dtype).ok_or_else(|| {
        ValidationError::new_err(format!(
            "unsupported DLPack dtype (code {}, {} bits)",
            dl.dtype.code, dl.dtype.bits
        ))
    })?;
    let ndim = dl.ndim.max(0) as usize;
    // SAFETY: DLPack guarantees `shape` has `ndim` entries, and `strides` too when not null.
    let shape: Vec<usize> = (0..ndim)
        .map(|i| unsafe { *dl.shape.add(i) }.max(0) as usize)
        .collect();
    let strides: Vec<i64> = if dl.strides.is_null() {
        hologram_core::tensor::layout::contiguous_strides(&shape)
            .iter()
            .map(|&s| s as i64)
            .collect()
    } else {
        // SAFETY: not null, so it has `ndim` entries (DLPack).
        (0..ndim).map(|i| unsafe { *dl.strides.add(i) }).collect()
    };
    if strides.iter().any(|&s| s < 0) {
        return Err(ValidationError::new_err(
            "negative strides are not supported; make the array contiguous first",
        ));
    }
    let layout = hologram_core::tensor::Layout {
        shape: shape.as_slice().into(),
        strides: strides.iter().map(|&s| s as usize).collect(),
        offset: 0,
    };
    let bytes = layout.span() * dtype.size();
    let address = (dl.data as u64)
        .checked_add(dl.byte_offset)
        .ok_or_else(|| {
            ValidationError::new_err("DLPack data pointer plus byte_offset overflows")
        })?;
    let exec = match dl.device.device_type {
        CPU | CUDA_HOST => cpu,
        CUDA => {
            let exec = cuda.ok_or_else(|| {
                ValidationError::new_err(
                    "a CUDA tensor needs a CUDA executor: from_dlpack(x, executor=Executor('cuda'))",
                )
            })?;
            let ours = exec.backend().device_ordinal();
            if dl.device.device_id < 0 || dl.device.device_id as u32 != ours {
                return Err(ValidationError::new_err(format!(
                    "the tensor is on CUDA device {}, the executor on device {ours}; move it \
                     with .to('cuda:{ours}') first (or set HOLOGRAM_CUDA_DEVICE)",
                    dl.device.device_id
                )));
            }
            exec
        }
        other => {
            return Err(ValidationError::new_err(format!(
                "DLPack device type {other} is not supported"
            )))
        }
    };
    if bytes == 0 {
        // No element to share: a fresh allocation, so that nothing claims memory the producer
        // may not have (an empty tensor's data pointer need not point at anything).
        drop(owner);
        return Tensor::from_bytes(exec, &[], &shape, dtype).py();
    }
    if address % dtype.size() as u64 != 0 {
        return Err(ValidationError::new_err(format!(
            "the tensor's data (address {address:#x}) is not aligned to its {}-byte elements; \
             pass a copy (x.copy() in NumPy, x.clone() in PyTorch)",
            dtype.size()
        )));
    }
    let interop = exec.interop().ok_or_else(|| {
        crate::errors::to_py(hologram_core::Error::InvalidArgument(format!(
            "the {} backend cannot use memory of other libraries (DLPack); copy through NumPy",
            exec.backend_type()
        )))
    })?;
    // SAFETY: the caller's contract: `bytes` (the span of the tensor's shape and strides) at
    // `address` are allocated on the device `dl` names, which was matched to `exec` above, and
    // stay so while `owner` lives. Unversioned DLPack has no read-only flag, so producers only
    // export writable memory (NumPy refuses read-only arrays); versioned imports check the flag. Concurrent writes by the producer while hologram uses
    // the tensor are the caller's to avoid, as with any DLPack consumer (PyTorch, NumPy).
    let memory = unsafe { interop.import_memory(address, bytes, owner) }
        .map_err(|e| crate::errors::to_py(e.into()))?;
    Tensor::from_external(exec, memory, dtype, layout).py()
}
