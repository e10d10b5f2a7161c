//! GEMM on the CPU through the `gemm` crate (packed, vectorized, parallel on rayon), or the
//! process's BLAS for f32 and f64 once adopted (`blas.rs`).

use half::{bf16, f16};
use hologram_isa::Type;

use super::CpuMemory;
use crate::backend::BufferArg;
use crate::error::{BackendError, Result};
use crate::library::GemmDesc;

/// The host address of an operand's range, which must be aligned to its `size`-byte elements.
fn host(arg: &BufferArg, size: usize) -> Result<*mut u8> {
    let m = arg
        .memory
        .as_any()
        .downcast_ref::<CpuMemory>()
        .ok_or_else(|| BackendError::ForeignBuffer("not host memory".into()))?;
    crate::launch::check_buffer(arg, m.len())?;
    // SAFETY: the range lies inside the allocation (checked just above).
    let p = unsafe { m.as_ptr().add(arg.offset) };
    if (p as usize) % size != 0 {
        return Err(BackendError::InvalidArgument {
            kernel: "gemm".into(),
            reason: format!(
                "an operand starts at address {p:p}, not a multiple of its {size}-byte elements (imported memory must be aligned to its element size)"
            ),
        });
    }
    Ok(p)
}

/// The bytes of `arg`'s range, copied when they overlap `c`'s (the GEMM crate's threads read A
/// and B while they write C, and they must not meet); `None` when they do not overlap.
fn copy_if_overlapping(
    p: *const u8,
    arg: &BufferArg,
    c: *const u8,
    c_len: usize,
) -> Option<Vec<u64>> {
    let (start, c_start) = (p as usize, c as usize);
    if !(start < c_start + c_len && c_start < start + arg.len) {
        return None;
    }
    let mut copy = vec![0u64; arg.len.div_ceil(8)];
    // SAFETY: `p` addresses `arg.len` bytes (checked by `GemmDesc::check`), read under the
    // device lock; the copy is a fresh allocation of at least as many bytes.
    unsafe { std::ptr::copy_nonoverlapping(p, copy.as_mut_ptr() as *mut u8, arg.len) };
    Some(copy)
}

/// Row and column strides of an operand as stored (`trans`: the matrix is stored transposed).
fn strides(trans: bool, ld: usize) -> (isize, isize) {
    if trans {
        (1, ld as isize)
    } else {
        (ld as isize, 1)
    }
}

/// Below this many multiply-adds a GEMM runs on the calling thread alone: waking a worker
/// costs more than it saves.
const PARALLEL_WORK: usize = 64 * 64 * 64;

/// From this many multiply-adds per matrix the GEMM crate's own rayon split runs it: the
/// operand it packs once for all threads outweighs the workers' wake-up, which it waits for.
const CRATE_SPLIT_WORK: usize = 768 * 768 * 768;

/// GEMMs go to an adopted BLAS only when M, N and K are all at least this.
const BLAS_MIN_SIDE: usize = 64;

/// The narrowest slice of C (rows or columns) one unit of a shared GEMM computes.
const MIN_SLICE: usize = 32;

/// How the matrices of one call are cut into units that the calling thread and rayon's
/// workers share (see `fanout`): each matrix into `parts` slices of C's rows (`along_m`) or
/// columns, each slice one single-threaded GEMM. The caller starts on the first unit at once,
/// so a worker that wakes late costs nothing: handing the whole call to the pool (the GEMM
/// crate's rayon mode) parks the caller and waits for one worker to wake and then another,
/// which doubled a 256x256 product on a 2-core machine whenever the workers slept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Split {
    parts: usize,
    along_m: bool,
}

impl Split {
    /// The split of `matrices` m×n products on `threads` threads: about two units per thread,
    /// none narrower than [`MIN_SLICE`], along the longer side of C.
    fn of(m: usize, n: usize, matrices: usize, threads: usize) -> Split {
        let along_m = m >= n;
        let side = if along_m { m } else { n };
        let wanted = (2 * threads).div_ceil(matrices.max(1));
        Split {
            parts: wanted.min(side / MIN_SLICE).max(1),
            along_m,
        }
    }

    /// The rows (or columns) of C that slice `p` of a matrix computes.
    fn range(&self, side: usize, p: usize) -> std::ops::Range<usize> {
        side * p / self.parts..side * (p + 1) / self.parts
    }
}

/// Raw operand addresses shared with rayon's workers.
#[derive(Clone, Copy)]
struct Operands<T> {
    a: *const T,
    b: *const T,
    c: *mut T,
}

// SAFETY: the addresses are only used by `run`'s units, which touch disjoint slices of C and
// only read A and B, while `run`'s caller keeps the matrices alive and untouched (its contract).
unsafe impl<T> Send for Operands<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for Operands<T> {}

/// # Safety
/// The pointers must address aligned matrices of the sizes `d` describes (checked by the
/// caller), C must not overlap A or B, and nothing else may access them meanwhile.
unsafe fn run<T: 'static + Copy + Send + Sync>(
    d: &GemmDesc,
    a: *const T,
    b: *const T,
    c: *mut T,
    alpha: T,
    beta: T,
    parallel: bool,
) {
    let work = d.m * d.n * d.k;
    let threads = rayon::current_num_threads();
    if !parallel || threads < 2 || work * d.batch < PARALLEL_WORK {
        for i in 0..d.batch {
            // SAFETY: matrix `i` lies inside its buffers (the caller's contract).
            unsafe { one(d, i, 0..d.m, 0..d.n, a, b, c, alpha, beta, false) };
        }
        return;
    }
    if work >= CRATE_SPLIT_WORK {
        for i in 0..d.batch {
            // SAFETY: as above.
            unsafe { one(d, i, 0..d.m, 0..d.n, a, b, c, alpha, beta, true) };
        }
        return;
    }
    // Matrices whose C ranges meet (a batch stride of C shorter than one matrix) run one
    // after another, as the GEMM crate's loop ran them: two threads must not write one element.
    let c_span = (d.m - 1) * d.ldc + d.n;
    let together = if d.stride_c >= c_span { d.batch } else { 1 };
    let split = Split::of(d.m, d.n, together, threads);
    let ops = Operands { a, b, c };
    for first in (0..d.batch).step_by(together) {
        let matrices = together.min(d.batch - first);
        super::fanout::share(matrices * split.parts, threads - 1, &|claims| {
            let ops = &ops; // the whole struct, not its raw-pointer fields one by one
            while let Some(unit) = claims.next_unit() {
                let (i, p) = (first + unit / split.parts, unit % split.parts);
                let (rows, cols) = if split.along_m {
                    (split.range(d.m, p), 0..d.n)
                } else {
                    (0..d.m, split.range(d.n, p))
                };
                // SAFETY: each unit is claimed once and writes its own slice of C: the slices
                // of one matrix are disjoint, and matrices that share a call do not meet (their
                // C stride spans a whole matrix); A and B are only read (the caller's contract).
                unsafe { one(d, i, rows, cols, ops.a, ops.b, ops.c, alpha, beta, false) };
            }
        });
    }
}

/// C[rows, cols] of matrix `i` of the batch: the GEMM crate on one thread, or on rayon's pool
/// when `crate_parallel`.
///
/// # Safety
/// As for [`run`]; the ranges lie inside `0..m` and `0..n`.
#[allow(clippy::too_many_arguments)]
unsafe fn one<T: 'static + Copy>(
    d: &GemmDesc,
    i: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    a: *const T,
    b: *const T,
    c: *mut T,
    alpha: T,
    beta: T,
    crate_parallel: bool,
) {
    let (a_rs, a_cs) = strides(d.trans_a, d.lda);
    let (b_rs, b_cs) = strides(d.trans_b, d.ldb);
    // Row r of op(A) and column j of op(B) start at these element offsets.
    let a_row = if d.trans_a {
        rows.start
    } else {
        rows.start * d.lda
    };
    let b_col = if d.trans_b {
        cols.start * d.ldb
    } else {
        cols.start
    };
    let par = if crate_parallel {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the slice lies inside matrix `i` of each operand, which lies inside its buffer
    // (the caller's contract).
    unsafe {
        gemm::gemm(
            rows.len(),
            cols.len(),
            d.k,
            c.add(i * d.stride_c + rows.start * d.ldc + cols.start),
            1,
            d.ldc as isize,
            d.beta != 0.0,
            a.add(i * d.stride_a + a_row),
            a_cs,
            a_rs,
            b.add(i * d.stride_b + b_col),
            b_cs,
            b_rs,
            // The crate computes dst = alpha·dst + beta·lhs·rhs.
            beta,
            alpha,
            false,
            false,
            false,
            par,
        )
    };
}

/// Runs a GEMM on host memory.
pub(crate) fn gemm(d: &GemmDesc, a: &BufferArg, b: &BufferArg, c: &BufferArg) -> Result<()> {
    if d.outer.count != 1 {
        return d.for_each_outer(a, b, c, gemm);
    }
    d.check(a, b, c)?;
    if d.m == 0 || d.n == 0 || d.batch == 0 {
        return Ok(());
    }
    let size = d.ty.size_bytes();
    let (pa, pb, pc) = (host(a, size)?, host(b, size)?, host(c, size)?);
    let device = super::device_lock::lock();
    let a_copy = copy_if_overlapping(pa, a, pc, c.len);
    let b_copy = copy_if_overlapping(pb, b, pc, c.len);
    let pa = a_copy.as_ref().map_or(pa, |v| v.as_ptr() as *mut u8);
    let pb = b_copy.as_ref().map_or(pb, |v| v.as_ptr() as *mut u8);
    let par = device.parallel;
    // The BLAS takes matrices large on every side; skinny ones (a 10-class output layer) ran
    // faster on the crate (1024x256 by 256x10: 96 us, MKL 160-190 us on the 2-core VM).
    let large = d.m.min(d.n).min(d.k) >= BLAS_MIN_SIDE;
    if let (true, true, Some(blas), Type::F32 | Type::F64) =
        (par, large, super::blas::adopted(), d.ty)
    {
        // SAFETY: as for `run` below.
        let done = unsafe {
            match d.ty {
                Type::F32 => super::blas::run::<f32>(blas, d, pa as _, pb as _, pc as _),
                _ => super::blas::run::<f64>(blas, d, pa as _, pb as _, pc as _),
            }
        };
        if done {
            return Ok(());
        }
    }
    // SAFETY: `check` verified every matrix of the batch lies inside its buffer and `host` that
    // each is aligned (the copies are 8-byte aligned); the element type is `d.ty`; A and B no
    // longer overlap C; the device lock keeps every other copy and launch away.
    unsafe {
        match d.ty {
            Type::F32 => run::<f32>(
                d,
                pa as _,
                pb as _,
                pc as _,
                d.alpha as f32,
                d.beta as f32,
                par,
            ),
            Type::F64 => run::<f64>(d, pa as _, pb as _, pc as _, d.alpha, d.beta, par),
            Type::F16 => run::<f16>(
                d,
                pa as _,
                pb as _,
                pc as _,
                f16::from_f64(d.alpha),
                f16::from_f64(d.beta),
                par,
            ),
            Type::BF16 => bf16_via_f32(d, pa as _, pb as _, pc as _, par),
            other => {
                return Err(BackendError::InvalidArgument {
                    kernel: "gemm".into(),
                    reason: format!("gemm supports f16, bf16, f32 and f64, not {other}"),
                })
            }
        }
    }
    Ok(())
}

/// bf16 has no CPU kernel: widen the used parts of A, B and C to f32, multiply, round back.
///
/// # Safety
/// As for [`run`].
unsafe fn bf16_via_f32(d: &GemmDesc, a: *const bf16, b: *const bf16, c: *mut bf16, par: bool) {
    let (rows_a, cols_a) = if d.trans_a { (d.k, d.m) } else { (d.m, d.k) };
    let (rows_b, cols_b) = if d.trans_b { (d.n, d.k) } else { (d.k, d.n) };
    /// # Safety
    /// `p` addresses `rows` rows of `cols` elements, `ld` apart.
    unsafe fn widen(p: *const bf16, rows: usize, cols: usize, ld: usize) -> Vec<f32> {
        let mut v = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            for col in 0..cols {
                // SAFETY: inside the matrix (the contract).
                v.push(unsafe { *p.add(r * ld + col) }.to_f32());
            }
        }
        v
    }
    for i in 0..d.batch {
        // SAFETY: matrix `i` of each operand lies inside its buffer (the caller's contract),
        // so the offsets and the widened reads stay inside; the f32 copies are fresh, dense and
        // disjoint.
        unsafe {
            let fa = widen(a.add(i * d.stride_a), rows_a, cols_a, d.lda);
            let fb = widen(b.add(i * d.stride_b), rows_b, cols_b, d.ldb);
            let cp = c.add(i * d.stride_c);
            let mut fc = widen(cp, d.m, d.n, d.ldc);
            let one = GemmDesc {
                lda: cols_a,
                ldb: cols_b,
                ldc: d.n,
                batch: 1,
                stride_a: 0,
                stride_b: 0,
                stride_c: 0,
                ty: Type::F32,
                ..*d
            };
            run::<f32>(
                &one,
                fa.as_ptr(),
                fb.as_ptr(),
                fc.as_mut_ptr(),
                d.alpha as f32,
                d.beta as f32,
                par,
            );
            for r in 0..d.m {
                for col in 0..d.n {
                    *cp.add(r * d.ldc + col) = bf16::from_f32(fc[r * d.n + col]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slices_of_a_split_cover_c_once() {
        for (m, n, batch, threads) in [
            (256, 256, 1, 2),
            (150, 97, 1, 2),
            (70, 151, 1, 8),
            (40, 40, 1, 4),
            (256, 64, 16, 2),
        ] {
            let split = Split::of(m, n, batch, threads);
            let side = if split.along_m { m } else { n };
            assert_eq!(split.along_m, m >= n);
            assert!(split.parts >= 1 && (split.parts == 1 || side / split.parts >= MIN_SLICE));
            let mut next = 0;
            for p in 0..split.parts {
                let r = split.range(side, p);
                assert_eq!(r.start, next, "{m}x{n} part {p}");
                next = r.end;
            }
            assert_eq!(next, side);
        }
    }
}
