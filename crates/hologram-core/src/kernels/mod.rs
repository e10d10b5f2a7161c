//! Generators of the Atlas ISA kernels behind tensor ops.

pub(crate) mod conv;
pub(crate) mod elementwise;
pub(crate) mod index;
pub(crate) mod launch_cache;
pub(crate) mod norm;
pub(crate) mod rows;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use hologram_compiler::Canonical;
use hologram_isa::semantics::Value;
use hologram_isa::{Imm, Operand, Program, Type};

/// A value as an immediate operand (its type is the instruction's).
pub(crate) fn imm(v: Value) -> Operand<String> {
    Operand::Imm(v.to_imm())
}

/// The value `x` as an immediate of type `t` (for constants the generators need: 0, 1, ...).
pub(crate) fn lit(t: Type, x: f64) -> Operand<String> {
    Operand::Imm(if t.is_float() {
        Imm::Float(if t == Type::F32 { (x as f32) as f64 } else { x })
    } else {
        Imm::Int(if t == Type::Pred {
            (x != 0.0) as i128
        } else {
            x as i128
        })
    })
}

/// A generated program as a canonical kernel (validated and canonicalized once per
/// distinct program in a process, then remembered). With `map`, the program is declared an
/// element-wise map (it writes its output at `%gid`), which the compiler checks.
pub(crate) fn generated_kernel(program: Program, map: bool) -> crate::error::Result<Canonical> {
    static MEMO: OnceLock<Mutex<HashMap<Program, Canonical>>> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    if let Some(k) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(&program) {
        return Ok(k.clone());
    }
    let k = if map {
        Canonical::elementwise(&program)?
    } else {
        Canonical::from_program(&program)?
    };
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(program, k.clone());
    Ok(k)
}
