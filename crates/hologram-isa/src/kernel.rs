//! A validated kernel: names resolved to indices, types known, facts for backends.

use std::collections::HashMap;

use crate::inst::{Inst, Op};
use crate::operand::{Operand, Special};
use crate::program::{ArrayDecl, Param, Program, RegDecl, Stmt};
use crate::types::Type;

/// A register of a kernel.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegInfo {
    /// Name without `%`.
    pub name: String,
    /// Type, fixed for the whole kernel.
    pub ty: Type,
    /// True when the program declared it with `.reg`.
    pub declared: bool,
}

/// Which array an array index of a [`Kernel`] refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrayRef {
    /// A buffer parameter (index into [`Kernel::params`]).
    Param(u32),
    /// A `.shared` array (index into [`Kernel::shared`]).
    Shared(u32),
    /// A `.scratch` array (index into [`Kernel::scratch`]).
    Scratch(u32),
}

/// Facts the validator established that backends use to run a kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct KernelFacts {
    /// Registers that some path may read before writing; backends set them to zero at start.
    pub zero_init: Vec<u32>,
    /// True when the kernel contains `barrier`.
    pub uses_barrier: bool,
    /// True when the kernel contains `atom`.
    pub uses_atomics: bool,
    /// The deepest nesting of `call` (0 without calls). Recursion is rejected.
    pub max_call_depth: u32,
    /// Special registers the kernel reads.
    pub specials: Vec<Special>,
    /// Bytes of `.shared` memory per block.
    pub shared_bytes: usize,
    /// Bytes of `.scratch` memory per lane.
    pub scratch_bytes: usize,
}

/// A validated kernel, ready for a backend. Built by [`crate::validate`].
///
/// Instructions use `u32` indices: registers index [`Kernel::regs`], parameters index
/// [`Kernel::params`], arrays are resolved with [`Kernel::array`], and labels are the index of the
/// instruction they mark (equal to `insts.len()` for a label at the very end, which ends the lane).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// Kernel name.
    pub name: String,
    /// Parameters in declaration order.
    pub params: Vec<Param>,
    /// `.shared` arrays.
    pub shared: Vec<ArrayDecl>,
    /// `.scratch` arrays.
    pub scratch: Vec<ArrayDecl>,
    /// Registers.
    pub regs: Vec<RegInfo>,
    /// Instructions.
    pub insts: Vec<Inst<u32>>,
    /// Label names with the instruction they mark, in the order they were written.
    pub labels: Vec<(String, u32)>,
    /// Facts for backends.
    pub facts: KernelFacts,
}

impl Kernel {
    /// Resolves an array index used in a [`crate::Mem`] of this kernel.
    pub fn array(&self, id: u32) -> ArrayRef {
        let p = self.params.len() as u32;
        let s = self.shared.len() as u32;
        if id < p {
            ArrayRef::Param(id)
        } else if id < p + s {
            ArrayRef::Shared(id - p)
        } else {
            ArrayRef::Scratch(id - p - s)
        }
    }

    /// The array index of an [`ArrayRef`].
    pub fn array_id(&self, r: ArrayRef) -> u32 {
        let p = self.params.len() as u32;
        let s = self.shared.len() as u32;
        match r {
            ArrayRef::Param(i) => i,
            ArrayRef::Shared(i) => p + i,
            ArrayRef::Scratch(i) => p + s + i,
        }
    }

    /// Name, element type and (for fixed arrays) length of an array.
    pub fn array_info(&self, id: u32) -> (&str, Type, Option<u32>) {
        match self.array(id) {
            ArrayRef::Param(i) => {
                let p = &self.params[i as usize];
                (&p.name, p.ty(), None)
            }
            ArrayRef::Shared(i) => {
                let a = &self.shared[i as usize];
                (&a.name, a.elem, Some(a.len))
            }
            ArrayRef::Scratch(i) => {
                let a = &self.scratch[i as usize];
                (&a.name, a.elem, Some(a.len))
            }
        }
    }

    /// The type of an operand.
    pub fn operand_type(&self, op: &Operand<u32>) -> Option<Type> {
        match op {
            Operand::Reg(r) => Some(self.regs[*r as usize].ty),
            Operand::Param(p) => Some(self.params[*p as usize].ty()),
            Operand::Special(_) => Some(Type::U32),
            Operand::Imm(_) => None,
        }
    }

    /// Turns the kernel back into a [`Program`] with its original names.
    ///
    /// A jump target with no entry in [`Kernel::labels`] (possible for kernels built by hand) is
    /// given the label `L<pc>`.
    pub fn to_program(&self) -> Program {
        let mut labels_at: HashMap<u32, Vec<String>> = HashMap::new();
        for (name, pc) in &self.labels {
            labels_at.entry(*pc).or_default().push(name.clone());
        }
        for inst in &self.insts {
            if let Some(t) = inst.op.target() {
                labels_at.entry(*t).or_insert_with(|| vec![format!("L{t}")]);
            }
        }
        let reg = |r: &u32| self.regs[*r as usize].name.clone();
        let param = |p: &u32| self.params[*p as usize].name.clone();
        let array = |a: &u32| self.array_info(*a).0.to_string();
        let label = |pc: &u32| labels_at.get(pc).map(|v| v[0].clone()).unwrap_or_default();
        let mut body = Vec::new();
        for pc in 0..=self.insts.len() {
            for name in labels_at.get(&(pc as u32)).into_iter().flatten() {
                body.push(Stmt::Label(name.clone()));
            }
            let Some(inst) = self.insts.get(pc) else {
                break;
            };
            let op = inst
                .op
                .map(&mut { reg }, &mut { param }, &mut { array }, &mut { label });
            let guard = inst.guard.as_ref().map(|g| crate::inst::Guard {
                pred: reg(&g.pred),
                negate: g.negate,
            });
            body.push(Stmt::Inst(Inst { guard, op }));
        }
        Program {
            name: self.name.clone(),
            params: self.params.clone(),
            shared: self.shared.clone(),
            scratch: self.scratch.clone(),
            regs: self
                .regs
                .iter()
                .filter(|r| r.declared)
                .map(|r| RegDecl {
                    name: r.name.clone(),
                    ty: r.ty,
                })
                .collect(),
            body,
        }
    }

    /// Checks that every index inside the kernel refers to something that exists: registers,
    /// parameters, arrays, guards and jump targets. [`crate::validate`] only makes kernels that
    /// pass; a kernel assembled by hand (its fields are public) may not, and must be checked
    /// before anything indexes tables with it.
    pub fn check_references(&self) -> Result<(), String> {
        let (nregs, nparams) = (self.regs.len(), self.params.len());
        let narrays = nparams + self.shared.len() + self.scratch.len();
        let reg = |r: &u32| (*r as usize) < nregs;
        let param = |p: &u32| (*p as usize) < nparams;
        let operand_ok = |o: &Operand<u32>| match o {
            Operand::Reg(r) => reg(r),
            Operand::Param(p) => param(p) && !self.params[*p as usize].is_buffer(),
            _ => true,
        };
        for (pc, inst) in self.insts.iter().enumerate() {
            let bad = |what: &str| Err(format!("instruction {pc}: {what}"));
            if inst.guard.as_ref().is_some_and(|g| !reg(&g.pred)) {
                return bad("its guard names a register that does not exist");
            }
            if inst.op.dst().is_some_and(|d| !reg(d)) {
                return bad("it writes a register that does not exist");
            }
            if inst.op.sources().iter().any(|(o, _)| !operand_ok(o)) {
                return bad("an operand names a register or scalar parameter that does not exist");
            }
            if let Some(m) = inst.op.mem() {
                let id = m.array as usize;
                if id >= narrays || (id < nparams && !self.params[id].is_buffer()) {
                    return bad("it accesses an array that does not exist");
                }
            }
            if inst
                .op
                .target()
                .is_some_and(|t| *t as usize > self.insts.len())
            {
                return bad("it jumps past the end of the kernel");
            }
        }
        if self.facts.zero_init.iter().any(|r| !reg(r)) {
            return Err("its zero-initialized registers include one that does not exist".into());
        }
        Ok(())
    }

    /// True when the instruction at `pc` can branch away (used by control-flow analyses).
    pub fn is_branch(&self, pc: usize) -> bool {
        matches!(
            self.insts.get(pc).map(|i| &i.op),
            Some(Op::Bra { .. } | Op::Loop { .. })
        )
    }
}
