//! Binds a launch's arguments to the views the interpreter and the native loops read, and says
//! which overlaps between buffers the parallel paths can tolerate.

use hologram_isa::{Kernel, ParamKind};
use smallvec::SmallVec;

use super::memops::ArrayView;
use super::CpuMemory;
use crate::backend::KernelArg;
use crate::error::{BackendError, Result};
use crate::launch::check_buffer;

/// A launch's arguments as the CPU sees them.
pub(crate) struct Bound {
    /// One view per parameter (scalar parameters get an empty view); `racy` is false.
    pub globals: SmallVec<[ArrayView; 8]>,
    /// Each scalar parameter's bits (`None` for buffers).
    pub scalars: SmallVec<[Option<u64>; 8]>,
    /// Each buffer parameter's element size in bytes (0 for scalars).
    pub sizes: SmallVec<[usize; 8]>,
}

/// Binds `args` (already checked against the kernel's parameters by `check_launch`) for batches
/// of `lanes` lanes. A buffer whose address is not a multiple of its element size (imported
/// memory) is an error: the lane loops and atomics read whole, aligned elements.
pub(crate) fn bind(
    kernel: &Kernel,
    args: &[KernelArg],
    lanes: usize,
    memory: impl Fn(&crate::backend::Memory) -> Result<&CpuMemory>,
) -> Result<Bound> {
    let mut bound = Bound {
        globals: SmallVec::with_capacity(args.len()),
        scalars: SmallVec::with_capacity(args.len()),
        sizes: SmallVec::with_capacity(args.len()),
    };
    for (param, arg) in kernel.params.iter().zip(args) {
        match (arg, param.kind) {
            (KernelArg::Buffer(b), ParamKind::Buffer { elem, .. }) => {
                let m = memory(&b.memory)?;
                // Against the allocation's own size: `check_launch` could only ask the
                // `Memory` trait object, which need not be this allocation.
                check_buffer(b, m.len())?;
                let size = elem.size_bytes();
                // SAFETY: offset + len fits in the allocation (checked just above).
                let base = unsafe { m.as_ptr().add(b.offset) };
                if (base as usize) % size != 0 {
                    return Err(BackendError::InvalidArgument {
                        kernel: kernel.name.clone(),
                        reason: format!(
                            "buffer '{}' of {elem} starts at address {base:p}, not a multiple of its {size}-byte elements (imported memory must be aligned to its element size)",
                            param.name
                        ),
                    });
                }
                bound.globals.push(ArrayView {
                    base,
                    len: (b.len / size) as u64,
                    per_lane: false,
                    lanes,
                    racy: false,
                });
                bound.scalars.push(None);
                bound.sizes.push(size);
            }
            (KernelArg::Scalar(v), _) => {
                bound.globals.push(ArrayView::empty(lanes));
                bound.scalars.push(Some(v.to_bits()));
                bound.sizes.push(0);
            }
            _ => {
                return Err(BackendError::Device(
                    "internal error: argument kind changed after validation".into(),
                ))
            }
        }
    }
    Ok(bound)
}

/// The bytes `[start, end)` of `elems` elements of a buffer view.
pub(crate) fn bytes_of(view: &ArrayView, size: usize, elems: usize) -> (usize, usize) {
    let start = view.base as usize;
    (start, start.saturating_add(elems.saturating_mul(size)))
}

/// True when two byte ranges share a byte.
pub(crate) fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// The whole bound range of parameter `p` in bytes (empty for scalars).
pub(crate) fn whole(globals: &[ArrayView], sizes: &[usize], p: usize) -> (usize, usize) {
    let v = &globals[p];
    bytes_of(v, sizes[p], v.len as usize)
}

/// Which buffers blocks running on several threads may race on: those the kernel writes
/// (`written[p]`) unless every access indexes them with the lane's own `%gid`
/// (`gid_private[p]`: each element then belongs to one lane), and those that overlap another
/// buffer of which one is written. Their accesses must be relaxed atomics; no other thread
/// writes what the others touch, so plain copies cannot race there. `None` when a buffer
/// overlaps a written one other than element for element (another element size, or elements
/// at other addresses): racing atomics would overlap partly, which Rust forbids, so the launch
/// runs on one thread.
pub(crate) fn racy_buffers(
    globals: &[ArrayView],
    sizes: &[usize],
    written: &[bool],
    gid_private: &[bool],
) -> Option<Vec<bool>> {
    let buffers: Vec<usize> = (0..sizes.len())
        .filter(|&p| sizes[p] != 0 && globals[p].len != 0)
        .collect();
    let is_written = |p: usize| written.get(p).copied().unwrap_or(true);
    let mut racy: Vec<bool> = (0..sizes.len())
        .map(|p| is_written(p) && !gid_private.get(p).copied().unwrap_or(false))
        .collect();
    let writes: Vec<usize> = buffers.iter().copied().filter(|&p| is_written(p)).collect();
    // Launches have a handful of buffers; the quadratic check is a few dozen compares. Only
    // bytes of written buffers are written, so a buffer that overlaps none is only read.
    for &w in &writes {
        for &q in &buffers {
            if q == w || !overlaps(whole(globals, sizes, w), whole(globals, sizes, q)) {
                continue;
            }
            let apart = (globals[w].base as usize).abs_diff(globals[q].base as usize);
            if sizes[w] != sizes[q] || apart % sizes[w] != 0 {
                return None;
            }
            // Another parameter reaches these elements: `%gid` no longer keeps lanes apart.
            racy[w] = true;
            racy[q] = true;
        }
    }
    Some(racy)
}
