//! GEMM through cuBLAS.
//!
//! [`GemmDesc`] is row-major; cuBLAS is column-major. A row-major matrix is the column-major
//! matrix of its transpose with the same leading dimension, and `Cᵀ = op(B)ᵀ · op(A)ᵀ`, so the
//! call swaps A and B (and their transposes, leading dimensions and strides) and swaps m and n.
//! f16 and bf16 accumulate in f32; f32 uses TF32 tensor cores only when the descriptor allows it
//! ([`GemmPrecision::Tf32`]).

use std::ffi::c_void;

use cudarc::cublas::result as blas;
use cudarc::cublas::sys::{
    cublasComputeType_t as Compute, cublasGemmAlgo_t, cublasHandle_t, cublasOperation_t as OpT,
    cudaDataType_t as DataType,
};
use hologram_isa::Type;

use super::device::Device;
use super::memory::device_address;
use crate::backend::BufferArg;
use crate::error::{BackendError, Result};
use crate::library::{GemmDesc, GemmPrecision};

/// A cuBLAS handle bound to the backend's stream.
pub(crate) struct Blas {
    handle: cublasHandle_t,
}

// SAFETY: the handle is used under the backend's mutex, with the context current.
unsafe impl Send for Blas {}

fn blas_error(what: &str) -> impl Fn(blas::CublasError) -> BackendError + '_ {
    move |e| BackendError::Device(format!("cuBLAS {what} failed: {e:?}"))
}

impl Blas {
    /// Creates a handle on the device's stream (the context must be current).
    pub(crate) fn new(dev: &Device) -> Result<Blas> {
        let handle = blas::create_handle().map_err(blas_error("cublasCreate"))?;
        // SAFETY: fresh handle; the stream lives as long as the device, which outlives `Blas`.
        if let Err(e) = unsafe { blas::set_stream(handle, dev.stream as *mut _) } {
            // SAFETY: destroyed once on this error path.
            let _ = unsafe { blas::destroy_handle(handle) };
            return Err(blas_error("cublasSetStream")(e));
        }
        Ok(Blas { handle })
    }

    /// True when cuBLAS can run this GEMM (every size fits its 32-bit ints).
    pub(crate) fn supports(desc: &GemmDesc) -> bool {
        let fits = |v: usize| v <= i32::MAX as usize;
        [
            desc.m,
            desc.n,
            desc.k,
            desc.lda,
            desc.ldb,
            desc.ldc,
            desc.batch,
            desc.matrices(),
        ]
        .into_iter()
        .all(fits)
            && [desc.stride_a, desc.stride_b, desc.stride_c]
                .into_iter()
                .all(|s| s <= i64::MAX as usize)
    }

    /// Enqueues `C = alpha·op(A)·op(B) + beta·C` (arguments already checked by `desc.check`).
    /// With an outer batch, `pointer_arrays` is the device address of the matrices' A, B and C
    /// addresses (`desc.matrices()` each, in that order; see `gemm_pointers`), queued before.
    pub(crate) fn gemm(
        &mut self,
        desc: &GemmDesc,
        a: &BufferArg,
        b: &BufferArg,
        c: &BufferArg,
        pointer_arrays: Option<u64>,
    ) -> Result<()> {
        let (pa, pb, pc) = (device_address(a)?, device_address(b)?, device_address(c)?);
        let (data, compute) = match (desc.ty, desc.precision) {
            (Type::F32, GemmPrecision::Tf32) => {
                (DataType::CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F_FAST_TF32)
            }
            (Type::F32, _) => (DataType::CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F),
            (Type::F64, _) => (DataType::CUDA_R_64F, Compute::CUBLAS_COMPUTE_64F),
            (Type::F16, _) => (DataType::CUDA_R_16F, Compute::CUBLAS_COMPUTE_32F),
            (Type::BF16, _) => (DataType::CUDA_R_16BF, Compute::CUBLAS_COMPUTE_32F),
            (t, _) => {
                return Err(BackendError::InvalidArgument {
                    kernel: "gemm".into(),
                    reason: format!("gemm supports f16, bf16, f32 and f64, not {t}"),
                })
            }
        };
        // Scalars in the compute type's precision (f64 for f64, else f32).
        let (alpha32, beta32) = (desc.alpha as f32, desc.beta as f32);
        let (alpha64, beta64) = (desc.alpha, desc.beta);
        let (alpha, beta): (*const c_void, *const c_void) = if desc.ty == Type::F64 {
            (
                &alpha64 as *const f64 as *const _,
                &beta64 as *const f64 as *const _,
            )
        } else {
            (
                &alpha32 as *const f32 as *const _,
                &beta32 as *const f32 as *const _,
            )
        };
        let op = |t: bool| {
            if t {
                OpT::CUBLAS_OP_T
            } else {
                OpT::CUBLAS_OP_N
            }
        };
        let i = |v: usize| v as i32;
        if desc.outer.count != 1 {
            let arrays = pointer_arrays.ok_or_else(|| {
                BackendError::Device("an outer-batched GEMM without its pointer arrays".into())
            })?;
            let total = desc.matrices() as u64;
            let (arr_a, arr_b, arr_c) = (arrays, arrays + 8 * total, arrays + 16 * total);
            // SAFETY: the arrays hold `matrices()` addresses each, written on this stream
            // before this call from operands checked to lie inside their buffers
            // (`GemmDesc::check` covers the outer batch); sizes fit i32 (`supports`); alpha and
            // beta outlive the call (host pointer mode). A and B swap as for the strided call.
            return unsafe {
                cudarc::cublas::sys::cublasGemmBatchedEx(
                    self.handle,
                    op(desc.trans_b),
                    op(desc.trans_a),
                    i(desc.n),
                    i(desc.m),
                    i(desc.k),
                    alpha,
                    arr_b as *const *const c_void,
                    data,
                    i(desc.ldb),
                    arr_a as *const *const c_void,
                    data,
                    i(desc.lda),
                    beta,
                    arr_c as *const *mut c_void,
                    data,
                    i(desc.ldc),
                    i(desc.matrices()),
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .result()
            .map_err(blas_error("gemm (cublasGemmBatchedEx)"));
        }
        // SAFETY: every matrix was checked to lie inside its buffer (`GemmDesc::check`), sizes
        // fit i32 (`supports`), and alpha/beta outlive the call (host pointer mode).
        unsafe {
            cudarc::cublas::sys::cublasGemmStridedBatchedEx(
                self.handle,
                op(desc.trans_b),
                op(desc.trans_a),
                i(desc.n),
                i(desc.m),
                i(desc.k),
                alpha,
                pb as *const c_void,
                data,
                i(desc.ldb),
                desc.stride_b as i64,
                pa as *const c_void,
                data,
                i(desc.lda),
                desc.stride_a as i64,
                beta,
                pc as *mut c_void,
                data,
                i(desc.ldc),
                desc.stride_c as i64,
                i(desc.batch),
                compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .result()
        .map_err(blas_error("gemm (cublasGemmStridedBatchedEx)"))
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: destroyed once (the backend binds the context before dropping this).
        let _ = unsafe { blas::destroy_handle(self.handle) };
    }
}
