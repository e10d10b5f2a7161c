//! The exception hierarchy: every error becomes a `hologram.HologramError` subclass.

use hologram_backends::BackendError;
use hologram_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    HologramError,
    PyException,
    "Base class of every Hologram error."
);
create_exception!(
    _native,
    BackendUnavailableError,
    HologramError,
    "The requested backend cannot run on this machine; the message says why."
);
create_exception!(
    _native,
    ValidationError,
    HologramError,
    "A program, argument, shape or dtype is invalid."
);
create_exception!(
    _native,
    CompileError,
    HologramError,
    "Compiling a kernel for the device failed; the message carries the compiler log."
);
create_exception!(
    _native,
    OutOfBoundsError,
    HologramError,
    "A kernel accessed an array out of bounds; nothing was written outside any buffer."
);
create_exception!(
    _native,
    OutOfMemoryError,
    HologramError,
    "The device ran out of memory."
);
create_exception!(
    _native,
    DeviceError,
    HologramError,
    "The device or its driver reported an error."
);

/// Converts a core error into the matching Python exception.
///
/// A `ValidationError` from `.hasm` text carries `line` and `column` (1-based; an error about
/// the kernel as a whole points at its name).
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    if let Error::Asm(a) = &e {
        // The assembler's own message, which starts with `line:col:` as Python callers expect.
        let err = ValidationError::new_err(a.to_string());
        let (line, column) = a.position();
        Python::attach(|py| {
            let v = err.value(py);
            // Setting an attribute on a fresh exception instance cannot fail in practice; if it
            // did, the message still carries `line:col:`.
            let _ = v.setattr("line", line);
            let _ = v.setattr("column", column);
        });
        return err;
    }
    match e {
        Error::Asm(_)
        | Error::Invalid(_)
        | Error::InvalidArgument(_)
        | Error::LengthMismatch(_)
        | Error::TypeMismatch(_)
        | Error::ShapeMismatch(_)
        | Error::DeviceMismatch(_) => ValidationError::new_err(msg),
        Error::Internal(_) => HologramError::new_err(msg),
        Error::Backend(b) => match b {
            BackendError::OutOfBounds { .. } => OutOfBoundsError::new_err(msg),
            BackendError::OutOfMemory { .. } => OutOfMemoryError::new_err(msg),
            BackendError::Compile { .. } => CompileError::new_err(msg),
            BackendError::Unavailable { .. } | BackendError::UnknownBackend(_) => {
                BackendUnavailableError::new_err(msg)
            }
            BackendError::InvalidArgument { .. }
            | BackendError::InvalidLaunch { .. }
            | BackendError::CopyOutOfRange { .. }
            | BackendError::ForeignBuffer(_) => ValidationError::new_err(msg),
            BackendError::Unsupported { .. } => ValidationError::new_err(msg),
            BackendError::BarrierDivergence { .. }
            | BackendError::LaunchTimeout { .. }
            | BackendError::Device(_) => DeviceError::new_err(msg),
        },
    }
}

/// `Result` of the bindings.
pub type PyRes<T> = PyResult<T>;

/// Maps any core result into a Python result.
pub trait IntoPy<T> {
    /// Converts the error into a Python exception.
    fn py(self) -> PyRes<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py(self) -> PyRes<T> {
        self.map_err(to_py)
    }
}

impl<T> IntoPy<T> for Result<T, BackendError> {
    fn py(self) -> PyRes<T> {
        self.map_err(|e| to_py(Error::Backend(e)))
    }
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("HologramError", py.get_type::<HologramError>())?;
    m.add(
        "BackendUnavailableError",
        py.get_type::<BackendUnavailableError>(),
    )?;
    m.add("ValidationError", py.get_type::<ValidationError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("OutOfBoundsError", py.get_type::<OutOfBoundsError>())?;
    m.add("OutOfMemoryError", py.get_type::<OutOfMemoryError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    Ok(())
}
