//! `hologram conformance`

use std::path::PathBuf;

use crate::error::CliError;

pub fn run(dir: Option<PathBuf>, backend: &str) -> Result<(), CliError> {
    let dir = dir.unwrap_or_else(hologram_conformance::default_dir);
    let suite = hologram_conformance::Suite::load(&dir)?;
    let exec = super::executor(backend)?;
    let report = suite.run(exec.backend().as_ref());
    out!("{}", report.summary())?;
    if exec.backend_type() == hologram_core::BackendType::Cuda {
        outln!("cuda kernel cache: {}", hologram_backends::cuda::stats())?;
    }
    if report.all_passed() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "{} of {} conformance tests failed",
            report.failed(),
            report.results.len()
        )))
    }
}
