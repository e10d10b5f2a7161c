//! Control flow: the ISA's labels, guarded branches, `loop`, `call`/`ret` and `exit` become a
//! state machine over basic blocks, `loop { switch hg_pc { ... } }`, inside `hg_run()`.
//!
//! `hg_pc` is the instruction index where the next block starts; `hg_state` is 0 while the lane
//! runs, 1 when it is parked at a barrier (`hg_bar` names the barrier, `hg_pc` the block after
//! it) and 2 when it has ended. `call` pushes the return block on a per-lane stack of depth
//! `KernelFacts::max_call_depth`; `ret` with an empty stack ends the lane like `exit`. A kernel
//! that is a single block with no jumps is emitted as straight-line code.
//!
//! No statement returns early from the middle of a block: `exit` and faults only set
//! `hg_state`, every later memory access of the block checks it, and the dispatch loop returns
//! at the next block. (Early returns are lowered by drivers into nested conditionals, one level
//! per return; Mesa's llvmpipe mis-executes kernels with ~80 of them.)

use std::collections::BTreeSet;

use hologram_isa::{Inst, Op};

use super::inst::zero;
use super::types::normalize;
use super::{CodegenError, Gen};

impl Gen<'_> {
    /// True when the instruction ends a basic block.
    fn ends_block(&self, op: &Op<u32>) -> bool {
        match op {
            Op::Bra { .. } | Op::Loop { .. } | Op::Call { .. } => true,
            // `exit` (and `ret` outside subroutines) return from hg_run wherever they are.
            Op::Ret => self.k.facts.max_call_depth > 0,
            Op::Exit => false,
            Op::Barrier => self.barrier_mode,
            _ => false,
        }
    }

    /// Start indices of the basic blocks.
    fn leaders(&self) -> BTreeSet<u32> {
        let n = self.k.insts.len() as u32;
        let mut l = BTreeSet::new();
        l.insert(0);
        for (pc, inst) in self.k.insts.iter().enumerate() {
            if let Some(t) = inst.op.target() {
                l.insert(*t);
            }
            if self.ends_block(&inst.op) {
                l.insert(pc as u32 + 1);
            }
        }
        l.retain(|&pc| pc < n);
        l
    }

    /// The text of `fn hg_run()`.
    pub(crate) fn run_function(&mut self) -> Result<String, CodegenError> {
        let leaders: Vec<u32> = self.leaders().into_iter().collect();
        let jumps = self.k.insts.iter().any(|i| i.op.target().is_some());
        self.out.clear();
        if leaders.len() <= 1 && !jumps && !self.barrier_mode {
            // Straight-line code (guarded exits return from hg_run).
            self.indent = 1;
            let n = self.k.insts.len();
            for pc in 0..n {
                self.emit_at(pc as u32)?;
            }
            self.line("hg_state = 2u;");
            return Ok(format!(
                "fn hg_run() {{\n{}}}\n",
                std::mem::take(&mut self.out)
            ));
        }
        self.indent = 3;
        let n = self.k.insts.len() as u32;
        for (bi, &start) in leaders.iter().enumerate() {
            let end = leaders.get(bi + 1).copied().unwrap_or(n);
            self.indent = 2;
            self.line(&format!("case {start}u: {{"));
            self.indent = 3;
            let mut terminated = false;
            for pc in start..end {
                self.emit_at(pc)?;
                if self.ends_block(&self.k.insts[pc as usize].op) {
                    terminated = true;
                }
            }
            if !terminated {
                self.goto(end);
            }
            self.indent = 2;
            self.line("}");
        }
        let cases = std::mem::take(&mut self.out);
        Ok(format!(
            "fn hg_run() {{\n    loop {{\n        if (hg_state != 0u) {{ return; }}\n        hg_tick = hg_tick - 1u;\n        if (hg_tick == 0u) {{ hg_refill(); if (hg_state != 0u) {{ return; }} }}\n        switch hg_pc {{\n{cases}            default: {{ hg_state = 2u; }}\n        }}\n    }}\n    // The loop only ends by `return`: the driver cut it (see the module documentation).\n    hg_report(4u, 0u, 0u);\n}}\n"
        ))
    }

    /// Sets the next block (the end of the kernel ends the lane).
    fn goto(&mut self, pc: u32) {
        if pc as usize >= self.k.insts.len() {
            self.line("hg_state = 2u;");
        } else {
            self.line(&format!("hg_pc = {pc}u;"));
        }
    }

    /// Emits the instruction at `pc`, including control flow.
    pub(crate) fn emit_at(&mut self, pc: u32) -> Result<(), CodegenError> {
        let inst: &Inst<u32> = &self.k.insts[pc as usize];
        let next = pc + 1;
        match &inst.op {
            Op::Bra { target } => {
                let target = *target;
                self.branch(inst, next, |g| g.goto(target));
            }
            Op::Loop { counter, target } => {
                let (c, target) = (*counter, *target);
                let ty = self.k.regs[c as usize].ty;
                let one = super::types::literal(
                    hologram_isa::semantics::Value::from_imm(hologram_isa::Imm::Int(1), ty),
                    false,
                );
                let dec = normalize(ty, &format!("(r{c} - {one})"));
                self.branch(inst, next, |g| {
                    g.line(&format!("r{c} = {dec};"));
                    g.line(&format!("if (r{c} != {}) {{", zero(ty)));
                    g.indent += 1;
                    g.goto(target);
                    g.indent -= 1;
                    g.line("} else {");
                    g.indent += 1;
                    g.goto(next);
                    g.indent -= 1;
                    g.line("}");
                });
            }
            Op::Call { target } => {
                let target = *target;
                self.branch(inst, next, |g| {
                    g.line(&format!("hg_stack[hg_sp] = {next}u;"));
                    g.line("hg_sp = hg_sp + 1u;");
                    g.goto(target);
                });
            }
            Op::Ret => {
                let calls = self.k.facts.max_call_depth > 0;
                self.branch(inst, next, |g| {
                    if calls {
                        g.line("if (hg_sp == 0u) { hg_state = 2u; } else {");
                        g.line("    hg_sp = hg_sp - 1u;");
                        g.line("    hg_pc = hg_stack[hg_sp];");
                        g.line("}");
                    } else {
                        g.line("hg_state = 2u;");
                    }
                });
            }
            Op::Exit => self.branch(inst, next, |g| g.line("hg_state = 2u;")),
            Op::Barrier if self.barrier_mode => {
                self.branch(inst, next, |g| {
                    g.goto_parked(next);
                    g.line(&format!("hg_bar = {pc}u;"));
                    // A lane that ended earlier in this block (exit, fault) stays ended.
                    g.line("if (hg_state == 0u) { hg_state = 1u; }");
                });
            }
            Op::Barrier => {}
            _ => self.emit_inst(inst)?,
        }
        Ok(())
    }

    /// Sets the block a parked lane resumes at (the end of the kernel: it then ends at once).
    fn goto_parked(&mut self, pc: u32) {
        self.line(&format!("hg_pc = {pc}u;"));
    }

    /// A block terminator: `taken` where the guard holds, fall through to `next` otherwise.
    /// In straight-line code the fall-through is simply the next statement.
    fn branch(&mut self, inst: &Inst<u32>, next: u32, taken: impl FnOnce(&mut Self)) {
        // Only block terminators need the explicit fall-through; `exit` simply returns.
        let straight = self.indent == 1 || !self.ends_block(&inst.op);
        match &inst.guard {
            None => taken(self),
            Some(g) => {
                let not = if g.negate { "!" } else { "" };
                self.line(&format!("if ({not}r{}) {{", g.pred));
                self.indent += 1;
                taken(self);
                self.indent -= 1;
                if straight {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.indent += 1;
                    self.goto(next);
                    self.indent -= 1;
                    self.line("}");
                }
            }
        }
    }
}
