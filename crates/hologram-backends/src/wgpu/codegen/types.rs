//! How ISA types live in WGSL: register types, literals and re-normalization after arithmetic.
//!
//! WGSL has no 8- or 16-bit integers and (in core) no 16-bit floats, so:
//! - `u8`/`u16` registers are `u32` holding the zero-extended value,
//! - `i8`/`i16` registers are `i32` holding the sign-extended value,
//! - `f16`/`bf16` registers are `f32` holding a value that is exactly representable in the
//!   16-bit format (every instruction computes in `f32` and rounds once, as the ISA specifies),
//! - `pred` registers are `bool`,
//! - 64-bit types map to WGSL's `i64`/`u64`/`f64`, available only where the adapter has the
//!   `SHADER_INT64` / `SHADER_F64` features.

use hologram_isa::semantics::Value;
use hologram_isa::Type;

/// The WGSL type of a register of ISA type `ty`.
pub fn reg_type(ty: Type) -> &'static str {
    match ty {
        Type::U8 | Type::U16 | Type::U32 => "u32",
        Type::I8 | Type::I16 | Type::I32 => "i32",
        Type::F16 | Type::BF16 | Type::F32 => "f32",
        Type::U64 => "u64",
        Type::I64 => "i64",
        Type::F64 => "f64",
        Type::Pred => "bool",
    }
}

/// True for the types held in a wider WGSL type (and so re-normalized after arithmetic).
pub fn is_narrow(ty: Type) -> bool {
    matches!(
        ty,
        Type::U8 | Type::U16 | Type::I8 | Type::I16 | Type::F16 | Type::BF16
    )
}

/// True for 64-bit types.
pub fn is_wide(ty: Type) -> bool {
    ty.size_bytes() == 8
}

/// Wraps an expression computed in the register type so it holds a valid value of `ty` again:
/// masks or sign-extends narrow integers and rounds `f16`/`bf16` results to nearest-even.
pub fn normalize(ty: Type, expr: &str) -> String {
    match ty {
        Type::U8 => format!("(({expr}) & 0xffu)"),
        Type::U16 => format!("(({expr}) & 0xffffu)"),
        Type::I8 => format!("((({expr}) << 24u) >> 24u)"),
        Type::I16 => format!("((({expr}) << 16u) >> 16u)"),
        Type::F16 => format!("hg_rh({expr})"),
        Type::BF16 => format!("hg_rb({expr})"),
        _ => expr.to_string(),
    }
}

/// The register-type bits of a value: what a register of the value's type holds, as the WGSL
/// bit pattern of [`reg_type`] (narrow integers extended, half floats widened to `f32`).
fn reg_bits(v: Value) -> u64 {
    match v {
        Value::I8(x) => x as i32 as u32 as u64,
        Value::I16(x) => x as i32 as u32 as u64,
        Value::F16(x) => x.to_f32().to_bits() as u64,
        Value::BF16(x) => x.to_f32().to_bits() as u64,
        other => other.to_bits(),
    }
}

/// True when a literal of this value cannot be written as a WGSL constant (naga rejects NaN and
/// infinite float constants), so it must be formed at run time.
pub fn needs_runtime_literal(v: Value) -> bool {
    match v {
        Value::F16(x) => !x.to_f32().is_finite(),
        Value::BF16(x) => !x.to_f32().is_finite(),
        Value::F32(x) => !x.is_finite(),
        Value::F64(x) => !x.is_finite(),
        _ => false,
    }
}

/// A WGSL expression of the register type holding `v`.
///
/// With `opaque`, the expression is not a constant expression (it mixes in the private variable
/// `hg_zero`, which is always 0), so naga neither folds it nor rejects non-finite values or
/// constant division by zero; drivers still fold it.
pub fn literal(v: Value, opaque: bool) -> String {
    let bits = reg_bits(v);
    let ty = v.ty();
    if ty == Type::Pred {
        return match (bits != 0, opaque) {
            (true, false) => "true".into(),
            (false, false) => "false".into(),
            (true, true) => "(hg_zero == 0u)".into(),
            (false, true) => "(hg_zero != 0u)".into(),
        };
    }
    let opaque = opaque || needs_runtime_literal(v);
    if is_wide(ty) {
        let raw = if opaque {
            format!("({bits:#x}lu ^ u64(hg_zero))")
        } else {
            format!("{bits:#x}lu")
        };
        return match ty {
            Type::U64 => raw,
            other => format!("bitcast<{}>({raw})", reg_type(other)),
        };
    }
    let raw = if opaque {
        format!("({bits:#x}u ^ hg_zero)")
    } else {
        format!("{bits:#x}u")
    };
    match reg_type(ty) {
        "u32" => raw,
        t => format!("bitcast<{t}>({raw})"),
    }
}

/// A WGSL identifier-safe rendering of a name (for comments).
pub fn comment_safe(name: &str) -> String {
    name.chars()
        .map(|c| if c == '\n' || c == '*' { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn literals() {
        assert_eq!(literal(Value::U32(7), false), "0x7u");
        assert_eq!(literal(Value::I8(-1), false), "bitcast<i32>(0xffffffffu)");
        assert_eq!(
            literal(Value::F32(f32::INFINITY), false),
            "bitcast<f32>((0x7f800000u ^ hg_zero))"
        );
        assert_eq!(
            literal(Value::F16(f16::from_f32(1.0)), false),
            "bitcast<f32>(0x3f800000u)"
        );
        assert_eq!(literal(Value::Pred(true), true), "(hg_zero == 0u)");
        assert_eq!(
            literal(Value::I64(-1), false),
            "bitcast<i64>(0xfffffffffffffffflu)"
        );
    }
}
