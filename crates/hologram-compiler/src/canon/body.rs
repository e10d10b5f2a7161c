//! The working form of a kernel body during canonicalization: instructions that can be deleted
//! in place, with branch targets as instruction indices into the original body.

use std::cell::Cell;

use hologram_isa::{Inst, Kernel, Op};

/// A kernel body being rewritten. Index `i` is instruction `i` of the input; deleted
/// instructions become `None`. A branch to a deleted instruction goes to the next live one.
#[derive(Clone, Debug)]
pub(crate) struct Body {
    insts: Vec<Option<Inst<u32>>>,
    /// Union-find over indices: a deleted index points past itself, so finding the next live
    /// instruction is near-constant time however many deleted ones lie in between.
    next: Vec<Cell<u32>>,
}

impl Body {
    pub fn new(kernel: &Kernel) -> Self {
        Body {
            insts: kernel.insts.iter().cloned().map(Some).collect(),
            next: (0..=kernel.insts.len() as u32).map(Cell::new).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// The instruction at `pc`, if it is live.
    pub fn get(&self, pc: usize) -> Option<&Inst<u32>> {
        self.insts.get(pc).and_then(|i| i.as_ref())
    }

    /// Every slot, deleted ones as `None`.
    pub fn slots(&self) -> &[Option<Inst<u32>>] {
        &self.insts
    }

    /// The live instructions, to rewrite in place (not to delete).
    pub fn live_mut(&mut self) -> impl Iterator<Item = &mut Inst<u32>> {
        self.insts.iter_mut().flatten()
    }

    /// Replaces the live instruction at `pc`.
    pub fn set(&mut self, pc: usize, inst: Inst<u32>) {
        debug_assert!(self.insts[pc].is_some(), "set on a deleted instruction");
        if self.insts[pc].is_some() {
            self.insts[pc] = Some(inst);
        }
    }

    /// Deletes the instruction at `pc`; true if it was live.
    pub fn delete(&mut self, pc: usize) -> bool {
        if self.insts[pc].take().is_some() {
            self.next[pc].set(pc as u32 + 1);
            true
        } else {
            false
        }
    }

    /// The first live instruction at or after `pc` (len() if none).
    pub fn next_live(&self, pc: usize) -> usize {
        let mut x = pc.min(self.insts.len());
        // Path halving: each step also shortens the path for later finds.
        loop {
            let parent = self.next[x].get() as usize;
            if parent == x {
                return x;
            }
            let grand = self.next[parent].get();
            self.next[x].set(grand);
            x = parent;
        }
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

    /// The old index of every live instruction, in order (the inverse of [`Body::compact`]'s
    /// renumbering).
    pub fn live_indices(&self) -> Vec<usize> {
        (0..self.insts.len())
            .filter(|&i| self.insts[i].is_some())
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_live_skips_long_runs_of_deleted_instructions() {
        let k = hologram_isa::assemble(&format!(
            ".kernel k\n.param .buf.u32 y .rw\n{}    st.u32 y[0], 1;\n",
            "    mov.u32 %a, 1;\n".repeat(1000)
        ))
        .unwrap();
        let mut b = Body::new(&k);
        for pc in (0..1000).rev() {
            assert!(b.delete(pc));
        }
        assert!(!b.delete(5));
        assert_eq!(b.next_live(0), 1000);
        assert_eq!(b.next_live(500), 1000);
        assert_eq!(b.next_live(1001), 1001);
        assert_eq!(b.compact().0.len(), 1);
        assert_eq!(b.live_indices(), vec![1000]);
    }
}
