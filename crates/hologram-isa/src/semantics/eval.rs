//! Evaluating one instruction on [`Value`]s: constant folding in the compiler uses exactly the
//! semantics the CPU backend runs.

use half::{bf16, f16};

use super::convert::{FromWide, ToWide};
use super::scalar::{Float, Int, Num};
use super::value::Value;
use crate::inst::{BinaryOp, CmpOp, TernaryOp, UnaryOp};
use crate::types::Type;

/// Applies `$body` to the payload of an integer value, with `$T` its Rust type; `None` for
/// anything else.
macro_rules! on_int {
    ($v:expr, |$x:ident: $T:ident| $body:expr) => {
        match $v {
            Value::I8($x) => {
                type $T = i8;
                $body
            }
            Value::I16($x) => {
                type $T = i16;
                $body
            }
            Value::I32($x) => {
                type $T = i32;
                $body
            }
            Value::I64($x) => {
                type $T = i64;
                $body
            }
            Value::U8($x) => {
                type $T = u8;
                $body
            }
            Value::U16($x) => {
                type $T = u16;
                $body
            }
            Value::U32($x) => {
                type $T = u32;
                $body
            }
            Value::U64($x) => {
                type $T = u64;
                $body
            }
            _ => None,
        }
    };
}

/// Like `on_int!` for every numeric value (integers and floats); `None` for predicates.
macro_rules! on_num {
    ($v:expr, |$x:ident: $T:ident| $body:expr) => {
        match $v {
            Value::F16($x) => {
                type $T = f16;
                $body
            }
            Value::BF16($x) => {
                type $T = bf16;
                $body
            }
            Value::F32($x) => {
                type $T = f32;
                $body
            }
            Value::F64($x) => {
                type $T = f64;
                $body
            }
            other => on_int!(other, |$x: $T| $body),
        }
    };
}

trait Wrap: Sized {
    fn wrap(self) -> Value;
    fn unwrap_from(v: Value) -> Option<Self>;
}

macro_rules! wrap_impl {
    ($($t:ty => $var:ident),*) => {$(
        impl Wrap for $t {
            fn wrap(self) -> Value { Value::$var(self) }
            fn unwrap_from(v: Value) -> Option<Self> { if let Value::$var(x) = v { Some(x) } else { None } }
        }
    )*};
}
wrap_impl!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64,
           f16 => F16, bf16 => BF16, f32 => F32, f64 => F64);

fn int_un<T: Int + Wrap>(op: UnaryOp, x: T) -> Option<Value> {
    Some(
        match op {
            UnaryOp::Abs => T::abs(x),
            UnaryOp::Neg => T::neg(x),
            UnaryOp::Not => T::not(x),
            _ => return None,
        }
        .wrap(),
    )
}

fn float_un<T: Float + Wrap>(op: UnaryOp, x: T) -> Option<Value> {
    use UnaryOp::*;
    Some(
        match op {
            Abs => T::abs(x),
            Neg => T::neg(x),
            Not => return None,
            Exp => T::exp(x),
            Exp2 => T::exp2(x),
            Log => T::log(x),
            Log2 => T::log2(x),
            Log10 => T::log10(x),
            Sqrt => T::sqrt(x),
            Rsqrt => T::rsqrt(x),
            Sin => T::sin(x),
            Cos => T::cos(x),
            Tan => T::tan(x),
            Tanh => T::tanh(x),
            Sigmoid => T::sigmoid(x),
            Erf => T::erf(x),
            Floor => T::floor(x),
            Ceil => T::ceil(x),
            Round => T::round(x),
            Trunc => T::trunc(x),
        }
        .wrap(),
    )
}

/// `op.T v`, or None when the operation is not defined for the type.
pub fn unary(op: UnaryOp, v: Value) -> Option<Value> {
    match v {
        Value::Pred(p) => (op == UnaryOp::Not).then_some(Value::Pred(!p)),
        Value::F16(x) => float_un(op, x),
        Value::BF16(x) => float_un(op, x),
        Value::F32(x) => float_un(op, x),
        Value::F64(x) => float_un(op, x),
        v => on_int!(v, |x: T| int_un::<T>(op, x)),
    }
}

fn num_bin<T: Num + Wrap>(op: BinaryOp, a: T, b: T) -> Option<T> {
    use BinaryOp::*;
    Some(match op {
        Add => T::add(a, b),
        Sub => T::sub(a, b),
        Mul => T::mul(a, b),
        Div => T::div(a, b),
        Rem => T::rem(a, b),
        Min => T::min(a, b),
        Max => T::max(a, b),
        _ => return None,
    })
}

fn int_bin<T: Int + Wrap>(op: BinaryOp, a: T, b: T) -> Option<Value> {
    use BinaryOp::*;
    Some(
        match op {
            And => T::and(a, b),
            Or => T::or(a, b),
            Xor => T::xor(a, b),
            Shl => T::shl(a, b),
            Shr => T::shr(a, b),
            Pow => return None,
            _ => num_bin(op, a, b)?,
        }
        .wrap(),
    )
}

fn float_bin<T: Float + Wrap>(op: BinaryOp, a: T, b: T) -> Option<Value> {
    Some(
        match op {
            BinaryOp::Pow => T::pow(a, b),
            _ => num_bin(op, a, b)?,
        }
        .wrap(),
    )
}

/// `op.T a, b`, or None when the types differ or the operation is not defined for them.
pub fn binary(op: BinaryOp, a: Value, b: Value) -> Option<Value> {
    if a.ty() != b.ty() {
        return None;
    }
    match (a, b) {
        (Value::Pred(x), Value::Pred(y)) => match op {
            BinaryOp::And => Some(Value::Pred(x & y)),
            BinaryOp::Or => Some(Value::Pred(x | y)),
            BinaryOp::Xor => Some(Value::Pred(x ^ y)),
            _ => None,
        },
        (Value::F16(x), _) => float_bin(op, x, f16::unwrap_from(b)?),
        (Value::BF16(x), _) => float_bin(op, x, bf16::unwrap_from(b)?),
        (Value::F32(x), _) => float_bin(op, x, f32::unwrap_from(b)?),
        (Value::F64(x), _) => float_bin(op, x, f64::unwrap_from(b)?),
        (a, b) => on_int!(a, |x: T| int_bin::<T>(op, x, T::unwrap_from(b)?)),
    }
}

/// `op.T a, b, c`.
pub fn ternary(op: TernaryOp, a: Value, b: Value, c: Value) -> Option<Value> {
    if a.ty() != b.ty() || a.ty() != c.ty() {
        return None;
    }
    fn float_t<T: Float + Wrap>(op: TernaryOp, a: T, b: Value, c: Value) -> Option<Value> {
        let (b, c) = (T::unwrap_from(b)?, T::unwrap_from(c)?);
        Some(
            match op {
                TernaryOp::Mad => T::mad(a, b, c),
                TernaryOp::Fma => T::fma(a, b, c),
            }
            .wrap(),
        )
    }
    match a {
        Value::F16(x) => float_t(op, x, b, c),
        Value::BF16(x) => float_t(op, x, b, c),
        Value::F32(x) => float_t(op, x, b, c),
        Value::F64(x) => float_t(op, x, b, c),
        a if op == TernaryOp::Mad => {
            on_int!(a, |x: T| Some(
                T::mad(x, T::unwrap_from(b)?, T::unwrap_from(c)?).wrap()
            ))
        }
        _ => None,
    }
}

/// `setp.CMP.T a, b`.
pub fn compare(cmp: CmpOp, a: Value, b: Value) -> Option<bool> {
    if a.ty() != b.ty() {
        return None;
    }
    if let (Value::Pred(x), Value::Pred(y)) = (a, b) {
        return match cmp {
            CmpOp::Eq => Some(x == y),
            CmpOp::Ne => Some(x != y),
            _ => None,
        };
    }
    fn cmp_t<T: Num + Wrap>(cmp: CmpOp, x: T, b: Value) -> Option<bool> {
        let y = T::unwrap_from(b)?;
        Some(match cmp {
            CmpOp::Eq => T::cmp_eq(x, y),
            CmpOp::Ne => !T::cmp_eq(x, y),
            CmpOp::Lt => T::cmp_lt(x, y),
            CmpOp::Le => T::cmp_le(x, y),
            CmpOp::Gt => T::cmp_lt(y, x),
            CmpOp::Ge => T::cmp_le(y, x),
        })
    }
    on_num!(a, |x: T| cmp_t::<T>(cmp, x, b))
}

fn from_wide(w: super::convert::Wide, to: Type) -> Option<Value> {
    Some(match to {
        Type::I8 => Value::I8(i8::from_wide(w)),
        Type::I16 => Value::I16(i16::from_wide(w)),
        Type::I32 => Value::I32(i32::from_wide(w)),
        Type::I64 => Value::I64(i64::from_wide(w)),
        Type::U8 => Value::U8(u8::from_wide(w)),
        Type::U16 => Value::U16(u16::from_wide(w)),
        Type::U32 => Value::U32(u32::from_wide(w)),
        Type::U64 => Value::U64(u64::from_wide(w)),
        Type::F16 => Value::F16(f16::from_wide(w)),
        Type::BF16 => Value::BF16(bf16::from_wide(w)),
        Type::F32 => Value::F32(f32::from_wide(w)),
        Type::F64 => Value::F64(f64::from_wide(w)),
        Type::Pred => return None,
    })
}

/// `cvt.TO.FROM v`.
pub fn cvt(v: Value, to: Type) -> Option<Value> {
    let w = on_num!(v, |x: T| Some(<T as ToWide>::to_wide(x)))?;
    from_wide(w, to)
}

/// `bitcast.TO.FROM v`: the same bits as a value of `to`; `None` when the widths differ or either
/// type is `pred`.
pub fn bitcast(v: Value, to: Type) -> Option<Value> {
    let from = v.ty();
    if from == Type::Pred || to == Type::Pred || from.bits() != to.bits() {
        return None;
    }
    Some(Value::from_bits(to, v.to_bits()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_like_the_backends() {
        assert_eq!(
            binary(BinaryOp::Div, Value::I32(7), Value::I32(0)),
            Some(Value::I32(7))
        );
        assert_eq!(
            binary(BinaryOp::Shl, Value::U8(1), Value::U8(9)),
            Some(Value::U8(2))
        );
        assert_eq!(
            binary(BinaryOp::And, Value::F32(1.0), Value::F32(1.0)),
            None
        );
        assert_eq!(
            unary(UnaryOp::Not, Value::Pred(true)),
            Some(Value::Pred(false))
        );
        assert_eq!(
            ternary(TernaryOp::Mad, Value::U8(16), Value::U8(16), Value::U8(1)),
            Some(Value::U8(1))
        );
        assert_eq!(
            compare(CmpOp::Ne, Value::F32(f32::NAN), Value::F32(f32::NAN)),
            Some(true)
        );
        assert_eq!(cvt(Value::F32(-1.5), Type::U8), Some(Value::U8(0)));
        assert_eq!(cvt(Value::I8(-1), Type::U16), Some(Value::U16(0xffff)));
        assert_eq!(binary(BinaryOp::Add, Value::I32(1), Value::U32(1)), None);
        assert_eq!(
            bitcast(Value::F32(-1.0), Type::U32),
            Some(Value::U32(0xbf80_0000))
        );
        assert_eq!(
            bitcast(Value::I64(-1), Type::F64).map(|v| v.to_bits()),
            Some(!0)
        );
        assert_eq!(bitcast(Value::F32(1.0), Type::U16), None);
    }
}
