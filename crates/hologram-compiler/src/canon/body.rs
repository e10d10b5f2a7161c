//! The working form of a kernel body during canonicalization: instructions that can be deleted
//! in place, with branch targets as instruction indices into the original body.

use hologram_isa::{Inst, Kernel, Op};

/// A kernel body being rewritten. Index `i` is instruction `i` of the input; deleted
/// instructions become `None`. A branch to a deleted instruction goes to the next live one.
#[derive(Clone, Debug)]
pub(crate) struct Body {
    pub insts: Vec<Option<Inst<u32>>>,
}

impl Body {
    pub fn new(kernel: &Kernel) -> Self {
        Body {
            insts: kernel.insts.iter().cloned().map(Some).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// The first live instruction at or after `pc` (len() if none).
    pub fn next_live(&self, pc: usize) -> usize {
        (pc..self.insts.len())
            .find(|&i| self.insts[i].is_some())
            .unwrap_or(self.insts.len())
    }

    /// Removes deleted instructions, renumbering branch targets; returns the compacted
    /// instructions and the new index of every old index (len for the end).
    pub fn compact(&self) -> (Vec<Inst<u32>>, Vec<u32>) {
        let mut new_index = Vec::with_capacity(self.insts.len() + 1);
        let mut n = 0u32;
        for i in &self.insts {
            new_index.push(n);
            if i.is_some() {
                n += 1;
            }
        }
        new_index.push(n);
        let remap = |t: &u32| new_index[(*t as usize).min(self.insts.len())];
        let out = self
            .insts
            .iter()
            .flatten()
            .map(|inst| {
                let op = match &inst.op {
                    Op::Bra { target } => Op::Bra {
                        target: remap(target),
                    },
                    Op::Loop { counter, target } => Op::Loop {
                        counter: *counter,
                        target: remap(target),
                    },
                    Op::Call { target } => Op::Call {
                        target: remap(target),
                    },
                    other => other.clone(),
                };
                Inst {
                    guard: inst.guard.clone(),
                    op,
                }
            })
            .collect();
        (out, new_index)
    }
}

/// True for operations without side effects whose result depends only on their operands.
pub(crate) fn is_pure(op: &Op<u32>) -> bool {
    matches!(
        op,
        Op::Mov { .. }
            | Op::Cvt { .. }
            | Op::Bitcast { .. }
            | Op::Unary { .. }
            | Op::Binary { .. }
            | Op::Ternary { .. }
            | Op::Setp { .. }
            | Op::Selp { .. }
    )
}

/// Registers an instruction reads (guard, sources, loop counter, and the old value of a guarded
/// destination, which lanes that skip the instruction keep).
pub(crate) fn reads(inst: &Inst<u32>) -> Vec<u32> {
    let mut r: Vec<u32> = inst
        .op
        .sources()
        .iter()
        .filter_map(|(s, _)| s.as_reg().copied())
        .collect();
    if let Some(g) = &inst.guard {
        r.push(g.pred);
        if let Some(&d) = inst.op.dst() {
            r.push(d);
        }
    }
    if let Op::Loop { counter, .. } = inst.op {
        r.push(counter);
    }
    r
}
