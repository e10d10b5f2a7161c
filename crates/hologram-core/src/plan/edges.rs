//! Work at a plan's edges that runs outside its captured graph, on the caller's memory.
//!
//! A replay copies each input into the plan's input buffer and each output out of the plan's
//! output buffer into a fresh tensor, because the captured graph (a CUDA graph) reads and writes
//! the addresses it was captured with. For large tensors these copies cost real time: a GPT's
//! logits (128 MiB) cross twice per training step, out of the forward plan and, as their
//! gradient, into the backward plan. When every step that reads a large input comes first in
//! the plan (the head), or every step that touches a large output comes last (the tail), those
//! steps run outside the graph, in their place in the order, with their arguments moved to the
//! caller's input or to the fresh output: no copy. Steps that touch a buffer only partly, and
//! inputs the steps write, keep the copies.

use std::ops::Range;

use hologram_backends::{BufferArg, KernelArg, Memory};
use hologram_isa::{Access, ParamKind};

use super::binding::{Input, Slot};
use super::step::Step;

/// Inputs and outputs of at least this many bytes are worth moving. Below, a copy costs less
/// than launching the edge steps one by one from the host: an 8 MiB input copies in about 4 µs
/// on an H100, less than a cuBLAS call costs the host, and small models are host-bound.
const MIN_BYTES: usize = 16 << 20;

/// At most this many steps run outside the graph at each edge.
const MAX_STEPS: usize = 8;

/// Which steps run outside the graph, and for which inputs and outputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Edges {
    /// Steps (indexes, in order) that run before the graph.
    pub head: Vec<usize>,
    /// Steps (indexes, in order) that run after the graph.
    pub tail: Vec<usize>,
    /// Input slots (by input position) that the head reads in the caller's memory.
    pub inputs: Vec<usize>,
    /// Outputs (by position) that the tail (or the head, when only it touches them) writes
    /// into fresh tensors.
    pub outputs: Vec<usize>,
}

impl Edges {
    /// True when step `i` runs outside the graph.
    pub fn outside(&self, i: usize) -> bool {
        self.head.binary_search(&i).is_ok() || self.tail.binary_search(&i).is_ok()
    }
}

/// A byte range of one allocation that a replay moves to another place.
pub(crate) struct Move {
    pub from: Memory,
    pub range: Range<usize>,
    pub to: Memory,
    /// Byte offset in `to` of `range.start`.
    pub to_offset: usize,
}

/// The buffer ranges a step touches, and whether it writes each.
fn touches(step: &Step) -> Vec<(&Memory, Range<usize>, bool)> {
    fn arg(b: &BufferArg, write: bool) -> (&Memory, Range<usize>, bool) {
        (&b.memory, b.offset..b.offset + b.len, write)
    }
    match step {
        Step::Launch { kernel, args, .. } => args
            .iter()
            .zip(&kernel.kernel().params)
            .filter_map(|(a, p)| match (a, &p.kind) {
                (KernelArg::Buffer(b), ParamKind::Buffer { access, .. }) => {
                    Some(arg(b, *access == Access::ReadWrite))
                }
                _ => None,
            })
            .collect(),
        Step::Gemm { a, b, c, .. } => vec![arg(a, false), arg(b, false), arg(c, true)],
        Step::Conv { a, b, out, .. } => vec![arg(a, false), arg(b, false), arg(out, true)],
        Step::Copy {
            src,
            src_offset,
            dst,
            dst_offset,
            len,
        } => vec![
            (src, *src_offset..src_offset + len, false),
            (dst, *dst_offset..dst_offset + len, true),
        ],
        Step::Upload {
            memory,
            offset,
            data,
        } => vec![(memory, *offset..offset + data.len(), true)],
    }
}

/// The steps touching `slot`'s bytes, or `None` when one touches them only partly (its range
/// reaches outside), is a copy or constant (which stay in the graph), or, with `read_only`,
/// writes them.
fn users(steps: &[Step], slot: &Slot, read_only: bool) -> Option<Vec<usize>> {
    let memory = slot.storage.memory();
    let range = slot.offset..slot.offset + slot.bytes();
    let mut found = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        for (m, r, write) in touches(step) {
            if !std::sync::Arc::ptr_eq(m, memory) || r.end <= range.start || range.end <= r.start {
                continue;
            }
            let movable = matches!(
                step,
                Step::Launch { .. } | Step::Gemm { .. } | Step::Conv { .. }
            );
            if !movable || r.start < range.start || range.end < r.end || (read_only && write) {
                return None;
            }
            found.push(i);
        }
    }
    Some(found)
}

/// True when `a` and `b` may run in either order: neither writes what the other touches.
fn independent(a: &Step, b: &Step) -> bool {
    let (ta, tb) = (touches(a), touches(b));
    ta.iter().all(|(ma, ra, wa)| {
        tb.iter().all(|(mb, rb, wb)| {
            !(*wa || *wb)
                || !std::sync::Arc::ptr_eq(ma, mb)
                || ra.end <= rb.start
                || rb.end <= ra.start
        })
    })
}

/// True when `slot`'s bytes meet one of `outputs`' (an input the plan also returns: its slot
/// must be filled, since the output is read from it).
fn meets_an_output(slot: &Slot, outputs: &[Slot]) -> bool {
    let range = slot.offset..slot.offset + slot.bytes();
    outputs.iter().any(|o| {
        std::sync::Arc::ptr_eq(o.storage.memory(), slot.storage.memory())
            && o.offset < range.end
            && range.start < o.offset + o.bytes()
    })
}

/// The edges of a plan with these steps, inputs and outputs; `own_refs[i]` counts the plan's
/// buffers sharing output `i`'s storage (only an output alone in its storage moves).
///
/// With a captured graph (`captured`), the steps that read a large input move to the head when
/// no step before them writes what they read or touches what they write; those that touch a
/// large output move to the tail likewise with the steps after them. Either way the work keeps
/// its order where it matters. Without one, every step runs from the host in its place anyway,
/// so every input and output whose steps can use the caller's memory does, whatever its size:
/// a replay on the CPU copies no input (a training step's batch crossed twice per step, 0.3 ms
/// each for 2 MiB on a 2-core VM).
pub(crate) fn find(
    steps: &[Step],
    inputs: &[Input],
    outputs: &[Slot],
    own_refs: &[usize],
    captured: bool,
) -> Edges {
    let (min_bytes, max_steps) = if captured {
        (MIN_BYTES, MAX_STEPS)
    } else {
        (0, usize::MAX)
    };
    let mut edges = Edges::default();
    let mut head = std::collections::BTreeSet::new();
    for (i, input) in inputs.iter().enumerate() {
        let Input::Slot(slot) = input else { continue };
        if slot.bytes() < min_bytes || meets_an_output(slot, outputs) {
            continue;
        }
        let Some(users) = users(steps, slot, true) else {
            continue;
        };
        let movable = !captured
            || users
                .iter()
                .all(|&u| (0..u).all(|s| users.contains(&s) || independent(&steps[s], &steps[u])));
        if movable && !users.is_empty() && head.len() + users.len() <= max_steps {
            head.extend(users);
            edges.inputs.push(i);
        }
    }
    let mut tail = std::collections::BTreeSet::new();
    for (i, slot) in outputs.iter().enumerate() {
        if slot.bytes() < min_bytes || own_refs.get(i) != Some(&1) {
            continue;
        }
        let Some(users) = users(steps, slot, false) else {
            continue;
        };
        if !users.is_empty() && users.iter().all(|u| head.contains(u)) {
            // Written (and read) only before the graph: the head writes the fresh output.
            edges.outputs.push(i);
            continue;
        }
        let movable = users.iter().all(|&u| {
            !captured
                || (!head.contains(&u)
                    && (u + 1..steps.len())
                        .all(|s| users.contains(&s) || independent(&steps[u], &steps[s])))
        });
        if movable && !users.is_empty() && tail.len() + users.len() <= max_steps {
            // Without a graph a step may be in both (it runs once, in its place).
            tail.extend(users.into_iter().filter(|u| !head.contains(u)));
            edges.outputs.push(i);
        }
    }
    edges.head = head.into_iter().collect();
    edges.tail = tail.into_iter().collect();
    edges
}

impl Step {
    /// The step with every buffer argument inside a moved range taken to its new place, or
    /// `None` when no argument is.
    pub(crate) fn moved(&self, moves: &[Move]) -> Option<Step> {
        if moves.is_empty() {
            return None;
        }
        let place = |memory: &Memory, offset: usize, len: usize| {
            moves.iter().find_map(|m| {
                (std::sync::Arc::ptr_eq(memory, &m.from)
                    && m.range.start <= offset
                    && offset + len <= m.range.end)
                    .then(|| (m.to.clone(), m.to_offset + offset - m.range.start))
            })
        };
        let buffer = |b: &BufferArg| {
            place(&b.memory, b.offset, b.len).map(|(memory, offset)| BufferArg {
                memory,
                offset,
                len: b.len,
            })
        };
        let mut any = false;
        let mut take = |b: &BufferArg| match buffer(b) {
            Some(moved) => {
                any = true;
                moved
            }
            None => b.clone(),
        };
        let step = match self {
            Step::Launch {
                kernel,
                config,
                args,
            } => Step::Launch {
                kernel: kernel.clone(),
                config: *config,
                args: args
                    .iter()
                    .map(|a| match a {
                        KernelArg::Buffer(b) => KernelArg::Buffer(take(b)),
                        other => other.clone(),
                    })
                    .collect(),
            },
            Step::Gemm { desc, a, b, c } => Step::Gemm {
                desc: *desc,
                a: take(a),
                b: take(b),
                c: take(c),
            },
            Step::Conv {
                desc,
                pass,
                a,
                b,
                out,
            } => Step::Conv {
                desc: *desc,
                pass: *pass,
                a: take(a),
                b: take(b),
                out: take(out),
            },
            // Copies and constants stay in the graph's buffers (no edge moves them: `find`
            // takes only ranges whose users it can move, and these are never among them).
            Step::Copy { .. } | Step::Upload { .. } => return None,
        };
        any.then_some(step)
    }
}
