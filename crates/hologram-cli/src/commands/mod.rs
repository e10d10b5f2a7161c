//! One module per subcommand.

pub mod asm;
pub mod bench;
pub mod bench_cuda;
pub mod conformance;
pub mod cross_check;
pub mod demo;
pub mod info;
pub mod info_stats;
pub mod run;

use hologram_core::Executor;

use crate::error::CliError;

/// Opens an executor by name: `auto` for the best available backend, a backend (`cpu`, `cuda`,
/// `vulkan`, ...) or a device (`cuda:1`).
pub fn executor(name: &str) -> Result<Executor, CliError> {
    Ok(Executor::on(name)?)
}

/// Reads and assembles a `.hasm` file; errors carry `file:line:col`.
pub fn assemble_file(path: &std::path::Path) -> Result<hologram_isa::Kernel, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::Io(path.display().to_string(), e))?;
    hologram_isa::assemble_bytes(&bytes).map_err(|error| CliError::Asm {
        file: path.display().to_string(),
        error: Box::new(error),
    })
}
