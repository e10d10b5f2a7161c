//! Atlas ISA to CUDA C.
//!
//! [`generate`] turns a validated kernel into one CUDA C translation unit: the [`prelude`], then
//! one `extern "C" __global__` function, named by [`entry_name`], whose body is the kernel's instructions in
//! order, one C statement each, with labels and `goto` for control flow. This part is plain
//! Rust (no CUDA needed), so the NVRTC compile-only check and unit tests can use it anywhere.
//!
//! # Kernel ABI
//!
//! The entry's parameters follow the kernel's, in order: a buffer parameter `i` becomes a pointer
//! `p<i>` and its element count `n<i>` (`unsigned long long`); a scalar parameter is passed by
//! value (`f16`/`bf16` as their 16 bits, `pred` as one byte). Four more follow: `hg_flag`
//! (two device `unsigned int`s, zero between launches: the first elects the lane that records
//! an error, the second tells every lane to stop), `hg_rec` (five `unsigned long long` the
//! device can write, host-mapped), `hg_kid` (`unsigned int`, the kernel's id in the backend)
//! and `hg_tmo` (`unsigned long long`, the launch timeout in nanoseconds, 0 for none), then two
//! `unsigned int`s (multiplier, shift: [`divide::magic`]) for each parameter of
//! [`divide::divisor_params`], in parameter order. The first
//! error of a launch writes `hg_rec = {kind, hg_kid, a, b, c}`: [`ERR_OUT_OF_BOUNDS`] with
//! `{array, index, length}` (the prelude's `hg_oob`), [`ERR_BARRIER_DIVERGENCE`] with
//! `{block, barrier, barrier}` (`hg_diverged`), [`ERR_TIMEOUT`] with `{elapsed ns, timeout ns,
//! 0}` (`hg_timed_out`); see [`launch_error`].
//!
//! # Semantics
//!
//! Every instruction keeps the ISA's exact semantics (checked against the CPU interpreter by the
//! conformance suite): integer helpers compute in unsigned types and wrap; float arithmetic uses
//! the round-to-nearest intrinsics (`__fadd_rn`, ...), so `mad` is never contracted into an `fma`;
//! f16/bf16 compute in f32 and round once in software; conversions that could round twice go
//! through round-to-odd. Transcendentals call CUDA's libdevice functions, whose error bounds are
//! listed in the backend's README.

mod compute;
mod control;
mod ctype;
pub mod divide;
pub mod map;
mod memory;
pub mod norm;
pub mod prelude;
pub mod rows;

use std::fmt::Write;

use hologram_compiler::patterns::norm_templates::NormKernel;
use hologram_compiler::patterns::{Pattern, RowPattern};
use hologram_isa::{Kernel, ParamKind, Special};

use self::control::{label, Flow};
use self::ctype::{ctype, reg, special};
use self::memory::{ArrayC, ArrayLen, Checks};
use crate::error::{BackendError, Result};

/// The name of the generated `__global__` function of kernel `kernel`: `hologram_` and the
/// kernel's name (characters other than letters, digits and `_` become `_`), so profilers such
/// as Nsight and torch.profiler show which kernel ran.
pub fn entry_name(kernel: &str) -> String {
    let mut s = String::from("hologram_");
    s.extend(kernel.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    s
}

/// Bumped whenever generated code changes meaning or form, so cached binaries are not reused.
pub const CODEGEN_VERSION: u32 = 5;

/// `hg_rec[0]` of an out-of-bounds access.
pub const ERR_OUT_OF_BOUNDS: u64 = 1;
/// `hg_rec[0]` when lanes of a block waited at different barriers.
pub const ERR_BARRIER_DIVERGENCE: u64 = 2;
/// `hg_rec[0]` when a lane ran past the launch timeout.
pub const ERR_TIMEOUT: u64 = 3;

/// A row kernel whose intent has a dedicated form: the softmax family ([`rows`]) or layer norm
/// ([`norm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowForm {
    /// Softmax, log-softmax, their backward ops and the attention probabilities.
    Softmax(RowPattern),
    /// Layer norm, forward or backward.
    Norm(NormKernel),
}

impl RowForm {
    /// The dedicated form of a kernel's intent, if it has one (and `HOLOGRAM_CUDA_ROW_FORM`
    /// does not turn them off).
    pub fn of(pattern: Option<&Pattern>) -> Option<RowForm> {
        if !rows::enabled() {
            return None;
        }
        match pattern? {
            Pattern::Rows(p) if rows::has_form(p) => Some(RowForm::Softmax(*p)),
            Pattern::Norm(k) if norm::has_form(k) => Some(RowForm::Norm(*k)),
            _ => None,
        }
    }

    /// True when a launch with `args` may run the form (see [`rows::fits`], [`norm::fits`]).
    pub fn fits(
        &self,
        args: &[crate::backend::KernelArg],
        address: impl Fn(usize) -> Option<u64>,
        len: impl Fn(usize) -> Option<u64>,
    ) -> bool {
        match self {
            RowForm::Softmax(p) => rows::fits(p, args, address, len),
            RowForm::Norm(k) => norm::fits(k, args, address, len),
        }
    }
}

/// Choices that change the generated code (and so belong in cache keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Check every buffer access against the buffer's length (`.shared` and `.scratch`
    /// accesses are always checked).
    pub bounds_checks: bool,
    /// Declare `__launch_bounds__(n)`, so the compiler keeps register use low enough for blocks
    /// of `n` lanes.
    pub launch_bounds: Option<u32>,
    /// Generate the vectorized form of an element-wise map (see [`map`]): four lanes per CUDA
    /// thread, launched with [`map::geometry`] and the original lane count as a last argument.
    pub vector_map: bool,
    /// Generate the dedicated form of this row kernel (see [`RowForm`]), for a launch that
    /// fits it.
    pub dedicated_rows: Option<RowForm>,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            bounds_checks: true,
            launch_bounds: None,
            vector_map: false,
            dedicated_rows: None,
        }
    }
}

impl CodegenOptions {
    /// A short text naming the options, for cache keys and logs (`checked`, `unchecked;lb1024`).
    pub fn tag(&self) -> String {
        let mut t = String::from(if self.bounds_checks {
            "checked"
        } else {
            "unchecked"
        });
        if let Some(n) = self.launch_bounds {
            let _ = write!(t, ";lb{n}");
        }
        if self.vector_map {
            let _ = write!(t, ";vmap{}", map::LANES_PER_THREAD);
        }
        if self.dedicated_rows.is_some() {
            t.push_str(";rows1");
        }
        t
    }
}

/// Generates the CUDA C source of a validated kernel.
pub fn generate(kernel: &Kernel, opts: &CodegenOptions) -> Result<String> {
    let unsupported = |what: String| BackendError::Compile {
        kernel: kernel.name.clone(),
        log: format!("the CUDA code generator has no translation of {what}"),
    };
    if opts.vector_map {
        let pattern = map::vectorizable(kernel).ok_or_else(|| BackendError::Compile {
            kernel: kernel.name.clone(),
            log: "the vectorized map form was asked for a kernel that is not an element-wise map"
                .into(),
        })?;
        return map::generate(kernel, &pattern, opts);
    }
    match &opts.dedicated_rows {
        Some(RowForm::Softmax(p)) => return rows::generate(kernel, p, opts),
        Some(RowForm::Norm(k)) => return norm::generate(kernel, k, opts),
        None => {}
    }
    let mut out = String::with_capacity(prelude::PRELUDE.len() + 256 * kernel.insts.len());
    out.push_str(prelude::PRELUDE);
    let _ = writeln!(out, "\n// kernel {}", kernel.name);
    let (params, mut arrays) = parameters(kernel);
    let _ = writeln!(out, "{}) {{", entry_head(kernel, opts, &params));
    let _ = writeln!(out, "  // parameters: {}", param_summary(kernel));

    // Where the lane is.
    out.push_str("  const hg_u32 hg_lane = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;\n");
    out.push_str("  const hg_u32 hg_lanes = blockDim.x * blockDim.y * blockDim.z;\n");
    for s in &kernel.facts.specials {
        let _ = writeln!(
            out,
            "  const hg_u32 {} = {};",
            special(*s),
            special_expr(*s)
        );
    }

    // Block-shared arrays start zeroed: the block clears them together.
    for (j, a) in kernel.shared.iter().enumerate() {
        let _ = writeln!(
            out,
            "  __shared__ {} sh{j}[{}];",
            ctype(a.elem),
            a.len.max(1)
        );
        arrays.push(ArrayC {
            base: format!("sh{j}"),
            len: ArrayLen::Static(a.len),
        });
    }
    if !kernel.shared.is_empty() {
        for (j, a) in kernel.shared.iter().enumerate() {
            let _ = writeln!(
                out,
                "  for (hg_u32 hg_k = hg_lane; hg_k < {}u; hg_k += hg_lanes) sh{j}[hg_k] = 0;",
                a.len
            );
        }
        out.push_str("  __syncthreads();\n");
    }
    // Per-lane scratch arrays start zeroed.
    for (j, a) in kernel.scratch.iter().enumerate() {
        let _ = writeln!(out, "  {} sc{j}[{}] = {{}};", ctype(a.elem), a.len.max(1));
        arrays.push(ArrayC {
            base: format!("sc{j}"),
            len: ArrayLen::Static(a.len),
        });
    }
    let flow = Flow::of(kernel);
    if flow.loops {
        out.push_str("  const hg_u64 hg_t0 = hg_now(); hg_u32 hg_tick = 0u;\n");
    }
    if !flow.barriers.is_empty() {
        out.push_str("  __shared__ volatile hg_u32 hg_bar_seen; hg_u32 hg_bid = 0u;\n");
    }
    if flow.has_calls() {
        let depth = kernel.facts.max_call_depth.max(1);
        let _ = writeln!(out, "  hg_u32 hg_rs[{depth}]; hg_u32 hg_sp = 0u;");
    }
    // Registers: every one starts at zero (the ISA requires it for registers read before any
    // write; for the others it costs nothing).
    for (r, info) in kernel.regs.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {} {} = 0; // %{}",
            ctype(info.ty),
            reg(r as u32),
            info.name
        );
    }

    let checks = Checks {
        global: opts.bounds_checks,
    };
    let program = kernel.to_program();
    let texts: Vec<String> = program
        .body
        .iter()
        .filter_map(|s| match s {
            hologram_isa::Stmt::Inst(i) => {
                let mut t = String::new();
                let _ = hologram_isa::text::write_inst(&mut t, i);
                Some(t)
            }
            hologram_isa::Stmt::Label(_) => None,
        })
        .collect();
    for (pc, inst) in kernel.insts.iter().enumerate() {
        let pc32 = pc as u32;
        if flow.labels.contains(&pc32) {
            let _ = writeln!(out, "{}:;", label(pc32));
        }
        let stmt = compute::statement(kernel, &inst.op)
            .or_else(|| memory::statement(kernel, &arrays, checks, &inst.op))
            .or_else(|| control::statement(kernel, &flow, pc32, &inst.op))
            .unwrap_or_else(|| Err("an unknown instruction".into()))
            .map_err(unsupported)?;
        if let Some(t) = texts.get(pc) {
            let _ = writeln!(out, "  // {t}");
        }
        match &inst.guard {
            Some(g) => {
                let not = if g.negate { "!" } else { "" };
                let _ = writeln!(out, "  if ({not}{}) {{ {stmt} }}", reg(g.pred));
            }
            None => {
                let _ = writeln!(out, "  {stmt}");
            }
        }
    }
    let end = kernel.insts.len() as u32;
    if flow.labels.contains(&end) {
        let _ = writeln!(out, "{}:;", label(end));
    }
    out.push_str(&flow.rendezvous());
    if flow.has_calls() {
        // Falling off the end ends the lane; only `ret` enters the dispatcher.
        out.push_str("  return;\n");
        out.push_str(&control::return_dispatcher(&flow));
    }
    out.push_str("}\n");
    Ok(out)
}

/// The entry's declaration up to its parameter list's end, without the closing parenthesis:
/// `extern "C" __global__ void [__launch_bounds__(n)] <entry>(<params>` (forms that take more
/// parameters append them).
pub(crate) fn entry_head(kernel: &Kernel, opts: &CodegenOptions, params: &str) -> String {
    let bounds = opts
        .launch_bounds
        .map(|n| format!("__launch_bounds__({n}) "))
        .unwrap_or_default();
    format!(
        "extern \"C\" __global__ void {bounds}{}({params}",
        entry_name(&kernel.name)
    )
}

/// The entry's parameter list (the kernel's parameters, then the error record's; see the
/// module's ABI) and how generated code reaches each buffer parameter (array ids index it).
pub(crate) fn parameters(kernel: &Kernel) -> (String, Vec<ArrayC>) {
    let mut out = String::new();
    let mut arrays = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        match p.kind {
            ParamKind::Buffer { elem, .. } => {
                let _ = write!(out, "{}* p{i}, hg_u64 n{i}, ", ctype(elem));
                arrays.push(ArrayC {
                    base: format!("p{i}"),
                    len: ArrayLen::Dynamic(format!("n{i}")),
                });
            }
            ParamKind::Scalar(ty) => {
                let t = if ty == hologram_isa::Type::Pred {
                    "hg_u8"
                } else {
                    ctype(ty)
                };
                let _ = write!(out, "{t} p{i}, ");
                // Scalar parameters take an array slot too, so array ids index `arrays`.
                arrays.push(ArrayC {
                    base: String::new(),
                    len: ArrayLen::Static(0),
                });
            }
        }
    }
    out.push_str("hg_u32* hg_flag, hg_u64* hg_rec, hg_u32 hg_kid, hg_u64 hg_tmo");
    out.push_str(&divide::c_parameters(&divide::divisor_params(kernel)));
    (out, arrays)
}

/// The launch error an error record describes (`rec` as the prelude writes it, see the module's
/// ABI), or `None` when `rec[0]` is 0 (no error).
pub fn launch_error(kernel: &Kernel, rec: &[u64; 5]) -> Option<BackendError> {
    match rec[0] {
        0 => None,
        ERR_BARRIER_DIVERGENCE => {
            let mut pcs = vec![rec[3] as u32, rec[4] as u32];
            pcs.sort_unstable();
            Some(BackendError::BarrierDivergence {
                kernel: kernel.name.clone(),
                block: rec[2],
                pcs,
            })
        }
        ERR_TIMEOUT => Some(BackendError::LaunchTimeout {
            kernel: kernel.name.clone(),
            seconds: rec[3] as f64 * 1e-9,
            stuck: false,
        }),
        _ => Some(oob_error(kernel, rec)),
    }
}

fn oob_error(kernel: &Kernel, rec: &[u64; 5]) -> BackendError {
    let arrays = kernel.params.len() + kernel.shared.len() + kernel.scratch.len();
    let array = if (rec[2] as usize) < arrays {
        kernel.array_info(rec[2] as u32).0.to_string()
    } else {
        format!("#{}", rec[2])
    };
    BackendError::OutOfBounds {
        kernel: kernel.name.clone(),
        array,
        index: rec[3] as i64 as i128,
        len: rec[4],
    }
}

fn param_summary(kernel: &Kernel) -> String {
    kernel
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| format!("p{i}={}", p.name))
        .collect::<Vec<_>>()
        .join(" ")
}

/// C for a special register, from the CUDA built-ins. Arithmetic wraps in 32 bits, as on the CPU.
fn special_expr(s: Special) -> String {
    use hologram_isa::Dim;
    let axis = |d: Dim| ["x", "y", "z"][d.index()];
    match s {
        Special::Tid(d) => format!("threadIdx.{}", axis(d)),
        Special::Ntid(d) => format!("blockDim.{}", axis(d)),
        Special::Ctaid(d) => format!("blockIdx.{}", axis(d)),
        Special::Nctaid(d) => format!("gridDim.{}", axis(d)),
        Special::Gid(d) => {
            let a = axis(d);
            format!("blockIdx.{a} * blockDim.{a} + threadIdx.{a}")
        }
        // x fastest over the whole launch: gid.x + gid.y * width + gid.z * width * height.
        Special::GidLinear => "(blockIdx.x * blockDim.x + threadIdx.x) + (blockIdx.y * blockDim.y + threadIdx.y) * (gridDim.x * blockDim.x) + (blockIdx.z * blockDim.z + threadIdx.z) * (gridDim.x * blockDim.x * gridDim.y * blockDim.y)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(text: &str, opts: CodegenOptions) -> String {
        let k = hologram_isa::assemble(text).expect("valid kernel");
        generate(&k, &opts).expect("generates")
    }

    #[test]
    fn saxpy_has_checked_and_unchecked_forms() {
        let text = ".kernel saxpy\n.param .f32 a\n.param .buf.f32 x\n.param .buf.f32 y .rw\n.param .u32 n\n    mov.u32 %i, %gid;\n    setp.ge.u32 %p, %i, n;\n@%p exit;\n    ld.f32 %x, x[%i];\n    ld.f32 %y, y[%i];\n    fma.f32 %y, a, %x, %y;\n    st.f32 y[%i], %y;\n";
        let checked = gen(text, CodegenOptions::default());
        assert!(checked.contains("extern \"C\" __global__ void hologram_saxpy(hg_f32 p0, hg_f32* p1, hg_u64 n1, hg_f32* p2, hg_u64 n2, hg_u32 p3, hg_u32* hg_flag, hg_u64* hg_rec, hg_u32 hg_kid, hg_u64 hg_tmo)"), "{checked}");
        assert!(checked.contains("if (hg_x >= n1) { hg_oob(hg_flag, hg_rec, hg_kid, 1u,"));
        assert!(checked.contains("hg_fma_f32(p0, r2, r3)"), "{checked}");
        let unchecked = gen(
            text,
            CodegenOptions {
                bounds_checks: false,
                launch_bounds: Some(1024),
                vector_map: false,
                dedicated_rows: None,
            },
        );
        assert!(!unchecked.contains("hg_x >= n1"));
        assert!(unchecked.contains("__launch_bounds__(1024) hologram_saxpy"));
    }

    #[test]
    fn calls_use_a_return_stack() {
        let text = ".kernel c\n.param .buf.u32 out .rw\n    mov.u32 %a, 0;\n    call F;\n    call F;\n    st.u32 out[%gid], %a;\n    exit;\nF:\n    add.u32 %a, %a, 1;\n    ret;\n";
        let code = gen(text, CodegenOptions::default());
        assert!(
            code.contains("hg_u32 hg_rs[1]; hg_u32 hg_sp = 0u;"),
            "{code}"
        );
        assert!(code.contains("hg_rs[hg_sp++] = 2u; goto L5;"), "{code}");
        assert!(
            code.contains("case 2u: goto L2;\n  case 3u: goto L3;\n  default: return;"),
            "{code}"
        );
        // Every `ret` jumps to the one dispatcher.
        assert_eq!(code.matches("switch (hg_rs[--hg_sp])").count(), 1, "{code}");
        assert!(code.contains("goto hg_ret;"), "{code}");
    }

    #[test]
    fn barriers_meet_at_one_rendezvous_that_votes() {
        let text = ".kernel b\n.param .buf.u32 y .rw\n.scratch .u32 s[1]\n    st.u32 s[0], %tid.x;\n    ld.u32 %q, s[0];\n    setp.eq.u32 %p, %q, 0;\n@%p bra B;\n    barrier;\n    exit;\nB:\n    barrier;\n    st.u32 y[%gid], 1;\n";
        let code = gen(text, CodegenOptions::default());
        // One __syncthreads() for the rendezvous (none for the barriers themselves).
        assert_eq!(code.matches("__syncthreads();").count(), 1, "{code}");
        assert!(code.contains("hg_bid = 4u; goto HG_SYNC;"), "{code}");
        assert!(code.contains("hg_bid = 6u; goto HG_SYNC;"), "{code}");
        assert!(
            code.contains("if (__syncthreads_or(hg_seen != hg_bid))"),
            "{code}"
        );
        assert!(
            code.contains(
                "switch (hg_bid) { case 4u: goto L5; case 6u: goto L7; default: return; }"
            ),
            "{code}"
        );
        // No backward jump: no clock.
        assert!(!code.contains("hg_t0 = hg_now()"), "{code}");
    }

    #[test]
    fn barriers_every_lane_reaches_in_order_are_plain_syncthreads() {
        // A skip that lands on the barrier (as the row kernels' reductions do) and an exit.
        let text = ".kernel u\n.param .buf.u32 y .rw\n.shared .u32 t[64]\n    setp.ge.u32 %p, %tid.x, 32;\n@%p bra S;\n    st.u32 t[%tid.x], 1;\nS:\n    barrier;\n    setp.ge.u32 %q, %tid.x, 60;\n@%q exit;\n    ld.u32 %v, t[%tid.x];\n    barrier;\n    st.u32 y[%gid], %v;\n";
        let k = hologram_isa::assemble(text).expect("valid kernel");
        assert!(control::barriers_are_uniform(&k));
        let code = gen(text, CodegenOptions::default());
        // Two barriers plus the shared arrays' clearing, no rendezvous.
        assert_eq!(code.matches("__syncthreads();").count(), 3, "{code}");
        assert!(!code.contains("HG_SYNC"), "{code}");
        assert!(!code.contains("hg_bar_seen"), "{code}");
        // A loop around a barrier, a guarded barrier and a call keep the rendezvous.
        for text in [
            ".kernel l\n.param .buf.u32 y .rw\n.param .u32 n\n    mov.u32 %c, n;\nL:\n    barrier;\n    loop %c, L;\n    st.u32 y[%gid], 1;\n",
            ".kernel g\n.param .buf.u32 y .rw\n.param .u32 n\n    setp.ge.u32 %p, n, 32;\n@%p barrier;\n    st.u32 y[%gid], 1;\n",
            ".kernel c\n.param .buf.u32 y .rw\n    call F;\n    st.u32 y[%gid], 1;\n    exit;\nF:\n    barrier;\n    ret;\n",
        ] {
            let k = hologram_isa::assemble(text).expect("valid kernel");
            assert!(!control::barriers_are_uniform(&k), "{text}");
            assert!(gen(text, CodegenOptions::default()).contains("goto HG_SYNC;"), "{text}");
        }
    }

    #[test]
    fn backward_jumps_check_the_clock_and_forward_ones_do_not() {
        let text = ".kernel l\n.param .buf.u32 y .rw\n.param .u32 n\n    mov.u32 %c, n;\n    mov.u32 %k, 0;\nL:\n    add.u32 %k, %k, 1;\n    setp.eq.u32 %p, %k, 5;\n@%p bra OUT;\n    loop %c, L;\nOUT:\n    st.u32 y[%gid], %k;\n";
        let code = gen(text, CodegenOptions::default());
        assert!(code.contains("const hg_u64 hg_t0 = hg_now();"), "{code}");
        assert_eq!(code.matches("hg_timed_out(").count(), 2, "{code}"); // the prelude's and the loop's
        assert!(code.contains("if (r0 != 0) { if (((++hg_tick) & 1023u) == 0u && hg_timed_out(hg_flag, hg_rec, hg_kid, hg_t0, hg_tmo)) return; goto L2; }"), "{code}");
        assert!(code.contains("if (r2) { goto L6; }"), "{code}");
    }

    #[test]
    fn error_records_become_errors() {
        let k =
            hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[%gid], 1;\n")
                .expect("valid");
        assert_eq!(launch_error(&k, &[0; 5]), None);
        assert!(matches!(
            launch_error(&k, &[ERR_OUT_OF_BOUNDS, 0, 0, 9, 4]),
            Some(BackendError::OutOfBounds {
                index: 9,
                len: 4,
                ..
            })
        ));
        assert_eq!(
            launch_error(&k, &[ERR_BARRIER_DIVERGENCE, 0, 3, 8, 5]),
            Some(BackendError::BarrierDivergence {
                kernel: "k".into(),
                block: 3,
                pcs: vec![5, 8]
            })
        );
        assert_eq!(
            launch_error(&k, &[ERR_TIMEOUT, 0, 2_500_000_000, 2_000_000_000, 0]),
            Some(BackendError::LaunchTimeout {
                kernel: "k".into(),
                seconds: 2.0,
                stuck: false
            })
        );
    }

    #[test]
    fn shared_arrays_are_zeroed_by_the_block() {
        let text = ".kernel s\n.param .buf.f32 x .rw\n.shared .f32 t[64]\n    st.f32 t[%tid.x], 1.0;\n    barrier;\n    ld.f32 %v, t[3];\n    st.f32 x[%gid], %v;\n";
        let code = gen(text, CodegenOptions::default());
        assert!(code.contains("__shared__ hg_f32 sh0[64];"));
        assert!(code.contains("sh0[hg_k] = 0;"));
        // A literal index inside a declared array is not checked.
        assert!(
            code.contains("{ const hg_u64 hg_x = (hg_u64)(((hg_u64)0x3ull)); r0 = sh0[hg_x]; }"),
            "{code}"
        );
    }
}
