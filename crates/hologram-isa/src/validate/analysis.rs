//! Whole-kernel analyses: procedures, calls (recursion, depth), divergent barriers, and
//! registers that may be read before they are written.

use std::collections::BTreeSet;

use super::error::{Location, ValidationError, ValidationErrorKind as K};
use super::{calls, divergence, uninit};
use crate::flow::{self, Procedures};
use crate::inst::Op;
use crate::kernel::{Kernel, KernelFacts};
use crate::operand::Operand;

pub(crate) fn analyze(k: &Kernel, stmt_of_pc: &[usize]) -> Result<KernelFacts, ValidationError> {
    let last_stmt = stmt_of_pc.last().copied().unwrap_or(0);
    let loc = |pc: usize| Location::Stmt(stmt_of_pc.get(pc).copied().unwrap_or(last_stmt));
    let intra = flow::intra(&k.insts);
    let procs =
        Procedures::new(&k.insts, &intra, Procedures::limit_for(k.insts.len())).map_err(|e| {
            let subroutine = k
                .labels
                .iter()
                .find(|(_, at)| *at == e.entry)
                .map(|(n, _)| n.clone())
                .unwrap_or_else(|| match e.entry {
                    0 => "the kernel entry".to_string(),
                    pc => format!("at instruction {pc}"),
                });
            ValidationError::new(
                loc(e.entry as usize),
                K::SharedCode {
                    subroutine,
                    limit: e.limit,
                },
            )
        })?;
    let call_facts = calls::check(k, &procs, &loc)?;
    divergence::check(k, &intra, &procs, &call_facts, &loc)?;
    let zero_init = uninit::maybe_uninitialized(k, &intra, &procs);

    let mut specials = BTreeSet::new();
    for inst in &k.insts {
        for (src, _) in inst.op.sources() {
            if let Operand::Special(s) = src {
                specials.insert(*s);
            }
        }
    }
    Ok(KernelFacts {
        zero_init,
        uses_barrier: k.insts.iter().any(|i| matches!(i.op, Op::Barrier)),
        uses_atomics: k.insts.iter().any(|i| matches!(i.op, Op::Atom { .. })),
        max_call_depth: call_facts.max_depth,
        specials: specials.into_iter().collect(),
        shared_bytes: k.shared.iter().map(|a| a.bytes()).sum(),
        scratch_bytes: k.scratch.iter().map(|a| a.bytes()).sum(),
    })
}
