//! `hologram.asm(text)` and running programs from Python.

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_compiler::Canonical;
use hologram_core::Executor;
use hologram_isa::semantics::Value;
use hologram_isa::{Kernel, ParamKind};
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

pub fn run(
    py: Python<'_>,
    exec: &Executor,
    program: &PyProgram,
    grid: Vec<u32>,
    block: Vec<u32>,
    args: &Bound<'_, PyDict>,
    bounds_checks: bool,
) -> PyRes<()> {
    let k = &program.kernel;
    for key in args.keys() {
        let name: String = key.extract()?;
        if k.params.iter().all(|p| p.name != name) {
            return Err(ValidationError::new_err(format!(
                "kernel '{}' has no parameter '{name}'",
                k.name
            )));
        }
    }
    let mut kargs = Vec::new();
    for p in &k.params {
        let v = args
            .get_item(&p.name)?
            .ok_or_else(|| ValidationError::new_err(format!("missing argument '{}'", p.name)))?;
        match p.kind {
            ParamKind::Scalar(ty) => {
                let text: String = v.str()?.extract()?;
                let text = if text == "True" {
                    "true".into()
                } else if text == "False" {
                    "false".into()
                } else {
                    text
                };
                let val = Value::parse(ty, &text).ok_or_else(|| {
                    ValidationError::new_err(format!("'{}' needs a {ty}, got {text}", p.name))
                })?;
                kargs.push(KernelArg::Scalar(val));
            }
            ParamKind::Buffer { elem, .. } => {
                let t: PyRef<'_, PyTensor> = v
                    .getattr("_t")
                    .or_else(|_| Ok::<_, PyErr>(v.clone()))?
                    .extract()
                    .map_err(|_| {
                        ValidationError::new_err(format!("'{}' needs a Buffer or Tensor", p.name))
                    })?;
                if t.t.dtype().storage() != elem {
                    return Err(ValidationError::new_err(format!(
                        "'{}' is a buffer of {elem}, got a {} tensor",
                        p.name,
                        t.t.dtype()
                    )));
                }
                if !t.t.is_contiguous() {
                    return Err(ValidationError::new_err(format!(
                        "'{}' must be contiguous",
                        p.name
                    )));
                }
                kargs.push(t.t.kernel_arg().py()?);
            }
        }
    }
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
