//! Dedicated kernels for the library templates whose intent the compiler attached: reductions
//! ([`super::reduce`]) and row kernels ([`super::rows`]), written as structured WGSL from the
//! pattern rather than translated instruction by instruction.
//!
//! The generic translation runs any ISA kernel: a state machine over basic blocks, a bounds
//! test on every access, a budget tick per block, and barriers as phases of `main` with
//! workgroup atomics at each one. A template's shape is known, so its dedicated form is plain
//! loops with `workgroupBarrier()` where the template has `barrier`, and (where the adapter has
//! subgroups) shuffles for the last levels of the block reduction's tree.
//!
//! Same parameters, launch shape and results as the template: the same operations in the same
//! order, through the same expression builders as the generic code (so the same roundings and
//! the same shields against drivers' float folds). Bounds: before any access, a workgroup (a
//! lane, for the lane reduction) checks from its arguments alone that every access it will
//! make is inside its buffer; one that cannot be proved in bounds runs the generic code
//! (kept in the module as `hg_generic`), which reports the first bad access exactly as the
//! generic form does. Loops end by their own condition; a loop found short of it afterwards was
//! cut by the driver (lavapipe's limiter) and reports `ERR_LOOP_CUT`, as the generic code does.

use std::fmt::Write;

use hologram_compiler::patterns::{Pattern, ReduceKind, ReducePattern, RowPattern};
use hologram_isa::{Kernel, ParamKind, Type};

use super::{CodegenError, CodegenOptions, Gen};

/// A kernel's library intent with a dedicated WGSL form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dedicated {
    /// A reduction template (`reduce_templates`).
    Reduce(ReducePattern),
    /// A row kernel template (`softmax_templates`).
    Rows(RowPattern),
}

impl Dedicated {
    /// The dedicated form of a kernel's intent, if it has one.
    pub fn of(pattern: Option<&Pattern>) -> Option<Dedicated> {
        match pattern? {
            Pattern::Reduce(p) => Some(Dedicated::Reduce(*p)),
            Pattern::Rows(p) => Some(Dedicated::Rows(*p)),
            _ => None,
        }
    }

    /// The options to generate this form with, from the adapter's launch options `opts`.
    /// NVIDIA's Vulkan compiler rejected the dedicated row modules generated with an H200's
    /// 64-bit and subgroup features (NVVM error 3, then device lost); generated as for a
    /// core-only adapter they compile and pass the row-kernel suites there. f64 rows need
    /// SHADER_F64, so they keep the generic form (`dedicated` stays unset).
    pub fn options(self, mut opts: CodegenOptions) -> CodegenOptions {
        match self {
            Dedicated::Rows(p) if p.storage == Type::F64 => {}
            Dedicated::Rows(_) => {
                opts.int64 = false;
                opts.float64 = false;
                opts.int64_atomics = false;
                opts.subgroups = false;
                opts.dedicated = Some(self);
            }
            Dedicated::Reduce(_) => opts.dedicated = Some(self),
        }
        opts
    }

    /// True when a launch with workgroups of `block` lanes can take the dedicated form: the
    /// block templates are written for their own block size (their shared arrays have one slot
    /// per lane); the lane reduction takes any. The kernel must have the template's parameters
    /// and shared arrays (an intent attached to another kernel keeps the generic form).
    pub fn fits(&self, k: &Kernel, block: [u32; 3]) -> bool {
        let buffers = k
            .params
            .iter()
            .filter(|p| matches!(p.kind, ParamKind::Buffer { .. }))
            .count();
        let scalars = k.params.len() - buffers;
        match self {
            Dedicated::Reduce(p) => match p.kind {
                ReduceKind::Lane => buffers == 2 && scalars == 4 && k.shared.is_empty(),
                ReduceKind::Block { index_input } => {
                    let want = 2 + usize::from(index_input) + usize::from(p.combine.is_arg());
                    block == [super::reduce::BLOCK, 1, 1]
                        && buffers == want
                        && scalars == 4
                        && k.shared.len() == 1 + usize::from(p.combine.is_arg())
                }
            },
            Dedicated::Rows(p) => {
                let (bufs, scal) = super::rows::params(p.op);
                block == [super::rows::ROW_BLOCK, 1, 1]
                    && buffers == bufs
                    && scalars == scal
                    && k.shared.len() == 2
                    && p.g.is_power_of_two()
                    && (32..=super::rows::ROW_BLOCK).contains(&p.g)
            }
        }
    }
}

/// The entry point of the dedicated form; `generic_call` is the argument list that runs the
/// generic code (`hg_generic`) from it.
pub(crate) fn main_function(
    g: &mut Gen<'_>,
    d: &Dedicated,
    generic_call: &str,
) -> Result<String, CodegenError> {
    let mut m = entry_header(g);
    let body = match d {
        Dedicated::Reduce(p) => super::reduce::body(g, p, generic_call)?,
        Dedicated::Rows(p) => super::rows::body(g, p, generic_call)?,
    };
    m.push_str(&body);
    m.push_str("    if (hd_cut) { hg_report(4u, 0u, 0u); }\n}\n");
    Ok(m)
}

/// `@compute fn main(...)` and the lane's setup: the launch words, scalar parameters, the
/// block's index (`hd_ctaid`, unfolded as the generic code does) and `hd_cut`, set when a loop
/// is found cut short.
fn entry_header(g: &Gen<'_>) -> String {
    let [bx, by, bz] = g.opts.block;
    let sg = if g.opts.subgroups {
        ", @builtin(subgroup_invocation_id) hg_sid: u32, @builtin(subgroup_size) hg_sgsize: u32"
    } else {
        ""
    };
    let mut m = String::new();
    let _ = writeln!(m, "@compute @workgroup_size({bx}, {by}, {bz})");
    let _ = writeln!(m, "fn main(@builtin(local_invocation_id) hg_lid: vec3<u32>, @builtin(local_invocation_index) hg_lidx: u32, @builtin(workgroup_id) hg_wid: vec3<u32>, @builtin(num_workgroups) hg_nwg: vec3<u32>{sg}) {{");
    m.push_str(&g.setup_lines());
    m.push_str(
        r#"    var hd_ctaid = hg_wid;
    if (hg_args[3] != 0u) {
        // The grid was folded to fit the dispatch limits: unfold the linear index.
        let l = hg_wid.x + hg_nwg.x * (hg_wid.y + hg_nwg.y * hg_wid.z);
        if (l >= hg_args[4]) { return; }
        hd_ctaid = vec3<u32>(l % hg_nctaid.x, (l / hg_nctaid.x) % hg_nctaid.y, l / (hg_nctaid.x * hg_nctaid.y));
    }
    hg_blk = hd_ctaid.x + hg_nctaid.x * (hd_ctaid.y + hg_nctaid.y * hd_ctaid.z);
    var hd_cut = false;
"#,
    );
    m
}

/// Statement lines at an indentation of `depth` levels (four spaces each).
pub(crate) struct Lines {
    pub text: String,
    pub depth: usize,
}

impl Lines {
    pub fn new(depth: usize) -> Lines {
        Lines {
            text: String::new(),
            depth,
        }
    }

    /// Writes `s` (one or more lines) at the current depth.
    pub fn line(&mut self, s: &str) {
        for l in s.lines() {
            for _ in 0..self.depth {
                self.text.push_str("    ");
            }
            self.text.push_str(l);
            self.text.push('\n');
        }
    }

    /// Writes `head {`, then `body` one level deeper, then `}`.
    pub fn block(&mut self, head: &str, body: impl FnOnce(&mut Lines)) {
        self.line(&format!("{head} {{"));
        self.depth += 1;
        body(self);
        self.depth -= 1;
        self.line("}");
    }
}

/// The WGSL name of parameter `p`'s scalar value.
pub(crate) fn scalar(p: usize) -> String {
    format!("p{p}")
}
