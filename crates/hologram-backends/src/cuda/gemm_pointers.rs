//! GEMMs with an outer batch ([`OuterBatch`]) as one cuBLAS call: `cublasGemmBatchedEx` takes
//! an array of device pointers per operand instead of one batch stride, so `[B, H, rows, cols]`
//! views whose two batch strides do not merge (attention's heads sliced out of one projection)
//! are read and written in place instead of packed.
//!
//! The arrays are written on the device, by a small Atlas kernel launched on the stream right
//! before the GEMM, into scratch memory the backend keeps for its lifetime: captured into a CUDA
//! graph, the pair replays as it was recorded, and one scratch serves every call because the
//! stream runs each fill and its GEMM before the next fill.

use std::sync::OnceLock;

use hologram_compiler::Canonical;
use hologram_isa::semantics::Value;

use crate::backend::{Backend, BufferArg, CompiledKernel, KernelArg, LaunchConfig, Memory};
use crate::error::{BackendError, Result};
use crate::library::{GemmDesc, OuterBatch};

/// `HOLOGRAM_CUDA_OUTER_GEMM=0` runs outer batches as a loop of strided-batched calls instead
/// (callers then pack the operands), for comparison.
pub(crate) const OUTER_GEMM_ENV: &str = "HOLOGRAM_CUDA_OUTER_GEMM";

/// Lanes per block of the fill kernel.
const BLOCK: u32 = 128;

/// Whether outer batches run as one pointer-array call (the default).
pub(crate) fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(OUTER_GEMM_ENV).map_or(true, |v| v.trim() != "0"))
}

/// The fill kernel: lane `i < total` writes matrix `i`'s address of A, B and C at `out[i]`,
/// `out[total + i]` and `out[2 total + i]`, matrix `i` being batch entry `i % batch` of outer
/// batch `i / batch` (strides in bytes).
const FILL_KERNEL: &str = r#".kernel gemm_pointers
.param .buf.u64 out .rw
.param .u32 batch
.param .u32 total
.param .u64 base_a
.param .u64 base_b
.param .u64 base_c
.param .u64 step_a
.param .u64 step_b
.param .u64 step_c
.param .u64 outer_a
.param .u64 outer_b
.param .u64 outer_c
    mov.u32 %i, %gid;
    setp.ge.u32 %done, %i, total;
@%done exit;
    div.u32 %o, %i, batch;
    rem.u32 %j, %i, batch;
    cvt.u64.u32 %o64, %o;
    cvt.u64.u32 %j64, %j;
    mad.u64 %p, %o64, outer_a, base_a;
    mad.u64 %p, %j64, step_a, %p;
    st.u64 out[%i], %p;
    add.u32 %k, %i, total;
    mad.u64 %p, %o64, outer_b, base_b;
    mad.u64 %p, %j64, step_b, %p;
    st.u64 out[%k], %p;
    add.u32 %k, %k, total;
    mad.u64 %p, %o64, outer_c, base_c;
    mad.u64 %p, %j64, step_c, %p;
    st.u64 out[%k], %p;
"#;

/// The fill kernel in canonical form, assembled once per process.
fn fill_kernel() -> Result<Canonical> {
    static KERNEL: OnceLock<std::result::Result<Canonical, String>> = OnceLock::new();
    KERNEL
        .get_or_init(|| Canonical::assemble(FILL_KERNEL).map_err(|e| e.to_string()))
        .clone()
        .map_err(|log| BackendError::Compile {
            kernel: "gemm_pointers".into(),
            log,
        })
}

/// The fill kernel compiled for one backend and the scratch its arrays go to.
#[derive(Default)]
pub(crate) struct PointerArrays {
    compiled: Option<CompiledKernel>,
    /// Every scratch allocation made, the current (largest) last: graphs captured earlier keep
    /// the addresses of older ones, so none is freed before the backend.
    scratch: Vec<Memory>,
}

impl PointerArrays {
    /// Queues the fill of the three pointer arrays of `desc`'s matrices (A, B, C of our
    /// row-major descriptor, at the device addresses `base`) and returns the device address of
    /// the A array (B's and C's follow, `desc.matrices()` entries apart). `desc` was checked
    /// against its buffers.
    pub(crate) fn fill(
        &mut self,
        backend: &dyn Backend,
        desc: &GemmDesc,
        base: [u64; 3],
    ) -> Result<u64> {
        let total = desc.matrices();
        let total32 = u32::try_from(total).map_err(|_| BackendError::InvalidArgument {
            kernel: "gemm".into(),
            reason: format!("{total} matrices are more than one pointer-array GEMM takes"),
        })?;
        let bytes = 3 * 8 * total;
        if self.scratch.last().is_none_or(|m| m.size() < bytes) {
            let size = bytes.next_power_of_two().max(64 << 10);
            self.scratch.push(backend.allocate(size)?);
        }
        let scratch = self.scratch.last().cloned().ok_or_else(|| {
            BackendError::Device("pointer-array scratch missing after allocation".into())
        })?;
        let compiled = match &self.compiled {
            Some(c) => c.clone(),
            None => {
                let c = backend.compile(&fill_kernel()?)?;
                self.compiled = Some(c.clone());
                c
            }
        };
        let size = desc.ty.size_bytes() as u64;
        let OuterBatch {
            stride_a: oa,
            stride_b: ob,
            stride_c: oc,
            ..
        } = desc.outer;
        let u64_arg = |v: u64| KernelArg::Scalar(Value::U64(v));
        let bytes_arg = |elements: usize| u64_arg(elements as u64 * size);
        let address = scratch.device_ptr().ok_or_else(|| {
            BackendError::Device("CUDA scratch memory without a device address".into())
        })?;
        let args = [
            KernelArg::Buffer(BufferArg {
                memory: scratch,
                offset: 0,
                len: bytes,
            }),
            KernelArg::Scalar(Value::U32(desc.batch as u32)),
            KernelArg::Scalar(Value::U32(total32)),
            u64_arg(base[0]),
            u64_arg(base[1]),
            u64_arg(base[2]),
            bytes_arg(desc.stride_a),
            bytes_arg(desc.stride_b),
            bytes_arg(desc.stride_c),
            bytes_arg(oa),
            bytes_arg(ob),
            bytes_arg(oc),
        ];
        backend.launch(
            &compiled,
            &LaunchConfig::for_elements(total as u64, BLOCK),
            &args,
        )?;
        Ok(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_kernel_assembles() {
        fill_kernel().unwrap();
    }

    #[test]
    fn fill_kernel_writes_the_addresses_on_the_cpu() {
        // The kernel is plain Atlas: the CPU backend runs it too, so its arithmetic is checked
        // without a GPU.
        let cpu = crate::CpuBackend::new();
        let compiled = cpu.compile(&fill_kernel().unwrap()).unwrap();
        let (batch, outer) = (3usize, 2usize);
        let total = batch * outer;
        let out = cpu.allocate(3 * 8 * total).unwrap();
        let u = |v: u64| KernelArg::Scalar(Value::U64(v));
        let args = [
            KernelArg::Buffer(BufferArg::whole(out.clone())),
            KernelArg::Scalar(Value::U32(batch as u32)),
            KernelArg::Scalar(Value::U32(total as u32)),
            u(1000),
            u(2000),
            u(3000),
            u(4),
            u(8),
            u(12),
            u(100),
            u(200),
            u(300),
        ];
        cpu.launch(
            &compiled,
            &LaunchConfig::for_elements(total as u64, 4),
            &args,
        )
        .unwrap();
        let mut bytes = vec![0u8; 3 * 8 * total];
        cpu.copy_out(&out, 0, &mut bytes).unwrap();
        let got: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut want = Vec::new();
        for (base, step, outer_step) in [(1000, 4, 100), (2000, 8, 200), (3000, 12, 300)] {
            for i in 0..total as u64 {
                want.push(base + (i / batch as u64) * outer_step + (i % batch as u64) * step);
            }
        }
        assert_eq!(got, want);
    }
}
