//! General matrix multiply: `C = alpha * op(A) * op(B) + beta * C`, row-major, batched.

use std::sync::Mutex;

use hologram_isa::semantics::Value;
use hologram_isa::Type;

use crate::backend::{Backend, BufferArg, KernelArg, LaunchConfig};
use crate::error::{BackendError, Result};

/// How much precision a GEMM may trade for speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GemmPrecision {
    /// Products and sums in the element type (f16/bf16 accumulate in f32).
    #[default]
    Exact,
    /// f32 inputs may be rounded to TF32 (10-bit mantissa) on tensor cores.
    Tf32,
}

/// A second batch dimension around a GEMM's batch: `count` repetitions of the whole strided
/// batch, each `stride_*` elements past the one before. It lets a GEMM read `[B, H, rows, cols]`
/// views whose two batch strides do not merge into one (attention's heads, sliced out of one
/// projection) in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OuterBatch {
    /// Repetitions of the batch (1: no outer batch).
    pub count: usize,
    /// Elements between consecutive outer batches of A.
    pub stride_a: usize,
    /// Elements between consecutive outer batches of B.
    pub stride_b: usize,
    /// Elements between consecutive outer batches of C.
    pub stride_c: usize,
}

impl OuterBatch {
    /// No outer batch: the GEMM's own batch only.
    pub const NONE: OuterBatch = OuterBatch {
        count: 1,
        stride_a: 0,
        stride_b: 0,
        stride_c: 0,
    };
}

/// A row-major GEMM: `C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C`, repeated over
/// `batch` matrices `stride_*` elements apart (and that batch over [`OuterBatch`]). `op(X)` is
/// `Xᵀ` when `trans_*` is set. Leading dimensions are in elements. With `beta == 0`, C is not
/// read (NaNs in C do not propagate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GemmDesc {
    /// Element type of A, B and C: f16, bf16, f32 or f64.
    pub ty: Type,
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The shared dimension.
    pub k: usize,
    /// Use Aᵀ (A is stored k×m).
    pub trans_a: bool,
    /// Use Bᵀ (B is stored n×k).
    pub trans_b: bool,
    /// Scale of the product.
    pub alpha: f64,
    /// Scale of the old C.
    pub beta: f64,
    /// Row stride of A as stored.
    pub lda: usize,
    /// Row stride of B as stored.
    pub ldb: usize,
    /// Row stride of C.
    pub ldc: usize,
    /// Number of matrices.
    pub batch: usize,
    /// Elements between consecutive A matrices.
    pub stride_a: usize,
    /// Elements between consecutive B matrices.
    pub stride_b: usize,
    /// Elements between consecutive C matrices.
    pub stride_c: usize,
    /// Precision policy.
    pub precision: GemmPrecision,
    /// Repetitions of the whole batch ([`OuterBatch::NONE`] for none).
    pub outer: OuterBatch,
}

impl GemmDesc {
    /// A single, non-transposed, densely packed `C = A · B`.
    pub fn new(ty: Type, m: usize, n: usize, k: usize) -> Self {
        GemmDesc {
            ty,
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
            lda: k,
            ldb: n,
            ldc: n,
            batch: 1,
            stride_a: m * k,
            stride_b: k * n,
            stride_c: m * n,
            precision: GemmPrecision::Exact,
            outer: OuterBatch::NONE,
        }
    }

    /// Matrices in all: the batch times the outer batch.
    pub fn matrices(&self) -> usize {
        self.batch.saturating_mul(self.outer.count)
    }

    /// Runs `gemm` once per outer batch with that batch's operands (the descriptor without its
    /// outer batch; buffer ranges starting at the batch's first elements): how libraries that
    /// take one batch stride run an [`OuterBatch`]. Checks the whole descriptor first; without
    /// an outer batch, calls `gemm` once with the arguments as they are.
    pub fn for_each_outer(
        &self,
        a: &BufferArg,
        b: &BufferArg,
        c: &BufferArg,
        mut gemm: impl FnMut(&GemmDesc, &BufferArg, &BufferArg, &BufferArg) -> Result<()>,
    ) -> Result<()> {
        if self.outer.count == 1 {
            return gemm(self, a, b, c);
        }
        self.check(a, b, c)?;
        let inner = GemmDesc {
            outer: OuterBatch::NONE,
            ..*self
        };
        let size = self.ty.size_bytes();
        let skip = |arg: &BufferArg, elements: usize| -> BufferArg {
            // In range: `check` proved every outer batch's matrices lie inside the buffer.
            let bytes = (elements * size).min(arg.len);
            BufferArg {
                memory: arg.memory.clone(),
                offset: arg.offset + bytes,
                len: arg.len - bytes,
            }
        };
        for o in 0..self.outer.count {
            gemm(
                &inner,
                &skip(a, o * self.outer.stride_a),
                &skip(b, o * self.outer.stride_b),
                &skip(c, o * self.outer.stride_c),
            )?;
        }
        Ok(())
    }

    /// Checks types, leading dimensions and that every matrix fits its buffer.
    pub fn check(&self, a: &BufferArg, b: &BufferArg, c: &BufferArg) -> Result<()> {
        let bad = |reason: String| BackendError::InvalidArgument {
            kernel: "gemm".into(),
            reason,
        };
        if !matches!(self.ty, Type::F16 | Type::BF16 | Type::F32 | Type::F64) {
            return Err(bad(format!(
                "gemm supports f16, bf16, f32 and f64, not {}",
                self.ty
            )));
        }
        let (rows_a, cols_a) = if self.trans_a {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        };
        let (rows_b, cols_b) = if self.trans_b {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        };
        let size = self.ty.size_bytes();
        let outer = self.outer;
        for (name, buf, rows, cols, ld, stride, outer_stride) in [
            (
                "A",
                a,
                rows_a,
                cols_a,
                self.lda,
                self.stride_a,
                outer.stride_a,
            ),
            (
                "B",
                b,
                rows_b,
                cols_b,
                self.ldb,
                self.stride_b,
                outer.stride_b,
            ),
            (
                "C",
                c,
                self.m,
                self.n,
                self.ldc,
                self.stride_c,
                outer.stride_c,
            ),
        ] {
            if ld < cols.max(1) {
                return Err(bad(format!(
                    "leading dimension of {name} ({ld}) is less than its {cols} columns"
                )));
            }
            crate::launch::check_buffer(buf, buf.memory.size())?;
            if rows == 0 || cols == 0 || self.batch == 0 || outer.count == 0 {
                continue;
            }
            // Checked: a wrapped extent would pass the length check and send the CPU GEMM
            // past the buffer.
            let last = (self.batch - 1)
                .checked_mul(stride)
                .and_then(|x| x.checked_add((outer.count - 1).checked_mul(outer_stride)?))
                .and_then(|x| x.checked_add((rows - 1).checked_mul(ld)?))
                .and_then(|x| x.checked_add(cols))
                .filter(|x| x.checked_mul(size).is_some())
                .ok_or_else(|| {
                    bad(format!(
                        "{name} spans more than the address space ({} x {} batches of strides {outer_stride} and {stride}, {rows} rows of {ld})",
                        outer.count, self.batch
                    ))
                })?;
            if last * size > buf.len {
                return Err(bad(format!(
                    "{name} needs {} elements but its buffer holds {}",
                    last,
                    buf.len / size
                )));
            }
        }
        for v in [
            self.m,
            self.n,
            self.k,
            self.lda,
            self.ldb,
            self.ldc,
            self.stride_a,
            self.stride_b,
            self.stride_c,
        ] {
            if v > u32::MAX as usize {
                return Err(bad(format!("dimension {v} exceeds u32")));
            }
        }
        Ok(())
    }
}

/// Tile edge of the generic kernel (a block computes a TILE×TILE tile of C).
const TILE: u32 = 16;

/// The generic GEMM kernel for one element type: tiles of A and B staged through shared memory,
/// accumulation in f32 (f64 for f64).
pub fn kernel_text(ty: Type) -> String {
    let acc = if ty == Type::F64 {
        Type::F64
    } else {
        Type::F32
    };
    let load = |dst: &str, arr: &str, idx: &str| {
        if ty == acc {
            format!("@%in ld.{ty} {dst}, {arr}[{idx}];")
        } else {
            format!("@%in ld.{ty} %h, {arr}[{idx}];\n@%in cvt.{acc}.{ty} {dst}, %h;")
        }
    };
    let load_a = load("%va", "a", "%ai");
    let load_b = load("%vb", "b", "%bi");
    let (load_c, store_c) = if ty == acc {
        (
            "ld.{ty} %old, c[%ci];".replace("{ty}", ty.name()),
            format!("st.{ty} c[%ci], %r;"),
        )
    } else {
        (
            format!("ld.{ty} %oh, c[%ci];\n    cvt.{acc}.{ty} %old, %oh;"),
            format!("cvt.{ty}.{acc} %rh, %r;\n    st.{ty} c[%ci], %rh;"),
        )
    };
    format!(
        r#".kernel gemm_{ty}
.param .buf.{ty} a
.param .buf.{ty} b
.param .buf.{ty} c .rw
.param .u32 m
.param .u32 n
.param .u32 k
.param .u32 lda
.param .u32 ldb
.param .u32 ldc
.param .pred ta
.param .pred tb
.param .u32 sa
.param .u32 sb
.param .u32 sc
.param .{acc} alpha
.param .{acc} beta
.shared .{acc} as[{tt}]
.shared .{acc} bs[{tt}]
    mov.u32 %tx, %tid.x;
    mov.u32 %ty, %tid.y;
    mad.u32 %row, %ctaid.y, {t}, %ty;
    mad.u32 %col, %ctaid.x, {t}, %tx;
    mul.u32 %abase, %ctaid.z, sa;
    mul.u32 %bbase, %ctaid.z, sb;
    mul.u32 %cbase, %ctaid.z, sc;
    mad.u32 %slot, %ty, {t}, %tx;
    mov.{acc} %acc, 0.0;
    mov.u32 %k0, 0;
TILE:
    setp.ge.u32 %done, %k0, k;
@%done bra FINISH;
    add.u32 %ka, %k0, %tx;
    mov.{acc} %va, 0.0;
    setp.lt.u32 %r_ok, %row, m;
    setp.lt.u32 %k_ok, %ka, k;
    and.pred %in, %r_ok, %k_ok;
    mad.u32 %an, %row, lda, %ka;
    mad.u32 %at, %ka, lda, %row;
    selp.u32 %ai, %at, %an, ta;
    add.u32 %ai, %ai, %abase;
    {load_a}
    st.{acc} as[%slot], %va;
    add.u32 %kb, %k0, %ty;
    mov.{acc} %vb, 0.0;
    setp.lt.u32 %c_ok, %col, n;
    setp.lt.u32 %kb_ok, %kb, k;
    and.pred %in, %c_ok, %kb_ok;
    mad.u32 %bn, %kb, ldb, %col;
    mad.u32 %bt, %col, ldb, %kb;
    selp.u32 %bi, %bt, %bn, tb;
    add.u32 %bi, %bi, %bbase;
    {load_b}
    st.{acc} bs[%slot], %vb;
    barrier;
    mov.u32 %kk, 0;
INNER:
    mad.u32 %ia, %ty, {t}, %kk;
    mad.u32 %ib, %kk, {t}, %tx;
    ld.{acc} %x, as[%ia];
    ld.{acc} %y, bs[%ib];
    fma.{acc} %acc, %x, %y, %acc;
    add.u32 %kk, %kk, 1;
    setp.lt.u32 %more, %kk, {t};
@%more bra INNER;
    barrier;
    add.u32 %k0, %k0, {t};
    bra TILE;
FINISH:
    setp.ge.u32 %r_out, %row, m;
    setp.ge.u32 %c_out, %col, n;
    or.pred %out, %r_out, %c_out;
@%out exit;
    mad.u32 %ci, %row, ldc, %col;
    add.u32 %ci, %ci, %cbase;
    mul.{acc} %r, %acc, alpha;
    setp.eq.{acc} %no_c, beta, 0.0;
@%no_c bra STORE;
    {load_c}
    fma.{acc} %r, beta, %old, %r;
STORE:
    {store_c}
"#,
        ty = ty.name(),
        acc = acc.name(),
        t = TILE,
        tt = TILE * TILE,
    )
}

/// The GEMM kernel of an element type in canonical form, assembled once per process: its text
/// depends only on the type, and every call parsed, validated, canonicalized and digested it
/// again before the backend found its compiled pipeline by that digest.
fn gemm_kernel(ty: Type) -> Result<hologram_compiler::Canonical> {
    static KERNELS: Mutex<Vec<(Type, hologram_compiler::Canonical)>> = Mutex::new(Vec::new());
    let mut kernels = KERNELS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, k)) = kernels.iter().find(|(t, _)| *t == ty) {
        return Ok(k.clone());
    }
    let kernel = hologram_compiler::Canonical::assemble(&kernel_text(ty)).map_err(|e| {
        BackendError::Compile {
            kernel: format!("gemm_{ty}"),
            log: e.to_string(),
        }
    })?;
    kernels.push((ty, kernel.clone()));
    Ok(kernel)
}

/// Runs a GEMM with the generic kernel on any backend.
pub fn generic_gemm<B: Backend + ?Sized>(
    backend: &B,
    desc: &GemmDesc,
    a: &BufferArg,
    b: &BufferArg,
    c: &BufferArg,
) -> Result<()> {
    if desc.outer.count != 1 {
        return desc.for_each_outer(a, b, c, |d, a, b, c| generic_gemm(backend, d, a, b, c));
    }
    desc.check(a, b, c)?;
    if desc.m == 0 || desc.n == 0 || desc.batch == 0 {
        return Ok(());
    }
    let compiled = backend.compile(&gemm_kernel(desc.ty)?)?;
    let acc = |v: f64| {
        if desc.ty == Type::F64 {
            Value::F64(v)
        } else {
            Value::F32(v as f32)
        }
    };
    let u = |v: usize| KernelArg::Scalar(Value::U32(v as u32));
    let args = [
        KernelArg::Buffer(a.clone()),
        KernelArg::Buffer(b.clone()),
        KernelArg::Buffer(c.clone()),
        u(desc.m),
        u(desc.n),
        u(desc.k),
        u(desc.lda),
        u(desc.ldb),
        u(desc.ldc),
        KernelArg::Scalar(Value::Pred(desc.trans_a)),
        KernelArg::Scalar(Value::Pred(desc.trans_b)),
        u(desc.stride_a),
        u(desc.stride_b),
        u(desc.stride_c),
        KernelArg::Scalar(acc(desc.alpha)),
        KernelArg::Scalar(acc(desc.beta)),
    ];
    let grid = [
        (desc.n as u32).div_ceil(TILE),
        (desc.m as u32).div_ceil(TILE),
        u32::try_from(desc.batch).map_err(|_| BackendError::InvalidArgument {
            kernel: "gemm".into(),
            reason: format!("batch {} exceeds u32", desc.batch),
        })?,
    ];
    let config = LaunchConfig::new(grid, [TILE, TILE, 1]);
    backend.launch(&compiled, &config, &args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuBackend, Library};

    #[test]
    fn kernels_assemble_for_every_type() {
        for ty in [Type::F16, Type::BF16, Type::F32, Type::F64] {
            hologram_isa::assemble(&kernel_text(ty)).unwrap_or_else(|e| panic!("{ty}: {e}"));
        }
    }

    fn host_gemm(d: &GemmDesc, a: &[f64], b: &[f64], c: &mut [f64]) {
        for bt in 0..d.batch {
            for i in 0..d.m {
                for j in 0..d.n {
                    let mut s = 0.0;
                    for p in 0..d.k {
                        let av = if d.trans_a {
                            a[bt * d.stride_a + p * d.lda + i]
                        } else {
                            a[bt * d.stride_a + i * d.lda + p]
                        };
                        let bv = if d.trans_b {
                            b[bt * d.stride_b + j * d.ldb + p]
                        } else {
                            b[bt * d.stride_b + p * d.ldb + j]
                        };
                        s += av * bv;
                    }
                    let ci = bt * d.stride_c + i * d.ldc + j;
                    c[ci] = d.alpha * s + if d.beta == 0.0 { 0.0 } else { d.beta * c[ci] };
                }
            }
        }
    }

    #[test]
    fn generic_gemm_matches_a_reference() {
        let cpu = CpuBackend::new();
        for (m, n, k, ta, tb, batch) in [
            (1, 1, 1, false, false, 1),
            (17, 33, 9, false, false, 2),
            (20, 5, 31, true, true, 1),
            (16, 16, 40, true, false, 3),
        ] {
            let mut d = GemmDesc::new(Type::F64, m, n, k);
            d.trans_a = ta;
            d.trans_b = tb;
            d.lda = if ta { m } else { k };
            d.ldb = if tb { k } else { n };
            d.batch = batch;
            d.alpha = 1.5;
            d.beta = 0.5;
            let a: Vec<f64> = (0..batch * m * k)
                .map(|i| ((i * 7) % 13) as f64 - 6.0)
                .collect();
            let b: Vec<f64> = (0..batch * k * n)
                .map(|i| ((i * 5) % 11) as f64 - 5.0)
                .collect();
            let mut c: Vec<f64> = (0..batch * m * n).map(|i| (i % 3) as f64).collect();
            let buf = |v: &[f64]| {
                let m = cpu.allocate(v.len() * 8).unwrap();
                cpu.copy_in(&m, 0, bytemuck::cast_slice(v)).unwrap();
                BufferArg::whole(m)
            };
            let (ba, bb, bc) = (buf(&a), buf(&b), buf(&c));
            generic_gemm(&cpu, &d, &ba, &bb, &bc).unwrap();
            let mut got = vec![0f64; c.len()];
            cpu.copy_out(&bc.memory, 0, bytemuck::cast_slice_mut(&mut got))
                .unwrap();
            host_gemm(&d, &a, &b, &mut c);
            assert_eq!(got, c, "{m}x{n}x{k} ta={ta} tb={tb}");
        }
    }

    #[test]
    fn rejects_buffers_that_are_too_small() {
        let cpu = CpuBackend::new();
        let small = BufferArg::whole(cpu.allocate(16).unwrap());
        let err = GemmDesc::new(Type::F32, 4, 4, 4)
            .check(&small, &small, &small)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("A needs 16 elements but its buffer holds 4"),
            "{err}"
        );
    }

    #[test]
    fn rejects_extents_that_wrap_around() {
        let cpu = CpuBackend::new();
        let small = BufferArg::whole(cpu.allocate(64).unwrap());
        // (batch - 1) · stride_a is 2^33 · 2^31 = 2^64, which wraps to 0: unchecked, A would
        // seem to need 4 elements, and the CPU GEMM would walk 2^33 matrices past the buffer.
        let mut d = GemmDesc::new(Type::F32, 2, 2, 2);
        d.stride_a = 1 << 31;
        d.batch = (1 << 33) + 1;
        let err = d.check(&small, &small, &small).unwrap_err();
        assert!(err.to_string().contains("spans more than"), "{err}");
        assert!(cpu.gemm(&d, &small, &small, &small).is_err());
    }
}
