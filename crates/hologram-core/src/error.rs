//! Errors of the core.

use hologram_backends::BackendError;

/// What went wrong. Messages say what happened and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// `.hasm` text failed to parse or validate; the error carries line and column.
    #[error("invalid program: {0}")]
    Asm(#[from] hologram_isa::AsmError),
    /// A program (built in Rust, or a kernel assembled by hand) is not valid.
    #[error("invalid program: {0}")]
    Invalid(#[from] hologram_isa::ValidationError),
    /// An argument is not one the operation accepts (an unknown name, a pending expression
    /// where stored data is needed, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A state that should not happen: a bug in Hologram. Please report it with the message.
    #[error("internal error (a bug in Hologram, please report it): {0}")]
    Internal(String),
    /// Sizes that must agree do not.
    #[error("length mismatch: {0}")]
    LengthMismatch(String),
    /// A buffer of the wrong element type, or an operation a dtype does not support.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// Shapes that must agree (or broadcast) do not.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// Tensors on different executors were combined.
    #[error("device mismatch: {0}")]
    DeviceMismatch(String),
    /// An error from the backend: one that cannot run here ([`BackendError::Unavailable`]), an
    /// unknown backend name, an out-of-bounds access, out of memory, a compile failure, ...
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Result type of the core.
pub type Result<T> = std::result::Result<T, Error>;
