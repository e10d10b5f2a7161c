//! A plan's constants: host data the recording uploaded (scalars, small tables). Each is copied
//! once into device memory of the plan's own; where the steps after its upload only read it,
//! they read that copy in place and a replay does nothing for it. Otherwise (the constant's
//! buffer is written again, partly read with other data, or is one of the plan's input or output
//! buffers) a replay copies it back into its buffer before the steps that read it.
//!
//! A buffer a constant was uploaded to during the recording is never given to another value of
//! the recording (see [`Arena::pin`]), so the steps after its upload that touch the buffer are
//! the constant's own uses.

use std::sync::Arc;

use hologram_backends::{Backend, BufferArg, KernelArg, Memory};
use hologram_isa::{Access, ParamKind};

use super::step::Step;
use crate::alloc::arena::Arena;
use crate::error::Result;

/// How a step touches a buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Touch {
    /// Reads `len` bytes from `offset`.
    Read { offset: usize, len: usize },
    /// Writes (or reads and writes) it.
    Write,
}

/// What a constant's buffer went through after the upload.
struct Uses {
    /// Steps reading it (inside the constant's bytes).
    reads: Vec<usize>,
    /// False when a step writes it or reads beyond the constant's bytes.
    in_place: bool,
}

fn same(a: &Memory, b: &Memory) -> bool {
    Arc::ptr_eq(a, b)
}

/// Calls `f` with each buffer `step` touches and how.
fn touches(step: &Step, mut f: impl FnMut(&Memory, Touch)) {
    let read = |b: &BufferArg| Touch::Read {
        offset: b.offset,
        len: b.len,
    };
    match step {
        Step::Launch { kernel, args, .. } => {
            for (arg, param) in args.iter().zip(&kernel.kernel().params) {
                if let KernelArg::Buffer(b) = arg {
                    let writes = matches!(
                        param.kind,
                        ParamKind::Buffer {
                            access: Access::ReadWrite,
                            ..
                        }
                    );
                    f(&b.memory, if writes { Touch::Write } else { read(b) });
                }
            }
        }
        Step::Gemm { a, b, c, .. } => {
            f(&a.memory, read(a));
            f(&b.memory, read(b));
            f(&c.memory, Touch::Write);
        }
        Step::Conv { a, b, out, .. } => {
            f(&a.memory, read(a));
            f(&b.memory, read(b));
            f(&out.memory, Touch::Write);
        }
        Step::Upload { memory, .. } => f(memory, Touch::Write),
        Step::Copy {
            src,
            src_offset,
            dst,
            len,
            ..
        } => {
            f(
                src,
                Touch::Read {
                    offset: *src_offset,
                    len: *len,
                },
            );
            f(dst, Touch::Write);
        }
    }
}

/// The uses of the constant of `len` bytes at `offset` of `memory` by `steps` (those after its
/// upload).
fn uses(steps: &[Step], first: usize, memory: &Memory, offset: usize, len: usize) -> Uses {
    let mut u = Uses {
        reads: Vec::new(),
        in_place: true,
    };
    for (i, step) in steps.iter().enumerate().skip(first) {
        touches(step, |m, t| {
            if !same(m, memory) {
                return;
            }
            match t {
                Touch::Read { offset: o, len: l } if o >= offset && o + l <= offset + len => {
                    if u.reads.last() != Some(&i) {
                        u.reads.push(i);
                    }
                }
                _ => u.in_place = false,
            }
        });
    }
    u
}

/// Points the reads of `memory`'s bytes from `offset` in `step` at `constant` (which holds them
/// from its byte 0).
fn redirect(step: &mut Step, memory: &Memory, offset: usize, constant: &Memory) {
    let move_arg = |b: &mut BufferArg| {
        if same(&b.memory, memory) {
            b.memory = constant.clone();
            b.offset -= offset;
        }
    };
    match step {
        Step::Launch { args, .. } => {
            for arg in args {
                if let KernelArg::Buffer(b) = arg {
                    move_arg(b);
                }
            }
        }
        Step::Gemm { a, b, .. } | Step::Conv { a, b, .. } => {
            move_arg(a);
            move_arg(b);
        }
        Step::Copy {
            src, src_offset, ..
        } => {
            if same(src, memory) {
                *src = constant.clone();
                *src_offset -= offset;
            }
        }
        Step::Upload { .. } => {}
    }
}

/// The plan's constants: device copies of every upload, and how many were bound in place.
pub(crate) struct Constants {
    pub memory: Vec<Memory>,
    pub bytes: u64,
    pub in_place: usize,
}

/// Replaces each [`Step::Upload`] of `steps`: by nothing, its readers reading a device copy in
/// place, when its buffer is pinned in `arena`, is none of `slots` (the plan's input and output
/// buffers) and the later steps only read the constant's bytes; else by a [`Step::Copy`] from
/// the device copy.
pub(crate) fn bind(
    backend: &Arc<dyn Backend>,
    arena: &Arena,
    steps: &mut Vec<Step>,
    slots: &[&Memory],
) -> Result<Constants> {
    let mut c = Constants {
        memory: Vec::new(),
        bytes: 0,
        in_place: 0,
    };
    let mut dropped = vec![false; steps.len()];
    for i in 0..steps.len() {
        let Step::Upload {
            memory,
            offset,
            data,
        } = &steps[i]
        else {
            continue;
        };
        let (memory, offset, data) = (memory.clone(), *offset, data.clone());
        let constant = backend.allocate(data.len().max(1))?;
        backend.copy_in(&constant, 0, &data)?;
        c.bytes += data.len() as u64;
        let u = uses(steps, i + 1, &memory, offset, data.len());
        let own = arena.is_pinned(&memory) && !slots.iter().any(|s| same(s, &memory));
        if own && u.in_place {
            for r in u.reads {
                redirect(&mut steps[r], &memory, offset, &constant);
            }
            dropped[i] = true;
            c.in_place += 1;
        } else {
            steps[i] = Step::Copy {
                src: constant.clone(),
                src_offset: 0,
                dst: memory,
                dst_offset: offset,
                len: data.len(),
            };
        }
        c.memory.push(constant);
    }
    let mut k = 0;
    steps.retain(|_| {
        k += 1;
        !dropped[k - 1]
    });
    Ok(c)
}
