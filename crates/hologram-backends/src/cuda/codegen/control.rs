//! Control flow and synchronisation: `bra loop call ret exit barrier fence`.
//!
//! The ISA's control flow is unstructured, so the kernel body is a flat list of statements with
//! a C label `L<pc>` before every jump target and `goto` for branches. `call` pushes the
//! instruction after it onto a per-lane return stack (its depth is known statically: the
//! validator rejects recursion and bounds the depth) and `ret` jumps to one shared dispatcher at
//! the end of the body, which pops it and jumps back through a `switch` over every return site
//! (one switch per kernel, not one per `ret`: the source stays linear in the kernel's size).

use std::collections::BTreeSet;

use hologram_isa::{FenceScope, Kernel, Op};

use super::ctype::reg;

/// The C label of the return dispatcher.
pub(crate) const RETURN_LABEL: &str = "hg_ret";

/// The return dispatcher (for kernels with calls): pops the return stack and jumps to the
/// return site; with an empty stack, `ret` ends the lane like `exit`.
pub(crate) fn return_dispatcher(flow: &Flow) -> String {
    let mut s =
        format!("{RETURN_LABEL}:;\n  if (hg_sp == 0u) return;\n  switch (hg_rs[--hg_sp]) {{\n");
    for site in &flow.return_sites {
        s.push_str(&format!("  case {site}u: goto {};\n", label(*site)));
    }
    s.push_str("  default: return;\n  }\n");
    s
}

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
        Op::Ret if flow.has_calls() => format!("goto {RETURN_LABEL};"),
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
