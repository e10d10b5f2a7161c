//! The dedicated CUDA form of the fused row kernels (softmax, log-softmax, their backward ops
//! and the attention variants: `softmax_templates`), chosen from the kernel's intent.
//!
//! The generic translation keeps the template's layout: lane `l` of a row holds columns
//! `l, l + g, l + 2g, …` and the row's reductions go through shared memory with two barriers
//! each. On an H200 that ran softmax over rows of 1024 at 737 µs for 2^28 f32 elements against
//! torch's 533; the same template with lane `l` holding four adjacent columns per access
//! (`4l…4l+3`, then `+4g`), one vector load or store each, and warp shuffles for the reductions
//! ran at 528 µs (a form with the template's layout and shuffles alone: 825 µs).
//!
//! Same parameters, launch shape and operations as the template; the reductions add in another
//! order (results agree within rounding, not bit for bit). The form runs only where the host
//! proved every access in bounds and aligned, with no index past `u32` ([`fits`]); other
//! launches run the generic (checked) form, which reports bad accesses exactly.

use std::fmt::Write;

use hologram_compiler::patterns::softmax_templates::RowOp;
use hologram_compiler::patterns::RowPattern;
use hologram_isa::Type;

use super::{entry_head, parameters, prelude, CodegenOptions};
use crate::backend::KernelArg;
use crate::error::Result;
use hologram_isa::Kernel;

/// `HOLOGRAM_CUDA_ROW_FORM=0` runs every row kernel (this module's and `norm.rs`') in the generic
/// form, for comparison.
pub const ROW_FORM_ENV: &str = "HOLOGRAM_CUDA_ROW_FORM";

/// Whether row kernels run their dedicated form where it fits (the default).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var(ROW_FORM_ENV).map_or(true, |v| v.trim() != "0"))
}

/// Lanes per block of the row kernels (`row_gen::ROW_BLOCK`).
pub(super) const BLOCK: u32 = 256;

/// Elements one vector access moves.
pub(super) const VEC: u32 = 4;

/// True when the row kernel `p` has a dedicated form: 32-bit and 16-bit floats, rows held in
/// registers in whole vectors, group sizes of whole warps.
pub fn has_form(p: &RowPattern) -> bool {
    shape_has_form(p.storage, p.g, p.resident)
}

/// The row shapes the dedicated forms cover (see [`has_form`]).
pub(super) fn shape_has_form(storage: Type, g: u32, resident: u32) -> bool {
    matches!(storage, Type::F32 | Type::F16 | Type::BF16)
        && resident > 0
        && resident % VEC == 0
        && g.is_power_of_two()
        && (32..=BLOCK).contains(&g)
}

/// The preamble of a dedicated row form: the prelude, the group geometry, the shared helpers,
/// vector (un)packing for `storage`, and the entry's signature with the generic form's name
/// and parameters. Returns the source and the vector type's name.
pub(super) fn preamble(
    kernel: &Kernel,
    storage: Type,
    g: u32,
    resident: u32,
    opts: &CodegenOptions,
) -> (String, &'static str) {
    let mut out = String::with_capacity(prelude::PRELUDE.len() + 6000);
    out.push_str(prelude::PRELUDE);
    let (params, _) = parameters(kernel);
    let (load, store_cvt) = match storage {
        Type::F16 => ("hg_h2f", "hg_f2h"),
        Type::BF16 => ("hg_b2f", "hg_f2b"),
        _ => ("", ""),
    };
    // A vector of four storage elements: float4 for f32, two 32-bit words for 16-bit types.
    let vty = if storage == Type::F32 {
        "float4"
    } else {
        "uint2"
    };
    let _ = writeln!(out, "\n// kernel {} (dedicated row form)", kernel.name);
    let _ = writeln!(
        out,
        "#define G {g}u\n#define RB {}u\n#define V {}\n#define W {}u",
        BLOCK / g,
        resident / VEC,
        g / 32
    );
    out.push_str(ROW_HELPERS);
    let _ = writeln!(
        out,
        "HG_D void hg_unpack(const {vty}& v, float* f) {{ {} }}",
        unpack(storage, load)
    );
    let _ = writeln!(
        out,
        "HG_D {vty} hg_pack(const float* f) {{ {} }}",
        pack(storage, store_cvt)
    );
    let _ = writeln!(out, "{}) {{", entry_head(kernel, opts, &params));
    (out, vty)
}

/// True when `span` elements from element `off` of buffer `i` lie inside it, within `u32`
/// indexes, with `off` a whole number of vectors and the buffer's address aligned to one.
pub(super) fn vector_range(
    storage: Type,
    i: usize,
    off: u64,
    span: u64,
    address: &impl Fn(usize) -> Option<u64>,
    len: &impl Fn(usize) -> Option<u64>,
) -> bool {
    let vec_bytes = u64::from(VEC) * storage.size_bytes() as u64;
    off % u64::from(VEC) == 0
        && off
            .checked_add(span)
            .is_some_and(|end| end <= u64::from(u32::MAX) + 1 && len(i).is_some_and(|n| end <= n))
        && address(i).is_some_and(|a| a % vec_bytes == 0)
}

/// The scalar parameters of a row kernel, by name, from its launch arguments (same order as the
/// template's parameters).
struct Scalars {
    /// Element offsets of the inputs (`off`, or `yoff` and `goff`).
    offsets: Vec<u64>,
    rows: u64,
    cols: u64,
    /// The causal op's query length.
    qlen: Option<u64>,
}

/// Launch argument `i` as a scalar's bits (`None` past the end or for a buffer).
pub(super) fn scalar_arg(args: &[KernelArg], i: usize) -> Option<u64> {
    match args.get(i)? {
        KernelArg::Scalar(v) => Some(v.to_bits()),
        KernelArg::Buffer(_) => None,
    }
}

fn scalars(p: &RowPattern, args: &[KernelArg]) -> Option<Scalars> {
    let inputs = if p.op.is_backward() { 2 } else { 1 };
    let buffers = inputs + 1;
    let u = |i: usize| scalar_arg(args, i);
    let offsets = (0..inputs)
        .map(|i| u(buffers + i))
        .collect::<Option<Vec<_>>>()?;
    let rows = u(buffers + inputs)?;
    let cols = u(buffers + inputs + 1)?;
    let qlen = if p.op == RowOp::CausalAttentionSoftmax {
        Some(u(buffers + inputs + 3)?)
    } else {
        None
    };
    Some(Scalars {
        offsets,
        rows,
        cols,
        qlen,
    })
}

/// True when a launch of the row kernel `p` with `args` (checked against the kernel) may run
/// the dedicated form: every access in bounds and aligned to its vector, indexes within `u32`
/// as the template computes them, rows within the registers, a causal query length above 0.
/// `address(i)` is buffer argument `i`'s device address and `len(i)` its length in elements.
pub fn fits(
    p: &RowPattern,
    args: &[KernelArg],
    address: impl Fn(usize) -> Option<u64>,
    len: impl Fn(usize) -> Option<u64>,
) -> bool {
    let Some(s) = scalars(p, args) else {
        return false;
    };
    let Some(span) = s.rows.checked_mul(s.cols) else {
        return false;
    };
    let inputs = s.offsets.len();
    s.offsets
        .iter()
        .enumerate()
        .all(|(i, &off)| vector_range(p.storage, i, off, span, &address, &len))
        && vector_range(p.storage, inputs, 0, span, &address, &len)
        && s.cols % u64::from(VEC) == 0
        && s.cols <= u64::from(p.g) * u64::from(p.resident)
        && s.qlen != Some(0)
}

/// CUDA C of the dedicated form of `kernel` (the row template `p`), with the generic form's
/// entry name and parameters.
pub fn generate(kernel: &Kernel, p: &RowPattern, opts: &CodegenOptions) -> Result<String> {
    let (mut out, vty) = preamble(kernel, p.storage, p.g, p.resident, opts);
    let backward = p.op.is_backward();
    // Parameter names of the generic entry: buffers p0.., scalars after them.
    let (y, scalars_from) = if backward { ("p2", 3) } else { ("p1", 2) };
    let sc = |i: usize| format!("p{}", scalars_from + i);
    let (rows, cols) = if backward {
        (sc(2), sc(3))
    } else {
        (sc(1), sc(2))
    };
    let _ = writeln!(
        out,
        "  const hg_u32 t = threadIdx.x, grp = t / G, l = t % G, row = blockIdx.x * RB + grp;\n  \
           const hg_u32 len = row < {rows} ? {cols} : 0u;\n  \
           const hg_u32 rowbase = row * {cols};\n  \
           __shared__ float hg_red0[BLOCK_WARPS], hg_red1[BLOCK_WARPS];\n  \
           float a[V][4], b[V][4];\n  (void)b; (void)hg_red1;"
    );
    match p.op {
        RowOp::Softmax
        | RowOp::LogSoftmax
        | RowOp::AttentionSoftmax
        | RowOp::CausalAttentionSoftmax => {
            loads(&mut out, "a", "p0", &sc(0), vty);
            let attention = p.op.is_attention();
            // Columns at or past `lim` are -inf (masked, or past the row's end).
            if p.op == RowOp::CausalAttentionSoftmax {
                let _ = writeln!(
                    out,
                    "  const hg_u32 qe = (row < {rows} ? row % {q} : 0u) + 1u;\n  \
                       const hg_u32 lim = qe < len ? qe : len;",
                    q = sc(4)
                );
            } else {
                out.push_str("  const hg_u32 lim = len;\n");
            }
            let value = if attention {
                format!("hg_mul_f32(a[k][j], {})", sc(3))
            } else {
                "a[k][j]".into()
            };
            let _ = writeln!(
                out,
                "  float m = HG_NEG_INF;\n  \
                   #pragma unroll\n  for (int k = 0; k < V; k++)\n    \
                   #pragma unroll\n    for (int j = 0; j < 4; j++) {{\n      \
                     const hg_u32 c = VEC * (l + G * k) + j;\n      \
                     a[k][j] = c < lim ? {value} : HG_NEG_INF;\n      \
                     m = hg_nmax(m, a[k][j]);\n    }}\n  \
                   m = hg_group_max(m, hg_red0, t, grp);\n  \
                   float s = 0.0f;\n  \
                   #pragma unroll\n  for (int k = 0; k < V; k++)\n    \
                   #pragma unroll\n    for (int j = 0; j < 4; j++) {{\n      \
                     const hg_u32 c = VEC * (l + G * k) + j;\n      \
                     b[k][j] = hg_exp_f32(hg_sub_f32(a[k][j], m));\n      \
                     if (c < len) s = hg_add_f32(s, b[k][j]);\n    }}\n  \
                   s = hg_group_sum(s, hg_red1, t, grp);"
            );
            let result = if p.op == RowOp::LogSoftmax {
                out.push_str("  const float lse = hg_log_f32(s);\n");
                "hg_sub_f32(hg_sub_f32(a[k][j], m), lse)"
            } else {
                "hg_div_f32(b[k][j], s)"
            };
            store(&mut out, y, vty, result);
        }
        RowOp::SoftmaxBackward | RowOp::LogSoftmaxBackward | RowOp::AttentionSoftmaxBackward => {
            loads(&mut out, "a", "p0", &sc(0), vty);
            loads(&mut out, "b", "p1", &sc(1), vty);
            let term = if p.op == RowOp::LogSoftmaxBackward {
                "b[k][j]"
            } else {
                "hg_mul_f32(b[k][j], a[k][j])"
            };
            let _ = writeln!(
                out,
                "  float s = 0.0f;\n  \
                   #pragma unroll\n  for (int k = 0; k < V; k++)\n    \
                   #pragma unroll\n    for (int j = 0; j < 4; j++)\n      \
                     if (VEC * (l + G * k) + j < len) s = hg_add_f32(s, {term});\n  \
                   s = hg_group_sum(s, hg_red0, t, grp);"
            );
            let result = match p.op {
                RowOp::AttentionSoftmaxBackward => format!(
                    "hg_mul_f32(hg_mul_f32(a[k][j], hg_sub_f32(b[k][j], s)), {})",
                    sc(4)
                ),
                RowOp::SoftmaxBackward => "hg_mul_f32(a[k][j], hg_sub_f32(b[k][j], s))".into(),
                _ => "hg_sub_f32(b[k][j], hg_mul_f32(hg_exp_f32(a[k][j]), s))".into(),
            };
            store(&mut out, y, vty, &result);
        }
    }
    out.push_str("}\n");
    Ok(out)
}

/// The loads of a row: chunk `k` of lane `l` holds columns `4(l + G k) .. +3` of
/// `src[off + rowbase ..]` in `arr[k]` (whole chunks are in the row or out of it).
pub(super) fn loads(out: &mut String, arr: &str, src: &str, off: &str, vty: &str) {
    let _ = writeln!(
        out,
        "  #pragma unroll\n  for (int k = 0; k < V; k++) {{\n    \
           const hg_u32 c = VEC * (l + G * k);\n    \
           if (c < len) hg_unpack(*(const {vty}*)({src} + {off} + rowbase + c), {arr}[k]);\n  }}"
    );
}

/// The stores of the results, `result` an expression of chunk `k`, element `j`.
pub(super) fn store(out: &mut String, y: &str, vty: &str, result: &str) {
    let _ = writeln!(
        out,
        "  #pragma unroll\n  for (int k = 0; k < V; k++) {{\n    \
           const hg_u32 c = VEC * (l + G * k);\n    \
           if (c < len) {{\n      float r[4];\n      \
             #pragma unroll\n      for (int j = 0; j < 4; j++) r[j] = {result};\n      \
             *({vty}*)({y} + rowbase + c) = hg_pack(r);\n    }}\n  }}"
    );
}

pub(super) fn unpack(storage: Type, load: &str) -> String {
    match storage {
        Type::F32 => "f[0] = v.x; f[1] = v.y; f[2] = v.z; f[3] = v.w;".into(),
        _ => format!(
            "f[0] = {load}((unsigned short)(v.x & 0xffffu)); f[1] = {load}((unsigned short)(v.x >> 16)); \
             f[2] = {load}((unsigned short)(v.y & 0xffffu)); f[3] = {load}((unsigned short)(v.y >> 16));"
        ),
    }
}

pub(super) fn pack(storage: Type, cvt: &str) -> String {
    match storage {
        Type::F32 => "return make_float4(f[0], f[1], f[2], f[3]);".into(),
        _ => format!(
            "return make_uint2((unsigned)({cvt}(f[0])) | ((unsigned)({cvt}(f[1])) << 16), \
             (unsigned)({cvt}(f[2])) | ((unsigned)({cvt}(f[3])) << 16));"
        ),
    }
}

/// Shared by every dedicated row kernel: the template's NaN-propagating maximum, and group
/// reductions (warp shuffles, then the group's warps through shared memory and one barrier;
/// every lane of the block reaches it).
pub(super) const ROW_HELPERS: &str = r#"
#define VEC 4u
#define BLOCK_WARPS 8
#define HG_NEG_INF __uint_as_float(0xff800000u)
// `v` when it is larger, or NaN while `m` is not (as the template's max folds).
HG_D float hg_nmax(float m, float v) { return (v > m || (v != v && m == m)) ? v : m; }
struct HgMax { __device__ float operator()(float a, float b) const { return hg_nmax(a, b); } };
struct HgSum { __device__ float operator()(float a, float b) const { return hg_add_f32(a, b); } };
// The group's combination of `v`: its warp by shuffles, then the group's warps through `red`.
template <class C> static __device__ __forceinline__ float hg_group(float v, float* red, hg_u32 t, hg_u32 grp, C c) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = c(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (W == 1u) return v;
  if ((t & 31u) == 0u) red[t >> 5] = v;
  __syncthreads();
  float r = red[grp * W];
  for (hg_u32 w = 1u; w < W; w++) r = c(r, red[grp * W + w]);
  return r;
}
#define hg_group_max(v, red, t, grp) hg_group(v, red, t, grp, HgMax())
#define hg_group_sum(v, red, t, grp) hg_group(v, red, t, grp, HgSum())
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use hologram_isa::semantics::Value;

    fn pattern(op: RowOp) -> RowPattern {
        RowPattern {
            op,
            storage: Type::F32,
            g: 64,
            resident: 16,
        }
    }

    fn args(op: RowOp, off: u32, rows: u32, cols: u32) -> Vec<KernelArg> {
        let p = pattern(op);
        let cpu = crate::cpu::CpuBackend::new();
        let mem = || {
            KernelArg::Buffer(crate::backend::BufferArg::whole(
                crate::backend::Backend::allocate(&cpu, 4).expect("allocate"),
            ))
        };
        let mut v: Vec<KernelArg> = (0..if p.op.is_backward() { 3 } else { 2 })
            .map(|_| mem())
            .collect();
        let offs = if p.op.is_backward() { 2 } else { 1 };
        v.extend((0..offs).map(|_| KernelArg::Scalar(Value::U32(off))));
        v.push(KernelArg::Scalar(Value::U32(rows)));
        v.push(KernelArg::Scalar(Value::U32(cols)));
        if p.op.is_attention() {
            v.push(KernelArg::Scalar(Value::F32(0.5)));
        }
        if p.op == RowOp::CausalAttentionSoftmax {
            v.push(KernelArg::Scalar(Value::U32(8)));
        }
        v
    }

    #[test]
    fn the_host_check_takes_only_launches_it_can_prove() {
        let aligned = |_| Some(256u64);
        let big = |_| Some(1u64 << 20);
        for op in RowOp::ALL {
            let p = pattern(op);
            assert!(fits(&p, &args(op, 0, 16, 1024), aligned, big), "{op:?}");
            // Past a buffer, misaligned offset or address, columns not a whole vector, rows
            // longer than the registers hold.
            assert!(!fits(&p, &args(op, 0, 1025, 1024), aligned, big), "{op:?}");
            assert!(!fits(&p, &args(op, 2, 16, 1024), aligned, big), "{op:?}");
            assert!(
                !fits(&p, &args(op, 0, 16, 1024), |_| Some(8), big),
                "{op:?}"
            );
            assert!(!fits(&p, &args(op, 0, 16, 1022), aligned, big), "{op:?}");
            assert!(!fits(&p, &args(op, 0, 1, 2048), aligned, big), "{op:?}");
        }
    }

    #[test]
    fn only_float_rows_held_in_whole_vectors_have_a_form() {
        assert!(has_form(&pattern(RowOp::Softmax)));
        let with = |storage, g, resident| RowPattern {
            op: RowOp::Softmax,
            storage,
            g,
            resident,
        };
        assert!(has_form(&with(Type::BF16, 256, 16)));
        assert!(!has_form(&with(Type::F64, 64, 16)));
        assert!(!has_form(&with(Type::F32, 64, 0)));
        assert!(!has_form(&with(Type::F32, 64, 3)));
    }
}
