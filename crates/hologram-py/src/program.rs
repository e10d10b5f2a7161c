//! `hologram.asm(text)` and running programs from Python.

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_compiler::Canonical;
use hologram_core::named_args::{bind_by_name, parse_scalar};
use hologram_core::{Error, Executor};
use hologram_isa::{Kernel, ParamKind, Type};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::errors::{IntoPy, PyRes, ValidationError};
use crate::executor::nogil;
use crate::tensor::PyTensor;

/// A validated Atlas ISA kernel.
#[pyclass(name = "Program", module = "hologram._native", frozen)]
pub struct PyProgram {
    pub kernel: Kernel,
    /// The canonical form, made once: launches look the compiled kernel up by its digest.
    pub canonical: Canonical,
}

#[pymethods]
impl PyProgram {
    /// Parses and validates `.hasm` text (`str`, or `bytes` holding UTF-8); errors carry
    /// line:column (bytes that are not UTF-8: their offset). The GIL is released meanwhile.
    #[new]
    fn new(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyRes<Self> {
        let bytes: Vec<u8> = if let Ok(b) = text.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else if let Ok(s) = text.cast::<PyString>() {
            match s.to_cow() {
                Ok(s) => s.as_bytes().to_vec(),
                Err(e) => return Err(lone_surrogate(s, e)),
            }
        } else {
            return Err(PyTypeError::new_err(format!(
                "a program is .hasm text (str or bytes), not {}",
                text.get_type().name()?
            )));
        };
        py.detach(move || -> Result<PyProgram, hologram_core::Error> {
            let kernel = hologram_isa::assemble_bytes(&bytes)?;
            let canonical = Canonical::new(&kernel)?;
            Ok(PyProgram { kernel, canonical })
        })
        .map_err(crate::errors::to_py)
    }

    /// Kernel name.
    #[getter]
    fn name(&self) -> &str {
        &self.kernel.name
    }

    /// Parameters as `(name, kind, dtype)` with kind `buffer` or `scalar`.
    #[getter]
    fn params(&self) -> Vec<(String, &'static str, &'static str)> {
        self.kernel
            .params
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    if p.is_buffer() { "buffer" } else { "scalar" },
                    p.ty().name(),
                )
            })
            .collect()
    }

    /// The program as `.hasm` text.
    fn text(&self) -> String {
        hologram_isa::print(&self.kernel.to_program())
    }

    /// The canonical form as `.hasm` text.
    fn canonical(&self) -> String {
        hologram_isa::print(&self.canonical.kernel().to_program())
    }

    /// The canonical digest (hex), which keys kernel caches.
    #[getter]
    fn digest(&self) -> String {
        self.canonical.digest().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "Program('{}', {} instructions)",
            self.kernel.name,
            self.kernel.insts.len()
        )
    }
}

/// The error for a `str` that UTF-8 cannot encode (it holds a lone surrogate), at the first one.
fn lone_surrogate(text: &Bound<'_, PyString>, encode_error: PyErr) -> PyErr {
    // "surrogatepass" writes each surrogate as the three bytes UTF-8 forbids, so the first
    // invalid sequence is the first surrogate, and the decoder gives its line and column.
    let passed = text
        .call_method1("encode", ("utf-8", "surrogatepass"))
        .ok()
        .and_then(|b| b.cast::<PyBytes>().ok().map(|b| b.as_bytes().to_vec()));
    let located = passed.and_then(|bytes| {
        let at = std::str::from_utf8(&bytes).err()?.valid_up_to();
        let position = hologram_isa::text::decode(&bytes).err()?;
        let unit = match bytes.get(at..at + 3)? {
            [a, b, c] => (u32::from(a & 0x0f) << 12) | (u32::from(b & 0x3f) << 6) | u32::from(c & 0x3f),
            _ => return None,
        };
        Some(hologram_isa::ParseError {
            message: format!(
                "the text holds a lone surrogate (U+{unit:04X} at index {} of the string), which is not a character and has no UTF-8 encoding; remove it",
                bytes[..at].iter().filter(|&&b| b & 0xc0 != 0x80).count()
            ),
            ..position
        })
    });
    match located {
        Some(e) => crate::errors::to_py(hologram_isa::AsmError::Parse(e).into()),
        None => ValidationError::new_err(format!(
            "the program text cannot be encoded as UTF-8 (a lone surrogate?): {encode_error}"
        )),
    }
}

fn dims(v: &[u32], what: &str) -> PyRes<[u32; 3]> {
    if v.is_empty() || v.len() > 3 {
        return Err(ValidationError::new_err(format!(
            "{what} takes 1 to 3 sizes, got {}",
            v.len()
        )));
    }
    let mut d = [1u32; 3];
    d[..v.len()].copy_from_slice(v);
    Ok(d)
}

/// A tensor (or `Buffer`) bound to a buffer parameter: its dtype must match and it must be
/// contiguous.
fn buffer_arg(name: &str, elem: Type, v: &Bound<'_, PyAny>) -> hologram_core::Result<KernelArg> {
    let wrong = || Error::InvalidArgument(format!("'{name}' needs a Buffer or Tensor"));
    let native = v.getattr("_t").unwrap_or_else(|_| v.clone());
    let t: PyRef<'_, PyTensor> = native.extract().map_err(|_| wrong())?;
    if t.t.dtype().storage() != elem {
        return Err(Error::TypeMismatch(format!(
            "'{name}' is a buffer of {elem}, got a {} tensor",
            t.t.dtype()
        )));
    }
    if !t.t.is_contiguous() {
        return Err(Error::InvalidArgument(format!(
            "'{name}' must be contiguous"
        )));
    }
    t.t.kernel_arg()
}

pub fn run(
    py: Python<'_>,
    exec: &Executor,
    program: &PyProgram,
    grid: Vec<u32>,
    block: Vec<u32>,
    args: &Bound<'_, PyDict>,
    bounds_checks: bool,
) -> PyRes<()> {
    let given = args
        .iter()
        .map(|(key, value)| Ok((key.extract::<String>()?, value)))
        .collect::<PyRes<Vec<_>>>()?;
    // A Python error inside the conversion (a failing `str()`) is kept and raised as it is.
    let mut raised: Option<PyErr> = None;
    let bound = bind_by_name(&program.kernel, given, |p, v| {
        let converted = match p.kind {
            ParamKind::Scalar(ty) => v
                .str()
                .and_then(|s| s.extract::<String>())
                .map(|text| parse_scalar(&p.name, ty, &text).map(KernelArg::Scalar)),
            ParamKind::Buffer { elem, .. } => Ok(buffer_arg(&p.name, elem, &v)),
        };
        converted.unwrap_or_else(|e| {
            raised = Some(e);
            Err(Error::InvalidArgument("a Python error".into()))
        })
    });
    if let Some(e) = raised {
        return Err(e);
    }
    let kargs = bound.py()?;
    let mut config = LaunchConfig::new(dims(&grid, "grid")?, dims(&block, "block")?);
    if !bounds_checks {
        // SAFETY: `bounds_checks=False` is the Python caller's statement that the program stays
        // inside its buffers for these arguments; `Executor.run` documents that an
        // out-of-bounds access is then undefined behaviour (as with ctypes, Python cannot
        // check this promise).
        config = unsafe { config.without_bounds_checks() };
    }
    let (exec, kernel) = (exec.clone(), program.canonical.clone());
    nogil(py, move || {
        let compiled = exec.compile(&kernel)?;
        exec.launch(&compiled, &config, &kargs)
    })
}
