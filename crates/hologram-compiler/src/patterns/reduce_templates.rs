//! Library templates for reductions along one axis of a contiguous `[outer, R, inner]` view.
//!
//! Two kernels: one lane per output element looping over R (inner > 1, or short rows), and one
//! block per output chunk that reduces through shared memory with a tree (long contiguous rows;
//! long rows are split into chunks whose partial results are reduced again). They are built as
//! IR with [`ProgramBuilder`] and [`kernel`] returns them as [`Canonical`] kernels that carry
//! their intent ([`ReducePattern`]), so backends run them on their library paths without
//! recognizing anything. [`super::recognize_reduce`] still recognizes hand-written kernels whose
//! canonical form is one of them.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use hologram_isa::{BinaryOp, CmpOp, Imm, Program, ProgramBuilder, Special, Type, ValidationError};

use super::reduce::{ReduceKind, ReducePattern};
use super::Pattern;
use crate::Canonical;

/// The value `x` as an immediate of type `t`.
pub(crate) fn imm(t: Type, x: f64) -> Imm {
    if t.is_float() {
        Imm::Float(if t == Type::F32 { (x as f32) as f64 } else { x })
    } else {
        Imm::Int(x as i128)
    }
}

/// What a reduction computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Combine {
    Sum,
    Prod,
    Max,
    Min,
    ArgMax,
    ArgMin,
}

impl Combine {
    /// Every combine, in declaration order.
    pub const ALL: [Combine; 6] = [
        Combine::Sum,
        Combine::Prod,
        Combine::Max,
        Combine::Min,
        Combine::ArgMax,
        Combine::ArgMin,
    ];

    /// True for argmax and argmin.
    pub fn is_arg(self) -> bool {
        matches!(self, Combine::ArgMax | Combine::ArgMin)
    }

    /// The identity element in accumulator type `t`.
    pub(crate) fn init(self, t: Type) -> Imm {
        let (lo, hi) = t.int_range().unwrap_or((0, 0));
        match self {
            Combine::Sum => imm(t, 0.0),
            Combine::Prod => imm(t, 1.0),
            Combine::Max | Combine::ArgMax if t.is_float() => Imm::Float(f64::NEG_INFINITY),
            Combine::Min | Combine::ArgMin if t.is_float() => Imm::Float(f64::INFINITY),
            Combine::Max | Combine::ArgMax => Imm::Int(lo),
            Combine::Min | Combine::ArgMin => Imm::Int(hi),
        }
    }

    /// Folds value `x` into `acc`, and for arg reductions its index into the accumulator's:
    /// `index` is `(accumulator index, x's index)`. `tag` names the fold's temporaries. Max and
    /// min propagate NaN, like NumPy and PyTorch; ties keep the first index.
    pub(crate) fn fold(
        self,
        b: &mut ProgramBuilder,
        t: Type,
        acc: &str,
        x: &str,
        (aix, ix): (&str, &str),
        tag: &str,
    ) {
        match self {
            Combine::Sum => {
                b.add(t, acc, acc, x);
            }
            Combine::Prod => {
                b.mul(t, acc, acc, x);
            }
            Combine::Max | Combine::Min | Combine::ArgMax | Combine::ArgMin => {
                let cmp = if matches!(self, Combine::Max | Combine::ArgMax) {
                    CmpOp::Gt
                } else {
                    CmpOp::Lt
                };
                let (better, xnan, anum) = (
                    format!("%better{tag}"),
                    format!("%xnan{tag}"),
                    format!("%anum{tag}"),
                );
                b.setp(cmp, t, &better, x, acc);
                if t.is_float() {
                    // x is NaN and acc is not: take x.
                    b.setp(CmpOp::Ne, t, &xnan, x, x);
                    b.setp(CmpOp::Eq, t, &anum, acc, acc);
                    b.and(Type::Pred, &xnan, xnan.as_str(), anum.as_str());
                    b.or(Type::Pred, &better, better.as_str(), xnan.as_str());
                }
                b.selp(t, acc, x, acc, better.as_str());
                if self.is_arg() {
                    b.selp(Type::U32, aix, ix, aix, better.as_str());
                }
            }
        }
    }
}

/// Loads the lane kernel keeps in flight together (its unrolled loop's step).
pub const LANE_UNROLL: u32 = 4;

/// One lane per output element: `out[o*I + i] = fold over r of x[off + o*R*I + r*I + i]`.
/// `storage` is the input's element type, `acc` the accumulator type, `out` the stored result
/// type (u32 for arg reductions, widened to the output dtype by the caller).
///
/// The loop over `r` is unrolled [`LANE_UNROLL`] times: the unrolled body issues all its loads
/// before folding them in order, so loads overlap on GPUs while the order of operations (and so
/// every result bit) stays that of the plain sequential loop.
pub fn lane_program(c: Combine, storage: Type, acc: Type, out: Type) -> Program {
    let u = LANE_UNROLL as usize;
    let store_ty = if c.is_arg() { Type::U32 } else { out };
    let mut b = ProgramBuilder::new("reduce_lane");
    b.buffer("x", storage)
        .buffer_rw("out", store_ty)
        .scalar("off", Type::U32)
        .scalar("rlen", Type::U32)
        .scalar("inner", Type::U32)
        .scalar("n", Type::U32);
    let gid = Special::GidLinear;
    b.setp(CmpOp::Ge, Type::U32, "%done", gid, "n");
    b.guard("%done", false).exit();
    b.div(Type::U32, "%o", gid, "inner");
    b.rem(Type::U32, "%i", gid, "inner");
    b.mul(Type::U32, "%rowlen", "rlen", "inner");
    b.mad(Type::U32, "%idx", "%o", "%rowlen", "%i");
    b.add(Type::U32, "%idx", "%idx", "off");
    b.mov(acc, "%acc", c.init(acc));
    b.mov(Type::U32, "%best", 0u32);
    b.mov(Type::U32, "%r", 0u32);
    b.and(Type::U32, "%full", "rlen", !(LANE_UNROLL - 1));
    b.label("UNROLLED");
    b.setp(CmpOp::Ge, Type::U32, "%rest", "%r", "%full");
    b.guard("%rest", false).bra("LOOP");
    let idx_of = |k: usize| {
        if k == 0 {
            "%idx".to_string()
        } else {
            format!("%idx{k}")
        }
    };
    for k in 1..u {
        b.add(Type::U32, &idx_of(k), idx_of(k - 1).as_str(), "inner");
    }
    load_group(&mut b, storage, acc, "x", u, idx_of);
    for k in 0..u {
        let ix = if k == 0 {
            "%r".to_string()
        } else {
            b.add(Type::U32, &format!("%r{k}"), "%r", k as u32);
            format!("%r{k}")
        };
        c.fold(&mut b, acc, "%acc", &format!("%x{k}"), ("%best", &ix), "");
    }
    b.add(Type::U32, "%idx", idx_of(u - 1).as_str(), "inner");
    b.add(Type::U32, "%r", "%r", u as u32);
    b.bra("UNROLLED");
    b.label("LOOP");
    b.setp(CmpOp::Ge, Type::U32, "%end", "%r", "rlen");
    b.guard("%end", false).bra("STORE");
    load_one(&mut b, storage, acc, "%x", "x", "%idx");
    c.fold(&mut b, acc, "%acc", "%x", ("%best", "%r"), "");
    b.add(Type::U32, "%idx", "%idx", "inner");
    b.add(Type::U32, "%r", "%r", 1u32);
    b.bra("LOOP");
    b.label("STORE");
    let result = if c.is_arg() {
        "%best"
    } else if acc == out {
        "%acc"
    } else {
        b.cvt(out, acc, "%res", "%acc");
        "%res"
    };
    b.st(store_ty, "out", gid, result);
    b.finish()
}

/// Loads `count` elements of `arr` at the indexes `idx(k)` into `%x0..` (converted to `acc`),
/// every load before any conversion, so the loads are in flight together.
pub(crate) fn load_group(
    b: &mut ProgramBuilder,
    storage: Type,
    acc: Type,
    arr: &str,
    count: usize,
    idx: impl Fn(usize) -> String,
) {
    let raw = |k: usize| {
        if storage == acc {
            format!("%x{k}")
        } else {
            format!("%raw{k}")
        }
    };
    for k in 0..count {
        b.ld(storage, &raw(k), arr, idx(k).as_str());
    }
    if storage != acc {
        for k in 0..count {
            b.cvt(acc, storage, &format!("%x{k}"), raw(k).as_str());
        }
    }
}

fn load_one(b: &mut ProgramBuilder, storage: Type, acc: Type, dst: &str, arr: &str, idx: &str) {
    if storage == acc {
        b.ld(storage, dst, arr, idx);
    } else {
        b.ld(storage, "%raw", arr, idx);
        b.cvt(acc, storage, dst, "%raw");
    }
}

/// Lanes per block of the block kernel.
pub const BLOCK: u32 = 256;

/// Loads each lane of the block kernel keeps in flight together (its unrolled loop's step, in
/// strides of [`BLOCK`] elements).
pub const BLOCK_UNROLL: u32 = 8;

/// One block per (row, chunk) of a row-contiguous `[rows, R]` view (or of partial results with
/// their indexes for arg reductions): block `b` reduces elements `chunk*len .. min(R,
/// (chunk+1)*len)` of row `b / chunks` into `out[b]` (and `outix[b]`).
///
/// Lane `t` folds elements `t, t + BLOCK, t + 2·BLOCK, ...` of the chunk in order into one
/// accumulator; the loop is unrolled [`BLOCK_UNROLL`] times with every load of the unrolled body
/// issued before the folds, so on GPUs that many loads per lane are in flight while the order of
/// operations stays that of the plain loop. Then a shared-memory tree halves the
/// [`BLOCK`] accumulators down to one.
pub fn block_program(
    c: Combine,
    storage: Type,
    acc: Type,
    out: Type,
    with_index_input: bool,
) -> Program {
    let arg = c.is_arg();
    let mut b = ProgramBuilder::new("reduce_block");
    b.buffer("x", storage);
    if with_index_input {
        b.buffer("xix", Type::U32);
    }
    let store_ty = if arg { acc } else { out };
    b.buffer_rw("out", store_ty);
    if arg {
        b.buffer_rw("outix", Type::U32);
    }
    b.scalar("off", Type::U32)
        .scalar("rlen", Type::U32)
        .scalar("chunks", Type::U32)
        .scalar("clen", Type::U32)
        .shared("sacc", acc, BLOCK);
    if arg {
        b.shared("six", Type::U32, BLOCK);
    }
    let ctaid = Special::Ctaid(hologram_isa::Dim::X);
    b.mov(Type::U32, "%t", Special::Tid(hologram_isa::Dim::X));
    b.div(Type::U32, "%row", ctaid, "chunks");
    b.rem(Type::U32, "%chunk", ctaid, "chunks");
    b.mul(Type::U32, "%start", "%chunk", "clen");
    b.add(Type::U32, "%stop", "%start", "clen");
    b.min(Type::U32, "%stop", "%stop", "rlen");
    b.mad(Type::U32, "%rowbase", "%row", "rlen", "off");
    b.add(Type::U32, "%pos", "%start", "%t");
    b.mov(acc, "%acc", c.init(acc));
    b.mov(Type::U32, "%best", 0u32);
    b.label("UNROLLED");
    b.add(Type::U32, "%far", "%pos", (BLOCK_UNROLL - 1) * BLOCK);
    b.setp(CmpOp::Ge, Type::U32, "%rest", "%far", "%stop");
    b.guard("%rest", false).bra("LOOP");
    let u = BLOCK_UNROLL as usize;
    let idx_of = |k: usize| format!("%idx{k}");
    b.add(Type::U32, "%idx0", "%rowbase", "%pos");
    for k in 1..u {
        b.add(Type::U32, &idx_of(k), idx_of(k - 1).as_str(), BLOCK);
    }
    load_group(&mut b, storage, acc, "x", u, idx_of);
    if arg {
        for k in 0..u {
            let src = format!("%src{k}");
            if with_index_input {
                b.ld(Type::U32, &src, "xix", idx_of(k).as_str());
            } else {
                b.sub(Type::U32, &src, idx_of(k).as_str(), "%rowbase");
            }
        }
    }
    for k in 0..u {
        let (x, src) = (format!("%x{k}"), format!("%src{k}"));
        c.fold(&mut b, acc, "%acc", &x, ("%best", &src), "");
    }
    b.add(Type::U32, "%pos", "%pos", BLOCK_UNROLL * BLOCK);
    b.bra("UNROLLED");
    b.label("LOOP");
    b.setp(CmpOp::Ge, Type::U32, "%end", "%pos", "%stop");
    b.guard("%end", false).bra("REDUCE");
    b.add(Type::U32, "%idx", "%rowbase", "%pos");
    load_one(&mut b, storage, acc, "%x", "x", "%idx");
    if with_index_input {
        b.ld(Type::U32, "%src", "xix", "%idx");
    } else {
        b.sub(Type::U32, "%src", "%idx", "%rowbase");
    }
    c.fold(&mut b, acc, "%acc", "%x", ("%best", "%src"), "");
    b.add(Type::U32, "%pos", "%pos", BLOCK);
    b.bra("LOOP");
    b.label("REDUCE");
    b.st(acc, "sacc", "%t", "%acc");
    if arg {
        b.st(Type::U32, "six", "%t", "%best");
    }
    b.barrier();
    b.mov(Type::U32, "%s", BLOCK / 2);
    b.label("HALVE");
    b.setp(CmpOp::Eq, Type::U32, "%fin", "%s", 0u32);
    b.guard("%fin", false).bra("WRITE");
    b.setp(CmpOp::Lt, Type::U32, "%active", "%t", "%s");
    b.guard("%active", true).bra("NEXT");
    b.add(Type::U32, "%o", "%t", "%s");
    b.ld(acc, "%mine", "sacc", "%t");
    b.ld(acc, "%other", "sacc", "%o");
    if arg {
        b.ld(Type::U32, "%mix", "six", "%t");
        b.ld(Type::U32, "%oix", "six", "%o");
        arg_tree_fold(&mut b, c, acc);
    } else {
        c.fold(&mut b, acc, "%mine", "%other", ("%mix", "%oix"), "t");
    }
    b.st(acc, "sacc", "%t", "%mine");
    if arg {
        b.st(Type::U32, "six", "%t", "%mix");
    }
    b.label("NEXT");
    b.barrier();
    b.binary(BinaryOp::Shr, Type::U32, "%s", "%s", 1u32);
    b.bra("HALVE");
    b.label("WRITE");
    b.setp(CmpOp::Ne, Type::U32, "%rest", "%t", 0u32);
    b.guard("%rest", false).exit();
    b.ld(acc, "%mine", "sacc", 0u32);
    if arg {
        b.ld(Type::U32, "%mix", "six", 0u32);
        b.st(acc, "out", ctaid, "%mine");
        b.st(Type::U32, "outix", ctaid, "%mix");
    } else if acc == out {
        b.st(out, "out", ctaid, "%mine");
    } else {
        b.cvt(out, acc, "%res", "%mine");
        b.st(out, "out", ctaid, "%res");
    }
    b.finish()
}

/// Combines two partial arg results: the better value wins; equal values (or two NaNs) keep the
/// smaller index, so the result is the first occurrence.
fn arg_tree_fold(b: &mut ProgramBuilder, c: Combine, t: Type) {
    let cmp = if c == Combine::ArgMax {
        CmpOp::Gt
    } else {
        CmpOp::Lt
    };
    let p = Type::Pred;
    b.setp(cmp, t, "%bt", "%other", "%mine");
    b.setp(CmpOp::Eq, t, "%eqv", "%other", "%mine");
    b.setp(CmpOp::Lt, Type::U32, "%lower", "%oix", "%mix");
    b.and(p, "%tie", "%eqv", "%lower");
    if t.is_float() {
        b.setp(CmpOp::Ne, t, "%on", "%other", "%other");
        b.setp(CmpOp::Ne, t, "%mn", "%mine", "%mine");
        b.and(p, "%both", "%mn", "%on");
        b.and(p, "%both", "%both", "%lower");
        b.or(p, "%bt", "%bt", "%on");
        b.unary(hologram_isa::UnaryOp::Not, p, "%mnn", "%mn");
        b.and(p, "%bt", "%bt", "%mnn");
        b.or(p, "%bt", "%bt", "%both");
    }
    b.or(p, "%bt", "%bt", "%tie");
    b.selp(t, "%mine", "%other", "%mine", "%bt");
    b.selp(Type::U32, "%mix", "%oix", "%mix", "%bt");
}

/// The program of a reduction template.
pub fn program(p: &ReducePattern) -> Program {
    match p.kind {
        ReduceKind::Lane => lane_program(p.combine, p.storage, p.acc, p.out),
        ReduceKind::Block { index_input } => {
            block_program(p.combine, p.storage, p.acc, p.out, index_input)
        }
    }
}

/// The reduction template `p` as a canonical kernel carrying its intent (built once per
/// process and remembered).
pub fn kernel(p: &ReducePattern) -> Result<Canonical, ValidationError> {
    // Arg reductions store u32 indexes (lane) or values of the accumulator type (block): the
    // template does not use `out`, so the intent names the accumulator type, as recognition does.
    let p = &ReducePattern {
        out: if p.combine.is_arg() { p.acc } else { p.out },
        ..*p
    };
    static MEMO: OnceLock<Mutex<HashMap<ReducePattern, Canonical>>> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    if let Some(k) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(p) {
        return Ok(k.clone());
    }
    let k = Canonical::with_pattern(&program(p), Pattern::Reduce(*p))?;
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(*p, k.clone());
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_validate_and_carry_their_intent() {
        for c in Combine::ALL {
            for (s, a, o) in [
                (Type::F32, Type::F32, Type::F32),
                (Type::F16, Type::F32, Type::F16),
                (Type::I32, Type::I64, Type::I64),
                (Type::U8, Type::U8, Type::U8),
            ] {
                let mut kinds = vec![ReduceKind::Lane, ReduceKind::Block { index_input: false }];
                if c.is_arg() {
                    kinds.push(ReduceKind::Block { index_input: true });
                }
                for kind in kinds {
                    let p = ReducePattern {
                        kind,
                        combine: c,
                        storage: s,
                        acc: a,
                        out: o,
                    };
                    let k = kernel(&p).unwrap_or_else(|e| {
                        panic!("{p:?}: {e}\n{}", hologram_isa::print(&program(&p)))
                    });
                    let out = if c.is_arg() { a } else { o };
                    let declared = ReducePattern { out, ..p };
                    assert_eq!(k.pattern(), Some(&Pattern::Reduce(declared)));
                }
            }
        }
    }
}
