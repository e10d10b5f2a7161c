//! Library templates for fused row kernels over the last, contiguous axis of a `[rows, cols]`
//! view: softmax, log-softmax and their backward ops, each one program that writes its result
//! once. Rows of up to [`MAX_RESIDENT`] elements per lane are read once and kept in registers;
//! longer rows are read once per pass (the later passes mostly hit the cache).
//!
//! A block of [`ROW_BLOCK`] lanes handles `ROW_BLOCK / G` rows, `G` lanes per row (a power of
//! two from 32 to [`ROW_BLOCK`], see [`group_lanes`]). Lane `l` of a row's group visits elements
//! `l, l + G, l + 2G, ...` in order, in a loop unrolled [`ROW_UNROLL`] times whose loads are all
//! issued before they are used; the group combines its lanes' partial results through shared
//! memory in a fixed order (two barriers per reduction), so results do not depend on timing. f16 and bf16 compute in
//! f32, f64 in f64.
//!
//! The kernels are built as IR with [`ProgramBuilder`]; [`kernel`] returns them as [`Canonical`]
//! kernels carrying their intent ([`RowPattern`]), so backends run them on their library paths
//! without recognizing anything.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use hologram_isa::{CmpOp, Imm, Program, ProgramBuilder, Type, UnaryOp, ValidationError};

use super::reduce_templates::Combine;
pub use super::row_gen::{
    group_lanes, row_acc, row_plan, MAX_RESIDENT, PARTIALS, ROW_BLOCK, ROW_UNROLL,
};
use super::row_gen::{store, Gen};
use super::rows::RowPattern;
use super::Pattern;
use crate::Canonical;

/// What a row kernel computes, per row `x` (forward) or per rows of the output `y` and its
/// gradient `g` (backward).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowOp {
    /// `exp(x - max x) / Σ exp(x - max x)`.
    Softmax,
    /// `x - max x - log Σ exp(x - max x)`.
    LogSoftmax,
    /// `y · (g - Σ g·y)`.
    SoftmaxBackward,
    /// `g - exp(y) · Σ g`.
    LogSoftmaxBackward,
    /// Attention probabilities: softmax of `scale · x` (a runtime parameter).
    AttentionSoftmax,
    /// Causal attention probabilities: softmax of `scale · x` where column `j` of row `r` is
    /// kept only when `j <= r mod qlen` (the query's position; `qlen` a runtime parameter),
    /// the others are 0.
    CausalAttentionSoftmax,
    /// The gradient of the attention scores: `scale · y · (g - Σ g·y)`.
    AttentionSoftmaxBackward,
}

impl RowOp {
    /// True for the backward ops (two inputs, `y` then `g`).
    pub fn is_backward(self) -> bool {
        matches!(
            self,
            RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward | RowOp::AttentionSoftmaxBackward
        )
    }

    /// True for the attention ops, which take a `scale` parameter after `cols` (and the
    /// causal one a `qlen` after it).
    pub fn is_attention(self) -> bool {
        matches!(
            self,
            RowOp::AttentionSoftmax
                | RowOp::CausalAttentionSoftmax
                | RowOp::AttentionSoftmaxBackward
        )
    }

    /// Every row op.
    pub const ALL: [RowOp; 7] = [
        RowOp::Softmax,
        RowOp::LogSoftmax,
        RowOp::SoftmaxBackward,
        RowOp::LogSoftmaxBackward,
        RowOp::AttentionSoftmax,
        RowOp::CausalAttentionSoftmax,
        RowOp::AttentionSoftmaxBackward,
    ];
}

/// The fused row kernel for `op` over rows of `storage` elements with `g` lanes per row and
/// `resident` elements per lane in registers (see [`row_plan`]; with `resident > 0` rows must
/// have at most `resident · g` elements).
///
/// Forward parameters: `(x, y, off, rows, cols)`: `y[r*cols + c]` from `x[off + r*cols + c]`.
/// Backward parameters: `(yin, g, y, yoff, goff, rows, cols)`, `y` being the gradient of the
/// input. The attention ops add `scale` (of the compute type) after `cols`, and the causal one
/// `qlen` (u32, the query length: row `r` is query `r mod qlen`) after it. Launch
/// `ceil(rows / (ROW_BLOCK / g))` blocks of [`ROW_BLOCK`] lanes.
pub fn row_program(op: RowOp, storage: Type, g: u32, resident: u32) -> Program {
    let acc = row_acc(storage);
    let mut b = ProgramBuilder::new(format!("rows_{}", format!("{op:?}").to_lowercase()));
    if op.is_backward() {
        b.buffer("yin", storage)
            .buffer("g", storage)
            .buffer_rw("y", storage)
            .scalar("yoff", Type::U32)
            .scalar("goff", Type::U32);
    } else {
        b.buffer("x", storage)
            .buffer_rw("y", storage)
            .scalar("off", Type::U32);
    }
    b.scalar("rows", Type::U32).scalar("cols", Type::U32);
    if op.is_attention() {
        b.scalar("scale", acc);
    }
    let causal = op == RowOp::CausalAttentionSoftmax;
    if causal {
        b.scalar("qlen", Type::U32);
    }
    let mut gen = Gen::new(b, storage, g, resident);
    let zero = Imm::Float(0.0);
    let guarded = resident > 0;
    let attention = op.is_attention();
    if attention && !op.is_backward() {
        // Columns at or past `%lim` are masked: the row's end (which also hides the resident
        // padding), and for causal rows the column after the query's position.
        if causal {
            gen.b.rem(Type::U32, "%qi", "%row", "qlen");
            gen.b.add(Type::U32, "%qe", "%qi", 1u32);
            gen.b.min(Type::U32, "%lim", "%qe", "%len");
        } else {
            gen.b.mov(Type::U32, "%lim", "%len");
        }
    }
    // The forward ops' value of element `k`: the input, or for attention the scaled score
    // (-inf where masked).
    let value = move |b: &mut ProgramBuilder, k: usize| -> String {
        if !attention {
            return format!("%v0_{k}");
        }
        let (c, ok, sx, z) = (
            format!("%c{k}"),
            format!("%ok{k}"),
            format!("%sx{k}"),
            format!("%z{k}"),
        );
        b.sub(Type::U32, &c, format!("%e{k}").as_str(), "%rowbase");
        b.setp(CmpOp::Lt, Type::U32, &ok, c.as_str(), "%lim");
        b.mul(acc, &sx, format!("%v0_{k}").as_str(), "scale");
        b.selp(
            acc,
            &z,
            sx.as_str(),
            Imm::Float(f64::NEG_INFINITY),
            ok.as_str(),
        );
        z
    };
    match op {
        RowOp::Softmax
        | RowOp::LogSoftmax
        | RowOp::AttentionSoftmax
        | RowOp::CausalAttentionSoftmax => {
            let x = [("x", "off")];
            gen.b.mov(acc, "%m", Imm::Float(f64::NEG_INFINITY));
            gen.pass(&x, &|b, k| {
                let v = value(b, k);
                Combine::Max.fold(b, acc, "%m", &v, ("", ""), "")
            });
            gen.group_reduce(Combine::Max, "%m");
            gen.b.mov(acc, "%s", zero);
            gen.pass(&x, &|b, k| {
                let (d, x) = (format!("%d{k}"), format!("%x{k}"));
                let v = value(b, k);
                b.sub(acc, &d, v.as_str(), "%m");
                b.unary(UnaryOp::Exp, acc, &x, d.as_str());
                b.add(acc, "%s", "%s", x.as_str());
            });
            gen.group_reduce(Combine::Sum, "%s");
            if op == RowOp::LogSoftmax {
                gen.b.unary(UnaryOp::Log, acc, "%lse", "%s");
            }
            gen.pass(&x, &|b, k| {
                let (d, x, r) = (format!("%d{k}"), format!("%x{k}"), format!("%r{k}"));
                if op != RowOp::LogSoftmax {
                    // A resident row still holds its exponentials from the sum's pass.
                    if !guarded {
                        let v = value(b, k);
                        b.sub(acc, &d, v.as_str(), "%m");
                        b.unary(UnaryOp::Exp, acc, &x, d.as_str());
                    }
                    b.div(acc, &r, x.as_str(), "%s");
                } else {
                    let v = value(b, k);
                    b.sub(acc, &d, v.as_str(), "%m");
                    b.sub(acc, &r, d.as_str(), "%lse");
                }
                store(b, storage, acc, k, guarded);
            });
        }
        RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward | RowOp::AttentionSoftmaxBackward => {
            let yg = [("yin", "yoff"), ("g", "goff")];
            gen.b.mov(acc, "%s", zero);
            let soft = op != RowOp::LogSoftmaxBackward;
            gen.pass(&yg, &|b, k| {
                let (y, g) = (format!("%v0_{k}"), format!("%v1_{k}"));
                if soft {
                    let p = format!("%p{k}");
                    b.mul(acc, &p, g.as_str(), y.as_str());
                    b.add(acc, "%s", "%s", p.as_str());
                } else {
                    b.add(acc, "%s", "%s", g.as_str());
                }
            });
            gen.group_reduce(Combine::Sum, "%s");
            gen.pass(&yg, &|b, k| {
                let (y, g, r) = (format!("%v0_{k}"), format!("%v1_{k}"), format!("%r{k}"));
                if attention {
                    let (d, u) = (format!("%d{k}"), format!("%u{k}"));
                    b.sub(acc, &d, g.as_str(), "%s");
                    b.mul(acc, &u, y.as_str(), d.as_str());
                    b.mul(acc, &r, u.as_str(), "scale");
                } else if soft {
                    let d = format!("%d{k}");
                    b.sub(acc, &d, g.as_str(), "%s");
                    b.mul(acc, &r, y.as_str(), d.as_str());
                } else {
                    let (x, p) = (format!("%x{k}"), format!("%p{k}"));
                    b.unary(UnaryOp::Exp, acc, &x, y.as_str());
                    b.mul(acc, &p, x.as_str(), "%s");
                    b.sub(acc, &r, g.as_str(), p.as_str());
                }
                store(b, storage, acc, k, guarded);
            });
        }
    }
    gen.b.finish()
}

/// The row kernel `p` as a canonical kernel carrying its intent (built once per process and
/// remembered).
pub fn kernel(p: &RowPattern) -> Result<Canonical, ValidationError> {
    static MEMO: OnceLock<Mutex<HashMap<RowPattern, Canonical>>> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    if let Some(k) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(p) {
        return Ok(k.clone());
    }
    let k = Canonical::with_pattern(
        &row_program(p.op, p.storage, p.g, p.resident),
        Pattern::Rows(*p),
    )?;
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(*p, k.clone());
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_kernels_assemble() {
        for op in RowOp::ALL {
            for st in [Type::F32, Type::F64, Type::F16, Type::BF16] {
                for g in [32, 64, 128, 256] {
                    for resident in [0, 1, 3, 16] {
                        let p = row_program(op, st, g, resident);
                        hologram_isa::validate(&p).unwrap_or_else(|e| {
                            panic!("{op:?} {st} {g}: {e}\n{}", hologram_isa::print(&p))
                        });
                    }
                }
            }
        }
    }

    #[test]
    fn groups_give_lanes_about_eight_elements() {
        assert_eq!(group_lanes(1), 32);
        assert_eq!(group_lanes(1024), 64);
        assert_eq!(group_lanes(1500), 128);
        assert_eq!(group_lanes(4096), 256);
        assert_eq!(group_lanes(1 << 20), 256);
        assert_eq!(row_plan(1024), (64, 16));
        assert_eq!(row_plan(256), (32, 8));
        assert_eq!(row_plan(1500), (128, 12));
        assert_eq!(row_plan(4096), (256, 16));
        assert_eq!(row_plan(4097), (256, 0));
        assert_eq!(row_plan(5), (32, 1));
    }
}
