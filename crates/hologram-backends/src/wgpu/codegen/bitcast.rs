//! `bitcast`: the source register's bits, read as another type of the same width. Registers
//! hold narrow types widened (see [`super::types`]), so the bits are taken out of the source's
//! register form and put into the destination's: narrow integers are masked and re-extended,
//! `f16`/`bf16` (held as `f32`) go through their exact 16-bit conversions.

use hologram_isa::Type;

/// The raw bits of `v`, a register value of type `from`: a `u32` (the low `from.bits()` bits
/// set) or, for 64-bit types, a `u64`.
fn to_bits(from: Type, v: &str) -> String {
    match from {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => v.to_string(),
        Type::I8 => format!("(bitcast<u32>({v}) & 0xffu)"),
        Type::I16 => format!("(bitcast<u32>({v}) & 0xffffu)"),
        Type::I32 => format!("bitcast<u32>({v})"),
        Type::F16 => format!("hg_f2h({v})"),
        Type::BF16 => format!("hg_f2b({v})"),
        Type::F32 => format!("bitcast<u32>({v})"),
        Type::I64 | Type::F64 => format!("bitcast<u64>({v})"),
        Type::Pred => format!("select(0u, 1u, {v})"),
    }
}

/// The register value of type `to` whose bits are `bits` (from [`to_bits`]).
fn from_bits(to: Type, bits: &str) -> String {
    match to {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => bits.to_string(),
        Type::I8 => format!("(bitcast<i32>(({bits}) << 24u) >> 24u)"),
        Type::I16 => format!("(bitcast<i32>(({bits}) << 16u) >> 16u)"),
        Type::I32 => format!("bitcast<i32>({bits})"),
        Type::F16 => format!("hg_h2f({bits})"),
        Type::BF16 => format!("hg_b2f({bits})"),
        Type::F32 => format!("bitcast<f32>({bits})"),
        Type::I64 => format!("bitcast<i64>({bits})"),
        Type::F64 => format!("bitcast<f64>({bits})"),
        Type::Pred => format!("(({bits}) != 0u)"),
    }
}

/// An expression reinterpreting `v` (a register value of `from`) as `to` (same width; the
/// validator checked).
pub(crate) fn bitcast(to: Type, from: Type, v: &str) -> String {
    if to == from {
        return v.to_string();
    }
    from_bits(to, &to_bits(from, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_types_go_through_their_bits() {
        assert_eq!(bitcast(Type::U32, Type::F32, "r0"), "bitcast<u32>(r0)");
        assert_eq!(
            bitcast(Type::I8, Type::U8, "r0"),
            "(bitcast<i32>((r0) << 24u) >> 24u)"
        );
        assert_eq!(
            bitcast(Type::F16, Type::I16, "r1"),
            "hg_h2f((bitcast<u32>(r1) & 0xffffu))"
        );
        assert_eq!(
            bitcast(Type::F64, Type::I64, "r2"),
            "bitcast<f64>(bitcast<u64>(r2))"
        );
        assert_eq!(bitcast(Type::U16, Type::BF16, "r3"), "hg_f2b(r3)");
    }
}
