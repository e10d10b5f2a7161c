//! The dedicated CUDA form of the fused layer-norm row kernels (`norm_templates`), chosen from
//! the kernel's intent, built like the row form of the softmax family ([`super::rows`]): four
//! adjacent columns per vector access, warp-shuffle reductions, the template's parameters,
//! launch shape and operations (sums in another order). It runs only where the host proved the
//! launch in bounds and aligned ([`fits`]); other launches run the generic, checked form.

use std::fmt::Write;

use hologram_compiler::patterns::norm_templates::NormKernel;

use super::rows::{loads, preamble, scalar_arg, shape_has_form, store, vector_range, VEC};
use super::CodegenOptions;
use crate::backend::KernelArg;
use crate::error::Result;
use hologram_isa::Kernel;

/// True when the layer-norm kernel `k` has a dedicated form (see [`super::rows::has_form`]).
pub fn has_form(k: &NormKernel) -> bool {
    shape_has_form(k.storage, k.g, k.resident)
}

/// Positions of a layer-norm kernel's parameters (see `norm_templates::program`).
struct Layout {
    /// Buffers read per element of a row: `x`, and backward `dy`.
    inputs: usize,
    /// The weight (and forward, the bias), if affine.
    columns: Vec<usize>,
    /// The per-row statistics `mean` and `rstd`.
    stats: [usize; 2],
    /// The output `y` (backward: `dx`).
    out: usize,
    /// The first scalar (`off`).
    scalars: usize,
}

impl Layout {
    fn of(k: &NormKernel) -> Layout {
        let inputs = if k.backward { 2 } else { 1 };
        let columns = match (k.affine, k.backward) {
            (false, _) => vec![],
            (true, true) => vec![inputs],
            (true, false) => vec![inputs, inputs + 1],
        };
        let after = inputs + columns.len();
        let (stats, out) = if k.backward {
            ([after, after + 1], after + 2)
        } else {
            ([after + 1, after + 2], after)
        };
        Layout {
            inputs,
            columns,
            stats,
            out,
            scalars: after + 3,
        }
    }

    /// The entry's name of parameter `i` (`p<i>`, as the generic form names them).
    fn p(i: usize) -> String {
        format!("p{i}")
    }
}

/// True when a launch of the layer-norm kernel `k` with `args` may run the dedicated form:
/// every access in bounds and aligned to its vector, indexes within `u32`, rows within the
/// registers. `address(i)` is buffer argument `i`'s device address and `len(i)` its length in
/// elements.
pub fn fits(
    k: &NormKernel,
    args: &[KernelArg],
    address: impl Fn(usize) -> Option<u64>,
    len: impl Fn(usize) -> Option<u64>,
) -> bool {
    let l = Layout::of(k);
    let scalar = |i: usize| scalar_arg(args, i);
    let offsets: Option<Vec<u64>> = (0..l.inputs).map(|i| scalar(l.scalars + i)).collect();
    let (Some(offsets), Some(rows), Some(cols)) = (
        offsets,
        scalar(l.scalars + l.inputs),
        scalar(l.scalars + l.inputs + 1),
    ) else {
        return false;
    };
    let Some(span) = rows.checked_mul(cols) else {
        return false;
    };
    let st = k.storage;
    offsets
        .iter()
        .enumerate()
        .all(|(i, &off)| vector_range(st, i, off, span, &address, &len))
        && l.columns
            .iter()
            .all(|&i| vector_range(st, i, 0, cols, &address, &len))
        && l.stats.iter().all(|&i| len(i).is_some_and(|n| rows <= n))
        && vector_range(st, l.out, 0, span, &address, &len)
        && cols % u64::from(VEC) == 0
        && cols <= u64::from(k.g) * u64::from(k.resident)
}

/// CUDA C of the dedicated form of `kernel` (the layer-norm template `k`), with the generic
/// form's entry name and parameters.
pub fn generate(kernel: &Kernel, k: &NormKernel, opts: &CodegenOptions) -> Result<String> {
    let (mut out, vty) = preamble(kernel, k.storage, k.g, k.resident, opts);
    let l = Layout::of(k);
    let p = Layout::p;
    let sc = |i: usize| p(l.scalars + i);
    let (rows, cols) = (sc(l.inputs), sc(l.inputs + 1));
    let (mean, rstd) = (p(l.stats[0]), p(l.stats[1]));
    let _ = writeln!(
        out,
        "  const hg_u32 t = threadIdx.x, grp = t / G, l = t % G, row = blockIdx.x * RB + grp;\n  \
           const bool live = row < {rows};\n  \
           const hg_u32 len = live ? {cols} : 0u;\n  \
           const hg_u32 rowbase = row * {cols};\n  \
           const float n = (float){cols};\n  \
           __shared__ float hg_red0[BLOCK_WARPS], hg_red1[BLOCK_WARPS];\n  \
           float a[V][4], b[V][4], w[V][4], bias[V][4];\n  \
           (void)b; (void)w; (void)bias; (void)hg_red1;"
    );
    loads(&mut out, "a", &p(0), &sc(0), vty);
    // The weight (and bias) of each element's column.
    for (i, arr) in l.columns.iter().zip(["w", "bias"]) {
        let _ = writeln!(
            out,
            "  #pragma unroll\n  for (int k = 0; k < V; k++) {{\n    \
               const hg_u32 c = VEC * (l + G * k);\n    \
               if (c < len) hg_unpack(*(const {vty}*)({} + c), {arr}[k]);\n  }}",
            p(*i)
        );
    }
    let each = "  #pragma unroll\n  for (int k = 0; k < V; k++)\n    \
                #pragma unroll\n    for (int j = 0; j < 4; j++)";
    let inrow = "VEC * (l + G * k) + j < len";
    if !k.backward {
        let eps = sc(3);
        let _ = writeln!(
            out,
            "  float s = 0.0f;\n{each}\n      if ({inrow}) s = hg_add_f32(s, a[k][j]);\n  \
               s = hg_group_sum(s, hg_red0, t, grp);\n  \
               const float mean = hg_div_f32(s, n);\n  \
               float q = 0.0f;\n{each}\n      if ({inrow}) {{ const float d = hg_sub_f32(a[k][j], mean); q = hg_add_f32(q, hg_mul_f32(d, d)); }}\n  \
               q = hg_group_sum(q, hg_red1, t, grp);\n  \
               const float rstd = hg_rsqrt_f32(hg_add_f32(hg_div_f32(q, n), {eps}));\n  \
               if (live && l == 0u) {{ {mean}[row] = mean; {rstd}[row] = rstd; }}"
        );
        // `store` evaluates one expression per element: the affine form needs two steps.
        let result = format!(
            "hg_norm_out(hg_mul_f32(hg_sub_f32(a[k][j], mean), rstd), {})",
            if k.affine {
                "w[k][j], bias[k][j]"
            } else {
                "0.0f, 0.0f"
            }
        );
        let helper = if k.affine {
            "HG_D float hg_norm_out(float r, float w, float b) { return hg_add_f32(hg_mul_f32(r, w), b); }\n"
        } else {
            "HG_D float hg_norm_out(float r, float, float) { return r; }\n"
        };
        insert_before_entry(&mut out, helper);
        store(&mut out, &p(l.out), vty, &result);
    } else {
        loads(&mut out, "b", &p(1), &sc(1), vty);
        let g = if k.affine {
            "hg_mul_f32(b[k][j], w[k][j])"
        } else {
            "b[k][j]"
        };
        let _ = writeln!(
            out,
            "  const float mean = live ? {mean}[row] : 0.0f, rstd = live ? {rstd}[row] : 0.0f;\n  \
               float sg = 0.0f, sgx = 0.0f;\n{each}\n      if ({inrow}) {{\n        \
                 const float g = {g};\n        \
                 const float xh = hg_mul_f32(hg_sub_f32(a[k][j], mean), rstd);\n        \
                 sg = hg_add_f32(sg, g);\n        \
                 sgx = hg_add_f32(sgx, hg_mul_f32(g, xh));\n      }}\n  \
               sg = hg_group_sum(sg, hg_red0, t, grp);\n  \
               sgx = hg_group_sum(sgx, hg_red1, t, grp);\n  \
               const float mg = hg_div_f32(sg, n), mgx = hg_div_f32(sgx, n);"
        );
        let result = format!(
            "hg_mul_f32(hg_sub_f32(hg_sub_f32({g}, mg), hg_mul_f32(hg_mul_f32(hg_sub_f32(a[k][j], mean), rstd), mgx)), rstd)"
        );
        store(&mut out, &p(l.out), vty, &result);
    }
    out.push_str("}\n");
    Ok(out)
}

/// Puts device helper code before the entry (the preamble ends with the entry's signature).
fn insert_before_entry(out: &mut String, code: &str) {
    if let Some(at) = out.rfind("extern \"C\" __global__") {
        out.insert_str(at, code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hologram_isa::semantics::Value;
    use hologram_isa::Type;

    fn norm(backward: bool, affine: bool) -> NormKernel {
        NormKernel {
            backward,
            affine,
            storage: Type::F32,
            g: 32,
            resident: 16,
        }
    }

    /// Launch arguments of `k` (placeholder buffers: the check reads addresses and lengths
    /// through its closures).
    fn args(k: &NormKernel, off: u32, rows: u32, cols: u32) -> Vec<KernelArg> {
        let l = Layout::of(k);
        let cpu = crate::cpu::CpuBackend::new();
        let mut v: Vec<KernelArg> = (0..l.scalars)
            .map(|_| {
                KernelArg::Buffer(crate::backend::BufferArg::whole(
                    crate::backend::Backend::allocate(&cpu, 4).expect("allocate"),
                ))
            })
            .collect();
        v.extend((0..l.inputs).map(|_| KernelArg::Scalar(Value::U32(off))));
        v.push(KernelArg::Scalar(Value::U32(rows)));
        v.push(KernelArg::Scalar(Value::U32(cols)));
        if !k.backward {
            v.push(KernelArg::Scalar(Value::F32(1e-5)));
        }
        v
    }

    #[test]
    fn the_host_check_takes_only_launches_it_can_prove() {
        let aligned = |_| Some(256u64);
        let big = |_| Some(1u64 << 20);
        for backward in [false, true] {
            for affine in [false, true] {
                let k = norm(backward, affine);
                let what = format!("backward {backward} affine {affine}");
                assert!(fits(&k, &args(&k, 0, 64, 512), aligned, big), "{what}");
                assert!(!fits(&k, &args(&k, 0, 4096, 512), aligned, big), "{what}");
                assert!(!fits(&k, &args(&k, 2, 64, 512), aligned, big), "{what}");
                assert!(!fits(&k, &args(&k, 0, 64, 510), aligned, big), "{what}");
                assert!(!fits(&k, &args(&k, 0, 2, 1024), aligned, big), "{what}");
                assert!(!fits(&k, &args(&k, 0, 64, 512), |_| Some(4), big), "{what}");
                // Statistics shorter than the rows.
                let short = |i: usize| {
                    Some(if Layout::of(&k).stats.contains(&i) {
                        8
                    } else {
                        1 << 20
                    })
                };
                assert!(!fits(&k, &args(&k, 0, 64, 512), aligned, short), "{what}");
            }
        }
    }

    #[test]
    fn parameters_are_where_the_template_puts_them() {
        let f = Layout::of(&norm(false, true));
        assert_eq!(
            (f.inputs, f.columns.clone(), f.stats, f.out, f.scalars),
            (1, vec![1, 2], [4, 5], 3, 6)
        );
        let b = Layout::of(&norm(true, true));
        assert_eq!(
            (b.inputs, b.columns.clone(), b.stats, b.out, b.scalars),
            (2, vec![2], [3, 4], 5, 6)
        );
        let b = Layout::of(&norm(true, false));
        assert_eq!(
            (b.columns.clone(), b.stats, b.out, b.scalars),
            (vec![], [2, 3], 4, 5)
        );
    }
}
