//! Errors of the command line.

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Reading or writing a file failed.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// A `.npy` file is malformed or unsupported.
    #[error("{0}")]
    Npy(String),
    /// The command line is inconsistent with the program.
    #[error("{0}")]
    Usage(String),
    /// The program does not assemble.
    #[error("{file}:{error}")]
    Asm {
        /// The file.
        file: String,
        /// Parse or validation error, starting with line:col.
        error: Box<hologram_isa::AsmError>,
    },
    /// The core reported an error.
    #[error(transparent)]
    Core(#[from] hologram_core::Error),
    /// Loading the conformance suite failed.
    #[error(transparent)]
    Suite(#[from] hologram_conformance::SuiteError),
    /// Tests failed.
    #[error("{0}")]
    Failed(String),
    /// Whoever read standard output closed it (`hologram asm F | head`); not reported.
    #[error("standard output was closed")]
    StdoutClosed,
    /// The launch failed; `outs` says what became of the `--out` files.
    #[error("the launch failed: {error}\n{outs}")]
    LaunchFailed {
        /// Why the launch failed.
        error: Box<hologram_core::Error>,
        /// Which `--out` files hold the buffers as the failed launch left them, or why they
        /// could not be written.
        outs: String,
    },
}
