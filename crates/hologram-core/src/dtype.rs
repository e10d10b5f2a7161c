//! Tensor element types.

use std::fmt;

use hologram_isa::Type;

use crate::error::{Error, Result};

/// The element type of a [`crate::Tensor`]. `Bool` is stored as one byte (0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum DType {
    Bool,
    U8,
    I8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The ISA type of the stored elements.
    pub fn storage(self) -> Type {
        match self {
            DType::Bool | DType::U8 => Type::U8,
            DType::I8 => Type::I8,
            DType::I16 => Type::I16,
            DType::U16 => Type::U16,
            DType::I32 => Type::I32,
            DType::U32 => Type::U32,
            DType::I64 => Type::I64,
            DType::U64 => Type::U64,
            DType::F16 => Type::F16,
            DType::BF16 => Type::BF16,
            DType::F32 => Type::F32,
            DType::F64 => Type::F64,
        }
    }

    /// The ISA type element-wise kernels compute in: f16 and bf16 compute in f32 and round once
    /// when stored; `Bool` computes as a predicate.
    pub fn compute(self) -> Type {
        match self {
            DType::Bool => Type::Pred,
            DType::F16 | DType::BF16 => Type::F32,
            d => d.storage(),
        }
    }

    /// The dtype of an ISA storage type.
    pub fn from_type(t: Type) -> Option<DType> {
        DType::ALL
            .into_iter()
            .find(|d| *d != DType::Bool && d.storage() == t)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        self.storage().size_bytes()
    }

    /// Name as NumPy and PyTorch write it (`float32` is `f32` here).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            d => d.storage().name(),
        }
    }

    /// Parses a name (`f32`, `float32`, `bool`, `int64`, ...).
    pub fn parse(name: &str) -> Result<DType> {
        let n = name.trim().to_ascii_lowercase();
        let alias = match n.as_str() {
            "float32" | "float" => "f32",
            "float64" | "double" => "f64",
            "float16" | "half" => "f16",
            "bfloat16" => "bf16",
            "int8" => "i8",
            "int16" => "i16",
            "int32" | "int" => "i32",
            "int64" | "long" => "i64",
            "uint8" => "u8",
            "uint16" => "u16",
            "uint32" => "u32",
            "uint64" => "u64",
            other => other,
        };
        DType::ALL
            .into_iter()
            .find(|d| d.name() == alias)
            .ok_or_else(|| Error::TypeMismatch(format!("unknown dtype '{name}'")))
    }

    /// True for f16, bf16, f32, f64.
    pub fn is_float(self) -> bool {
        self.storage().is_float()
    }

    /// True for the integer types (not bool).
    pub fn is_int(self) -> bool {
        self != DType::Bool && self.storage().is_int()
    }

    /// True for signed integers and floats.
    pub fn is_signed(self) -> bool {
        self.is_float() || self.storage().is_signed_int()
    }

    fn rank(self) -> u8 {
        match self {
            DType::Bool => 0,
            d if d.is_int() => 1,
            _ => 2,
        }
    }

    /// The dtype two operands promote to (NumPy's rules for these types: bool < integers <
    /// floats; mixed signedness widens; f16 with bf16 gives f32).
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        match a.rank().cmp(&b.rank()) {
            std::cmp::Ordering::Less => return b,
            std::cmp::Ordering::Greater => return a,
            std::cmp::Ordering::Equal => {}
        }
        if a.is_float() {
            return match (a, b) {
                (DType::F64, _) | (_, DType::F64) => DType::F64,
                (DType::F32, _) | (_, DType::F32) => DType::F32,
                _ => DType::F32, // f16 with bf16
            };
        }
        // Integers.
        let (sa, sb) = (a.is_signed(), b.is_signed());
        let (wa, wb) = (a.size(), b.size());
        if sa == sb {
            return if wa >= wb { a } else { b };
        }
        let (signed, unsigned) = if sa { (a, b) } else { (b, a) };
        if signed.size() > unsigned.size() {
            return signed;
        }
        match unsigned.size() {
            1 => DType::I16,
            2 => DType::I32,
            4 => DType::I64,
            _ => DType::F64,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion() {
        assert_eq!(DType::promote(DType::I32, DType::F16), DType::F16);
        assert_eq!(DType::promote(DType::U8, DType::I8), DType::I16);
        assert_eq!(DType::promote(DType::U32, DType::I64), DType::I64);
        assert_eq!(DType::promote(DType::F16, DType::BF16), DType::F32);
        assert_eq!(DType::promote(DType::Bool, DType::U8), DType::U8);
        assert_eq!(DType::parse("float32").unwrap(), DType::F32);
        assert!(DType::parse("complex64").is_err());
    }
}
