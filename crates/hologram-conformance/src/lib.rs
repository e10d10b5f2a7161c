//! # hologram-conformance
//!
//! Loads the conformance suite (`tests/conformance/*.hasm` with their `.json` specs) and runs it
//! on any [`hologram_backends::Backend`]. Written once; every backend runs the same files.
//!
//! ```no_run
//! let suite = hologram_conformance::Suite::load(hologram_conformance::default_dir())?;
//! let cpu = hologram_backends::CpuBackend::new();
//! let report = suite.run(&cpu);
//! assert!(report.all_passed(), "{}", report.summary());
//! # Ok::<(), hologram_conformance::SuiteError>(())
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cross;
pub mod data;
pub mod random;
pub mod requires;
mod run;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hologram_compiler::Canonical;
use hologram_isa::Kernel;
use serde_json::Value as Json;

pub use cross::{cross_check, CrossReport};
pub use run::{Outcome, Report, TestResult};

/// Problems loading the suite.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A program does not assemble.
    #[error("{path}: {message}")]
    Assemble {
        /// The program.
        path: PathBuf,
        /// The assembler's message.
        message: String,
    },
    /// A spec is malformed.
    #[error("{path}: {message}")]
    Spec {
        /// The spec file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The suite's folder in this repository.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance")
}

/// One test: a kernel and its spec.
#[derive(Debug, Clone)]
pub struct Case {
    /// File stem, e.g. `arith_i32`.
    pub name: String,
    /// The assembled kernel.
    pub kernel: Arc<Kernel>,
    /// Its canonical form, which backends compile.
    pub canonical: Canonical,
    /// The parsed `.json` spec.
    pub spec: Json,
}

/// All tests of a folder.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Tests sorted by name.
    pub cases: Vec<Case>,
}

impl Suite {
    /// Loads every `NAME.hasm` with its `NAME.json` from `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Suite, SuiteError> {
        let dir = dir.as_ref();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SuiteError::Io { path, source }
        };
        let mut cases = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("hasm") {
                continue;
            }
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            // Bytes, not a string: a file that is not UTF-8 is an assembly error located at
            // its first bad byte.
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            let kernel =
                hologram_isa::assemble_bytes(&bytes).map_err(|e| SuiteError::Assemble {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            let spec_path = path.with_extension("json");
            let spec_text = std::fs::read_to_string(&spec_path).map_err(io(&spec_path))?;
            let spec: Json = serde_json::from_str(&spec_text).map_err(|e| SuiteError::Spec {
                path: spec_path.clone(),
                message: e.to_string(),
            })?;
            let canonical = Canonical::new(&kernel).map_err(|e| SuiteError::Assemble {
                path: path.clone(),
                message: e.to_string(),
            })?;
            cases.push(Case {
                name,
                kernel: Arc::new(kernel),
                canonical,
                spec,
            });
        }
        cases.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Suite { cases })
    }

    /// Runs every test on a backend.
    pub fn run(&self, backend: &dyn hologram_backends::Backend) -> Report {
        run::run_suite(self, backend)
    }
}
