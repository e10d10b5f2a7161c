//! Register-to-register instructions: `mov cvt` and the arithmetic, logic, compare and select
//! groups. Each becomes one C assignment that calls a prelude helper.

use hologram_isa::{BinaryOp, CmpOp, Kernel, Op, Type, UnaryOp};

use super::ctype::{ctype, operand, reg};
use super::divide;

/// The statement for a compute instruction, or `None` if `op` is not one.
pub(crate) fn statement(kernel: &Kernel, op: &Op<u32>) -> Option<Result<String, String>> {
    let o = |x, ty| operand(kernel, x, ty);
    let assign =
        |dst: &u32, expr: Result<String, String>| expr.map(|e| format!("{} = {e};", reg(*dst)));
    Some(match op {
        Op::Mov { ty, dst, src } => assign(dst, Ok(o(src, *ty))),
        Op::Cvt { to, from, dst, src } => assign(dst, cvt(*to, *from, &o(src, *from))),
        Op::Bitcast { to, from, dst, src } => assign(dst, bitcast(*to, *from, &o(src, *from))),
        Op::Unary { op, ty, dst, src } => assign(dst, unary(*op, *ty, &o(src, *ty))),
        Op::Binary { op, ty, dst, a, b } => match divide::divisor_param(kernel, *op, *ty, b) {
            // By a launch-uniform divisor: through the host's multiplier (see `divide`).
            Some(p) => {
                let f = if *op == BinaryOp::Div { "divm" } else { "remm" };
                let a = o(a, *ty);
                assign(
                    dst,
                    Ok(format!("hg_{f}_u32({a}, p{p}, hg_dm{p}, hg_ds{p})")),
                )
            }
            None => assign(dst, binary(*op, *ty, &o(a, *ty), &o(b, *ty))),
        },
        Op::Ternary {
            op,
            ty,
            dst,
            a,
            b,
            c,
        } => {
            if *ty == Type::Pred {
                Err(format!("{}.pred", op.name()))
            } else {
                let (a, b, c) = (o(a, *ty), o(b, *ty), o(c, *ty));
                assign(dst, Ok(format!("hg_{}_{ty}({a}, {b}, {c})", op.name())))
            }
        }
        Op::Setp { cmp, ty, dst, a, b } => assign(dst, setp(*cmp, *ty, &o(a, *ty), &o(b, *ty))),
        Op::Selp {
            ty,
            dst,
            a,
            b,
            cond,
        } => {
            let (a, b, c) = (o(a, *ty), o(b, *ty), o(cond, Type::Pred));
            assign(dst, Ok(format!("({c} ? {a} : {b})")))
        }
        _ => return None,
    })
}

/// `bitcast.TO.FROM`: through the unsigned integer of the width. f16 and bf16 already live in
/// `unsigned short`; f32 and f64 use the CUDA reinterpretation intrinsics.
fn bitcast(to: Type, from: Type, a: &str) -> Result<String, String> {
    if to == Type::Pred || from == Type::Pred || to.bits() != from.bits() {
        return Err(format!("bitcast.{to}.{from}"));
    }
    let bits = match from {
        Type::F32 => format!("__float_as_uint({a})"),
        Type::F64 => format!("hg_dbits({a})"),
        _ => format!("(hg_u{})({a})", from.bits()),
    };
    Ok(match to {
        Type::F32 => format!("__uint_as_float({bits})"),
        Type::F64 => format!("hg_dfrom({bits})"),
        _ => format!("(({})({bits}))", ctype(to)),
    })
}

fn unary(op: UnaryOp, ty: Type, a: &str) -> Result<String, String> {
    if ty == Type::Pred {
        return match op {
            UnaryOp::Not => Ok(format!("(!{a})")),
            _ => Err(format!("{}.pred", op.name())),
        };
    }
    if op.float_only() && !ty.is_float() || op == UnaryOp::Not && ty.is_float() {
        return Err(format!("{}.{ty}", op.name()));
    }
    Ok(format!("hg_{}_{ty}({a})", op.name()))
}

fn binary(op: BinaryOp, ty: Type, a: &str, b: &str) -> Result<String, String> {
    use BinaryOp::*;
    if ty == Type::Pred {
        return match op {
            And => Ok(format!("({a} && {b})")),
            Or => Ok(format!("({a} || {b})")),
            Xor => Ok(format!("({a} != {b})")),
            _ => Err(format!("{}.pred", op.name())),
        };
    }
    let int_only = matches!(op, And | Or | Xor | Shl | Shr);
    if int_only && ty.is_float() || op == Pow && !ty.is_float() {
        return Err(format!("{}.{ty}", op.name()));
    }
    Ok(format!("hg_{}_{ty}({a}, {b})", op.name()))
}

/// Comparisons in C: integers directly, f32/f64 with C's NaN rules, f16/bf16 widened to f32.
fn setp(cmp: CmpOp, ty: Type, a: &str, b: &str) -> Result<String, String> {
    let sym = match cmp {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    };
    match ty {
        Type::Pred if matches!(cmp, CmpOp::Eq | CmpOp::Ne) => Ok(format!("({a} {sym} {b})")),
        Type::Pred => Err(format!("setp.{}.pred", cmp.name())),
        Type::F16 => Ok(format!("(hg_h2f({a}) {sym} hg_h2f({b}))")),
        Type::BF16 => Ok(format!("(hg_b2f({a}) {sym} hg_b2f({b}))")),
        _ => Ok(format!("({a} {sym} {b})")),
    }
}

/// `cvt.TO.FROM`: integers wrap, floats to integers truncate and saturate (NaN to 0), and every
/// other conversion rounds once to nearest-even from the exact source value.
pub(crate) fn cvt(to: Type, from: Type, a: &str) -> Result<String, String> {
    let bad = || Err(format!("cvt.{to}.{from}"));
    if to == Type::Pred || from == Type::Pred {
        return bad();
    }
    if to == from {
        return Ok(a.to_string());
    }
    if to.is_int() && from.is_int() {
        return Ok(format!("(({}){a})", ctype(to)));
    }
    if to.is_int() {
        // Float source: widen f16/bf16 to f32 (exact), then a saturating truncation.
        let (base, w) = match from {
            Type::F16 => ("f32", format!("hg_h2f({a})")),
            Type::BF16 => ("f32", format!("hg_b2f({a})")),
            Type::F32 => ("f32", a.to_string()),
            _ => ("f64", a.to_string()),
        };
        return Ok(match to {
            Type::I64 | Type::U64 | Type::I32 | Type::U32 => format!("hg_{base}_{to}({w})"),
            Type::I16 => format!("((hg_i16)hg_clamp_i32(hg_{base}_i32({w}), -32768, 32767))"),
            Type::I8 => format!("((hg_i8)hg_clamp_i32(hg_{base}_i32({w}), -128, 127))"),
            Type::U16 => format!("((hg_u16)hg_clamp_u32(hg_{base}_u32({w}), 65535u))"),
            _ => format!("((hg_u8)hg_clamp_u32(hg_{base}_u32({w}), 255u))"),
        });
    }
    // The destination is a float.
    let narrow = |f32_expr: String| match to {
        Type::F16 => format!("hg_f2h({f32_expr})"),
        _ => format!("hg_f2b({f32_expr})"),
    };
    Ok(match (to, from) {
        // Integer sources.
        (Type::F32 | Type::F64, f) if f.is_int() && f.bits() <= 16 => {
            format!("(({}){a})", ctype(to))
        }
        (Type::F64, Type::I32 | Type::U32) => format!("((hg_f64){a})"),
        (Type::F32, Type::I32) => format!("__int2float_rn({a})"),
        (Type::F32, Type::U32) => format!("__uint2float_rn({a})"),
        (Type::F32, Type::I64) => format!("__ll2float_rn({a})"),
        (Type::F32, Type::U64) => format!("__ull2float_rn({a})"),
        (Type::F64, Type::I64) => format!("__ll2double_rn({a})"),
        (Type::F64, Type::U64) => format!("__ull2double_rn({a})"),
        (_, f) if f.is_int() && f.bits() <= 16 => narrow(format!("((hg_f32){a})")),
        (_, f) if f.is_int() => narrow(format!("hg_odd_{f}({a})")),
        // Float sources.
        (Type::F64, Type::F32) => format!("((hg_f64){a})"),
        (Type::F32, Type::F64) => format!("__double2float_rn({a})"),
        (Type::F32, Type::F16) => format!("hg_h2f({a})"),
        (Type::F32, Type::BF16) => format!("hg_b2f({a})"),
        (Type::F64, Type::F16) => format!("((hg_f64)hg_h2f({a}))"),
        (Type::F64, Type::BF16) => format!("((hg_f64)hg_b2f({a}))"),
        (_, Type::F32) => narrow(a.to_string()),
        (_, Type::F64) => narrow(format!("hg_odd_f64({a})")),
        (_, Type::F16) => narrow(format!("hg_h2f({a})")),
        (_, Type::BF16) => narrow(format!("hg_b2f({a})")),
        _ => return bad(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numeric_conversion_has_code() {
        for to in Type::ALL {
            for from in Type::ALL {
                let r = cvt(to, from, "x");
                assert_eq!(
                    r.is_ok(),
                    to != Type::Pred && from != Type::Pred,
                    "cvt.{to}.{from}"
                );
            }
        }
        assert_eq!(
            cvt(Type::F16, Type::F64, "x").unwrap(),
            "hg_f2h(hg_odd_f64(x))"
        );
        assert_eq!(
            cvt(Type::BF16, Type::I64, "x").unwrap(),
            "hg_f2b(hg_odd_i64(x))"
        );
        assert_eq!(
            cvt(Type::U8, Type::F16, "x").unwrap(),
            "((hg_u8)hg_clamp_u32(hg_f32_u32(hg_h2f(x)), 255u))"
        );
    }

    #[test]
    fn pred_logic_is_plain_c() {
        assert_eq!(
            binary(BinaryOp::Xor, Type::Pred, "a", "b").unwrap(),
            "(a != b)"
        );
        assert!(binary(BinaryOp::Add, Type::Pred, "a", "b").is_err());
        assert_eq!(
            setp(CmpOp::Lt, Type::F16, "a", "b").unwrap(),
            "(hg_h2f(a) < hg_h2f(b))"
        );
    }
}
