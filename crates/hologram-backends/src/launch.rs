//! Checks every backend applies before a launch or a copy, and the launch timeout.

use std::sync::OnceLock;
use std::time::Duration;

use hologram_isa::{Kernel, ParamKind};

use crate::backend::{BufferArg, Capabilities, KernelArg, LaunchConfig};
use crate::error::{BackendError, Result};

/// Checks that `len` bytes at `offset` fit in a buffer of `size` bytes.
pub fn check_range(offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(BackendError::CopyOutOfRange { offset, len, size }),
    }
}

/// Checks that a buffer argument's range lies inside `size` bytes: backends call it again with
/// the size of their own memory type after downcasting, since a [`DeviceMemory`] implemented
/// outside this crate may report any size.
///
/// [`DeviceMemory`]: crate::DeviceMemory
pub fn check_buffer(arg: &BufferArg, size: usize) -> Result<()> {
    check_range(arg.offset, arg.len, size).map_err(|_| BackendError::CopyOutOfRange {
        offset: arg.offset,
        len: arg.len,
        size,
    })
}

/// Checks a launch: geometry against the device's limits, and each argument against its
/// parameter (kind, scalar type, buffer alignment and range).
pub fn check_launch(
    kernel: &Kernel,
    config: &LaunchConfig,
    args: &[KernelArg],
    caps: &Capabilities,
) -> Result<()> {
    let invalid = |reason: String| BackendError::InvalidLaunch {
        kernel: kernel.name.clone(),
        reason,
    };
    if config.block.contains(&0) {
        return Err(invalid(format!(
            "block size {:?} has a zero dimension",
            config.block
        )));
    }
    if config.block_lanes() > caps.max_block_lanes as u64 {
        return Err(invalid(format!(
            "block of {} lanes exceeds the device limit of {}",
            config.block_lanes(),
            caps.max_block_lanes
        )));
    }
    let total = config.grid_blocks().saturating_mul(config.block_lanes());
    if total > 1u64 << 32 {
        return Err(invalid(format!(
            "{total} lanes in one launch; the limit is 2^32 (%gid is u32)"
        )));
    }
    if kernel.facts.shared_bytes > caps.max_shared_bytes {
        return Err(invalid(format!(
            "{} bytes of .shared memory; the device allows {}",
            kernel.facts.shared_bytes, caps.max_shared_bytes
        )));
    }
    let bad_arg = |reason: String| BackendError::InvalidArgument {
        kernel: kernel.name.clone(),
        reason,
    };
    if args.len() != kernel.params.len() {
        let names: Vec<&str> = kernel.params.iter().map(|p| p.name.as_str()).collect();
        return Err(bad_arg(format!(
            "the kernel takes {} arguments ({}), got {}",
            names.len(),
            names.join(", "),
            args.len()
        )));
    }
    for (param, arg) in kernel.params.iter().zip(args) {
        match (&param.kind, arg) {
            (ParamKind::Scalar(ty), KernelArg::Scalar(v)) => {
                if v.ty() != *ty {
                    return Err(bad_arg(format!(
                        "'{}' must be a {ty} scalar, got {} {v}",
                        param.name,
                        v.ty()
                    )));
                }
            }
            (ParamKind::Buffer { elem, .. }, KernelArg::Buffer(b)) => {
                let size = elem.size_bytes();
                if b.offset % size != 0 || b.len % size != 0 {
                    return Err(bad_arg(format!(
                        "buffer '{}' of {elem} must start and end on {size}-byte element boundaries (offset {}, length {})",
                        param.name, b.offset, b.len
                    )));
                }
                check_range(b.offset, b.len, b.memory.size()).map_err(|_| {
                    bad_arg(format!(
                        "buffer '{}' range {}..{} exceeds its {}-byte allocation",
                        param.name,
                        b.offset,
                        b.offset.saturating_add(b.len),
                        b.memory.size()
                    ))
                })?;
            }
            (ParamKind::Scalar(ty), KernelArg::Buffer(_)) => {
                return Err(bad_arg(format!(
                    "'{}' is a {ty} scalar, but a buffer was passed",
                    param.name
                )));
            }
            (ParamKind::Buffer { elem, .. }, KernelArg::Scalar(v)) => {
                return Err(bad_arg(format!(
                    "'{}' is a buffer of {elem}, but the scalar {v} was passed",
                    param.name
                )));
            }
        }
    }
    Ok(())
}

/// The environment variable that sets the launch timeout of the process, in seconds (a decimal
/// number; `0` turns it off). A launch's own [`LaunchConfig::timeout`] takes precedence.
///
/// No backend lets a runaway kernel hang the caller: a kernel that runs past the timeout stops
/// with [`BackendError::LaunchTimeout`]. What is timed differs with what each device can see:
/// - **CPU:** each batch of blocks the interpreter runs together (up to 1024 lanes), checked at
///   backward branches; the other blocks of the launch stop at their next check.
/// - **CUDA:** each lane, from its start, read from the GPU's `%globaltimer` at backward
///   branches; a lane that times out stops the other lanes of the launch at their next check.
///   The host also stops waiting when the stream shows no end long after that (then the
///   context may be stuck, and the error says so).
/// - **wgpu:** WGSL has no clock, so each lane gets a budget of executed basic blocks,
///   [`WGPU_BLOCKS_PER_SECOND`] per second of timeout; the host also stops waiting (`poll` with
///   a timeout) and then reports the device as unusable.
pub const TIMEOUT_ENV: &str = "HOLOGRAM_LAUNCH_TIMEOUT_S";

/// The timeout when [`TIMEOUT_ENV`] is not set: 60 s. Far longer than any sensible block of a
/// GPU kernel runs (display drivers' watchdogs kill kernels after 2 to 5 s), so no real work is
/// cut short, and short enough that an endless loop in a test or a notebook ends in a minute
/// with an error instead of never.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Basic blocks per second of timeout that a wgpu lane may execute (2^26, about what a GPU lane
/// runs per second in a tight loop), so the default 60 s allows about 4 * 10^9.
pub const WGPU_BLOCKS_PER_SECOND: u64 = 1 << 26;

/// The process's launch timeout: [`TIMEOUT_ENV`] if it is set to a number of seconds, else
/// [`DEFAULT_TIMEOUT`]; `None` when turned off. Read once.
pub fn default_timeout() -> Option<Duration> {
    static TIMEOUT: OnceLock<Option<Duration>> = OnceLock::new();
    *TIMEOUT.get_or_init(|| match std::env::var(TIMEOUT_ENV) {
        Ok(text) => match parse_timeout(&text) {
            Some(t) => (!t.is_zero()).then_some(t),
            None => {
                tracing::warn!(
                    value = %text,
                    "{TIMEOUT_ENV} is not a number of seconds; using the default of {} s",
                    DEFAULT_TIMEOUT.as_secs()
                );
                Some(DEFAULT_TIMEOUT)
            }
        },
        Err(_) => Some(DEFAULT_TIMEOUT),
    })
}

/// Seconds as written in [`TIMEOUT_ENV`]: a finite, non-negative decimal number.
pub fn parse_timeout(text: &str) -> Option<Duration> {
    let s: f64 = text.trim().parse().ok()?;
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(1e9)))
}

/// The error of a launch of `kernel` that ran past `timeout`.
pub fn timeout_error(kernel: &Kernel, timeout: Duration, stuck: bool) -> BackendError {
    BackendError::LaunchTimeout {
        kernel: kernel.name.clone(),
        seconds: timeout.as_secs_f64(),
        stuck,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_seconds() {
        assert_eq!(parse_timeout("60"), Some(Duration::from_secs(60)));
        assert_eq!(parse_timeout(" 0.25 "), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("0"), Some(Duration::ZERO));
        assert_eq!(parse_timeout("-1"), None);
        assert_eq!(parse_timeout("soon"), None);
        assert_eq!(parse_timeout("inf"), None);
    }

    #[test]
    fn a_zero_timeout_turns_the_limit_off() {
        let c = LaunchConfig::linear(1, 1).with_timeout(Duration::ZERO);
        assert_eq!(c.effective_timeout(), None);
        let c = LaunchConfig::linear(1, 1).with_timeout(Duration::from_millis(5));
        assert_eq!(c.effective_timeout(), Some(Duration::from_millis(5)));
    }
}
