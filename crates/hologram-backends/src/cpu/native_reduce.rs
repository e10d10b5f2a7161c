//! Recognized reductions run as native loops with exactly the interpreter's order of operations
//! (sequential per output for the lane template; 256 strided partial accumulators and the same
//! tree for the block template), so both paths give identical bits.

use std::any::TypeId;

use half::{bf16, f16};
use hologram_compiler::patterns::reduce_templates::{Combine, BLOCK};
use hologram_compiler::patterns::{ReduceKind, ReducePattern};
use hologram_isa::semantics::{convert, FromWide, Num, ToWide};
use hologram_isa::Type;

use super::fanout;
use super::memops::ArrayView;
use crate::backend::LaunchConfig;

/// One accumulator step of the templates: returns (new acc, taken).
#[inline(always)]
fn better<A: Num>(c: Combine, x: A, acc: A) -> bool {
    let nan_x = !A::cmp_eq(x, x);
    let nan_acc = !A::cmp_eq(acc, acc);
    match c {
        Combine::Max | Combine::ArgMax => A::cmp_lt(acc, x) || (nan_x && !nan_acc),
        _ => A::cmp_lt(x, acc) || (nan_x && !nan_acc),
    }
}

#[inline(always)]
pub(super) fn fold<A: Num>(c: Combine, acc: A, x: A) -> A {
    match c {
        Combine::Sum => A::add(acc, x),
        Combine::Prod => A::mul(acc, x),
        _ => {
            if better(c, x, acc) {
                x
            } else {
                acc
            }
        }
    }
}

/// The tree step of arg reductions: the better value wins; ties (and two NaNs) keep the
/// smaller index.
#[inline(always)]
fn arg_tree<A: Num>(c: Combine, mine: (A, u32), other: (A, u32)) -> (A, u32) {
    let gt = if c == Combine::ArgMax {
        A::cmp_lt(mine.0, other.0)
    } else {
        A::cmp_lt(other.0, mine.0)
    };
    let lower = other.1 < mine.1;
    let tie = A::cmp_eq(other.0, mine.0) && lower;
    let on = !A::cmp_eq(other.0, other.0);
    let mn = !A::cmp_eq(mine.0, mine.0);
    let both = mn && on && lower;
    let take = ((gt || on) && !mn) || both || tie;
    if take {
        other
    } else {
        mine
    }
}

pub(super) fn init<A: Num + FromWide>(c: Combine, t: Type) -> A {
    use hologram_isa::semantics::Wide;
    let w = match c {
        Combine::Sum => Wide::Int(0),
        Combine::Prod => Wide::Int(1),
        Combine::Max | Combine::ArgMax => match t.int_range() {
            Some((lo, _)) => Wide::Int(lo),
            None => Wide::Float(f64::NEG_INFINITY),
        },
        Combine::Min | Combine::ArgMin => match t.int_range() {
            Some((_, hi)) => Wide::Int(hi),
            None => Wide::Float(f64::INFINITY),
        },
    };
    A::from_wide(w)
}

#[inline(always)]
pub(super) fn widen<S: ToWide + 'static, A: FromWide + 'static>(s: S) -> A {
    if TypeId::of::<S>() == TypeId::of::<A>() {
        // SAFETY: S and A are the same type.
        unsafe { std::mem::transmute_copy(&s) }
    } else {
        convert::<S, A>(s)
    }
}

/// Runs `$body` with `$f` bound to the fold of `$c` (not an arg reduction) as a closure the
/// compiler specializes: a `match` on the combine per element kept the loops scalar.
macro_rules! with_fold {
    ($c:expr, |$f:ident| $body:expr) => {
        with_fold!(@arms $c, $f, $body, Sum, Prod, Max, Min)
    };
    (@arms $c:expr, $f:ident, $body:expr, $($combine:ident),*) => {
        match $c {
            $(Combine::$combine => {
                let $f = |acc, x| fold(Combine::$combine, acc, x);
                $body
            })*
            // The arg reductions never come here (they keep an index).
            other => {
                let $f = |acc, x| fold(other, acc, x);
                $body
            }
        }
    };
}

/// Rows folded per pass over a tile's lanes (see `fold_rows`).
const ROW_BLOCK: usize = 8;

/// Folds `rows` rows of `acc.len()` consecutive elements (row `r` at `row(r)`) into the lanes:
/// lane `j` folds element `j` of every row in row order (the interpreter's order, so the same
/// bits). Rows go in blocks of [`ROW_BLOCK`]: each lane takes a block's elements one after the
/// other in a register and is loaded and stored once per block, and the lanes of a row, read
/// contiguously, vectorize.
#[inline(always)]
fn fold_rows<S, A>(
    acc: &mut [A],
    rows: usize,
    row: impl Fn(usize) -> *const S,
    f: impl Fn(A, A) -> A,
) where
    S: ToWide + Copy + 'static,
    A: FromWide + Copy + 'static,
{
    let mut r = 0;
    while r + ROW_BLOCK <= rows {
        let block: [*const S; ROW_BLOCK] = std::array::from_fn(|k| row(r + k));
        for (j, a) in acc.iter_mut().enumerate() {
            let mut v = *a;
            for p in block {
                // SAFETY: the caller's rows hold `acc.len()` readable elements each.
                v = f(v, widen(unsafe { *p.add(j) }));
            }
            *a = v;
        }
        r += ROW_BLOCK;
    }
    fold_rows_in_order(acc, rows - r, |k| row(r + k), f);
}

/// Folds `rows` rows of `acc.len()` elements that follow each other in memory (row `r` at
/// `row(r)`, the block template's runs) into the lanes, a row at a time: the same order per
/// lane as [`fold_rows`] (the same bits), but read in address order. From memory this is what
/// the hardware prefetchers follow: a sum of 2^24 f32 on a 2-core EPYC VM read 45 GB/s against
/// 17.7 GB/s with `fold_rows`' blocks of 8 rows (7.8 against 23 GB/s on one core), and within
/// the caches both orders ran alike (2^20: 64-69 GB/s).
#[inline(always)]
fn fold_rows_in_order<S, A>(
    acc: &mut [A],
    rows: usize,
    row: impl Fn(usize) -> *const S,
    f: impl Fn(A, A) -> A,
) where
    S: ToWide + Copy + 'static,
    A: FromWide + Copy + 'static,
{
    for r in 0..rows {
        let p = row(r);
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: the caller's rows hold `acc.len()` readable elements each.
            *a = f(*a, widen(unsafe { *p.add(j) }));
        }
    }
}

/// Raw views of the launch's buffer arguments and scalar values.
pub(crate) struct Args<'a> {
    pub globals: &'a [ArrayView],
    pub scalars: &'a [Option<u64>],
    /// Element size of each buffer parameter (0 for scalars).
    pub sizes: &'a [usize],
    /// Whether the work may spread over rayon's pool (see `device_lock.rs`).
    pub parallel: bool,
}

impl Args<'_> {
    /// Buffer parameter `i`, if it is a buffer of `T`-sized elements (the native loops read and
    /// write it as `T`; the interpreter runs anything else).
    pub(super) fn buffer<T>(&self, i: usize) -> Option<&ArrayView> {
        (self.sizes.get(i).copied() == Some(std::mem::size_of::<T>()))
            .then(|| self.globals.get(i))
            .flatten()
    }

    /// True when no buffer in `written` overlaps another buffer in `written` or `read` (each
    /// as far as its bound length): the native loops' threads then never touch a byte another
    /// thread writes.
    pub(super) fn disjoint(&self, written: &[usize], read: &[usize]) -> bool {
        let whole = |p: usize| super::bind::whole(self.globals, self.sizes, p);
        written.iter().enumerate().all(|(i, &w)| {
            written[i + 1..]
                .iter()
                .chain(read)
                .all(|&o| !super::bind::overlaps(whole(w), whole(o)))
        })
    }

    pub(super) fn scalar(&self, i: usize) -> Option<usize> {
        self.scalars
            .get(i)
            .copied()
            .flatten()
            .map(|v| (v & 0xffff_ffff) as usize)
    }
}

/// Most lanes of the lane reduction reduced together (see `lane`): a row of a tile is this many
/// consecutive elements, read as one contiguous run.
const LANE_TILE: usize = 128;

/// Sends raw pointers to rayon workers (outputs are written at disjoint indexes).
#[derive(Clone, Copy)]
pub(super) struct Ptr(pub(super) *mut u8);
// SAFETY: a `Ptr` is an address; what may be done with it is up to the code that dereferences
// it, which writes each output element from one task only and checks that outputs overlap no
// input (`Args::disjoint`).
unsafe impl Send for Ptr {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ptr {}

fn lane<S, A, O>(p: &ReducePattern, a: &Args<'_>, lanes: usize) -> Option<()>
where
    S: ToWide + Copy + 'static,
    A: Num + FromWide + ToWide + 'static,
    O: FromWide + Copy + 'static,
{
    let arg = p.combine.is_arg();
    let x = a.buffer::<S>(0)?;
    let out = if arg {
        a.buffer::<u32>(1)?
    } else {
        a.buffer::<O>(1)?
    };
    let (off, rlen, inner, n) = (a.scalar(2)?, a.scalar(3)?, a.scalar(4)?, a.scalar(5)?);
    let n = n.min(lanes);
    if inner == 0 || n == 0 {
        return (n == 0).then_some(());
    }
    let outer = n.div_ceil(inner);
    let read = off.checked_add(outer.checked_mul(rlen)?.checked_mul(inner)?)?;
    if read > x.len as usize || n > out.len as usize || !a.disjoint(&[1], &[0]) {
        return None;
    }
    let (xp, op) = (Ptr(x.base), Ptr(out.base));
    let c = p.combine;
    let acc_ty = p.acc;
    // Lanes next to each other in memory (inner > 1: a reduction over a leading axis, a bias
    // gradient's column sums) run in tiles, one row of the tile at a time: each lane still
    // folds its elements in order (the same bits), but the tile's lanes are independent, so
    // their loads and adds overlap instead of waiting on one lane's chain, and a tile's row is
    // one contiguous run (a [1024, 256] column sum on a 2-core VM: 150 us lane by lane, 75 us
    // in tiles of 16 lanes with a `match` on the combine per element, 26-52 us now; torch
    // 15-20 us).
    let width = inner.min(LANE_TILE);
    let tiles_per_outer = inner.div_ceil(width);
    let tiles = outer * tiles_per_outer;
    // Each task reduces at least PARALLEL_MIN elements: waking the pool for less costs more.
    let min_lanes = if a.parallel {
        (super::native::PARALLEL_MIN / rlen.max(1)).max(1)
    } else {
        n
    };
    fanout::shared_range(..tiles)
        .with_min_len(min_lanes.div_ceil(width))
        .for_each(move |t| {
            let (xp, op) = (xp, op);
            let (o, i0) = (t / tiles_per_outer, (t % tiles_per_outer) * width);
            let g0 = o * inner + i0;
            let lanes = width.min(inner - i0).min(n.saturating_sub(g0));
            if lanes == 0 {
                return;
            }
            let base = off + o * rlen * inner + i0;
            let xs = xp.0 as *const S;
            let mut acc: [A; LANE_TILE] = [init(c, acc_ty); LANE_TILE];
            let mut best = [0u32; LANE_TILE];
            if arg {
                for r in 0..rlen {
                    // SAFETY: checked above that every index is inside x (which no thread
                    // writes): lane g0 + j reads base + r·inner + j.
                    let row = unsafe { xs.add(base + r * inner) };
                    for j in 0..lanes {
                        // SAFETY: as above.
                        let v: A = widen(unsafe { *row.add(j) });
                        if better(c, v, acc[j]) {
                            acc[j] = v;
                            best[j] = r as u32;
                        }
                    }
                }
            } else {
                // SAFETY: as above.
                let row = |r: usize| unsafe { xs.add(base + r * inner) };
                with_fold!(c, |f| fold_rows(&mut acc[..lanes], rlen, row, f));
            }
            for j in 0..lanes {
                // SAFETY: g0 + j < n <= out.len, of the type checked by `Args::buffer`; only
                // this task writes those elements, and no other buffer overlaps `out`.
                unsafe {
                    if arg {
                        *(op.0 as *mut u32).add(g0 + j) = best[j];
                    } else {
                        *(op.0 as *mut O).add(g0 + j) = widen::<A, O>(acc[j]);
                    }
                }
            }
        });
    Some(())
}

fn block<S, A, O>(p: &ReducePattern, a: &Args<'_>, blocks: usize, index_input: bool) -> Option<()>
where
    S: ToWide + Copy + 'static,
    A: Num + FromWide + ToWide + 'static,
    O: FromWide + Copy + 'static,
{
    let arg = p.combine.is_arg();
    let mut i = 0;
    let x = a.buffer::<S>(i)?;
    i += 1;
    let xix = if index_input {
        i += 1;
        Some(a.buffer::<u32>(i - 1)?)
    } else {
        None
    };
    let out_at = i;
    let out = if arg {
        a.buffer::<A>(i)?
    } else {
        a.buffer::<O>(i)?
    };
    i += 1;
    let outix = if arg {
        i += 1;
        Some(a.buffer::<u32>(i - 1)?)
    } else {
        None
    };
    let written: Vec<usize> = (out_at..i).collect();
    let read: Vec<usize> = (0..out_at).collect();
    if !a.disjoint(&written, &read) {
        return None;
    }
    let (off, rlen, chunks, clen) = (
        a.scalar(i)?,
        a.scalar(i + 1)?,
        a.scalar(i + 2)?,
        a.scalar(i + 3)?,
    );
    if chunks == 0 || blocks == 0 {
        return Some(());
    }
    let rows = blocks.div_ceil(chunks);
    let read = off.checked_add(rows.checked_mul(rlen)?)?;
    if read > x.len as usize || blocks > out.len as usize {
        return None;
    }
    if xix.is_some_and(|v| read > v.len as usize) || outix.is_some_and(|v| blocks > v.len as usize)
    {
        return None;
    }
    let c = p.combine;
    let acc_ty = p.acc;
    let (xp, op) = (Ptr(x.base), Ptr(out.base));
    let xixp = xix.map(|v| Ptr(v.base));
    let oixp = outix.map(|v| Ptr(v.base));
    let w = BLOCK as usize;
    // Each task reduces at least PARALLEL_MIN elements: waking the pool for less costs more. A
    // block reduces up to `clen` elements (a sum of 2^20 elements took one task when this
    // counted a block as `w` elements).
    let min_blocks = if a.parallel {
        (super::native::PARALLEL_MIN / clen.min(rlen).max(1)).max(1)
    } else {
        blocks
    };
    fanout::shared_range(..blocks)
        .with_min_len(min_blocks)
        .for_each(move |b| {
            let (xp, op, xixp, oixp) = (xp, op, xixp, oixp);
            let (row, chunk) = (b / chunks, b % chunks);
            let start = chunk * clen;
            let stop = (start + clen).min(rlen);
            let rowbase = row * rlen + off;
            let mut acc = [init::<A>(c, acc_ty); BLOCK as usize];
            let mut best = [0u32; BLOCK as usize];
            let xs = xp.0 as *const S;
            if arg {
                let mut pos = start;
                while pos < stop {
                    let lanes = (stop - pos).min(w);
                    for t in 0..lanes {
                        let idx = rowbase + pos + t;
                        // SAFETY: idx < off + rows * rlen <= x.len (checked); no thread
                        // writes x.
                        let v: A = widen(unsafe { *xs.add(idx) });
                        if better(c, v, acc[t]) {
                            acc[t] = v;
                            best[t] = match xixp {
                                // SAFETY: as above, for xix (u32, checked by `Args::buffer`).
                                Some(q) => unsafe { *(q.0 as *const u32).add(idx) },
                                None => (idx - rowbase) as u32,
                            };
                        }
                    }
                    pos += w;
                }
            } else {
                // Lane t folds elements start + t, start + t + w, ...: full runs of w elements,
                // then a shorter one.
                let (full, rest) = ((stop - start) / w, (stop - start) % w);
                // SAFETY: as above: every run lies inside row `row` of x.
                let run = |r: usize| unsafe { xs.add(rowbase + start + r * w) };
                with_fold!(c, |f| {
                    fold_rows_in_order(&mut acc, full, run, f);
                    if rest > 0 {
                        fold_rows_in_order(&mut acc[..rest], 1, |_| run(full), f);
                    }
                });
            }
            let mut s = w / 2;
            while s > 0 {
                for t in 0..s {
                    if arg {
                        let (v, ix) = arg_tree(c, (acc[t], best[t]), (acc[t + s], best[t + s]));
                        acc[t] = v;
                        best[t] = ix;
                    } else {
                        acc[t] = fold(c, acc[t], acc[t + s]);
                    }
                }
                s /= 2;
            }
            // SAFETY: b < blocks <= out.len (and outix.len), of the types `Args::buffer`
            // checked; only this task writes element b, and the outputs overlap nothing else.
            unsafe {
                if arg {
                    *(op.0 as *mut A).add(b) = acc[0];
                    if let Some(q) = oixp {
                        *(q.0 as *mut u32).add(b) = best[0];
                    }
                } else {
                    *(op.0 as *mut O).add(b) = widen::<A, O>(acc[0]);
                }
            }
        });
    Some(())
}

/// Runs a recognized reduction natively; `None` when the launch is not one the native code
/// handles (unusual types, a block size other than the template's, buffers too small), in which
/// case the interpreter runs it.
pub(crate) fn run(p: &ReducePattern, args: &Args<'_>, config: &LaunchConfig) -> Option<()> {
    let lanes = config.grid_blocks().saturating_mul(config.block_lanes()) as usize;
    let blocks = config.grid_blocks() as usize;
    if let ReduceKind::Block { .. } = p.kind {
        if config.block != [BLOCK, 1, 1] {
            return None;
        }
    }
    macro_rules! go {
        ($s:ty, $a:ty, $o:ty) => {
            match p.kind {
                ReduceKind::Lane => lane::<$s, $a, $o>(p, args, lanes),
                ReduceKind::Block { index_input } => {
                    block::<$s, $a, $o>(p, args, blocks, index_input)
                }
            }
        };
    }
    use Type::*;
    match (p.storage, p.acc, p.out) {
        (F32, F32, F32) => go!(f32, f32, f32),
        (F64, F64, F64) => go!(f64, f64, f64),
        (F16, F32, F16) => go!(f16, f32, f16),
        (F16, F32, F32) => go!(f16, f32, f32),
        (BF16, F32, BF16) => go!(bf16, f32, bf16),
        (BF16, F32, F32) => go!(bf16, f32, f32),
        // The last stage of a multi-stage 16-bit reduction: f32 partials to the 16-bit result.
        (F32, F32, F16) => go!(f32, f32, f16),
        (F32, F32, BF16) => go!(f32, f32, bf16),
        (I32, I64, I64) => go!(i32, i64, i64),
        (I64, I64, I64) => go!(i64, i64, i64),
        (U8, I64, I64) => go!(u8, i64, i64),
        (I32, I32, I32) => go!(i32, i32, i32),
        (U8, U8, U8) => go!(u8, u8, u8),
        (U32, U32, U32) => go!(u32, u32, u32),
        (U64, U64, U64) => go!(u64, u64, u64),
        _ => None,
    }
}
