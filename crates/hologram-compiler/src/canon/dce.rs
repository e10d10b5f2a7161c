//! Dead-code elimination: pure instructions whose result nobody reads, unreachable code,
//! branches to the next instruction, and a trailing `exit`.

use hologram_isa::{Kernel, Op};

use super::blocks::Flow;
use super::body::{is_pure, reads, Body};

/// Removes dead code once over; returns true if anything was removed.
pub(crate) fn run(kernel: &Kernel, body: &mut Body) -> bool {
    let mut changed = false;
    // Unreachable instructions.
    let flow = Flow::new(body);
    let reachable = flow.reachable(body);
    for (pc, slot) in body.insts.iter_mut().enumerate() {
        if slot.is_some() && !reachable[pc] {
            *slot = None;
            changed = true;
        }
    }
    // Branches to where control goes anyway.
    for pc in 0..body.len() {
        let to_next = match &body.insts[pc] {
            Some(inst) => match inst.op {
                Op::Bra { target } => body.next_live(target as usize) == body.next_live(pc + 1),
                _ => false,
            },
            None => false,
        };
        if to_next {
            body.insts[pc] = None;
            changed = true;
        }
    }
    // A final unguarded exit: falling off the end exits too.
    if let Some(last) = (0..body.len()).rev().find(|&i| body.insts[i].is_some()) {
        if matches!(&body.insts[last], Some(i) if i.guard.is_none() && matches!(i.op, Op::Exit)) {
            body.insts[last] = None;
            changed = true;
        }
    }
    // Results nobody reads (liveness to a fixed point).
    let flow = Flow::new(body);
    let n = body.len();
    let nregs = kernel.regs.len();
    let words = nregs.div_ceil(64).max(1);
    let mut live_in = vec![vec![0u64; words]; n + 1];
    let mut live_out = vec![vec![0u64; words]; n + 1];
    let set = |v: &mut Vec<u64>, r: u32| v[r as usize / 64] |= 1 << (r % 64);
    let has = |v: &Vec<u64>, r: u32| v[r as usize / 64] & (1 << (r % 64)) != 0;
    let mut again = true;
    while again {
        again = false;
        for pc in (0..n).rev() {
            let Some(inst) = &body.insts[pc] else {
                continue;
            };
            let mut out = vec![0u64; words];
            for &s in &flow.succ[pc] {
                for (o, i) in out.iter_mut().zip(&live_in[s]) {
                    *o |= i;
                }
            }
            let mut inn = out.clone();
            if inst.guard.is_none() {
                if let Some(&d) = inst.op.dst() {
                    inn[d as usize / 64] &= !(1 << (d % 64));
                }
            }
            for r in reads(inst) {
                set(&mut inn, r);
            }
            if inn != live_in[pc] || out != live_out[pc] {
                live_in[pc] = inn;
                live_out[pc] = out;
                again = true;
            }
        }
    }
    for (slot, out) in body.insts.iter_mut().zip(&live_out) {
        let dead = match slot {
            Some(inst) if is_pure(&inst.op) => inst.op.dst().is_some_and(|&d| !has(out, d)),
            _ => false,
        };
        if dead {
            *slot = None;
            changed = true;
        }
    }
    changed
}
