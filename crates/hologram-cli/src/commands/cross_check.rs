//! `hologram cross-check`: the conformance programs on two backends, every buffer compared.

use std::path::PathBuf;

use crate::error::CliError;

pub fn run(dir: Option<PathBuf>, reference: &str, backend: &str) -> Result<(), CliError> {
    let dir = dir.unwrap_or_else(hologram_conformance::default_dir);
    let suite = hologram_conformance::Suite::load(&dir)?;
    let reference = super::executor(reference)?;
    let candidate = super::executor(backend)?;
    let report = hologram_conformance::cross_check(
        &suite,
        reference.backend().as_ref(),
        candidate.backend().as_ref(),
    );
    out!("{}", report.summary())?;
    if report.mismatches() == 0 {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "{} of {} programs differ between the backends",
            report.mismatches(),
            report.results.len()
        )))
    }
}
