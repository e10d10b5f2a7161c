//! Generators of the Atlas ISA kernels behind tensor ops.

pub(crate) mod elementwise;
pub(crate) mod rows;

use hologram_isa::semantics::Value;
use hologram_isa::Type;

/// A literal for a value, typed for an ISA type (`1.0`, `-3`, `true`).
pub(crate) fn literal(v: Value) -> String {
    match v {
        Value::Pred(b) => if b { "true" } else { "false" }.to_string(),
        v => v.to_imm().to_string(),
    }
}

/// The value `x` as a literal of type `t` (for constants the generators need: 0, 1, ...).
pub(crate) fn lit(t: Type, x: f64) -> String {
    if t.is_float() {
        let v = match t {
            Type::F32 => (x as f32) as f64,
            _ => x,
        };
        hologram_isa::Imm::Float(v).to_string()
    } else if t == Type::Pred {
        if x != 0.0 { "true" } else { "false" }.to_string()
    } else {
        format!("{}", x as i128)
    }
}
