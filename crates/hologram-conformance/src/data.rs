//! Typed buffer contents from JSON, and comparison of results.

use half::{bf16, f16};
use hologram_isa::semantics::Value;
use hologram_isa::Type;
use serde_json::Value as Json;

/// Reads one JSON element (number, or "nan"/"inf"/"-inf") as a value of type `ty`.
pub fn element(ty: Type, j: &Json) -> Result<Value, String> {
    let bad = || format!("{j} is not a valid {ty}");
    match j {
        Json::String(s) if ty.is_float() => Value::parse(ty, s).ok_or_else(bad),
        Json::Bool(b) if ty == Type::Pred => Ok(Value::Pred(*b)),
        Json::Number(n) => {
            if ty.is_float() {
                let f = n.as_f64().ok_or_else(bad)?;
                Ok(match ty {
                    Type::F16 => Value::F16(f16::from_f64(f)),
                    Type::BF16 => Value::BF16(bf16::from_f64(f)),
                    Type::F32 => Value::F32(f as f32),
                    _ => Value::F64(f),
                })
            } else if let Some(v) = n.as_i64() {
                Value::parse(ty, &v.to_string()).ok_or_else(bad)
            } else if let Some(v) = n.as_u64() {
                Value::parse(ty, &v.to_string()).ok_or_else(bad)
            } else {
                Err(bad())
            }
        }
        _ => Err(bad()),
    }
}

/// Little-endian bytes of a list of values.
pub fn to_bytes(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        let size = v.ty().size_bytes();
        out.extend_from_slice(&v.to_bits().to_le_bytes()[..size]);
    }
    out
}

/// Values of type `ty` from little-endian bytes.
pub fn from_bytes(ty: Type, bytes: &[u8]) -> Vec<Value> {
    let size = ty.size_bytes();
    bytes
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            Value::from_bits(ty, u64::from_le_bytes(b))
        })
        .collect()
}

fn ordered(v: Value) -> Option<i128> {
    // Maps float bits to integers whose difference counts representable values (ulps).
    let (bits, width) = match v {
        Value::F16(x) => (x.to_bits() as u64, 16),
        Value::BF16(x) => (x.to_bits() as u64, 16),
        Value::F32(x) => (x.to_bits() as u64, 32),
        Value::F64(x) => (x.to_bits(), 64),
        _ => return None,
    };
    let sign = 1u64 << (width - 1);
    let mag = (bits & (sign - 1)) as i128;
    Some(if bits & sign != 0 { -mag } else { mag })
}

fn as_f64(v: Value) -> Option<f64> {
    match v {
        Value::F16(x) => Some(x.to_f64()),
        Value::BF16(x) => Some(x.to_f64()),
        Value::F32(x) => Some(x as f64),
        Value::F64(x) => Some(x),
        _ => None,
    }
}

/// Tolerances for floats: `ulp` units in the last place, or `abs` absolute difference.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tolerance {
    /// Allowed distance in representable values.
    pub ulp: u64,
    /// Allowed absolute difference.
    pub abs: f64,
}

/// Whether `got` matches `want`: integers exactly, floats bit for bit (any NaN matches any NaN)
/// or within the tolerance.
pub fn matches(got: Value, want: Value, tol: Tolerance) -> bool {
    if got.ty() != want.ty() {
        return false;
    }
    if !want.ty().is_float() {
        return got.to_bits() == want.to_bits();
    }
    let (g, w) = (
        as_f64(got).unwrap_or(f64::NAN),
        as_f64(want).unwrap_or(f64::NAN),
    );
    if g.is_nan() || w.is_nan() {
        return g.is_nan() && w.is_nan();
    }
    if got.to_bits() == want.to_bits() {
        return true;
    }
    if g.is_infinite() || w.is_infinite() {
        return false;
    }
    if tol.abs > 0.0 && (g - w).abs() <= tol.abs {
        return true;
    }
    match (ordered(got), ordered(want)) {
        (Some(a), Some(b)) if tol.ulp > 0 => (a - b).unsigned_abs() <= tol.ulp as u128,
        _ => false,
    }
}

/// The launch timeout a spec sets (`"timeout_s": seconds`), `None` when it sets none.
pub fn timeout(spec: &Json) -> Result<Option<std::time::Duration>, String> {
    match spec.get("timeout_s") {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Some(std::time::Duration::from_secs_f64(s)))
            .ok_or_else(|| format!("timeout_s must be a number of seconds, got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_distance() {
        let one = Value::F32(1.0);
        let next = Value::F32(f32::from_bits(1.0f32.to_bits() + 2));
        assert!(!matches(next, one, Tolerance::default()));
        assert!(matches(next, one, Tolerance { ulp: 2, abs: 0.0 }));
        assert!(matches(
            Value::F32(f32::NAN),
            Value::F32(-f32::NAN),
            Tolerance::default()
        ));
        assert!(!matches(
            Value::F32(0.0),
            Value::F32(-0.0),
            Tolerance::default()
        ));
        assert!(matches(
            Value::F32(1e-30),
            Value::F32(-1e-30),
            Tolerance { ulp: 0, abs: 1e-20 }
        ));
    }
}
