//! Control flow over a [`Body`]: successors of every instruction, with calls entering their
//! callee and returns going back to every call site of the procedures that reach them.

use hologram_isa::Op;

use super::body::Body;

/// Successor lists over live instruction indices; `len()` is the exit.
pub(crate) struct Flow {
    pub succ: Vec<Vec<usize>>,
}

impl Flow {
    pub fn new(body: &Body) -> Flow {
        let n = body.len();
        let next = |pc: usize| body.next_live(pc);
        // Intra-procedural successors (calls fall through) to find each procedure's extent.
        let intra = |pc: usize, op: &Op<u32>, guarded: bool| -> Vec<usize> {
            match op {
                Op::Bra { target } if guarded => vec![next(*target as usize), next(pc + 1)],
                Op::Bra { target } => vec![next(*target as usize)],
                Op::Loop { target, .. } => vec![next(*target as usize), next(pc + 1)],
                Op::Ret | Op::Exit if guarded => vec![n, next(pc + 1)],
                Op::Ret | Op::Exit => vec![n],
                _ => vec![next(pc + 1)],
            }
        };
        let mut entries = vec![next(0)];
        for inst in body.insts.iter().flatten() {
            if let Op::Call { target } = inst.op {
                let e = next(target as usize);
                if !entries.contains(&e) {
                    entries.push(e);
                }
            }
        }
        // Instructions each procedure reaches.
        let reach = |start: usize| -> Vec<bool> {
            let mut seen = vec![false; n + 1];
            let mut stack = vec![start];
            while let Some(pc) = stack.pop() {
                if pc >= n || seen[pc] {
                    continue;
                }
                seen[pc] = true;
                if let Some(inst) = &body.insts[pc] {
                    stack.extend(intra(pc, &inst.op, inst.guard.is_some()));
                }
            }
            seen
        };
        let bodies: Vec<Vec<bool>> = entries.iter().map(|&e| reach(e)).collect();
        let mut return_sites: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
        for (pc, inst) in body.insts.iter().enumerate() {
            if let Some(inst) = inst {
                if let Op::Call { target } = inst.op {
                    let e = next(target as usize);
                    if let Some(p) = entries.iter().position(|&x| x == e) {
                        return_sites[p].push(next(pc + 1));
                    }
                }
            }
        }
        let mut succ = vec![Vec::new(); n + 1];
        for (pc, slot) in body.insts.iter().enumerate() {
            let Some(inst) = slot else { continue };
            let guarded = inst.guard.is_some();
            succ[pc] = match &inst.op {
                Op::Call { target } => {
                    let mut v = vec![next(*target as usize)];
                    if guarded {
                        v.push(next(pc + 1));
                    }
                    v
                }
                Op::Ret => {
                    let mut v = Vec::new();
                    for (p, seen) in bodies.iter().enumerate() {
                        if seen[pc] {
                            if p == 0 {
                                v.push(n);
                            }
                            v.extend(return_sites[p].iter().copied());
                        }
                    }
                    if guarded {
                        v.push(next(pc + 1));
                    }
                    v
                }
                op => intra(pc, op, guarded),
            };
        }
        Flow { succ }
    }

    /// Live instructions reachable from the entry.
    pub fn reachable(&self, body: &Body) -> Vec<bool> {
        let n = body.len();
        let mut seen = vec![false; n + 1];
        let mut stack = vec![body.next_live(0)];
        while let Some(pc) = stack.pop() {
            if pc > n || seen[pc] {
                continue;
            }
            seen[pc] = true;
            stack.extend(self.succ[pc].iter().copied());
        }
        seen
    }

    /// Start of every basic block: the entry, jump targets, return sites and instructions after
    /// unconditional control transfers.
    pub fn leaders(body: &Body) -> Vec<bool> {
        let n = body.len();
        let mut lead = vec![false; n + 1];
        lead[body.next_live(0)] = true;
        for (pc, slot) in body.insts.iter().enumerate() {
            let Some(inst) = slot else { continue };
            if let Some(t) = inst.op.target() {
                lead[body.next_live(*t as usize)] = true;
            }
            // Lanes that fall through a guarded branch, exit or return keep their registers, so
            // only unconditional transfers and calls (whose callee may write registers) end a
            // block for value numbering.
            let ends = match inst.op {
                Op::Call { .. } => true,
                Op::Bra { .. } | Op::Ret | Op::Exit => inst.guard.is_none(),
                _ => false,
            };
            if ends {
                lead[body.next_live(pc + 1)] = true;
            }
        }
        lead
    }
}
