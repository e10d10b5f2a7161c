//! C spellings of ISA types, values and operands.

use hologram_isa::semantics::Value;
use hologram_isa::{Kernel, Operand, ParamKind, Special, Type};

/// The C storage type of an ISA type (the prelude's typedefs).
pub(crate) fn ctype(ty: Type) -> &'static str {
    match ty {
        Type::I8 => "hg_i8",
        Type::I16 => "hg_i16",
        Type::I32 => "hg_i32",
        Type::I64 => "hg_i64",
        Type::U8 => "hg_u8",
        Type::U16 => "hg_u16",
        Type::U32 => "hg_u32",
        Type::U64 => "hg_u64",
        Type::F16 => "hg_f16",
        Type::BF16 => "hg_bf16",
        Type::F32 => "hg_f32",
        Type::F64 => "hg_f64",
        Type::Pred => "hg_pred",
    }
}

/// A C expression with exactly the value's bits and type.
pub(crate) fn literal(v: Value) -> String {
    let ty = v.ty();
    let bits = v.to_bits();
    match ty {
        Type::Pred => (if bits != 0 { "true" } else { "false" }).to_string(),
        Type::F32 => format!("__uint_as_float(0x{bits:08x}u)"),
        Type::F64 => format!("hg_dfrom(0x{bits:016x}ull)"),
        Type::F16 | Type::BF16 => format!("(({})0x{bits:04x}u)", ctype(ty)),
        _ => format!("(({})0x{bits:x}ull)", ctype(ty)),
    }
}

/// The C name of a general register.
pub(crate) fn reg(r: u32) -> String {
    format!("r{r}")
}

/// The C name of a special register's local copy (`s_tid_x`, `s_gid`).
pub(crate) fn special(s: Special) -> String {
    format!("s_{}", s.name().replace('.', "_"))
}

/// The C expression of a source operand used as type `ty`.
pub(crate) fn operand(kernel: &Kernel, op: &Operand<u32>, ty: Type) -> String {
    match op {
        Operand::Reg(r) => reg(*r),
        Operand::Param(p) => {
            let is_pred = matches!(
                kernel.params.get(*p as usize).map(|p| p.kind),
                Some(ParamKind::Scalar(Type::Pred))
            );
            if is_pred {
                format!("(p{p} != 0)")
            } else {
                format!("p{p}")
            }
        }
        Operand::Special(s) => special(*s),
        Operand::Imm(imm) => literal(Value::from_imm(*imm, ty)),
    }
}

/// The type an index operand is read as: its own type, or u64 for a literal (as the CPU does).
pub(crate) fn index_type(kernel: &Kernel, op: &Operand<u32>) -> Type {
    kernel.operand_type(op).unwrap_or(Type::U64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn literals_keep_their_bits() {
        assert_eq!(literal(Value::F32(-0.0)), "__uint_as_float(0x80000000u)");
        assert_eq!(literal(Value::F64(1.0)), "hg_dfrom(0x3ff0000000000000ull)");
        assert_eq!(literal(Value::F16(f16::ONE)), "((hg_f16)0x3c00u)");
        assert_eq!(literal(Value::BF16(bf16::ONE)), "((hg_bf16)0x3f80u)");
        assert_eq!(literal(Value::I32(-1)), "((hg_i32)0xffffffffull)");
        assert_eq!(literal(Value::Pred(true)), "true");
    }

    #[test]
    fn specials_have_c_names() {
        assert_eq!(special(Special::GidLinear), "s_gid");
        assert_eq!(special(Special::Tid(hologram_isa::Dim::Y)), "s_tid_y");
    }
}
