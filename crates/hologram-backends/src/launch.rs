//! Checks every backend applies before a launch or a copy.

use hologram_isa::{Kernel, ParamKind};

use crate::backend::{Capabilities, KernelArg, LaunchConfig};
use crate::error::{BackendError, Result};

/// Checks that `len` bytes at `offset` fit in a buffer of `size` bytes.
pub fn check_range(offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(BackendError::CopyOutOfRange { offset, len, size }),
    }
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
