//! Control flow over a [`Body`]: the interprocedural graph of its live instructions (calls
//! enter their callee, returns go back to every call site of the procedures that reach them),
//! and basic-block leaders.

use hologram_isa::flow::{self, Graph, Procedures};
use hologram_isa::{Inst, Op};

use super::body::Body;

/// The live instructions of a body, compacted, with their control flow.
pub(crate) struct Flow {
    /// The live instructions (branch targets renumbered).
    pub insts: Vec<Inst<u32>>,
    /// Old index (in the body) of each compacted instruction.
    pub old_index: Vec<usize>,
    /// Interprocedural graph over the compacted instructions: node `insts.len()` is the exit,
    /// nodes after it the procedures' return points ([`flow::interprocedural`]).
    pub graph: Graph,
}

impl Flow {
    /// The flow of `body`'s live instructions. Canonicalization only shrinks validated kernels,
    /// whose subroutines are within the validator's bound on shared code, so no bound is
    /// applied here.
    pub fn new(body: &Body) -> Flow {
        let (insts, _) = body.compact();
        let old_index = body.live_indices();
        let intra = flow::intra(&insts);
        let graph = match Procedures::new(&insts, &intra, usize::MAX) {
            Ok(procs) => flow::interprocedural(&insts, &intra, &procs),
            // Unreachable with no bound; without procedures, every instruction is its own
            // successor's predecessor as in one procedure.
            Err(_) => intra,
        };
        Flow {
            insts,
            old_index,
            graph,
        }
    }

    /// Old indices of the live instructions reachable from the entry.
    pub fn reachable(&self) -> Vec<bool> {
        let n = self.insts.len();
        if n == 0 {
            return Vec::new();
        }
        let seen = self.graph.reachable_from(0);
        seen[..n].to_vec()
    }

    /// Start of every basic block: the entry, jump targets, return sites and instructions after
    /// unconditional control transfers.
    pub fn leaders(body: &Body) -> Vec<bool> {
        let n = body.len();
        let mut lead = vec![false; n + 1];
        lead[body.next_live(0)] = true;
        for (pc, slot) in body.slots().iter().enumerate() {
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
