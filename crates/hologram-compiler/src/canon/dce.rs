//! Dead-code elimination: pure instructions whose result nobody reads, unreachable code,
//! branches to the next instruction, and a trailing `exit`.

use hologram_isa::flow::dataflow;
use hologram_isa::{Kernel, Op};

use super::blocks::Flow;
use super::body::{is_pure, reads, Body};

/// Removes dead code once over; returns true if anything was removed.
pub(crate) fn run(kernel: &Kernel, body: &mut Body) -> bool {
    let mut changed = false;
    // Unreachable instructions.
    let flow = Flow::new(body);
    for (i, reachable) in flow.reachable().into_iter().enumerate() {
        if !reachable {
            changed |= body.delete(flow.old_index[i]);
        }
    }
    // Branches to where control goes anyway.
    for pc in 0..body.len() {
        let to_next = match body.get(pc) {
            Some(inst) => match inst.op {
                Op::Bra { target } => body.next_live(target as usize) == body.next_live(pc + 1),
                _ => false,
            },
            None => false,
        };
        if to_next {
            changed |= body.delete(pc);
        }
    }
    // A final unguarded exit: falling off the end exits too.
    if let Some(last) = (0..body.len()).rev().find(|&i| body.get(i).is_some()) {
        if matches!(body.get(last), Some(i) if i.guard.is_none() && matches!(i.op, Op::Exit)) {
            changed |= body.delete(last);
        }
    }
    // Results nobody reads: strong liveness over the interprocedural graph. A pure instruction
    // whose result is not live is dead, and its own reads do not keep anything alive, so a whole
    // chain of dead computations (`add %a, %a, 1` repeated, never stored) goes in one pass.
    let flow = Flow::new(body);
    let insts = &flow.insts;
    let has = |set: &[u64], r: u32| set[r as usize / 64] & (1 << (r % 64)) != 0;
    let live = |x: usize, set: &mut [u64]| {
        let Some(inst) = insts.get(x) else { return };
        if is_pure(&inst.op) && inst.op.dst().is_some_and(|&d| !has(set, d)) {
            return;
        }
        if inst.guard.is_none() {
            if let Some(&d) = inst.op.dst() {
                set[d as usize / 64] &= !(1 << (d % 64));
            }
        }
        for r in reads(inst) {
            set[r as usize / 64] |= 1 << (r % 64);
        }
    };
    let solution = dataflow::backward_may(&flow.graph, 0, kernel.regs.len(), &live);
    let mut dead = Vec::new();
    solution.walk_backward(&flow.graph, &live, |x, after| {
        let Some(inst) = insts.get(x) else { return };
        if is_pure(&inst.op) {
            if let Some(&d) = inst.op.dst() {
                if !has(after, d) {
                    dead.push(flow.old_index[x]);
                }
            }
        }
    });
    for pc in dead {
        changed |= body.delete(pc);
    }
    changed
}
