//! `cvt`: float to integer truncates and saturates (NaN gives 0); integer to integer wraps
//! (extended by the source type); everything else rounds to nearest-even once from the exact
//! source value. Narrowing to `f16`/`bf16` from a wider source goes through a round-to-odd
//! `f32`, which makes the final rounding exact-once.

use hologram_isa::Type;

use super::types::{normalize, reg_type};
use super::Gen;

impl Gen<'_> {
    /// An expression converting `v` (a register-type value of `from`) to `to`.
    pub(crate) fn convert(&self, to: Type, from: Type, v: &str) -> String {
        if to == from {
            return v.to_string();
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => int_to_int(to, from, v),
            (true, false) => float_to_int(to, from, v),
            (false, true) => int_to_float(to, from, v),
            (true, true) => float_to_float(to, from, v),
        }
    }
}

fn int_to_int(to: Type, from: Type, v: &str) -> String {
    let from_wide = from.size_bytes() == 8;
    let to_wide = to.size_bytes() == 8;
    match (from_wide, to_wide) {
        (false, false) => {
            // The source register holds its value extended to 32 bits by its own signedness.
            let bits = if reg_type(from) == "i32" {
                format!("bitcast<u32>({v})")
            } else {
                v.to_string()
            };
            let e = if reg_type(to) == "i32" {
                format!("bitcast<i32>({bits})")
            } else {
                bits
            };
            normalize(to, &e)
        }
        (false, true) => {
            let wide = if from.is_signed_int() {
                format!("i64({v})")
            } else {
                format!("u64({v})")
            };
            if reg_type(to)
                == reg_type(if from.is_signed_int() {
                    Type::I64
                } else {
                    Type::U64
                })
            {
                wide
            } else {
                format!("bitcast<{}>({wide})", reg_type(to))
            }
        }
        (true, false) => {
            let low = if from == Type::I64 {
                format!("u32(bitcast<u64>({v}) & 0xfffffffflu)")
            } else {
                format!("u32({v} & 0xfffffffflu)")
            };
            let e = if reg_type(to) == "i32" {
                format!("bitcast<i32>({low})")
            } else {
                low
            };
            normalize(to, &e)
        }
        (true, true) => format!("bitcast<{}>({v})", reg_type(to)),
    }
}

/// Saturating, truncating float to integer with NaN -> 0. Bounds are powers of two, exact in
/// every float type.
fn float_to_int(to: Type, from: Type, v: &str) -> String {
    let (lo, hi) = to.int_range().unwrap_or((0, 0));
    let ft = reg_type(from);
    let it = reg_type(to);
    let lit = |x: i128| -> String {
        match ft {
            "f64" => format!("f64({x}.0)"),
            _ => format!("{x}.0"),
        }
    };
    let int_lit = |x: i128| -> String {
        match it {
            "i32" => format!("bitcast<i32>({:#x}u)", x as i32 as u32),
            "u64" => format!("{:#x}lu", x as u64),
            "i64" => format!("bitcast<i64>({:#x}lu)", x as i64 as u64),
            _ => format!("{:#x}u", x as u32),
        }
    };
    let nan = if ft == "f64" {
        format!("hg_isnan64({v})")
    } else {
        format!("hg_isnan({v})")
    };
    // hi + 1 is a power of two; values >= it saturate. Signed: values <= lo saturate.
    let top = lit(hi + 1);
    let conv = format!("{it}({v})");
    if to.is_signed_int() {
        format!(
            "select(select(select({conv}, {min}, {v} <= {bot}), {max}, {v} >= {top}), {zero}, {nan})",
            min = int_lit(lo),
            max = int_lit(hi),
            bot = lit(lo),
            zero = super::inst::zero(to),
        )
    } else {
        // Below 1.0 (negative, zero, fractions, NaN) the result is 0.
        format!(
            "select(select({zero}, {conv}, {v} >= {one}), {max}, {v} >= {top})",
            max = int_lit(hi),
            one = lit(1),
            zero = super::inst::zero(to),
        )
    }
}

fn int_to_float(to: Type, from: Type, v: &str) -> String {
    let wide = from.size_bytes() == 8;
    match to {
        Type::F32 => format!("f32({v})"),
        Type::F64 => format!("f64({v})"),
        _ => {
            // f16 / bf16: one rounding from the exact value, through a round-to-odd f32.
            let odd = match (wide, from.is_signed_int()) {
                (false, _) if from.size_bytes() < 4 => format!("f32({v})"),
                (false, true) => format!("hg_i2f_odd({v})"),
                (false, false) => format!("hg_u2f_odd({v})"),
                (true, true) => format!("hg_i64f_odd({v})"),
                (true, false) => format!("hg_u64f_odd({v})"),
            };
            normalize(to, &odd)
        }
    }
}

fn float_to_float(to: Type, from: Type, v: &str) -> String {
    match (from, to) {
        (Type::F64, Type::F32) => format!("f32({v})"),
        (Type::F64, _) => normalize(to, &format!("hg_d2f_odd({v})")),
        (_, Type::F64) => format!("f64({v})"),
        // Between f32, f16 and bf16 (all held as f32): one rounding from the exact value.
        _ => normalize(to, v),
    }
}
