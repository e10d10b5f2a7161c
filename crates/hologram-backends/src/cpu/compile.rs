//! Lowers a validated kernel into the interpreter's form: every operand becomes a lane array
//! ("slot") and every instruction a pre-selected, type-specialized lane loop.

use std::collections::HashMap;
use std::sync::Arc;

use hologram_isa::semantics::Value;
use hologram_isa::{Kernel, Op, Operand, Special, Type};

use super::lanes::{self, IndexFn, LaneFn, LoopFn};
use super::memops::{self, AtomFn, LoadFn, StoreFn};
use crate::error::{BackendError, Result};

/// Index of a lane array in a block's register file.
pub(crate) type Slot = u32;

/// An interpreter instruction.
pub(crate) enum XOp {
    Compute {
        f: LaneFn,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `contiguous`: the index is `%gid` (or a copy of it), so lane `l` reads element
    /// `index[0] + l` and a full batch is one bounds check and one copy.
    Load {
        f: LoadFn,
        widen: IndexFn,
        d: Slot,
        array: u32,
        index: Slot,
        contiguous: bool,
        size: usize,
    },
    Store {
        f: StoreFn,
        widen: IndexFn,
        array: u32,
        index: Slot,
        src: Slot,
        contiguous: bool,
        size: usize,
    },
    Atom {
        f: AtomFn,
        widen: IndexFn,
        d: Slot,
        array: u32,
        index: Slot,
        a: Slot,
        b: Slot,
    },
    Bra {
        target: u32,
    },
    Loop {
        f: LoopFn,
        counter: Slot,
        target: u32,
    },
    Call {
        target: u32,
    },
    Ret,
    Exit,
    Barrier,
    Fence,
}

/// An instruction with its guard (`(predicate slot, negate)`).
pub(crate) struct XInst {
    pub op: XOp,
    pub guard: Option<(Slot, bool)>,
    /// Constants to write into staging slots before the instruction runs: `(slot, index into
    /// CpuKernel::consts)`. Empty unless the kernel has more than [`MAX_CONST_SLOTS`] distinct
    /// constants.
    pub fills: Vec<(Slot, u32)>,
}

/// Distinct constants that get a slot of their own (written once per worker); the rest share
/// a few staging slots, written before each instruction that reads them. Every slot is a lane
/// array (up to 1024 lanes, or a 4096-element chunk on the native path), so without this a kernel
/// with a million distinct literals would ask for gigabytes per worker.
pub(crate) const MAX_CONST_SLOTS: usize = 1024;

/// Staging slots: an instruction reads at most three operands.
const STAGING_SLOTS: usize = 3;

/// Where a constant slot's value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ConstSource {
    /// A literal.
    Value(Value),
    /// A scalar parameter, known at launch.
    Param(u32),
}

/// A kernel ready for the interpreter.
pub(crate) struct CpuKernel {
    pub kernel: Arc<Kernel>,
    pub insts: Vec<XInst>,
    /// Registers, then special registers, then constants.
    pub num_slots: usize,
    pub specials: Vec<(Special, Slot)>,
    pub consts: Vec<(Slot, Type, ConstSource)>,
    pub zero_init: Vec<Slot>,
    /// Per parameter: the kernel stores to it or updates it atomically.
    pub written: Vec<bool>,
    /// Per parameter: every access indexes it with the lane's own `%gid` (`private.rs`).
    pub gid_private: Vec<bool>,
    /// A native loop for a recognized element-wise map.
    pub native: Option<super::native::NativeMap>,
    /// A recognized reduction.
    pub native_reduce: Option<hologram_compiler::patterns::ReducePattern>,
    /// A recognized row kernel (softmax and friends).
    pub native_rows: Option<hologram_compiler::patterns::RowPattern>,
    /// A max-pooling kernel.
    pub native_pool: Option<hologram_compiler::patterns::PoolPattern>,
}

impl CpuKernel {
    /// Bytes of the lowered program (instructions, constants, slot lists), for cache statistics.
    pub(crate) fn code_bytes(&self) -> usize {
        std::mem::size_of_val(self.insts.as_slice())
            + std::mem::size_of_val(self.specials.as_slice())
            + std::mem::size_of_val(self.consts.as_slice())
            + std::mem::size_of_val(self.zero_init.as_slice())
    }
}

struct Lowering<'k> {
    kernel: &'k Kernel,
    /// Registers that always hold `%gid` (their only write is an unguarded `mov.u32 %r, %gid`).
    gid_copies: Vec<bool>,
    next_slot: Slot,
    specials: HashMap<Special, Slot>,
    /// Each distinct constant's index in `const_list`.
    consts: HashMap<(Type, u64, bool), u32>,
    const_list: Vec<(Slot, Type, ConstSource)>,
    /// Staging slots (made at the first constant past [`MAX_CONST_SLOTS`]).
    staging: Vec<Slot>,
    /// Fills the instruction being lowered needs.
    fills: Vec<(Slot, u32)>,
}

impl Lowering<'_> {
    fn internal(&self, what: String) -> BackendError {
        BackendError::Compile {
            kernel: self.kernel.name.clone(),
            log: format!("internal error: the CPU backend has no implementation of {what}"),
        }
    }

    fn fresh(&mut self) -> Slot {
        let s = self.next_slot;
        self.next_slot += 1;
        s
    }

    /// The slot holding an operand of type `ty`.
    fn slot(&mut self, op: &Operand<u32>, ty: Type) -> Slot {
        match op {
            Operand::Reg(r) => *r,
            Operand::Special(s) => {
                if let Some(&slot) = self.specials.get(s) {
                    return slot;
                }
                let slot = self.fresh();
                self.specials.insert(*s, slot);
                slot
            }
            Operand::Imm(imm) => {
                let v = Value::from_imm(*imm, ty);
                self.constant(ty, v.to_bits(), false, ConstSource::Value(v))
            }
            Operand::Param(p) => self.constant(ty, *p as u64, true, ConstSource::Param(*p)),
        }
    }

    fn constant(&mut self, ty: Type, key: u64, is_param: bool, src: ConstSource) -> Slot {
        let index = match self.consts.get(&(ty, key, is_param)) {
            Some(&i) => i,
            None => {
                let i = self.const_list.len() as u32;
                let slot = if self.const_list.len() < MAX_CONST_SLOTS {
                    self.fresh()
                } else {
                    if self.staging.is_empty() {
                        self.staging = (0..STAGING_SLOTS).map(|_| self.fresh()).collect();
                    }
                    // Spilled: the slot is a staging slot, chosen at each use.
                    self.staging[0]
                };
                self.consts.insert((ty, key, is_param), i);
                self.const_list.push((slot, ty, src));
                i
            }
        };
        if (index as usize) < MAX_CONST_SLOTS {
            return self.const_list[index as usize].0;
        }
        // A spilled constant: the same one twice in an instruction shares its staging slot.
        if let Some(&(slot, _)) = self.fills.iter().find(|&&(_, i)| i == index) {
            return slot;
        }
        let slot = self.staging[self.fills.len().min(STAGING_SLOTS - 1)];
        self.fills.push((slot, index));
        slot
    }

    fn is_gid(&self, op: &Operand<u32>) -> bool {
        match op {
            Operand::Special(Special::GidLinear) => true,
            Operand::Reg(r) => self.gid_copies[*r as usize],
            _ => false,
        }
    }

    fn index_type(&self, op: &Operand<u32>) -> Type {
        self.kernel.operand_type(op).unwrap_or(Type::U64)
    }

    fn widen(&self, ty: Type) -> Result<IndexFn> {
        lanes::index_fn(ty).ok_or_else(|| self.internal(format!("an index of type {ty}")))
    }

    fn compute(&self, f: Option<LaneFn>, what: String) -> Result<LaneFn> {
        f.ok_or_else(|| self.internal(what))
    }

    fn lower(&mut self, op: &Op<u32>) -> Result<XOp> {
        Ok(match op {
            Op::Mov { ty, dst, src } => {
                let a = self.slot(src, *ty);
                let f = self.compute(lanes::mov_fn(*ty), format!("mov.{ty}"))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b: a,
                    c: a,
                }
            }
            Op::Cvt { to, from, dst, src } => {
                let a = self.slot(src, *from);
                let f = self.compute(lanes::cvt_fn(*to, *from), format!("cvt.{to}.{from}"))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b: a,
                    c: a,
                }
            }
            Op::Bitcast { to, from, dst, src } => {
                // Registers hold raw bits, and both types have one width: a copy.
                let a = self.slot(src, *from);
                let f = self.compute(lanes::mov_fn(*to), format!("bitcast.{to}.{from}"))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b: a,
                    c: a,
                }
            }
            Op::Unary { op, ty, dst, src } => {
                let a = self.slot(src, *ty);
                let f = self.compute(lanes::unary_fn(*op, *ty), format!("{}.{ty}", op.name()))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b: a,
                    c: a,
                }
            }
            Op::Binary { op, ty, dst, a, b } => {
                let (a, b) = (self.slot(a, *ty), self.slot(b, *ty));
                let f = self.compute(lanes::binary_fn(*op, *ty), format!("{}.{ty}", op.name()))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b,
                    c: a,
                }
            }
            Op::Ternary {
                op,
                ty,
                dst,
                a,
                b,
                c,
            } => {
                let (a, b, c) = (self.slot(a, *ty), self.slot(b, *ty), self.slot(c, *ty));
                let f = self.compute(lanes::ternary_fn(*op, *ty), format!("{}.{ty}", op.name()))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b,
                    c,
                }
            }
            Op::Setp { cmp, ty, dst, a, b } => {
                let (a, b) = (self.slot(a, *ty), self.slot(b, *ty));
                let f = self.compute(
                    lanes::setp_fn(*cmp, *ty),
                    format!("setp.{}.{ty}", cmp.name()),
                )?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b,
                    c: a,
                }
            }
            Op::Selp {
                ty,
                dst,
                a,
                b,
                cond,
            } => {
                let (a, b, c) = (
                    self.slot(a, *ty),
                    self.slot(b, *ty),
                    self.slot(cond, Type::Pred),
                );
                let f = self.compute(lanes::selp_fn(*ty), format!("selp.{ty}"))?;
                XOp::Compute {
                    f,
                    d: *dst,
                    a,
                    b,
                    c,
                }
            }
            Op::Ld { ty, dst, mem } => {
                let widen = self.widen(self.index_type(&mem.index))?;
                let index = self.slot(&mem.index, self.index_type(&mem.index));
                let contiguous = self.is_gid(&mem.index);
                XOp::Load {
                    f: memops::load_fn(*ty),
                    widen,
                    d: *dst,
                    array: mem.array,
                    index,
                    contiguous,
                    size: ty.size_bytes(),
                }
            }
            Op::St { ty, mem, src } => {
                let widen = self.widen(self.index_type(&mem.index))?;
                let index = self.slot(&mem.index, self.index_type(&mem.index));
                let src = self.slot(src, *ty);
                let contiguous = self.is_gid(&mem.index);
                XOp::Store {
                    f: memops::store_fn(*ty),
                    widen,
                    array: mem.array,
                    index,
                    src,
                    contiguous,
                    size: ty.size_bytes(),
                }
            }
            Op::Atom {
                op,
                ty,
                dst,
                mem,
                a,
                b,
            } => {
                let widen = self.widen(self.index_type(&mem.index))?;
                let index = self.slot(&mem.index, self.index_type(&mem.index));
                let a = self.slot(a, *ty);
                let b = match b {
                    Some(b) => self.slot(b, *ty),
                    None => a,
                };
                let f = memops::atom_fn(*op, *ty)
                    .ok_or_else(|| self.internal(format!("atom.{}.{ty}", op.name())))?;
                XOp::Atom {
                    f,
                    widen,
                    d: *dst,
                    array: mem.array,
                    index,
                    a,
                    b,
                }
            }
            Op::Bra { target } => XOp::Bra { target: *target },
            Op::Loop { counter, target } => {
                let ty = self.kernel.regs[*counter as usize].ty;
                let f =
                    lanes::loop_fn(ty).ok_or_else(|| self.internal(format!("loop over {ty}")))?;
                XOp::Loop {
                    f,
                    counter: *counter,
                    target: *target,
                }
            }
            Op::Call { target } => XOp::Call { target: *target },
            Op::Ret => XOp::Ret,
            Op::Exit => XOp::Exit,
            Op::Barrier => XOp::Barrier,
            Op::Fence { .. } => XOp::Fence,
        })
    }
}

fn gid_copies(kernel: &Kernel) -> Vec<bool> {
    let mut writes = vec![0u32; kernel.regs.len()];
    let mut is_copy = vec![false; kernel.regs.len()];
    for inst in &kernel.insts {
        if let Some(&d) = inst.op.dst() {
            writes[d as usize] += 1;
            is_copy[d as usize] = inst.guard.is_none()
                && matches!(
                    inst.op,
                    Op::Mov {
                        ty: Type::U32,
                        src: Operand::Special(Special::GidLinear),
                        ..
                    }
                );
        }
    }
    is_copy
        .iter()
        .zip(&writes)
        .map(|(&c, &w)| c && w == 1)
        .collect()
}

/// Per parameter: whether some `st` or `atom` writes it.
fn written_params(kernel: &Kernel) -> Vec<bool> {
    let mut written = vec![false; kernel.params.len()];
    for inst in &kernel.insts {
        if let Op::St { mem, .. } | Op::Atom { mem, .. } = &inst.op {
            if let Some(w) = written.get_mut(mem.array as usize) {
                *w = true;
            }
        }
    }
    written
}

/// Lowers a validated kernel (checked again for what the interpreter trusts: see `trust.rs`).
pub(crate) fn lower(kernel: &Arc<Kernel>) -> Result<CpuKernel> {
    super::trust::check(kernel)?;
    let mut l = Lowering {
        kernel,
        gid_copies: gid_copies(kernel),
        next_slot: kernel.regs.len() as Slot,
        specials: HashMap::new(),
        consts: HashMap::new(),
        const_list: Vec::new(),
        staging: Vec::new(),
        fills: Vec::new(),
    };
    let mut insts = Vec::with_capacity(kernel.insts.len());
    for inst in &kernel.insts {
        let op = l.lower(&inst.op)?;
        let guard = inst.guard.as_ref().map(|g| (g.pred, g.negate));
        let fills = std::mem::take(&mut l.fills);
        insts.push(XInst { op, guard, fills });
    }
    let mut specials: Vec<(Special, Slot)> = l.specials.into_iter().collect();
    specials.sort_by_key(|&(_, s)| s);
    Ok(CpuKernel {
        kernel: kernel.clone(),
        insts,
        num_slots: l.next_slot as usize,
        specials,
        consts: l.const_list,
        zero_init: kernel.facts.zero_init.clone(),
        written: written_params(kernel),
        gid_private: super::private::gid_private_params(kernel),
        native: None,
        native_reduce: None,
        native_rows: None,
        native_pool: None,
    })
}
