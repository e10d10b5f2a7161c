//! Local value numbering over basic blocks, with constant folding and propagation, copy
//! propagation, IEEE-safe algebraic simplification and common-subexpression elimination.
//!
//! Every rewrite replaces one instruction by one instruction (or deletes it), so a program never
//! grows. Float identities that could change a NaN payload or the sign of a zero (`x*1`, `x+0`,
//! `x-x`, `x*0`) are never applied; constant folding uses the same functions the CPU backend
//! runs, so folded results are bit-identical.

use std::collections::{BTreeMap, HashMap};

use hologram_isa::semantics::{eval, Value};
use hologram_isa::{BinaryOp, CmpOp, Inst, Kernel, Op, Operand, Special, TernaryOp, Type};

use super::blocks::Flow;
use super::body::{is_pure, Body};

/// What a register or operand holds, as far as one basic block knows.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Val {
    Const(Type, u64),
    Param(u32),
    Special(Special),
    Num(u32),
}

/// What a register holds in the current block, valid when `block` is the current block's
/// number (so starting a block forgets everything without touching every register).
#[derive(Clone, Copy)]
struct RegVal {
    block: u32,
    val: Val,
    /// When it started holding `val` (orders the holders of a value).
    since: u64,
}

struct Block<'k> {
    kernel: &'k Kernel,
    /// Per register; see [`RegVal`].
    regs: Vec<RegVal>,
    number: u32,
    /// Registers holding each value, keyed by when they started to (the first has held it
    /// longest); a map, so that a register moving between values costs a log, not a scan.
    holders: HashMap<Val, BTreeMap<u64, u32>>,
    seq: u64,
    exprs: HashMap<(Tag, Vec<Val>), Val>,
    next_num: u32,
    never_written: &'k [bool],
}

impl Block<'_> {
    fn fresh(&mut self) -> Val {
        self.next_num += 1;
        Val::Num(self.next_num)
    }

    fn reg_val(&self, r: u32) -> Option<Val> {
        let e = &self.regs[r as usize];
        (e.block == self.number).then_some(e.val)
    }

    fn reg(&mut self, r: u32) -> Val {
        if let Some(v) = self.reg_val(r) {
            return v;
        }
        let v = if self.never_written[r as usize] {
            // Registers nothing writes read zero everywhere.
            Val::Const(self.kernel.regs[r as usize].ty, 0)
        } else {
            self.fresh()
        };
        self.add_holder(v, r);
        v
    }

    /// Records that `r` (which held nothing known in this block) now holds `v`.
    fn add_holder(&mut self, v: Val, r: u32) {
        self.seq += 1;
        self.regs[r as usize] = RegVal {
            block: self.number,
            val: v,
            since: self.seq,
        };
        self.holders.entry(v).or_default().insert(self.seq, r);
    }

    fn remove_holder(&mut self, r: u32) {
        let e = self.regs[r as usize];
        if e.block != self.number {
            return;
        }
        if let Some(h) = self.holders.get_mut(&e.val) {
            h.remove(&e.since);
            if h.is_empty() {
                self.holders.remove(&e.val);
            }
        }
    }

    /// The register that has held `v` longest.
    fn first_holder(&self, v: Val) -> Option<u32> {
        self.holders
            .get(&v)
            .and_then(|h| h.values().next().copied())
    }

    fn val(&mut self, op: &Operand<u32>, ty: Type) -> Val {
        match op {
            Operand::Reg(r) => self.reg(*r),
            Operand::Imm(i) => {
                let v = Value::from_imm(*i, ty);
                Val::Const(ty, v.to_bits())
            }
            Operand::Param(p) => Val::Param(*p),
            Operand::Special(s) => Val::Special(*s),
        }
    }

    /// The best operand for a value: a literal, a parameter, a special, or the register that has
    /// held it longest.
    fn operand_for(&self, v: Val, current: &Operand<u32>, is_index: bool) -> Operand<u32> {
        match v {
            Val::Const(ty, bits) => {
                let value = Value::from_bits(ty, bits);
                let imm = value.to_imm();
                let negative = matches!(imm, hologram_isa::Imm::Int(i) if i < 0);
                if is_index && negative {
                    return current.clone();
                }
                Operand::Imm(imm)
            }
            Val::Param(p) => Operand::Param(p),
            Val::Special(s) => Operand::Special(s),
            Val::Num(_) => match self.first_holder(v) {
                Some(h) => Operand::Reg(h),
                None => current.clone(),
            },
        }
    }

    /// Records that `dst` now holds `v`.
    fn define(&mut self, dst: u32, v: Val) {
        self.remove_holder(dst);
        self.add_holder(v, dst);
    }

    fn const_of(v: Val) -> Option<Value> {
        match v {
            Val::Const(ty, bits) => Some(Value::from_bits(ty, bits)),
            _ => None,
        }
    }
}

fn is_zero(v: Val) -> bool {
    matches!(v, Val::Const(ty, 0) if ty.is_int() || ty == Type::Pred)
}

fn is_one(v: Val) -> bool {
    matches!(v, Val::Const(ty, 1) if ty.is_int() || ty == Type::Pred)
}

fn is_all_ones(v: Val) -> bool {
    match v {
        Val::Const(ty, bits) if ty.is_int() => bits == u64::MAX >> (64 - ty.bits()),
        Val::Const(Type::Pred, 1) => true,
        _ => false,
    }
}

/// An equivalent simpler form: `Ok(i)` = the value of source operand `i`, `Err(v)` = a constant.
fn simplify(op: &Op<u32>, vals: &[Val]) -> Option<Result<usize, Value>> {
    let zero = |ty: Type| Value::from_bits(ty, 0);
    match op {
        Op::Binary { op, ty, .. } if ty.is_int() || *ty == Type::Pred => {
            let (a, b) = (vals[0], vals[1]);
            use BinaryOp::*;
            match op {
                Add | Or | Xor | Sub | Shl | Shr if is_zero(b) => Some(Ok(0)),
                Add | Or | Xor if is_zero(a) => Some(Ok(1)),
                Mul | And if is_zero(a) || is_zero(b) => Some(Err(zero(*ty))),
                Mul | Div if is_one(b) && *ty != Type::Pred => Some(Ok(0)),
                Mul if is_one(a) => Some(Ok(1)),
                And if is_all_ones(b) => Some(Ok(0)),
                And if is_all_ones(a) => Some(Ok(1)),
                Or if is_all_ones(a) || is_all_ones(b) => {
                    Some(Err(Value::from_bits(*ty, u64::MAX)))
                }
                Rem if is_one(b) => Some(Err(zero(*ty))),
                And | Or | Min | Max if a == b => Some(Ok(0)),
                Sub | Xor if a == b => Some(Err(zero(*ty))),
                _ => None,
            }
        }
        Op::Setp { cmp, ty, .. } if ty.is_int() || *ty == Type::Pred => {
            if vals[0] != vals[1] {
                return None;
            }
            let t = matches!(cmp, CmpOp::Eq | CmpOp::Le | CmpOp::Ge);
            Some(Err(Value::Pred(t)))
        }
        // Reinterpreting or converting a type as itself copies (NaN payloads included).
        Op::Bitcast { to, from, .. } | Op::Cvt { to, from, .. } if to == from => Some(Ok(0)),
        Op::Selp { .. } => {
            let (a, b, p) = (vals[0], vals[1], vals[2]);
            if a == b || p == Val::Const(Type::Pred, 1) {
                Some(Ok(0))
            } else if p == Val::Const(Type::Pred, 0) {
                Some(Ok(1))
            } else {
                None
            }
        }
        Op::Ternary {
            op: TernaryOp::Mad,
            ty,
            ..
        } if ty.is_int() => {
            if is_zero(vals[0]) || is_zero(vals[1]) {
                Some(Ok(2))
            } else {
                None
            }
        }
        _ => None,
    }
}

fn is_nan(v: Value) -> bool {
    match v {
        Value::F16(x) => x.is_nan(),
        Value::BF16(x) => x.is_nan(),
        Value::F32(x) => x.is_nan(),
        Value::F64(x) => x.is_nan(),
        _ => false,
    }
}

/// `v`, or the positive quiet NaN of its type if `v` is a NaN.
fn canonical_nan(v: Value) -> Value {
    let quiet = match v {
        Value::F16(x) if x.is_nan() => 0x7e00,
        Value::BF16(x) if x.is_nan() => 0x7fc0,
        Value::F32(x) if x.is_nan() => 0x7fc0_0000,
        Value::F64(x) if x.is_nan() => 0x7ff8_0000_0000_0000,
        _ => return v,
    };
    Value::from_bits(v.ty(), quiet)
}

/// Folds the operation when every source is a constant.
fn fold(op: &Op<u32>, vals: &[Val]) -> Option<Value> {
    let c: Option<Vec<Value>> = vals.iter().map(|&v| Block::const_of(v)).collect();
    let c = c?;
    match op {
        Op::Mov { .. } => Some(c[0]),
        Op::Cvt { to, .. } => eval::cvt(c[0], *to),
        // A NaN literal keeps its payload only as far as an f64 does (a signalling NaN would
        // come back quiet), so bit patterns that are NaNs stay bitcasts.
        Op::Bitcast { to, .. } => eval::bitcast(c[0], *to).filter(|v| !is_nan(*v)),
        Op::Unary { op, .. } => eval::unary(*op, c[0]),
        // Which operand's NaN an operation propagates depends on operand order, which this
        // pass may change; the ISA leaves NaN results unspecified, so folded NaNs are made one
        // canonical NaN and the canonical form does not depend on the operands' order.
        Op::Binary { op, .. } => eval::binary(*op, c[0], c[1]).map(canonical_nan),
        Op::Ternary { op, .. } => eval::ternary(*op, c[0], c[1], c[2]).map(canonical_nan),
        Op::Setp { cmp, .. } => eval::compare(*cmp, c[0], c[1]).map(Value::Pred),
        Op::Selp { .. } => match c[2] {
            Value::Pred(p) => Some(if p { c[0] } else { c[1] }),
            _ => None,
        },
        _ => None,
    }
}

/// The operation of an expression, without its operands.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Tag {
    Cvt(Type, Type),
    Bitcast(Type, Type),
    Unary(hologram_isa::UnaryOp, Type),
    Binary(BinaryOp, Type),
    Ternary(TernaryOp, Type),
    Setp(CmpOp, Type),
    Selp(Type),
}

/// The key under which an expression is remembered (commutative operands sorted).
fn expr_key(op: &Op<u32>, vals: &[Val]) -> Option<(Tag, Vec<Val>)> {
    let mut vals = vals.to_vec();
    let tag = match op {
        Op::Cvt { to, from, .. } => Tag::Cvt(*to, *from),
        Op::Bitcast { to, from, .. } => Tag::Bitcast(*to, *from),
        Op::Unary { op, ty, .. } => Tag::Unary(*op, *ty),
        Op::Binary { op, ty, .. } => {
            if op.is_commutative() {
                vals.sort_unstable();
            }
            Tag::Binary(*op, *ty)
        }
        Op::Ternary { op, ty, .. } => {
            vals[..2].sort_unstable();
            Tag::Ternary(*op, *ty)
        }
        Op::Setp { cmp, ty, .. } => {
            // `gt a, b` is `lt b, a` (for floats too: both are false with a NaN), so both
            // spellings share a key, whichever the operand-ordering pass later picks.
            let cmp = match cmp {
                CmpOp::Eq | CmpOp::Ne => {
                    vals.sort_unstable();
                    *cmp
                }
                CmpOp::Gt | CmpOp::Ge => {
                    vals.swap(0, 1);
                    if *cmp == CmpOp::Gt {
                        CmpOp::Lt
                    } else {
                        CmpOp::Le
                    }
                }
                CmpOp::Lt | CmpOp::Le => *cmp,
            };
            Tag::Setp(cmp, *ty)
        }
        Op::Selp { ty, .. } => Tag::Selp(*ty),
        _ => return None,
    };
    Some((tag, vals))
}

/// Rewrites one operand: `(operand, type it is read as, is it an array index)`.
type Rewrite<'a> = dyn FnMut(&Operand<u32>, Type, bool) -> Operand<u32> + 'a;

/// Rewrites the sources of `op` with `f(operand, type, is_index)`.
fn map_sources(
    op: &Op<u32>,
    f: &mut impl FnMut(&Operand<u32>, Type, bool) -> Operand<u32>,
    kernel: &Kernel,
) -> Op<u32> {
    let idx_ty = |o: &Operand<u32>| kernel.operand_type(o).unwrap_or(Type::U64);
    let mem = |m: &hologram_isa::Mem<u32>, f: &mut Rewrite| hologram_isa::Mem {
        array: m.array,
        index: f(&m.index, idx_ty(&m.index), true),
    };
    match op {
        Op::Mov { ty, dst, src } => Op::Mov {
            ty: *ty,
            dst: *dst,
            src: f(src, *ty, false),
        },
        Op::Cvt { to, from, dst, src } => Op::Cvt {
            to: *to,
            from: *from,
            dst: *dst,
            src: f(src, *from, false),
        },
        Op::Bitcast { to, from, dst, src } => Op::Bitcast {
            to: *to,
            from: *from,
            dst: *dst,
            src: f(src, *from, false),
        },
        Op::Ld { ty, dst, mem: m } => Op::Ld {
            ty: *ty,
            dst: *dst,
            mem: mem(m, f),
        },
        Op::St { ty, mem: m, src } => {
            let m = mem(m, f);
            Op::St {
                ty: *ty,
                mem: m,
                src: f(src, *ty, false),
            }
        }
        Op::Unary { op, ty, dst, src } => Op::Unary {
            op: *op,
            ty: *ty,
            dst: *dst,
            src: f(src, *ty, false),
        },
        Op::Binary { op, ty, dst, a, b } => Op::Binary {
            op: *op,
            ty: *ty,
            dst: *dst,
            a: f(a, *ty, false),
            b: f(b, *ty, false),
        },
        Op::Ternary {
            op,
            ty,
            dst,
            a,
            b,
            c,
        } => Op::Ternary {
            op: *op,
            ty: *ty,
            dst: *dst,
            a: f(a, *ty, false),
            b: f(b, *ty, false),
            c: f(c, *ty, false),
        },
        Op::Setp { cmp, ty, dst, a, b } => Op::Setp {
            cmp: *cmp,
            ty: *ty,
            dst: *dst,
            a: f(a, *ty, false),
            b: f(b, *ty, false),
        },
        Op::Selp {
            ty,
            dst,
            a,
            b,
            cond,
        } => Op::Selp {
            ty: *ty,
            dst: *dst,
            a: f(a, *ty, false),
            b: f(b, *ty, false),
            cond: f(cond, Type::Pred, false),
        },
        Op::Atom {
            op,
            ty,
            dst,
            mem: m,
            a,
            b,
        } => {
            let m = mem(m, f);
            let a2 = f(a, *ty, false);
            let b2 = b.as_ref().map(|b| f(b, *ty, false));
            Op::Atom {
                op: *op,
                ty: *ty,
                dst: *dst,
                mem: m,
                a: a2,
                b: b2,
            }
        }
        other => other.clone(),
    }
}

/// The type each source operand is read as, in `Op::sources` order.
fn source_types(op: &Op<u32>, kernel: &Kernel) -> Vec<Type> {
    op.sources()
        .iter()
        .map(|(o, t)| t.unwrap_or_else(|| kernel.operand_type(o).unwrap_or(Type::U64)))
        .collect()
}

/// Runs value numbering over every basic block; returns true if anything changed.
pub(crate) fn run(kernel: &Kernel, body: &mut Body) -> bool {
    let mut never_written = vec![true; kernel.regs.len()];
    for inst in body.slots().iter().flatten() {
        if let Some(&d) = inst.op.dst() {
            never_written[d as usize] = false;
        }
    }
    let leaders = Flow::leaders(body);
    let mut changed = false;
    let mut state: Option<Block> = None;
    for (pc, &leader) in leaders.iter().enumerate().take(body.len()) {
        if leader || state.is_none() {
            let (regs, number) = match state.take() {
                Some(old) => (old.regs, old.number + 1),
                None => {
                    let unknown = RegVal {
                        block: u32::MAX,
                        val: Val::Num(0),
                        since: 0,
                    };
                    (vec![unknown; kernel.regs.len()], 0)
                }
            };
            state = Some(Block {
                kernel,
                regs,
                number,
                holders: HashMap::new(),
                seq: 0,
                exprs: HashMap::new(),
                next_num: 0,
                never_written: &never_written,
            });
        }
        let Some(st) = state.as_mut() else { continue };
        let Some(inst) = body.get(pc).cloned() else {
            continue;
        };
        // A guard known true disappears; known false deletes the instruction.
        let mut guard = inst.guard.clone();
        if let Some(g) = &inst.guard {
            if let Val::Const(_, bits) = st.reg(g.pred) {
                if (bits != 0) != g.negate {
                    guard = None;
                } else {
                    changed |= body.delete(pc);
                    continue;
                }
            }
        }
        // Propagate constants and copies into the sources.
        let mut op = map_sources(
            &inst.op,
            &mut |o, ty, is_index| {
                let v = st.val(o, ty);
                st.operand_for(v, o, is_index)
            },
            kernel,
        );
        let types = source_types(&op, kernel);
        let vals: Vec<Val> = op
            .sources()
            .iter()
            .zip(&types)
            .map(|((o, _), ty)| st.val(o, *ty))
            .collect();
        let dst = op.dst().copied();
        if is_pure(&op) {
            let dst = dst.unwrap_or(0);
            let ty = op.dst_type().unwrap_or(Type::U32);
            let unguarded = guard.is_none();
            let mut result: Option<Val> = None;
            if let Some(v) = fold(&op, &vals) {
                op = Op::Mov {
                    ty,
                    dst,
                    src: Operand::Imm(v.to_imm()),
                };
                result = Some(Val::Const(ty, v.to_bits()));
            } else if let Some(s) = simplify(&op, &vals) {
                match s {
                    Ok(i) => {
                        let src = op.sources()[i].0.clone();
                        result = Some(vals[i]);
                        op = Op::Mov { ty, dst, src };
                    }
                    Err(v) => {
                        op = Op::Mov {
                            ty,
                            dst,
                            src: Operand::Imm(v.to_imm()),
                        };
                        result = Some(Val::Const(ty, v.to_bits()));
                    }
                }
            } else if let Op::Mov { .. } = op {
                result = Some(vals[0]);
            } else if unguarded {
                if let Some(key) = expr_key(&op, &vals) {
                    if let Some(&v) = st.exprs.get(&key) {
                        if let Some(h) = st.first_holder(v) {
                            op = Op::Mov {
                                ty,
                                dst,
                                src: Operand::Reg(h),
                            };
                            result = Some(v);
                        }
                    } else {
                        let v = st.fresh();
                        st.exprs.insert(key, v);
                        result = Some(v);
                    }
                }
            }
            // Writing a register with the value it already holds does nothing.
            if unguarded {
                if let (Some(v), Some(cur)) = (result, st.reg_val(dst)) {
                    if v == cur {
                        changed |= body.delete(pc);
                        continue;
                    }
                }
            }
            let v = match result {
                Some(v) if unguarded => v,
                _ => st.fresh(),
            };
            st.define(dst, v);
        } else if let Some(d) = dst {
            let v = st.fresh();
            st.define(d, v);
        }
        let new = Inst { guard, op };
        if Some(&new) != body.get(pc) {
            body.set(pc, new);
            changed = true;
        }
    }
    changed
}
