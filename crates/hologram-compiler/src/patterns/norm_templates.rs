//! Fused layer-norm row kernels over the last, contiguous axis of a `[rows, cols]` view, built
//! with the row-kernel machinery of `row_gen.rs`: the forward kernel writes the normalized
//! rows and each row's mean and reciprocal standard deviation in one launch; the backward kernel
//! writes the input's gradient in one launch (the weight's and bias's gradients are column sums
//! the caller takes). f16 and bf16 compute in f32, f64 in f64.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use hologram_isa::{CmpOp, Imm, Program, ProgramBuilder, Type, UnaryOp, ValidationError};

use super::reduce_templates::Combine;
use super::row_gen::{row_acc, store, Gen};
use crate::Canonical;

/// Which layer-norm kernel, for what storage type and row plan (see
/// [`super::softmax_templates::row_plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NormKernel {
    /// Forward (`y`, `mean`, `rstd` from `x`) or backward (`dx` from `x`, `dy`, `mean`, `rstd`).
    pub backward: bool,
    /// With an elementwise weight (and, forward, a bias) over the columns.
    pub affine: bool,
    /// Element type of the rows.
    pub storage: Type,
    /// Lanes per row.
    pub g: u32,
    /// Elements per lane kept in registers (0: every pass reads the row again).
    pub resident: u32,
}

/// Loads the column's weight (and bias) for element `k` into `%w<k>` (`%b<k>`), converted to
/// the compute type; with `guarded` (rows held in registers), only where the element is in the
/// row (`%in<k>`), since columns past the row's end are past the weight's end too.
fn load_columns(b: &mut ProgramBuilder, st: Type, acc: Type, k: usize, bias: bool, guarded: bool) {
    let col = format!("%c{k}");
    b.sub(Type::U32, &col, format!("%e{k}").as_str(), "%rowbase");
    for (arr, reg) in [("w", "w"), ("b", "b")]
        .into_iter()
        .take(if bias { 2 } else { 1 })
    {
        let dst = format!("%{reg}{k}");
        let raw = if st == acc {
            dst.clone()
        } else {
            format!("%{reg}r{k}")
        };
        if guarded {
            b.guard(&format!("%in{k}"), false);
        }
        b.ld(st, &raw, arr, col.as_str());
        if st != acc {
            b.cvt(acc, st, &dst, raw.as_str());
        }
    }
}

/// Stores the row statistic `value` (compute type) at `array[row]` from the group's first lane
/// of a live row.
fn store_stat(b: &mut ProgramBuilder, acc: Type, array: &str, value: &str) {
    b.setp(CmpOp::Eq, Type::U32, "%first", "%l", 0u32);
    b.and(Type::Pred, "%first", "%first", "%live");
    b.guard("%first", false).st(acc, array, "%row", value);
}

/// The program of a layer-norm kernel.
///
/// Forward parameters: `(x, [w, b,] y, mean, rstd, off, rows, cols, eps)`: `y[r*cols + c]` from
/// `x[off + r*cols + c]`; `mean` and `rstd` (compute type) get one value per row.
/// Backward parameters: `(x, dy, [w,] mean, rstd, dx, xoff, dyoff, rows, cols)`.
/// Launch `ceil(rows / (ROW_BLOCK / g))` blocks of `ROW_BLOCK` lanes.
pub fn program(k: &NormKernel) -> Program {
    let (st, acc) = (k.storage, row_acc(k.storage));
    let name = if k.backward {
        "layer_norm_backward"
    } else {
        "layer_norm"
    };
    let mut b = ProgramBuilder::new(name);
    b.buffer("x", st);
    if k.backward {
        b.buffer("dy", st);
    }
    if k.affine {
        b.buffer("w", st);
        if !k.backward {
            b.buffer("b", st);
        }
    }
    if k.backward {
        b.buffer("mean", acc)
            .buffer("rstd", acc)
            .buffer_rw("y", st)
            .scalar("off", Type::U32)
            .scalar("dyoff", Type::U32);
    } else {
        b.buffer_rw("y", st)
            .buffer_rw("mean", acc)
            .buffer_rw("rstd", acc)
            .scalar("off", Type::U32);
    }
    b.scalar("rows", Type::U32).scalar("cols", Type::U32);
    if !k.backward {
        b.scalar("eps", acc);
    }
    let mut gen = Gen::new(b, st, k.g, k.resident);
    let zero = Imm::Float(0.0);
    let guarded = k.resident > 0;
    let affine = k.affine;
    gen.b.cvt(acc, Type::U32, "%n", "cols");
    if !k.backward {
        let x = [("x", "off")];
        gen.b.mov(acc, "%s", zero);
        gen.pass(&x, &|b, k| {
            let v = format!("%v0_{k}");
            if guarded {
                // Elements past the row's end read as -inf in registers: they must not count.
                let m = format!("%m{k}");
                b.selp(acc, &m, v.as_str(), zero, format!("%in{k}").as_str());
                b.add(acc, "%s", "%s", m.as_str());
            } else {
                b.add(acc, "%s", "%s", v.as_str());
            }
        });
        gen.group_reduce(Combine::Sum, "%s");
        gen.b.div(acc, "%mean", "%s", "%n");
        gen.b.mov(acc, "%q", zero);
        gen.pass(&x, &|b, k| {
            let d = format!("%d{k}");
            b.sub(acc, &d, format!("%v0_{k}").as_str(), "%mean");
            b.mul(acc, &d, d.as_str(), d.as_str());
            if guarded {
                b.selp(acc, &d, d.as_str(), zero, format!("%in{k}").as_str());
            }
            b.add(acc, "%q", "%q", d.as_str());
        });
        gen.group_reduce(Combine::Sum, "%q");
        gen.b.div(acc, "%var", "%q", "%n");
        gen.b.add(acc, "%var", "%var", "eps");
        gen.b.unary(UnaryOp::Rsqrt, acc, "%rstd", "%var");
        store_stat(&mut gen.b, acc, "mean", "%mean");
        store_stat(&mut gen.b, acc, "rstd", "%rstd");
        gen.pass(&x, &|b, k| {
            let r = format!("%r{k}");
            b.sub(acc, &r, format!("%v0_{k}").as_str(), "%mean");
            b.mul(acc, &r, r.as_str(), "%rstd");
            if affine {
                load_columns(b, st, acc, k, true, guarded);
                b.mul(acc, &r, r.as_str(), format!("%w{k}").as_str());
                b.add(acc, &r, r.as_str(), format!("%b{k}").as_str());
            }
            store(b, st, acc, k, guarded);
        });
    } else {
        let xg = [("x", "off"), ("dy", "dyoff")];
        // Rows past the last have no statistics (and no elements).
        gen.b.guard("%live", false).ld(acc, "%mean", "mean", "%row");
        gen.b.guard("%live", false).ld(acc, "%rstd", "rstd", "%row");
        gen.b.mov(acc, "%sg", zero);
        gen.b.mov(acc, "%sgx", zero);
        // g = dy·w and xhat = (x - mean)·rstd; dx = rstd·(g - Σg/n - xhat·Σ(g·xhat)/n).
        let grads = move |b: &mut ProgramBuilder, k: usize| {
            let (gk, xh) = (format!("%g{k}"), format!("%xh{k}"));
            if affine {
                load_columns(b, st, acc, k, false, guarded);
                b.mul(
                    acc,
                    &gk,
                    format!("%v1_{k}").as_str(),
                    format!("%w{k}").as_str(),
                );
            } else {
                b.mov(acc, &gk, format!("%v1_{k}").as_str());
            }
            b.sub(acc, &xh, format!("%v0_{k}").as_str(), "%mean");
            b.mul(acc, &xh, xh.as_str(), "%rstd");
        };
        gen.pass(&xg, &|b, k| {
            grads(b, k);
            let (gk, xh, p) = (format!("%g{k}"), format!("%xh{k}"), format!("%p{k}"));
            b.add(acc, "%sg", "%sg", gk.as_str());
            b.mul(acc, &p, gk.as_str(), xh.as_str());
            b.add(acc, "%sgx", "%sgx", p.as_str());
        });
        gen.group_reduce_all(Combine::Sum, &["%sg", "%sgx"]);
        gen.b.div(acc, "%mg", "%sg", "%n");
        gen.b.div(acc, "%mgx", "%sgx", "%n");
        gen.pass(&xg, &|b, k| {
            grads(b, k);
            let (gk, xh, r) = (format!("%g{k}"), format!("%xh{k}"), format!("%r{k}"));
            b.sub(acc, &r, gk.as_str(), "%mg");
            b.mul(acc, &xh, xh.as_str(), "%mgx");
            b.sub(acc, &r, r.as_str(), xh.as_str());
            b.mul(acc, &r, r.as_str(), "%rstd");
            store(b, st, acc, k, guarded);
        });
    }
    gen.b.finish()
}

/// The kernel as a canonical kernel carrying its intent (built once per process and
/// remembered).
pub fn kernel(k: &NormKernel) -> Result<Canonical, ValidationError> {
    static MEMO: OnceLock<Mutex<HashMap<NormKernel, Canonical>>> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    if let Some(c) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(k) {
        return Ok(c.clone());
    }
    let c = Canonical::with_pattern(&program(k), super::Pattern::Norm(*k))?;
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(*k, c.clone());
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_validate() {
        for backward in [false, true] {
            for affine in [false, true] {
                for storage in [Type::F32, Type::F16, Type::BF16, Type::F64] {
                    for (g, resident) in [(32, 0), (128, 8), (256, 16), (32, 1)] {
                        let k = NormKernel {
                            backward,
                            affine,
                            storage,
                            g,
                            resident,
                        };
                        let p = program(&k);
                        hologram_isa::validate(&p)
                            .unwrap_or_else(|e| panic!("{k:?}: {e}\n{}", hologram_isa::print(&p)));
                    }
                }
            }
        }
    }
}
