//! Registers that some path may read before any write: a must-be-written problem over the graph
//! where `call` enters its callee and `ret` returns to every caller of the procedures that reach
//! it.

use crate::flow::{dataflow, interprocedural, BitSet, Graph, Procedures};
use crate::inst::Op;
use crate::kernel::Kernel;

/// The registers some path may read before writing them (backends zero them at start).
pub(crate) fn maybe_uninitialized(k: &Kernel, intra: &Graph, procs: &Procedures) -> Vec<u32> {
    let n = k.insts.len();
    let nregs = k.regs.len();
    if nregs == 0 || n == 0 {
        return Vec::new();
    }
    let g = interprocedural(&k.insts, intra, procs);
    // A node surely writes its destination when it is an unguarded instruction with one.
    let transfer = |x: usize, set: &mut [u64]| {
        if let Some(inst) = k.insts.get(x) {
            if inst.guard.is_none() {
                if let Some(&d) = inst.op.dst() {
                    set[d as usize / 64] |= 1 << (d % 64);
                }
            }
        }
    };
    let solution = dataflow::forward_must(&g, 0, nregs, &transfer);
    let mut zero = BitSet::new(nregs);
    let has = |set: &[u64], r: u32| set[r as usize / 64] & (1 << (r % 64)) != 0;
    solution.walk_forward(&transfer, |x, written| {
        let Some(inst) = k.insts.get(x) else { return };
        let mut check = |r: u32| {
            if !has(written, r) {
                zero.insert(r as usize);
            }
        };
        for (s, _) in inst.op.sources() {
            if let Some(&r) = s.as_reg() {
                check(r);
            }
        }
        if let Some(g) = &inst.guard {
            check(g.pred);
            // A guarded write keeps the old value in lanes that skip it: that old value is read.
            if let Some(&d) = inst.op.dst() {
                check(d);
            }
        }
        if let Op::Loop { counter, .. } = inst.op {
            check(counter);
        }
    });
    zero.iter().map(|r| r as u32).collect()
}
