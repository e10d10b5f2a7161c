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

use hologram_core::{BackendType, Executor};

use crate::error::CliError;

/// Opens an executor by name (`auto` for the best available backend).
pub fn executor(name: &str) -> Result<Executor, CliError> {
    if name.trim().eq_ignore_ascii_case("auto") {
        Ok(Executor::new_auto()?)
    } else {
        Ok(Executor::new_with_backend(name.parse::<BackendType>()?)?)
    }
}

/// Reads and assembles a `.hasm` file; errors carry `file:line:col`.
pub fn assemble_file(path: &std::path::Path) -> Result<hologram_isa::Kernel, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::Io(path.display().to_string(), e))?;
    hologram_isa::assemble_bytes(&bytes).map_err(|error| CliError::Asm {
        file: path.display().to_string(),
        error: Box::new(error),
    })
}
