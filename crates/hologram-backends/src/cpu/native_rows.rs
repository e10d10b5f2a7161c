//! Recognized row kernels (softmax, log-softmax and their backward ops) run as native loops
//! with exactly the interpreter's order of operations: every row's `g` lanes accumulate their
//! strided elements in element order, and the group combines the lanes' results with the
//! template's fixed two-level order, so both paths give identical bits. Unlike the
//! template, the forward softmax keeps each element's exponential from the sum pass instead of
//! computing it again (the same function of the same value, so the same bits), and every
//! exponential of a row is taken in one vectorized lane loop before the sum folds them in the
//! template's order.

use half::{bf16, f16};
use hologram_compiler::patterns::reduce_templates::Combine;
use hologram_compiler::patterns::softmax_templates::{RowOp, PARTIALS, ROW_BLOCK};
use hologram_compiler::patterns::RowPattern;
use hologram_isa::semantics::{Float, FromWide, Num, ToWide};
use hologram_isa::{Type, UnaryOp};

use super::fanout;
use super::lanes;
use super::memops::ArrayView;
use super::native_reduce::{fold, init, widen, Args, Ptr};
use crate::backend::LaunchConfig;

/// What the attention ops add to a row: the score scale, and the first masked column (`cols`
/// when nothing is masked).
#[derive(Clone, Copy)]
struct Attention<A> {
    scale: A,
    limit: usize,
}

/// One row's inputs and output, in elements of the storage type.
struct Row<S> {
    /// `x` (forward) or `y` (backward).
    first: *const S,
    /// The gradient `g` (backward only).
    second: *const S,
    out: *mut S,
}

/// Combines the lanes' partial results as the template's group reduction does
/// (`row_gen::Gen::group_reduce`): lane `l` below `PARTIALS` folds slots `l + PARTIALS`,
/// `l + 2·PARTIALS`, ... into its own, then the partials are folded in order. (Each lane's
/// folds run in that order; the lanes are stepped together, so the step vectorizes.)
fn group_tree<A: Num>(c: Combine, partial: &mut [A]) -> A {
    let parts = (PARTIALS as usize).min(partial.len());
    let fan = partial.len() / parts;
    let (head, tail) = partial.split_at_mut(parts);
    for w in 1..fan {
        fold_slice(c, head, &tail[(w - 1) * parts..w * parts]);
    }
    let mut out = head[0];
    for &p in &head[1..] {
        out = fold(c, out, p);
    }
    out
}

/// `fold(Max, p, v)` without branches: it takes `v` when `p < v`, or when `v` is NaN and `p` is
/// not; so it keeps `p` when `p` is NaN or `v <= p` (two compares, no NaN test of `v`).
#[inline(always)]
fn max_step<A: Num>(p: A, v: A) -> A {
    let keep = !A::cmp_eq(p, p) | A::cmp_le(v, p);
    if keep {
        p
    } else {
        v
    }
}

/// `acc[l] = fold(c, acc[l], xs[l])` for every `l < xs.len()`: branch-free for `Sum` and
/// `Max`, so the loop vectorizes.
#[inline(always)]
fn fold_slice<A: Num>(c: Combine, acc: &mut [A], xs: &[A]) {
    let lanes = acc[..xs.len()].iter_mut().zip(xs);
    match c {
        Combine::Sum => {
            for (p, &v) in lanes {
                *p = A::add(*p, v);
            }
        }
        Combine::Max => {
            for (p, &v) in lanes {
                *p = max_step(*p, v);
            }
        }
        _ => {
            for (p, &v) in lanes {
                *p = fold(c, *p, v);
            }
        }
    }
}

/// Folds `value(c)` for every column `c` into lane `c % g`'s partial result, each lane in
/// element order.
#[inline(always)]
fn lanes_fold<A: Num>(
    c: Combine,
    partial: &mut [A],
    cols: usize,
    mut value: impl FnMut(usize) -> A,
) {
    let g = partial.len();
    let mut base = 0;
    while base < cols {
        let n = g.min(cols - base);
        for (l, p) in partial[..n].iter_mut().enumerate() {
            *p = fold(c, *p, value(base + l));
        }
        base += g;
    }
}

/// `x ↦ e^x` over a row through the `exp` lane function (vectorized, with exactly the bits of
/// `A::exp`, which the interpreter runs lane by lane).
fn exp_in_place<A: Float>(xs: &mut [A]) {
    match lanes::unary_fn(UnaryOp::Exp, A::TYPE) {
        Some(f) => {
            let p = xs.as_mut_ptr() as *mut u8;
            // SAFETY: `xs` holds xs.len() aligned elements of `A::TYPE`, the lane function's
            // type; destination and operand are the same slot exactly, which the contract
            // allows.
            unsafe { f(xs.len(), p, p, p, p, None) }
        }
        None => xs.iter_mut().for_each(|x| *x = A::exp(*x)),
    }
}

/// Lanes whose partial results [`lanes_fold_slice`] keeps in registers while it walks a row.
const LANE_BLOCK: usize = 16;

/// Folds `xs` into the lanes' partial results as [`lanes_fold`] does (lane `l` takes elements
/// `l, l + g, ...` in order). Blocks of [`LANE_BLOCK`] lanes are held in a local array over the
/// whole row, so the step is a vector select in registers: stepped in memory, a `Max` whose
/// result is often the old value compiled to masked stores, which are slow.
#[inline(always)]
fn lanes_fold_slice<A: Num>(c: Combine, partial: &mut [A], xs: &[A]) {
    let g = partial.len();
    let whole = xs.len() / g;
    if g % LANE_BLOCK != 0 {
        for chunk in xs.chunks(g) {
            fold_slice(c, partial, chunk);
        }
        return;
    }
    // The whole chunks, block by block (each block's lanes in element order)...
    for (block, lanes) in partial.chunks_exact_mut(LANE_BLOCK).enumerate() {
        let first = block * LANE_BLOCK;
        let mut acc: [A; LANE_BLOCK] = std::array::from_fn(|l| lanes[l]);
        for k in 0..whole {
            let at = k * g + first;
            if let Ok(x) = <&[A; LANE_BLOCK]>::try_from(&xs[at..at + LANE_BLOCK]) {
                fold_slice(c, &mut acc, x);
            }
        }
        lanes.copy_from_slice(&acc);
    }
    // ...then the last, partial chunk: the last element of the lanes it reaches.
    let tail = &xs[whole * g..];
    fold_slice(c, &mut partial[..tail.len()], tail);
}

/// A plain softmax or log-softmax row whose storage is the accumulator type: the same
/// operations in the same order as [`row`]'s general form, over slices, with AVX2 vectors
/// where the CPU has them (the lane functions' dispatch, [`lanes::simd_level`]).
///
/// # Safety
/// As [`row`], with `S` = `A`.
unsafe fn plain_row<A: Float + FromWide + 'static>(
    op: RowOp,
    row: &Row<A>,
    cols: usize,
    partial: &mut [A],
    exps: &mut Vec<A>,
) {
    #[cfg(target_arch = "x86_64")]
    if lanes::simd_level() == "avx2+fma" {
        // SAFETY: the CPU has AVX2 and FMA (detected); the rest as this function's contract.
        return unsafe { plain_row_avx2(op, row, cols, partial, exps) };
    }
    // SAFETY: this function's contract.
    unsafe { plain_row_body(op, row, cols, partial, exps) }
}

/// [`plain_row_body`] compiled for AVX2 (no FMA contraction: Rust never fuses a multiply and
/// an add on its own, so the bits are the portable code's).
///
/// # Safety
/// As [`plain_row`], on a CPU with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plain_row_avx2<A: Float + FromWide + 'static>(
    op: RowOp,
    row: &Row<A>,
    cols: usize,
    partial: &mut [A],
    exps: &mut Vec<A>,
) {
    // SAFETY: this function's contract.
    unsafe { plain_row_body(op, row, cols, partial, exps) }
}

/// # Safety
/// As [`plain_row`].
#[inline(always)]
unsafe fn plain_row_body<A: Float + FromWide + 'static>(
    op: RowOp,
    row: &Row<A>,
    cols: usize,
    partial: &mut [A],
    exps: &mut Vec<A>,
) {
    let acc_ty = A::TYPE;
    // SAFETY: `cols` valid elements (the contract); not used after the output is written.
    let x = unsafe { std::slice::from_raw_parts(row.first, cols) };
    partial.fill(init(Combine::Max, acc_ty));
    lanes_fold_slice(Combine::Max, partial, x);
    let m = group_tree(Combine::Max, partial);
    exps.clear();
    exps.extend(x.iter().map(|&v| A::sub(v, m)));
    let shifted_log = op == RowOp::LogSoftmax;
    if shifted_log {
        // Log-softmax writes `x - m - lse`: keep `x - m` for the end.
        exps.extend_from_within(..);
        exp_in_place(&mut exps[cols..]);
    } else {
        exp_in_place(exps);
    }
    partial.fill(init(Combine::Sum, acc_ty));
    lanes_fold_slice(Combine::Sum, partial, &exps[exps.len() - cols..]);
    let s = group_tree(Combine::Sum, partial);
    // SAFETY: `cols` valid elements of the output, which is the input exactly or does not
    // overlap it (the contract); the input slice is not read from here on.
    let out = unsafe { std::slice::from_raw_parts_mut(row.out, cols) };
    if shifted_log {
        let lse = A::log(s);
        for (o, &d) in out.iter_mut().zip(&exps[..cols]) {
            *o = A::sub(d, lse);
        }
    } else {
        for (o, &e) in out.iter_mut().zip(exps.iter()) {
            *o = A::div(e, s);
        }
    }
}

/// Computes one row.
///
/// # Safety
/// `row`'s pointers address `cols` valid elements; `out` may equal an input exactly but not
/// overlap one otherwise.
unsafe fn row<S, A>(
    op: RowOp,
    row: &Row<S>,
    cols: usize,
    attention: Attention<A>,
    partial: &mut [A],
    exps: &mut Vec<A>,
) where
    S: ToWide + FromWide + Copy + 'static,
    A: Float + FromWide + ToWide + 'static,
{
    if matches!(op, RowOp::Softmax | RowOp::LogSoftmax)
        && std::any::TypeId::of::<S>() == std::any::TypeId::of::<A>()
    {
        // SAFETY: `S` is `A` (checked just above), so the row's pointers address `A`s.
        unsafe {
            let same = &*(row as *const Row<S>).cast::<Row<A>>();
            return plain_row(op, same, cols, partial, exps);
        }
    }
    let acc_ty = if std::mem::size_of::<A>() == 8 {
        Type::F64
    } else {
        Type::F32
    };
    // Every use below passes `c < cols`, inside each row (the contract). An input that overlaps
    // the output is the output itself: raw pointers, no references, so reads after writes of
    // the same element are fine.
    // SAFETY: element `c < cols` of the first input.
    let a = |c: usize| -> A { widen(unsafe { *row.first.add(c) }) };
    // SAFETY: element `c < cols` of the second input.
    let b = |c: usize| -> A { widen(unsafe { *row.second.add(c) }) };
    // SAFETY: element `c < cols` of the output.
    let put = |c: usize, v: A| unsafe { *row.out.add(c) = widen::<A, S>(v) };
    let zero: A = init(Combine::Sum, acc_ty);
    let neg_inf: A = init(Combine::Max, acc_ty);
    // The forward value of column `c`: the input, or the template's masked, scaled score.
    let value = |c: usize| -> A {
        if !op.is_attention() {
            a(c)
        } else if c < attention.limit {
            A::mul(a(c), attention.scale)
        } else {
            neg_inf
        }
    };
    match op {
        RowOp::Softmax
        | RowOp::LogSoftmax
        | RowOp::AttentionSoftmax
        | RowOp::CausalAttentionSoftmax => {
            partial.fill(neg_inf);
            lanes_fold(Combine::Max, partial, cols, value);
            let m = group_tree(Combine::Max, partial);
            partial.fill(zero);
            // The exponentials first, all together (one vectorized lane loop), then the sum
            // over them in the template's order.
            exps.clear();
            if op != RowOp::LogSoftmax {
                // (The plain row as its own loop: one that tests for attention per element
                // does not vectorize.)
                if op.is_attention() {
                    exps.extend((0..cols).map(|c| A::sub(value(c), m)));
                } else {
                    exps.extend((0..cols).map(|c| A::sub(a(c), m)));
                }
                exp_in_place(exps);
                lanes_fold(Combine::Sum, partial, cols, |c| exps[c]);
                let s = group_tree(Combine::Sum, partial);
                for (c, &e) in exps.iter().enumerate() {
                    put(c, A::div(e, s));
                }
            } else {
                exps.extend((0..cols).map(|c| A::sub(a(c), m)));
                exp_in_place(exps);
                lanes_fold(Combine::Sum, partial, cols, |c| exps[c]);
                let lse = A::log(group_tree(Combine::Sum, partial));
                for c in 0..cols {
                    put(c, A::sub(A::sub(a(c), m), lse));
                }
            }
        }
        RowOp::SoftmaxBackward => {
            partial.fill(zero);
            lanes_fold(Combine::Sum, partial, cols, |c| A::mul(b(c), a(c)));
            let s = group_tree(Combine::Sum, partial);
            for c in 0..cols {
                put(c, A::mul(a(c), A::sub(b(c), s)));
            }
        }
        RowOp::AttentionSoftmaxBackward => {
            partial.fill(zero);
            lanes_fold(Combine::Sum, partial, cols, |c| A::mul(b(c), a(c)));
            let s = group_tree(Combine::Sum, partial);
            for c in 0..cols {
                put(c, A::mul(A::mul(a(c), A::sub(b(c), s)), attention.scale));
            }
        }
        RowOp::LogSoftmaxBackward => {
            partial.fill(zero);
            lanes_fold(Combine::Sum, partial, cols, b);
            let s = group_tree(Combine::Sum, partial);
            exps.clear();
            exps.extend((0..cols).map(a));
            exp_in_place(exps);
            for (c, &e) in exps.iter().enumerate() {
                put(c, A::sub(b(c), A::mul(e, s)));
            }
        }
    }
}

fn run_typed<S, A>(p: &RowPattern, args: &Args<'_>, config: &LaunchConfig) -> Option<()>
where
    S: ToWide + FromWide + Copy + 'static,
    A: Float + FromWide + ToWide + 'static,
{
    let backward = p.op.is_backward();
    let n_in = if backward { 2 } else { 1 };
    let inputs: Vec<&ArrayView> = (0..n_in)
        .map(|i| args.buffer::<S>(i))
        .collect::<Option<_>>()?;
    let out = args.buffer::<S>(n_in)?;
    let offs: Vec<usize> = (0..n_in)
        .map(|i| args.scalar(n_in + 1 + i))
        .collect::<Option<_>>()?;
    let rows = args.scalar(2 * n_in + 1)?;
    let cols = args.scalar(2 * n_in + 2)?;
    let (scale, qlen) = if p.op.is_attention() {
        let bits = args.scalars.get(2 * n_in + 3).copied().flatten()?;
        let scale: A = if std::mem::size_of::<A>() == 8 {
            widen(f64::from_bits(bits))
        } else {
            widen(f32::from_bits(bits as u32))
        };
        let qlen = if p.op == RowOp::CausalAttentionSoftmax {
            // The template divides by it: a zero is the interpreter's to report.
            Some(args.scalar(2 * n_in + 4).filter(|&q| q > 0)?)
        } else {
            None
        };
        (scale, qlen)
    } else {
        (A::default(), None)
    };
    let g = p.g as usize;
    let rows = rows.min(config.grid[0] as usize * (ROW_BLOCK / p.g) as usize);
    if p.resident > 0 && cols > p.resident as usize * g {
        // The template would only see the first resident·g columns: unusual, interpret it.
        return None;
    }
    let elems = rows.checked_mul(cols)?;
    if elems == 0 {
        return Some(());
    }
    if elems > out.len as usize {
        return None;
    }
    let size = std::mem::size_of::<S>();
    let out_range = (out.base as usize, out.base as usize + elems * size);
    for (x, &off) in inputs.iter().zip(&offs) {
        // Indexes are u32 in the template: where they would wrap, or leave the buffers, the
        // interpreter runs the launch (and reports what it finds).
        let end = off.checked_add(elems)?;
        if end > x.len as usize || end > u32::MAX as usize {
            return None;
        }
        let start = x.base as usize + off * size;
        let overlaps = start < out_range.1 && out_range.0 < start + elems * size;
        if overlaps && start != out_range.0 {
            return None;
        }
    }
    // SAFETY: offset checked against the buffer above.
    let first = Ptr(unsafe { inputs[0].base.add(offs[0] * size) });
    let second = if backward {
        // SAFETY: offset checked against the buffer above.
        Ptr(unsafe { inputs[1].base.add(offs[1] * size) })
    } else {
        first
    };
    let out_p = Ptr(out.base);
    let min_rows = if args.parallel {
        (super::native::PARALLEL_MIN / cols).max(1)
    } else {
        rows
    };
    fanout::shared_range(..rows)
        .with_min_len(min_rows)
        .for_each_init(
            || (vec![A::default(); g], Vec::with_capacity(cols)),
            move |(partial, exps), r| {
                let (first, second, out_p) = (first, second, out_p);
                let at = r * cols;
                // Causal rows see the columns up to their query's position (`r mod qlen`).
                let attention = Attention {
                    scale,
                    limit: qlen.map_or(cols, |q| (r % q + 1).min(cols)),
                };
                // SAFETY: rows·cols elements of every input (after its offset) and of the output
                // are in bounds and of type S (checked above); each row is one task, which
                // writes only its own range of the output, and an input overlapping the output
                // is exactly the output (checked above), so no task reads another's writes.
                unsafe {
                    let row_ptrs = Row {
                        first: (first.0 as *const S).add(at),
                        second: (second.0 as *const S).add(at),
                        out: (out_p.0 as *mut S).add(at),
                    };
                    row::<S, A>(p.op, &row_ptrs, cols, attention, partial, exps);
                }
            },
        );
    Some(())
}

/// Runs a recognized row kernel natively; `None` when the launch is not one the native code
/// handles (a block size other than the template's, buffers too small, an output that partly
/// overlaps an input), in which case the interpreter runs it.
pub(crate) fn run(p: &RowPattern, args: &Args<'_>, config: &LaunchConfig) -> Option<()> {
    if config.block != [ROW_BLOCK, 1, 1] || config.grid[1] != 1 || config.grid[2] != 1 {
        return None;
    }
    match p.storage {
        Type::F32 => run_typed::<f32, f32>(p, args, config),
        Type::F64 => run_typed::<f64, f64>(p, args, config),
        Type::F16 => run_typed::<f16, f32>(p, args, config),
        Type::BF16 => run_typed::<bf16, f32>(p, args, config),
        _ => None,
    }
}
