//! Errors of every backend.

/// What went wrong in a backend. Messages say what happened and, where it helps, what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot run on this machine (library, driver or device missing).
    #[error("the {backend} backend is not available: {reason}")]
    Unavailable {
        /// Backend name.
        backend: String,
        /// Why, e.g. "libcuda.so.1 was not found".
        reason: String,
    },
    /// `HOLOGRAM_BACKEND` or a backend name is not one Hologram knows.
    #[error("unknown backend '{0}' (expected auto, cpu, cuda, cuda:N, metal, vulkan or dx12)")]
    UnknownBackend(String),
    /// A kernel indexed outside an array; the launch stopped and nothing was written outside
    /// any buffer.
    #[error("out-of-bounds access in kernel '{kernel}': index {index} into '{array}', which has {len} elements")]
    OutOfBounds {
        /// Kernel name.
        kernel: String,
        /// Buffer parameter, `.shared` or `.scratch` array.
        array: String,
        /// The offending index.
        index: i128,
        /// The array's length in elements.
        len: u64,
    },
    /// Lanes of one block waited at different barriers.
    #[error("barrier divergence in kernel '{kernel}', block {block}: lanes wait at different barriers (instructions {pcs:?}); every live lane of a block must reach the same barrier")]
    BarrierDivergence {
        /// Kernel name.
        kernel: String,
        /// Linear block index.
        block: u64,
        /// The barrier instructions lanes were waiting at.
        pcs: Vec<u32>,
    },
    /// A kernel ran past the launch timeout (an endless loop, most likely) and was stopped.
    #[error("{}", timeout_message(kernel, *seconds, *stuck))]
    LaunchTimeout {
        /// Kernel name.
        kernel: String,
        /// The timeout in force, in seconds.
        seconds: f64,
        /// The device could not stop the kernel (it may still run): the backend refuses further
        /// work, and a new executor (for CUDA, a new process) is needed.
        stuck: bool,
    },
    /// The launch configuration cannot run (block too large, grid too large...).
    #[error("invalid launch of kernel '{kernel}': {reason}")]
    InvalidLaunch {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// An argument does not match its parameter.
    #[error("invalid argument for kernel '{kernel}': {reason}")]
    InvalidArgument {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A copy reaches past the end of a buffer.
    #[error("copy out of range: {len} bytes at offset {offset} of a {size}-byte buffer")]
    CopyOutOfRange {
        /// Offset in bytes.
        offset: usize,
        /// Length in bytes.
        len: usize,
        /// Buffer size in bytes.
        size: usize,
    },
    /// The device has no memory left for an allocation.
    #[error("out of memory: could not allocate {bytes} bytes on {device}")]
    OutOfMemory {
        /// Requested size.
        bytes: usize,
        /// Device name.
        device: String,
    },
    /// Code generation or the device compiler failed.
    #[error("compiling kernel '{kernel}' failed:\n{log}")]
    Compile {
        /// Kernel name.
        kernel: String,
        /// Compiler log.
        log: String,
    },
    /// The kernel needs something this device cannot do.
    #[error("kernel '{kernel}' needs {feature}, which is not supported on this device ({device})")]
    Unsupported {
        /// Kernel name.
        kernel: String,
        /// The missing feature, e.g. "f64 arithmetic".
        feature: String,
        /// Device name.
        device: String,
    },
    /// A buffer from another backend or executor was passed.
    #[error("buffer belongs to a different backend ({0}); copy it to this executor first")]
    ForeignBuffer(String),
    /// An error reported by the device driver.
    #[error("device error: {0}")]
    Device(String),
}

fn timeout_message(kernel: &str, seconds: f64, stuck: bool) -> String {
    let what = if stuck {
        "and the device could not stop it, so this backend refuses further work: create a new executor (for CUDA, restart the process)"
    } else {
        "and was stopped"
    };
    format!(
        "kernel '{kernel}' ran past the launch timeout of {seconds} s (an endless loop?) {what}. \
         If it really needs longer, raise the limit with HOLOGRAM_LAUNCH_TIMEOUT_S=<seconds> \
         (0 turns it off) or LaunchConfig::timeout"
    )
}

/// Result type of the backends.
pub type Result<T> = std::result::Result<T, BackendError>;
