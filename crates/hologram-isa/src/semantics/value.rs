//! A typed scalar value: launch arguments for scalar parameters and folded constants.

use std::fmt;

use half::{bf16, f16};

use crate::operand::Imm;
use crate::types::Type;

/// One value of a scalar type.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub enum Value {
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    F16(f16),
    BF16(bf16),
    F32(f32),
    F64(f64),
    Pred(bool),
}

impl Value {
    /// The value's type.
    pub fn ty(self) -> Type {
        match self {
            Value::I8(_) => Type::I8,
            Value::I16(_) => Type::I16,
            Value::I32(_) => Type::I32,
            Value::I64(_) => Type::I64,
            Value::U8(_) => Type::U8,
            Value::U16(_) => Type::U16,
            Value::U32(_) => Type::U32,
            Value::U64(_) => Type::U64,
            Value::F16(_) => Type::F16,
            Value::BF16(_) => Type::BF16,
            Value::F32(_) => Type::F32,
            Value::F64(_) => Type::F64,
            Value::Pred(_) => Type::Pred,
        }
    }

    /// The value's bits, zero-extended (predicates are 0 or 1).
    pub fn to_bits(self) -> u64 {
        match self {
            Value::I8(v) => v as u8 as u64,
            Value::I16(v) => v as u16 as u64,
            Value::I32(v) => v as u32 as u64,
            Value::I64(v) => v as u64,
            Value::U8(v) => v as u64,
            Value::U16(v) => v as u64,
            Value::U32(v) => v as u64,
            Value::U64(v) => v,
            Value::F16(v) => v.to_bits() as u64,
            Value::BF16(v) => v.to_bits() as u64,
            Value::F32(v) => v.to_bits() as u64,
            Value::F64(v) => v.to_bits(),
            Value::Pred(v) => v as u64,
        }
    }

    /// A value of type `ty` from its bits (higher bits ignored).
    pub fn from_bits(ty: Type, bits: u64) -> Value {
        match ty {
            Type::I8 => Value::I8(bits as i8),
            Type::I16 => Value::I16(bits as i16),
            Type::I32 => Value::I32(bits as i32),
            Type::I64 => Value::I64(bits as i64),
            Type::U8 => Value::U8(bits as u8),
            Type::U16 => Value::U16(bits as u16),
            Type::U32 => Value::U32(bits as u32),
            Type::U64 => Value::U64(bits),
            Type::F16 => Value::F16(f16::from_bits(bits as u16)),
            Type::BF16 => Value::BF16(bf16::from_bits(bits as u16)),
            Type::F32 => Value::F32(f32::from_bits(bits as u32)),
            Type::F64 => Value::F64(f64::from_bits(bits)),
            Type::Pred => Value::Pred(bits & 1 != 0),
        }
    }

    /// The value of a literal used as type `ty` (the validator has checked that it fits).
    /// Integers wrap to the width; floats round to nearest-even.
    pub fn from_imm(imm: Imm, ty: Type) -> Value {
        use super::convert::{FromWide, Wide};
        let w = match imm {
            Imm::Int(v) => Wide::Int(v),
            Imm::Float(f) => Wide::Float(f),
        };
        match ty {
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
            Type::Pred => Value::Pred(matches!(imm, Imm::Int(v) if v != 0)),
        }
    }

    /// The value as a literal (integers exact, floats exact as f64, predicates 0/1).
    pub fn to_imm(self) -> Imm {
        match self {
            Value::I8(v) => Imm::Int(v as i128),
            Value::I16(v) => Imm::Int(v as i128),
            Value::I32(v) => Imm::Int(v as i128),
            Value::I64(v) => Imm::Int(v as i128),
            Value::U8(v) => Imm::Int(v as i128),
            Value::U16(v) => Imm::Int(v as i128),
            Value::U32(v) => Imm::Int(v as i128),
            Value::U64(v) => Imm::Int(v as i128),
            Value::F16(v) => Imm::Float(v.to_f64()),
            Value::BF16(v) => Imm::Float(v.to_f64()),
            Value::F32(v) => Imm::Float(v as f64),
            Value::F64(v) => Imm::Float(v),
            Value::Pred(v) => Imm::Int(v as i128),
        }
    }

    /// Parses text as a value of type `ty` (`"1024"`, `"-2.5"`, `"nan"`, `"true"`).
    pub fn parse(ty: Type, text: &str) -> Option<Value> {
        let text = text.trim();
        let imm = match (ty, text) {
            (Type::Pred, "true") => Imm::Int(1),
            (Type::Pred, "false") => Imm::Int(0),
            (_, "inf") => Imm::Float(f64::INFINITY),
            (_, "nan") => Imm::Float(f64::NAN),
            _ => crate::text::parse_literal(text)?,
        };
        let imm = match (imm, ty.is_float()) {
            (Imm::Int(v), true) => Imm::Float(v as f64),
            (imm, _) => imm,
        };
        crate::validate::check_literal(imm, ty, crate::validate::Location::Kernel).ok()?;
        Some(Value::from_imm(imm, ty))
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Pred(b) => write!(f, "{b}"),
            v => write!(f, "{}", v.to_imm()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        for v in [
            Value::I8(-3),
            Value::U64(u64::MAX),
            Value::F32(-0.5),
            Value::BF16(bf16::from_f32(2.0)),
            Value::Pred(true),
        ] {
            assert_eq!(Value::from_bits(v.ty(), v.to_bits()), v);
        }
    }

    #[test]
    fn parses_text() {
        assert_eq!(Value::parse(Type::U32, "1024"), Some(Value::U32(1024)));
        assert_eq!(Value::parse(Type::F32, "2"), Some(Value::F32(2.0)));
        assert_eq!(Value::parse(Type::I8, "300"), None);
        assert_eq!(Value::parse(Type::U32, "1.5"), None);
        assert_eq!(Value::parse(Type::Pred, "true"), Some(Value::Pred(true)));
        assert!(matches!(Value::parse(Type::F64, "nan"), Some(Value::F64(v)) if v.is_nan()));
    }
}
