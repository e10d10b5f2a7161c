//! Scalar types of the Atlas ISA.

use std::fmt;

/// A scalar type: the type of a register, a parameter, an array element or an instruction.
///
/// `F16` and `BF16` are computing types: arithmetic on them is carried out in `f32` and rounded
/// back to the 16-bit format after every instruction, so every backend gives the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // the variants are the type names
pub enum Type {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    /// A predicate (boolean). Only registers and scalar parameters can be predicates.
    Pred,
}

impl Type {
    /// Every type, in declaration order.
    pub const ALL: [Type; 13] = [
        Type::I8,
        Type::I16,
        Type::I32,
        Type::I64,
        Type::U8,
        Type::U16,
        Type::U32,
        Type::U64,
        Type::F16,
        Type::BF16,
        Type::F32,
        Type::F64,
        Type::Pred,
    ];

    /// The name used in `.hasm` text (`i32`, `bf16`, `pred`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Type::I8 => "i8",
            Type::I16 => "i16",
            Type::I32 => "i32",
            Type::I64 => "i64",
            Type::U8 => "u8",
            Type::U16 => "u16",
            Type::U32 => "u32",
            Type::U64 => "u64",
            Type::F16 => "f16",
            Type::BF16 => "bf16",
            Type::F32 => "f32",
            Type::F64 => "f64",
            Type::Pred => "pred",
        }
    }

    /// Parses a type name as written in `.hasm` text.
    pub fn from_name(name: &str) -> Option<Type> {
        Type::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Size of one element in bytes (a predicate stored in memory takes one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            Type::I8 | Type::U8 | Type::Pred => 1,
            Type::I16 | Type::U16 | Type::F16 | Type::BF16 => 2,
            Type::I32 | Type::U32 | Type::F32 => 4,
            Type::I64 | Type::U64 | Type::F64 => 8,
        }
    }

    /// Width in bits (1 for predicates).
    pub fn bits(self) -> u32 {
        match self {
            Type::Pred => 1,
            t => 8 * t.size_bytes() as u32,
        }
    }

    /// True for the floating-point types (f16, bf16, f32, f64).
    pub fn is_float(self) -> bool {
        matches!(self, Type::F16 | Type::BF16 | Type::F32 | Type::F64)
    }

    /// True for the integer types, signed or not.
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// True for i8..i64.
    pub fn is_signed_int(self) -> bool {
        matches!(self, Type::I8 | Type::I16 | Type::I32 | Type::I64)
    }

    /// True for u8..u64.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, Type::U8 | Type::U16 | Type::U32 | Type::U64)
    }

    /// True for every type but `pred`.
    pub fn is_numeric(self) -> bool {
        self != Type::Pred
    }

    /// Smallest and largest value of an integer type, as i128.
    pub fn int_range(self) -> Option<(i128, i128)> {
        let bits = self.bits();
        if self.is_signed_int() {
            Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1))
        } else if self.is_unsigned_int() {
            Some((0, (1i128 << bits) - 1))
        } else {
            None
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in Type::ALL {
            assert_eq!(Type::from_name(t.name()), Some(t));
        }
        assert_eq!(Type::from_name("f128"), None);
    }

    #[test]
    fn ranges() {
        assert_eq!(Type::I8.int_range(), Some((-128, 127)));
        assert_eq!(Type::U64.int_range(), Some((0, u64::MAX as i128)));
        assert_eq!(Type::F32.int_range(), None);
    }
}
