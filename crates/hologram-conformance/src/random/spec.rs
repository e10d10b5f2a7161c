//! The launch shape and the inputs of a random program, as a conformance-format spec.

use half::{bf16, f16};
use hologram_isa::semantics::Value;
use hologram_isa::{Imm, Type};
use serde_json::{json, Map, Value as Json};

use super::program::Program;
use super::Rng;

/// Launch geometry.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
}

impl Shape {
    /// 1-D launches half of the time (block sizes that are and are not powers of two), else
    /// 2-D and 3-D blocks and grids; at most 128 lanes per block and 512 in all.
    pub fn random(rng: &mut Rng) -> Shape {
        if rng.chance(50) {
            let block = *rng.pick(&[1, 7, 32, 64, 100, 128]);
            let grid = 1 + rng.below(if block <= 32 { 6 } else { 3 }) as u32;
            return Shape {
                grid: [grid, 1, 1],
                block: [block, 1, 1],
            };
        }
        loop {
            let block = [0; 3].map(|_| *rng.pick(&[1, 2, 3, 4, 5, 8]));
            let grid = [0; 3].map(|_| 1 + rng.below(3) as u32);
            let s = Shape { grid, block };
            if s.block_lanes() <= 128 && s.lanes() <= 512 && s.lanes() >= 8 {
                return s;
            }
        }
    }

    pub fn block_lanes(&self) -> u32 {
        self.block.iter().product()
    }

    pub fn lanes(&self) -> u32 {
        self.block_lanes() * self.grid.iter().product::<u32>()
    }
}

/// A random input element of type `ty`: mostly small values, sometimes raw bits (extremes,
/// infinities, NaNs, subnormals).
fn element(rng: &mut Rng, ty: Type) -> Json {
    let v = if rng.chance(75) {
        let small = rng.below(33) as i128 - 16;
        let v = Value::from_imm(Imm::Int(small), ty);
        if ty.is_float() && rng.chance(40) {
            // Halves and quarters too.
            let q = [0.25, 0.5, 0.75, -0.5][rng.below(4)];
            match v {
                Value::F16(x) => Value::F16(f16::from_f64(x.to_f64() + q)),
                Value::BF16(x) => Value::BF16(bf16::from_f64(x.to_f64() + q)),
                Value::F32(x) => Value::F32(x + q as f32),
                Value::F64(x) => Value::F64(x + q),
                other => other,
            }
        } else {
            v
        }
    } else {
        Value::from_bits(ty, rng.next_u64())
    };
    to_json(v)
}

/// A value as the JSON the harness reads back to the same value (NaNs lose their payload).
pub(crate) fn to_json(v: Value) -> Json {
    let float = |f: f64| {
        if f.is_nan() {
            json!("nan")
        } else if f.is_infinite() {
            json!(if f > 0.0 { "inf" } else { "-inf" })
        } else {
            json!(f)
        }
    };
    match v {
        Value::F16(x) => float(x.to_f64()),
        Value::BF16(x) => float(x.to_f64()),
        Value::F32(x) => float(x as f64),
        Value::F64(x) => float(x),
        Value::I8(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::I64(x) => json!(x),
        Value::U8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::Pred(x) => json!(x),
    }
}

/// The spec: grid, block, every argument, and the tolerance of each `approx` element.
pub(crate) fn spec(rng: &mut Rng, shape: &Shape, p: &Program) -> Json {
    let mut args = Map::new();
    for b in &p.buffers {
        let arg = if b.input {
            json!({ "data": (0..b.len).map(|_| element(rng, b.ty)).collect::<Vec<_>>() })
        } else {
            json!({ "fill": to_json(Value::from_bits(b.ty, 0)), "len": b.len })
        };
        args.insert(b.name.clone(), arg);
    }
    for (name, ty) in &p.scalars {
        let v = match name.as_str() {
            "n" => json!(p.n),
            _ => element(rng, *ty),
        };
        args.insert(name.clone(), json!({ "scalar": v }));
    }
    json!({
        "description": "a random program (crates/hologram-conformance/src/random)",
        "grid": shape.grid,
        "block": shape.block,
        "args": args,
        "approx_tolerance": p.approx_tolerance,
    })
}
