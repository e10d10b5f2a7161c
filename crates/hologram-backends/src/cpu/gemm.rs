//! GEMM on the CPU through the `gemm` crate (packed, vectorized, parallel on rayon).

use half::{bf16, f16};
use hologram_isa::Type;

use super::CpuMemory;
use crate::backend::BufferArg;
use crate::error::{BackendError, Result};
use crate::library::GemmDesc;

fn host(arg: &BufferArg) -> Result<*mut u8> {
    let m = arg
        .memory
        .as_any()
        .downcast_ref::<CpuMemory>()
        .ok_or_else(|| BackendError::ForeignBuffer("not host memory".into()))?;
    // SAFETY: `GemmDesc::check` verified the range lies inside the allocation.
    Ok(unsafe { m.as_ptr().add(arg.offset) })
}

/// Row and column strides of an operand as stored (`trans`: the matrix is stored transposed).
fn strides(trans: bool, ld: usize) -> (isize, isize) {
    if trans {
        (1, ld as isize)
    } else {
        (ld as isize, 1)
    }
}

/// # Safety
/// The pointers must address matrices of the sizes `d` describes (checked by the caller).
unsafe fn run<T: 'static + Copy>(
    d: &GemmDesc,
    a: *const T,
    b: *const T,
    c: *mut T,
    alpha: T,
    beta: T,
) {
    let (a_rs, a_cs) = strides(d.trans_a, d.lda);
    let (b_rs, b_cs) = strides(d.trans_b, d.ldb);
    let par = if d.m * d.n * d.k >= 64 * 64 * 64 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    for i in 0..d.batch {
        gemm::gemm(
            d.m,
            d.n,
            d.k,
            c.add(i * d.stride_c),
            1,
            d.ldc as isize,
            d.beta != 0.0,
            a.add(i * d.stride_a),
            a_cs,
            a_rs,
            b.add(i * d.stride_b),
            b_cs,
            b_rs,
            // The crate computes dst = alpha·dst + beta·lhs·rhs.
            beta,
            alpha,
            false,
            false,
            false,
            par,
        );
    }
}

/// Runs a GEMM on host memory.
pub(crate) fn gemm(d: &GemmDesc, a: &BufferArg, b: &BufferArg, c: &BufferArg) -> Result<()> {
    d.check(a, b, c)?;
    if d.m == 0 || d.n == 0 || d.batch == 0 {
        return Ok(());
    }
    let (pa, pb, pc) = (host(a)?, host(b)?, host(c)?);
    // SAFETY: `check` verified every matrix of the batch lies inside its buffer; the element
    // type matches `d.ty`.
    unsafe {
        match d.ty {
            Type::F32 => run::<f32>(d, pa as _, pb as _, pc as _, d.alpha as f32, d.beta as f32),
            Type::F64 => run::<f64>(d, pa as _, pb as _, pc as _, d.alpha, d.beta),
            Type::F16 => run::<f16>(
                d,
                pa as _,
                pb as _,
                pc as _,
                f16::from_f64(d.alpha),
                f16::from_f64(d.beta),
            ),
            Type::BF16 => bf16_via_f32(d, pa as _, pb as _, pc as _),
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
unsafe fn bf16_via_f32(d: &GemmDesc, a: *const bf16, b: *const bf16, c: *mut bf16) {
    let (rows_a, cols_a) = if d.trans_a { (d.k, d.m) } else { (d.m, d.k) };
    let (rows_b, cols_b) = if d.trans_b { (d.n, d.k) } else { (d.k, d.n) };
    let widen = |p: *const bf16, rows: usize, cols: usize, ld: usize| -> Vec<f32> {
        let mut v = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            for col in 0..cols {
                v.push((*p.add(r * ld + col)).to_f32());
            }
        }
        v
    };
    for i in 0..d.batch {
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
        );
        for r in 0..d.m {
            for col in 0..d.n {
                *cp.add(r * d.ldc + col) = bf16::from_f32(fc[r * d.n + col]);
            }
        }
    }
}
