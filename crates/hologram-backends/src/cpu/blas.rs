//! f32 and f64 GEMMs through the BLAS already loaded in the process: PyTorch's MKL.
//!
//! In a process that runs PyTorch on the CPU, torch's GEMMs go through the MKL linked into
//! `libtorch_cpu`, on torch's OpenMP team. [`share_blas`] (called with
//! [`super::share_openmp_threads`]) finds that library among those already mapped and from then
//! on runs the CPU backend's f32 and f64 GEMMs through its Fortran `sgemm_`/`dgemm_` (32-bit
//! integers: the LP64 interface, which MKL exports beside `sgemm_64`). A compiled model's GEMMs
//! then run as fast as torch's own, on the same threads (the `gemm` crate reached 75-85 % of
//! MKL's rate on a 2-core AMD EPYC). Nothing is loaded; other types, and GEMMs whose leading
//! dimensions the Fortran interface does not take, stay on the `gemm` crate.

use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

use crate::library::GemmDesc;

/// `?gemm_(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`, column-major, every
/// argument by reference (the Fortran interface).
type Gemm<T> = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *const i32,
    *const i32,
    *const i32,
    *const T,
    *const T,
    *const i32,
    *const T,
    *const i32,
    *const T,
    *mut T,
    *const i32,
);

/// The adopted library.
pub(crate) struct Blas {
    sgemm: Gemm<f32>,
    dgemm: Gemm<f64>,
    path: String,
}

static BLAS: OnceLock<Blas> = OnceLock::new();

/// The adopted BLAS, if any.
pub(crate) fn adopted() -> Option<&'static Blas> {
    BLAS.get()
}

/// The path of the BLAS the CPU backend's f32/f64 GEMMs run through, if one was adopted.
pub fn blas_library() -> Option<String> {
    BLAS.get().map(|b| b.path.clone())
}

/// Adopts the MKL of a PyTorch already loaded in this process (see the module documentation);
/// returns its path, or `None` when there is none (or with `HOLOGRAM_CPU_POOL=rayon`).
pub(crate) fn share_blas() -> Option<String> {
    if BLAS.get().is_none() {
        if let Some(b) = find_loaded_blas() {
            let _ = BLAS.set(b);
        }
    }
    blas_library()
}

#[cfg(target_os = "linux")]
fn find_loaded_blas() -> Option<Blas> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for path in maps.lines().filter_map(|l| l.split_whitespace().nth(5)) {
        let name = path.rsplit('/').next().unwrap_or(path);
        // Libraries whose `sgemm_` is known to take 32-bit integers.
        if !(name.starts_with("libtorch_cpu.so") || name.starts_with("libmkl_rt.so")) {
            continue;
        }
        let Ok(c_path) = std::ffi::CString::new(path) else {
            continue;
        };
        // SAFETY: RTLD_NOLOAD only returns a handle to a library already loaded (no
        // initializer runs); the handle is never closed, so the symbols stay valid.
        let (s, d) = unsafe {
            let handle = libc::dlopen(c_path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
            if handle.is_null() {
                continue;
            }
            (
                libc::dlsym(handle, c"sgemm_".as_ptr()),
                libc::dlsym(handle, c"dgemm_".as_ptr()),
            )
        };
        if s.is_null() || d.is_null() {
            continue;
        }
        // SAFETY: the Fortran BLAS `sgemm_`/`dgemm_` of these libraries have this signature.
        let (sgemm, dgemm) = unsafe {
            (
                std::mem::transmute::<*mut c_void, Gemm<f32>>(s),
                std::mem::transmute::<*mut c_void, Gemm<f64>>(d),
            )
        };
        return Some(Blas {
            sgemm,
            dgemm,
            path: path.to_string(),
        });
    }
    None
}

#[cfg(not(target_os = "linux"))]
fn find_loaded_blas() -> Option<Blas> {
    None
}

/// An f32 or f64 scalar with its BLAS routine.
pub(crate) trait BlasElement: Copy {
    fn routine(b: &Blas) -> Gemm<Self>;
    fn of(x: f64) -> Self;
}

impl BlasElement for f32 {
    fn routine(b: &Blas) -> Gemm<f32> {
        b.sgemm
    }
    fn of(x: f64) -> f32 {
        x as f32
    }
}

impl BlasElement for f64 {
    fn routine(b: &Blas) -> Gemm<f64> {
        b.dgemm
    }
    fn of(x: f64) -> f64 {
        x
    }
}

/// The column-major call computing row-major `C = alpha·op(A)·op(B) + beta·C`: `C^T = op(B)^T ·
/// op(A)^T`, so B comes first. `None` when a size or leading dimension does not fit the
/// interface (32-bit, at least the rows of the column-major matrix), or K is 0.
fn fortran_args(d: &GemmDesc) -> Option<[i32; 6]> {
    if d.k == 0 {
        // C = beta·C: MKL returns without writing C even when beta is 0 (the crate zeroes it).
        return None;
    }
    let int = |v: usize| i32::try_from(v.max(1)).ok();
    // Rows (column-major) of the stored B and A as the call sees them.
    let b_rows = if d.trans_b { d.k } else { d.n };
    let a_rows = if d.trans_a { d.m } else { d.k };
    if d.ldb < b_rows.max(1) || d.lda < a_rows.max(1) || d.ldc < d.n.max(1) {
        return None;
    }
    Some([
        int(d.n)?,
        int(d.m)?,
        int(d.k)?,
        int(d.ldb)?,
        int(d.lda)?,
        int(d.ldc)?,
    ])
}

/// Runs `d` (every matrix of its batch) through the BLAS; false (nothing done) when the
/// interface cannot take it.
///
/// # Safety
/// As for the `gemm` crate path: the pointers address aligned matrices of the sizes `d`
/// describes, C overlaps neither A nor B, and nothing else accesses them meanwhile.
pub(crate) unsafe fn run<T: BlasElement>(
    blas: &Blas,
    d: &GemmDesc,
    a: *const T,
    b: *const T,
    c: *mut T,
) -> bool {
    // Fortran's M, N, K and leading dimensions (B first: see `fortran_args`).
    let Some([rows, cols, depth, ld_first, ld_second, ld_c]) = fortran_args(d) else {
        return false;
    };
    let trans = |t: bool| if t { b"T\0" } else { b"N\0" };
    let (ta, tb) = (trans(d.trans_b), trans(d.trans_a));
    let (alpha, beta) = (T::of(d.alpha), T::of(d.beta));
    let gemm = T::routine(blas);
    for i in 0..d.batch {
        // SAFETY: matrix `i` of each operand lies inside its buffer (the caller's contract),
        // and the arguments describe it (`fortran_args`); every argument outlives the call.
        unsafe {
            gemm(
                ta.as_ptr() as *const c_char,
                tb.as_ptr() as *const c_char,
                &rows,
                &cols,
                &depth,
                &alpha,
                b.add(i * d.stride_b),
                &ld_first,
                a.add(i * d.stride_a),
                &ld_second,
                &beta,
                c.add(i * d.stride_c),
                &ld_c,
            )
        };
    }
    true
}
