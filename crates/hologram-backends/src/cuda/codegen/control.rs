//! Control flow and synchronisation: `bra loop call ret exit barrier fence`.
//!
//! The ISA's control flow is unstructured, so the kernel body is a flat list of statements with
//! a C label `L<pc>` before every jump target and `goto` for branches. `call` pushes the
//! instruction after it onto a per-lane return stack (its depth is known statically: the
//! validator rejects recursion) and `ret` pops it and jumps back through a `switch` over every
//! return site.

use std::collections::BTreeSet;

use hologram_isa::{FenceScope, Kernel, Op};

use super::ctype::reg;

/// The C label of instruction `pc`.
pub(crate) fn label(pc: u32) -> String {
    format!("L{pc}")
}

/// Jump targets and return sites of a kernel.
pub(crate) struct Flow {
    /// Instructions that need a label.
    pub labels: BTreeSet<u32>,
    /// The instruction after each `call` (where `ret` goes back to).
    pub return_sites: BTreeSet<u32>,
}

impl Flow {
    pub(crate) fn of(kernel: &Kernel) -> Flow {
        let mut labels = BTreeSet::new();
        let mut return_sites = BTreeSet::new();
        for (pc, inst) in kernel.insts.iter().enumerate() {
            if let Some(t) = inst.op.target() {
                labels.insert(*t);
            }
            if matches!(inst.op, Op::Call { .. }) {
                return_sites.insert(pc as u32 + 1);
                labels.insert(pc as u32 + 1);
            }
        }
        Flow {
            labels,
            return_sites,
        }
    }

    /// True when the kernel needs a return stack.
    pub(crate) fn has_calls(&self) -> bool {
        !self.return_sites.is_empty()
    }
}

/// The statement for a control instruction at `pc`, or `None` if `op` is not one.
pub(crate) fn statement(
    kernel: &Kernel,
    flow: &Flow,
    pc: u32,
    op: &Op<u32>,
) -> Option<Result<String, String>> {
    Some(Ok(match op {
        Op::Bra { target } => format!("goto {};", label(*target)),
        Op::Loop { counter, target } => {
            let ty = match kernel.regs.get(*counter as usize) {
                Some(r) if r.ty.is_int() => r.ty,
                _ => return Some(Err("loop over a non-integer counter".into())),
            };
            let c = reg(*counter);
            format!(
                "{c} = hg_sub_{ty}({c}, 1); if ({c} != 0) goto {};",
                label(*target)
            )
        }
        Op::Call { target } => {
            format!("hg_rs[hg_sp++] = {}u; goto {};", pc + 1, label(*target))
        }
        Op::Ret if flow.has_calls() => {
            let mut s = String::from("if (hg_sp == 0u) return; switch (hg_rs[--hg_sp]) {");
            for site in &flow.return_sites {
                s.push_str(&format!(" case {site}u: goto {};", label(*site)));
            }
            s.push_str(" default: return; }");
            s
        }
        Op::Ret | Op::Exit => "return;".to_string(),
        Op::Barrier => "__syncthreads();".to_string(),
        Op::Fence {
            scope: FenceScope::Block,
        } => "__threadfence_block();".to_string(),
        Op::Fence {
            scope: FenceScope::Device,
        } => "__threadfence();".to_string(),
        _ => return None,
    }))
}
