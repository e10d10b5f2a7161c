//! Control flow and synchronisation: `bra loop call ret exit barrier fence`.
//!
//! The ISA's control flow is unstructured, so the kernel body is a flat list of statements with
//! a C label `L<pc>` before every jump target and `goto` for branches. `call` pushes the
//! instruction after it onto a per-lane return stack (its depth is known statically: the
//! validator rejects recursion and bounds the depth) and `ret` jumps to one shared dispatcher at
//! the end of the body, which pops it and jumps back through a `switch` over every return site
//! (one switch per kernel, not one per `ret`: the source stays linear in the kernel's size).
//!
//! Barriers: every `barrier` jumps to one rendezvous, `HG_SYNC`, after recording its own
//! position in `hg_bid`. Lanes at different barriers thus still meet at the same
//! `__syncthreads()` (CUDA leaves lanes at different `__syncthreads()` calls undefined, and in
//! practice they hang), where each lane publishes its barrier in shared memory; a second,
//! voting barrier (`__syncthreads_or`) tells every lane whether any lane saw another barrier
//! than its own. If so, a lane that disagrees records [`super::ERR_BARRIER_DIVERGENCE`] and the
//! whole block ends; else every lane jumps back to the instruction after its barrier. Exited
//! lanes are not waited for, as on the CPU: CUDA's barriers count only lanes that have not
//! exited.
//!
//! Most kernels with barriers (reductions, row kernels) cannot diverge at them: when no jump
//! crosses a barrier (none skips forward over one, none goes back around one), no barrier is
//! guarded and there are no calls, every lane that has not exited reaches every barrier once,
//! in order ([`barriers_are_uniform`]). Their barriers are plain `__syncthreads()`, without the
//! rendezvous (two block barriers, a shared word and a `switch` each).
//!
//! Runaway loops: every backward jump (`bra`, `loop` or `call` to an earlier instruction) counts
//! a tick, and every [`TICKS_PER_CHECK`] ticks the lane reads `%globaltimer` and the launch's
//! stop word (`hg_timed_out` in the prelude). A lane running longer than the launch's timeout
//! (`hg_tmo` nanoseconds since the lane started) records [`super::ERR_TIMEOUT`], raises the
//! stop word so the other lanes end at their next check, and ends. Every endless loop takes
//! backward jumps, so none runs past the timeout unnoticed; straight-line code cannot run long.

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

/// Backward jumps between two looks at the clock: a few cycles each, so a tight loop pays
/// almost nothing, and a check every few microseconds at most.
pub(crate) const TICKS_PER_CHECK: u32 = 1024;

/// Jump targets and return sites of a kernel.
pub(crate) struct Flow {
    /// Instructions that need a label.
    pub labels: BTreeSet<u32>,
    /// The instruction after each `call` (where `ret` goes back to).
    pub return_sites: BTreeSet<u32>,
    /// The position of each `barrier` (the rendezvous returns to the instruction after it);
    /// empty when the barriers are uniform (plain `__syncthreads()`).
    pub barriers: BTreeSet<u32>,
    /// Some jump goes backward: the kernel can loop and needs the timeout check.
    pub loops: bool,
}

impl Flow {
    pub(crate) fn of(kernel: &Kernel) -> Flow {
        let mut labels = BTreeSet::new();
        let mut return_sites = BTreeSet::new();
        let mut barriers = BTreeSet::new();
        let mut loops = false;
        for (pc, inst) in kernel.insts.iter().enumerate() {
            let pc = pc as u32;
            if let Some(t) = inst.op.target() {
                labels.insert(*t);
                loops |= *t <= pc;
            }
            if matches!(inst.op, Op::Call { .. }) {
                return_sites.insert(pc + 1);
                labels.insert(pc + 1);
            }
            if matches!(inst.op, Op::Barrier) {
                barriers.insert(pc);
            }
        }
        if barriers_are_uniform(kernel) {
            barriers.clear();
        }
        labels.extend(barriers.iter().map(|pc| pc + 1));
        Flow {
            labels,
            return_sites,
            barriers,
            loops,
        }
    }

    /// The statement that counts a jump from `pc` to `target`: a tick when it goes backward.
    fn tick(pc: u32, target: u32) -> String {
        if target <= pc {
            format!(
                "if (((++hg_tick) & {}u) == 0u && hg_timed_out(hg_flag, hg_rec, hg_kid, hg_t0, hg_tmo)) return; ",
                TICKS_PER_CHECK - 1
            )
        } else {
            String::new()
        }
    }

    /// The rendezvous every barrier jumps to (see the module documentation), placed after the
    /// kernel's last instruction; empty for kernels without barriers.
    pub(crate) fn rendezvous(&self) -> String {
        if self.barriers.is_empty() {
            return String::new();
        }
        let mut s = String::from("  return;\nHG_SYNC: {\n");
        s.push_str("  hg_bar_seen = hg_bid;\n");
        s.push_str("  __syncthreads();\n");
        s.push_str("  const hg_u32 hg_seen = hg_bar_seen;\n");
        s.push_str("  if (__syncthreads_or(hg_seen != hg_bid)) {\n");
        s.push_str(
            "    if (hg_seen != hg_bid) hg_diverged(hg_flag, hg_rec, hg_kid, hg_seen, hg_bid);\n",
        );
        s.push_str("    return;\n  }\n  switch (hg_bid) {");
        for pc in &self.barriers {
            s.push_str(&format!(" case {pc}u: goto {};", label(pc + 1)));
        }
        s.push_str(" default: return; }\n}\n");
        s
    }

    /// True when the kernel needs a return stack.
    pub(crate) fn has_calls(&self) -> bool {
        !self.return_sites.is_empty()
    }
}

/// True when every lane that has not exited reaches every `barrier` of `kernel` exactly once and
/// in program order, so lanes can never wait at different barriers: no call, no guarded
/// barrier, and no jump (guarded or not: an unguarded one may run on a diverged path) that
/// skips forward over a barrier or goes back to or before one it passed. Landing on a barrier
/// is fine. Sufficient, not necessary: other kernels keep the rendezvous.
pub(crate) fn barriers_are_uniform(kernel: &Kernel) -> bool {
    let barriers: Vec<u32> = kernel
        .insts
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i.op, Op::Barrier))
        .map(|(pc, _)| pc as u32)
        .collect();
    if barriers.is_empty() {
        return true;
    }
    kernel.insts.iter().enumerate().all(|(pc, inst)| {
        let pc = pc as u32;
        match (&inst.op, inst.op.target()) {
            (Op::Call { .. }, _) => false,
            (Op::Barrier, _) => inst.guard.is_none(),
            (_, Some(&t)) if t > pc => !barriers.iter().any(|&b| pc < b && b < t),
            (_, Some(&t)) => !barriers.iter().any(|&b| t <= b && b <= pc),
            (_, None) => true,
        }
    })
}

/// The statement for a control instruction at `pc`, or `None` if `op` is not one.
pub(crate) fn statement(
    kernel: &Kernel,
    flow: &Flow,
    pc: u32,
    op: &Op<u32>,
) -> Option<Result<String, String>> {
    Some(Ok(match op {
        Op::Bra { target } => format!("{}goto {};", Flow::tick(pc, *target), label(*target)),
        Op::Loop { counter, target } => {
            let ty = match kernel.regs.get(*counter as usize) {
                Some(r) if r.ty.is_int() => r.ty,
                _ => return Some(Err("loop over a non-integer counter".into())),
            };
            let c = reg(*counter);
            format!(
                "{c} = hg_sub_{ty}({c}, 1); if ({c} != 0) {{ {}goto {}; }}",
                Flow::tick(pc, *target),
                label(*target)
            )
        }
        Op::Call { target } => {
            format!(
                "hg_rs[hg_sp++] = {}u; {}goto {};",
                pc + 1,
                Flow::tick(pc, *target),
                label(*target)
            )
        }
        Op::Ret if flow.has_calls() => format!("goto {RETURN_LABEL};"),
        Op::Ret | Op::Exit => "return;".to_string(),
        Op::Barrier if flow.barriers.contains(&pc) => format!("hg_bid = {pc}u; goto HG_SYNC;"),
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
