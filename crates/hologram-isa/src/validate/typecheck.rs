//! Type rules of every instruction.

use super::error::{Location, ValidationError, ValidationErrorKind as K};
use super::{operand_type, Resolver};
use crate::inst::{AtomOp, BinaryOp, CmpOp, Op, TernaryOp, UnaryOp};
use crate::kernel::ArrayRef;
use crate::operand::{Imm, Mem, Operand};
use crate::types::Type;

type VResult = Result<(), ValidationError>;

fn unsupported(loc: Location, op: String, ty: Type, why: &'static str) -> VResult {
    Err(ValidationError::new(
        loc,
        K::UnsupportedType { op, ty, why },
    ))
}

/// Checks that an immediate can be used as a value of type `ty`.
pub(crate) fn check_imm(imm: Imm, ty: Type, loc: Location) -> VResult {
    let out_of_range = || {
        Err(ValidationError::new(
            loc,
            K::ImmediateOutOfRange {
                value: imm.to_string(),
                ty,
            },
        ))
    };
    match (imm, ty) {
        (Imm::Int(v), Type::Pred) => {
            if v == 0 || v == 1 {
                Ok(())
            } else {
                out_of_range()
            }
        }
        (Imm::Float(_), Type::Pred) => out_of_range(),
        (Imm::Int(v), t) if t.is_int() => {
            // Any value in [signed min, unsigned max] of the width is accepted; it is taken modulo
            // 2^bits, so `0xffffffff` and `-1` are the same i32.
            let bits = t.bits();
            let lo = -(1i128 << (bits - 1));
            let hi = (1i128 << bits) - 1;
            if v < lo || v > hi {
                out_of_range()
            } else {
                Ok(())
            }
        }
        (Imm::Float(_), t) if t.is_int() => Err(ValidationError::new(
            loc,
            K::TypeMismatch(format!("float literal {imm} used where {t} is expected")),
        )),
        (Imm::Int(v), t) => {
            if (v as f64).is_finite() && !overflows(v as f64, t) {
                Ok(())
            } else {
                out_of_range()
            }
        }
        (Imm::Float(v), t) => {
            if v.is_finite() && overflows(v, t) {
                out_of_range()
            } else {
                Ok(())
            }
        }
    }
}

/// True when a finite value rounds to infinity in the float type `t`.
fn overflows(v: f64, t: Type) -> bool {
    match t {
        Type::F16 => half::f16::from_f64(v).is_infinite(),
        Type::BF16 => half::bf16::from_f64(v).is_infinite(),
        Type::F32 => (v as f32).is_infinite(),
        _ => false,
    }
}

fn describe(op: &Operand<u32>, r: &Resolver<'_>) -> String {
    match op {
        Operand::Reg(i) => format!("%{}", r.regs[*i as usize].name),
        Operand::Param(i) => r.program.params[*i as usize].name.clone(),
        Operand::Imm(v) => v.to_string(),
        Operand::Special(s) => s.to_string(),
    }
}

/// Checks a source operand against the type it must have (`None`: an index, any integer).
fn check_source(r: &Resolver<'_>, op: &Operand<u32>, want: Option<Type>, loc: Location) -> VResult {
    match (op, want) {
        (Operand::Imm(imm), Some(ty)) => check_imm(*imm, ty, loc),
        (Operand::Imm(imm), None) => match imm {
            Imm::Int(v) if *v >= 0 && *v <= u64::MAX as i128 => Ok(()),
            _ => Err(ValidationError::new(
                loc,
                K::TypeMismatch(format!("index {imm} must be a non-negative integer")),
            )),
        },
        (_, want) => {
            let have = operand_type(r, op).unwrap_or(Type::Pred);
            match want {
                Some(ty) if have != ty => Err(ValidationError::new(
                    loc,
                    K::TypeMismatch(format!("{} is {have}, expected {ty}", describe(op, r))),
                )),
                None if !have.is_int() => Err(ValidationError::new(
                    loc,
                    K::TypeMismatch(format!(
                        "index {} is {have}, expected an integer",
                        describe(op, r)
                    )),
                )),
                _ => Ok(()),
            }
        }
    }
}

/// Checks an array access: element type, writability, constant index bounds.
fn check_mem(
    r: &Resolver<'_>,
    mem: &Mem<u32>,
    ty: Type,
    write: bool,
    atomic: bool,
    loc: Location,
) -> VResult {
    let p = r.program;
    let nparams = p.params.len() as u32;
    let nshared = p.shared.len() as u32;
    let (name, elem, len, kind) = if mem.array < nparams {
        let prm = &p.params[mem.array as usize];
        if write && !prm.is_writable() {
            return Err(ValidationError::new(
                loc,
                K::ReadOnlyWrite(prm.name.clone()),
            ));
        }
        (&prm.name, prm.ty(), None, ArrayRef::Param(mem.array))
    } else if mem.array < nparams + nshared {
        let i = mem.array - nparams;
        let a = &p.shared[i as usize];
        (&a.name, a.elem, Some(a.len), ArrayRef::Shared(i))
    } else {
        let i = mem.array - nparams - nshared;
        let a = &p.scratch[i as usize];
        (&a.name, a.elem, Some(a.len), ArrayRef::Scratch(i))
    };
    if elem != ty {
        return Err(ValidationError::new(
            loc,
            K::TypeMismatch(format!(
                "'{name}' holds {elem}, but the instruction accesses it as {ty}"
            )),
        ));
    }
    if atomic && matches!(kind, ArrayRef::Scratch(_)) {
        return Err(ValidationError::new(
            loc,
            K::Invalid(format!(
                "atomics need global or shared memory; '{name}' is per-lane .scratch"
            )),
        ));
    }
    check_source(r, &mem.index, None, loc)?;
    if let (Some(len), Operand::Imm(Imm::Int(i))) = (len, &mem.index) {
        if *i >= len as i128 {
            return Err(ValidationError::new(
                loc,
                K::StaticIndexOutOfBounds {
                    array: name.clone(),
                    index: *i,
                    len,
                },
            ));
        }
    }
    Ok(())
}

/// Checks the types of one resolved instruction.
pub(crate) fn check(r: &Resolver<'_>, op: &Op<u32>, loc: Location) -> VResult {
    for (src, want) in op.sources() {
        if op.mem().is_some_and(|m| std::ptr::eq(&m.index, src)) {
            continue; // checked with the array below
        }
        check_source(r, src, want, loc)?;
    }
    match op {
        Op::Mov { .. } | Op::Selp { .. } => Ok(()),
        Op::Cvt { to, from, .. } => {
            if *to == Type::Pred || *from == Type::Pred {
                return unsupported(
                    loc,
                    "cvt".into(),
                    Type::Pred,
                    "use setp or selp to convert to or from pred",
                );
            }
            Ok(())
        }
        Op::Bitcast { to, from, .. } => {
            if *to == Type::Pred || *from == Type::Pred {
                return unsupported(
                    loc,
                    format!("bitcast.{to}.{from}"),
                    Type::Pred,
                    "a predicate has no bits to reinterpret; use selp or setp",
                );
            }
            if to.bits() != from.bits() {
                return Err(ValidationError::new(
                    loc,
                    K::TypeMismatch(format!(
                        "bitcast.{to}.{from} reinterprets bits between types of the same width, but {to} has {} bits and {from} {} (use cvt to convert values)",
                        to.bits(),
                        from.bits()
                    )),
                ));
            }
            Ok(())
        }
        Op::Ld { ty, mem, .. } => check_mem(r, mem, *ty, false, false, loc),
        Op::St { ty, mem, .. } => check_mem(r, mem, *ty, true, false, loc),
        Op::Unary { op, ty, .. } => {
            let name = format!("{}.{ty}", op.name());
            match op {
                UnaryOp::Not if !(ty.is_int() || *ty == Type::Pred) => {
                    unsupported(loc, name, *ty, "not is for integers and predicates")
                }
                UnaryOp::Abs | UnaryOp::Neg if !(ty.is_signed_int() || ty.is_float()) => {
                    unsupported(
                        loc,
                        name,
                        *ty,
                        "abs and neg are for signed integers and floats",
                    )
                }
                op if op.float_only() && !ty.is_float() => {
                    unsupported(loc, name, *ty, "this operation is for floats only")
                }
                _ => Ok(()),
            }
        }
        Op::Binary { op, ty, .. } => {
            let name = format!("{}.{ty}", op.name());
            match op {
                BinaryOp::And | BinaryOp::Or | BinaryOp::Xor
                    if !(ty.is_int() || *ty == Type::Pred) =>
                {
                    unsupported(
                        loc,
                        name,
                        *ty,
                        "bitwise operations are for integers and predicates",
                    )
                }
                BinaryOp::Shl | BinaryOp::Shr if !ty.is_int() => {
                    unsupported(loc, name, *ty, "shifts are for integers")
                }
                BinaryOp::Pow if !ty.is_float() => unsupported(loc, name, *ty, "pow is for floats"),
                BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Rem
                | BinaryOp::Min
                | BinaryOp::Max
                    if *ty == Type::Pred =>
                {
                    unsupported(
                        loc,
                        name,
                        *ty,
                        "arithmetic is for numbers; use and/or/xor on predicates",
                    )
                }
                _ => Ok(()),
            }
        }
        Op::Ternary { op, ty, .. } => {
            let name = format!("{}.{ty}", op.name());
            match op {
                TernaryOp::Fma if !ty.is_float() => {
                    unsupported(loc, name, *ty, "fma is for floats; use mad")
                }
                TernaryOp::Mad if *ty == Type::Pred => {
                    unsupported(loc, name, *ty, "mad is for numbers")
                }
                _ => Ok(()),
            }
        }
        Op::Setp { cmp, ty, .. } => {
            if *ty == Type::Pred && !matches!(cmp, CmpOp::Eq | CmpOp::Ne) {
                return unsupported(
                    loc,
                    format!("setp.{}.pred", cmp.name()),
                    *ty,
                    "predicates compare with eq and ne only",
                );
            }
            Ok(())
        }
        Op::Atom { op, ty, mem, .. } => {
            let name = format!("atom.{}.{ty}", op.name());
            let ints = matches!(ty, Type::I32 | Type::U32 | Type::I64 | Type::U64);
            let floats = matches!(ty, Type::F32 | Type::F64);
            let ok = match op {
                AtomOp::Add | AtomOp::Exch => ints || floats,
                AtomOp::Min | AtomOp::Max | AtomOp::Cas => ints,
            };
            if !ok {
                return unsupported(
                    loc,
                    name,
                    *ty,
                    "atomics take 32- and 64-bit integers (add and exch also f32 and f64)",
                );
            }
            check_mem(r, mem, *ty, true, true, loc)
        }
        Op::Loop { counter, .. } => {
            let ty = r.regs[*counter as usize].ty;
            if !ty.is_int() {
                return Err(ValidationError::new(
                    loc,
                    K::TypeMismatch(format!(
                        "loop counter %{} is {ty}, expected an integer",
                        r.regs[*counter as usize].name
                    )),
                ));
            }
            Ok(())
        }
        Op::Bra { .. } | Op::Call { .. } | Op::Ret | Op::Exit | Op::Barrier | Op::Fence { .. } => {
            Ok(())
        }
    }
}
