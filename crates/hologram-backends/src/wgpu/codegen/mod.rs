//! Atlas ISA -> WGSL.
//!
//! Pure Rust and independent of wgpu, so it is built and unit-tested (with naga validating the
//! output) whether or not the `wgpu` feature is on.
//!
//! Shape of a generated module:
//! - binding 0: `hg_err`, the device-side error word (first out-of-bounds access or barrier
//!   divergence, read back after the launch); binding 1: `hg_args`, launch words (grid, buffer
//!   offsets and lengths, scalar arguments); bindings 2..: one storage buffer per buffer
//!   parameter (see [`arrays`]);
//! - registers, scalar parameters, `.scratch` arrays and the lane's control state are
//!   `var<private>` (zero-initialized, so `KernelFacts::zero_init` holds for free);
//! - `hg_run()` runs the lane: a `loop { switch hg_pc { ... } }` state machine over basic blocks
//!   (see `blocks.rs`); it returns when the lane exits, faults, or reaches a `barrier`;
//! - `main` sets up special registers and scalars, then calls `hg_run()` once or, for kernels
//!   with barriers, in phases separated by `workgroupBarrier()` at the top level of `main`
//!   (uniform control flow: every lane of the workgroup runs every phase).
//!
//! Runaway lanes: WGSL has no clock, so every pass of the state machine spends one unit of the
//! lane's budget (`hg_tick`, refilled in chunks of 2^16 from `hg_chunks`; the launch passes the
//! budget in `hg_args[6..8]`, see [`timeout_budget`]). A lane that spends it all reports
//! [`ERR_TIMEOUT`]; at each refill a lane also stops if another lane already reported an error.
//!
//! Drivers that cut loops: Mesa's llvmpipe/lavapipe (gallivm) gives each shader invocation one
//! loop limiter of 65535 iterations, shared by every loop of the shader, and silently leaves
//! whatever loop it is in once it runs out. No restructuring of loops escapes a limiter shared
//! by all of them, so the generated code detects the cut instead: the state machine and the
//! barrier phase loop only end by `return`, so reaching the statement after either loop means
//! the driver cut it, and the lane reports [`ERR_LOOP_CUT`]. Straight-line kernels whose
//! helpers loop end with a canary loop of two passes that comes up short when the limiter is
//! spent.

pub mod arrays;
mod bitcast;
mod blocks;
mod convert;
pub mod dedicated;
pub mod dedicated_checks;
mod fma;
mod fold;
mod inst;
pub mod map;
pub mod math;
pub mod prelude;
pub mod reduce;
pub mod rows;
mod trig;
pub mod types;
pub mod wide;

use std::fmt::Write;

use hologram_isa::{Kernel, Op, ParamKind, Type, UnaryOp};

use self::arrays::{ArrayLayout, Space};

/// Words of `hg_args` before the per-parameter slots.
pub const ARGS_HEADER_WORDS: usize = 8;
/// Words of the error buffer `hg_err`.
pub const ERR_WORDS: usize = 8;
/// Binding of the error buffer.
pub const ERR_BINDING: u32 = 0;
/// Binding of the launch-argument buffer.
pub const ARGS_BINDING: u32 = 1;
/// Error kind written to `hg_err[1]` for an out-of-bounds access.
pub const ERR_OUT_OF_BOUNDS: u32 = 1;
/// Error kind written to `hg_err[1]` when lanes of a block wait at different barriers.
pub const ERR_BARRIER_DIVERGENCE: u32 = 2;
/// Error kind written to `hg_err[1]` when a lane spent its budget of executed blocks.
pub const ERR_TIMEOUT: u32 = 3;
/// Error kind written to `hg_err[1]` when the driver cut one of the shader's loops short.
pub const ERR_LOOP_CUT: u32 = 4;
/// Blocks a lane runs between two looks at `hg_err` (and budget refills).
pub const TICKS_PER_CHUNK: u64 = 1 << 16;

/// The words `hg_args[6]` (first chunk) and `hg_args[7]` (further chunks, `u32::MAX` for no
/// limit) that give a lane a budget of `blocks` executed blocks.
pub fn timeout_budget(blocks: Option<u64>) -> [u32; 2] {
    match blocks {
        None => [TICKS_PER_CHUNK as u32, u32::MAX],
        Some(b) => {
            let b = b.clamp(1, (u32::MAX as u64 - 1) * TICKS_PER_CHUNK);
            let first = (b - 1) % TICKS_PER_CHUNK + 1;
            [first as u32, ((b - first) / TICKS_PER_CHUNK) as u32]
        }
    }
}

/// What the generated code may use, and how it is specialized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CodegenOptions {
    /// Workgroup size (the kernel's block size; part of the pipeline's identity).
    pub block: [u32; 3],
    /// Emit bounds checks (the launch's `bounds_checks`).
    pub bounds_checks: bool,
    /// The adapter has `SHADER_INT64` (i64/u64 registers and buffers).
    pub int64: bool,
    /// The adapter has `SHADER_F64`.
    pub float64: bool,
    /// The adapter has `SHADER_INT64_ATOMIC_ALL_OPS`.
    pub int64_atomics: bool,
    /// Most storage buffers one shader may bind.
    pub max_storage_buffers: u32,
    /// Generate element-wise maps in their 4-lane form ([`map`]); other kernels ignore it.
    pub vector_map: bool,
    /// The adapter has `SUBGROUP` (subgroup operations in compute shaders): lanes meeting at
    /// a barrier report per subgroup.
    pub subgroups: bool,
    /// Generate the kernel's dedicated form for its library intent ([`dedicated`]): a
    /// reduction or row kernel written from its pattern, with the generic code kept for the
    /// workgroups it cannot prove in bounds.
    pub dedicated: Option<dedicated::Dedicated>,
    /// The launcher proved every access of the launch in bounds
    /// ([`dedicated_checks::DedicatedChecks::in_bounds`]): the dedicated form is generated
    /// without its in-bounds tests and generic fallback (`bounds_checks` is off), and its
    /// module is built without wgpu's clamps, as a checked module is.
    pub proven: bool,
}

impl CodegenOptions {
    /// Options for an adapter with only core WGSL features.
    pub fn core(block: [u32; 3]) -> Self {
        CodegenOptions {
            block,
            bounds_checks: true,
            int64: false,
            float64: false,
            int64_atomics: false,
            max_storage_buffers: 8,
            vector_map: false,
            subgroups: false,
            dedicated: None,
            proven: false,
        }
    }

    /// A stable text form, for pipeline cache keys.
    pub fn key(&self) -> String {
        format!(
            "wgsl-v1;block={:?};checks={};proven={};i64={};f64={};a64={};map4={};sg={};ded={:?}",
            self.block,
            self.bounds_checks,
            self.proven,
            self.int64,
            self.float64,
            self.int64_atomics,
            self.vector_map,
            self.subgroups,
            self.dedicated
        )
    }
}

/// Why a kernel cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodegenError {
    /// The kernel needs a feature the adapter lacks (the text names it).
    Unsupported(String),
}

/// A bounds-checked access: which array, and the type of its index (to report the index as the
/// kernel wrote it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    /// Array index of the kernel ([`Kernel::array`]).
    pub array: u32,
    /// Index type; `None` for a literal index.
    pub index_ty: Option<Type>,
}

/// A generated WGSL module and what the launcher needs to bind it.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The WGSL source.
    pub wgsl: String,
    /// `(parameter index, binding)` of every buffer parameter.
    pub buffer_bindings: Vec<(u32, u32)>,
    /// Access sites, indexed by the site id the shader reports.
    pub sites: Vec<Site>,
    /// Buffer parameters sharing pool bindings (empty unless the kernel has more buffer
    /// parameters than the adapter has storage-buffer bindings).
    pub pools: Vec<arrays::Pool>,
    /// Words of the argument buffer.
    pub args_words: usize,
    /// The module is a map's 4-lane form ([`map`]): launched in its own shape, with the lanes
    /// of the original launch in argument word [`map::total_word`].
    pub vector_map: bool,
    /// The module is a dedicated reduction or row kernel ([`dedicated`]).
    pub dedicated: bool,
    /// For a 4-lane map: what its lanes' accesses are bounded by (the launcher proves from
    /// these that a launch cannot fault, see [`map::MapChecks`]).
    pub map_checks: Option<map::MapChecks>,
    /// `main` ends with the loop-cut canary (the launch may report a cut on drivers that cut).
    pub loop_canary: bool,
    /// For a dedicated reduction or row kernel: what the launcher proves a launch cannot
    /// fault from (see [`dedicated_checks`]).
    pub dedicated_checks: Option<dedicated_checks::DedicatedChecks>,
}

/// The argument-buffer word holding parameter `p`'s first slot.
pub fn param_word(p: u32) -> usize {
    ARGS_HEADER_WORDS + 2 * p as usize
}

/// Generates WGSL for a validated kernel.
pub fn generate(kernel: &Kernel, opts: &CodegenOptions) -> Result<Generated, CodegenError> {
    check_support(kernel, opts)?;
    let arrays::Layouts { arrays, pools } =
        arrays::layouts(kernel, opts.max_storage_buffers).map_err(CodegenError::Unsupported)?;
    let map = if opts.vector_map {
        map::vectorizable(kernel)
    } else {
        None
    };
    let args_words =
        param_word(kernel.params.len() as u32).max(ARGS_HEADER_WORDS) + usize::from(map.is_some());
    let mut g = Gen {
        k: kernel,
        opts,
        arrays,
        pools,
        sites: Vec::new(),
        out: String::new(),
        indent: 2,
        barrier_mode: kernel.facts.uses_barrier,
        canary: false,
        live_checks: true,
    };
    let run = g.run_function()?;
    let decls = g.declarations();
    let libraries = [
        prelude::HELPERS,
        math::HELPERS,
        fma::HELPERS,
        trig::HELPERS,
        wide::HELPERS,
    ];
    let used = prelude::resolve(&format!("{decls}{run}"), &libraries);
    // Kernels with the state machine detect cuts where it ends; straight-line ones need the
    // canary when they loop at all (atomics' compare-and-swap loops, looping helpers).
    g.canary = !run.contains("hg_refill")
        && (run.contains("loop {") || used.iter().any(|h| h.text.contains("loop {")));
    let dedicated = opts
        .dedicated
        .filter(|d| map.is_none() && d.fits(kernel, opts.block));
    let mut dedicated_checks = None;
    let main = match (&map, &dedicated) {
        (Some(m), _) => map::main_function(&mut g, m)?,
        (None, Some(d)) => {
            // The generic code stays, as a function, for workgroups (or lanes) the dedicated
            // form cannot prove in bounds: they report errors exactly as the generic form does.
            let (generic, call) = g.generic_main(Some("hg_generic"));
            let fast = dedicated::main_function(&mut g, d, &call)?;
            let helpers_loop = prelude::resolve(&fast, &libraries)
                .iter()
                .any(|h| h.text.contains("loop {"));
            dedicated_checks =
                dedicated_checks::DedicatedChecks::of(kernel, d, opts.bounds_checks, helpers_loop);
            format!("{generic}{fast}")
        }
        _ => g.generic_main(None).0,
    };
    let mut body = String::new();
    body.push_str(&run);
    body.push_str(&main);
    let helpers = prelude::resolve(&format!("{decls}{body}"), &libraries);
    let mut wgsl = String::new();
    let _ = writeln!(
        wgsl,
        "// Atlas ISA kernel '{}', generated by hologram-backends (wgpu)",
        types::comment_safe(&kernel.name)
    );
    wgsl.push_str(&decls);
    for h in helpers {
        wgsl.push_str(h.text);
    }
    wgsl.push_str(&body);
    let buffer_bindings = g
        .arrays
        .iter()
        .filter_map(|a| match a.space {
            Space::Buffer { param, binding } if binding != u32::MAX && !a.pooled => {
                Some((param, binding))
            }
            _ => None,
        })
        .collect();
    let pools = g.pools.clone();
    Ok(Generated {
        wgsl,
        buffer_bindings,
        sites: g.sites,
        pools,
        args_words,
        vector_map: map.is_some(),
        dedicated: dedicated.is_some(),
        map_checks: map.as_ref().map(|m| map::MapChecks::of(kernel, m)),
        loop_canary: g.canary,
        dedicated_checks,
    })
}

/// Rejects kernels that need what the adapter lacks.
fn check_support(kernel: &Kernel, opts: &CodegenOptions) -> Result<(), CodegenError> {
    let mut types: Vec<Type> = kernel.regs.iter().map(|r| r.ty).collect();
    types.extend(kernel.params.iter().map(|p| p.ty()));
    types.extend(kernel.shared.iter().map(|a| a.elem));
    types.extend(kernel.scratch.iter().map(|a| a.elem));
    for inst in &kernel.insts {
        match &inst.op {
            Op::Cvt { to, from, .. } | Op::Bitcast { to, from, .. } => types.extend([*to, *from]),
            op => types.extend(op.dst_type()),
        }
    }
    let uses = |t: Type| types.contains(&t);
    if uses(Type::F64) && !(opts.float64 && opts.int64) {
        return Err(CodegenError::Unsupported(
            "f64 arithmetic (WGSL has no f64; the adapter lacks SHADER_F64 or SHADER_INT64)".into(),
        ));
    }
    if (uses(Type::I64) || uses(Type::U64)) && !opts.int64 {
        return Err(CodegenError::Unsupported(
            "64-bit integers (i64/u64 are not core WGSL; the adapter lacks SHADER_INT64)".into(),
        ));
    }
    for inst in &kernel.insts {
        match &inst.op {
            Op::Atom { ty, .. } if types::is_wide(*ty) && !opts.int64_atomics => {
                return Err(CodegenError::Unsupported(format!(
                    "64-bit atomics (atom on {ty}; the adapter lacks SHADER_INT64_ATOMIC_ALL_OPS)"
                )));
            }
            Op::Unary {
                op, ty: Type::F64, ..
            } if !wide::f64_unary_supported(*op) => {
                return Err(CodegenError::Unsupported(format!(
                    "f64 {} (WGSL has no f64 transcendental functions)",
                    op.name()
                )));
            }
            Op::Binary {
                op: hologram_isa::BinaryOp::Pow,
                ty: Type::F64,
                ..
            } => {
                return Err(CodegenError::Unsupported(
                    "f64 pow (WGSL has no f64 transcendental functions)".into(),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Generator state for one kernel.
pub(crate) struct Gen<'k> {
    pub k: &'k Kernel,
    pub opts: &'k CodegenOptions,
    pub arrays: Vec<ArrayLayout>,
    pub pools: Vec<arrays::Pool>,
    pub sites: Vec<Site>,
    /// Statements being written (the current function body).
    pub out: String,
    pub indent: usize,
    /// The kernel has barriers: lanes park at them and `main` runs phases.
    pub barrier_mode: bool,
    /// `main` ends with [`LOOP_CANARY`] (straight-line code whose helpers loop).
    pub canary: bool,
    /// Unchecked accesses test that the lane is live (false in the 4-lane form of maps, whose
    /// lanes are all live).
    pub live_checks: bool,
}

impl Gen<'_> {
    /// Writes one statement line at the current indentation.
    pub fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    /// Module-scope declarations: bindings, workgroup and private variables.
    fn declarations(&self) -> String {
        let mut d = String::new();
        let _ = writeln!(
            d,
            "@group(0) @binding({ERR_BINDING}) var<storage, read_write> hg_err: array<atomic<u32>, {ERR_WORDS}>;"
        );
        let _ = writeln!(
            d,
            "@group(0) @binding({ARGS_BINDING}) var<storage, read> hg_args: array<u32>;"
        );
        for a in &self.arrays {
            d.push_str(&a.declaration());
        }
        for (i, p) in self.pools.iter().enumerate() {
            d.push_str(&p.declaration(i));
        }
        if self.barrier_mode {
            d.push_str("var<workgroup> hg_sync: array<atomic<u32>, 6>;\n");
        }
        d.push_str("var<private> hg_zero: u32;\n");
        d.push_str("var<private> hg_pc: u32;\n");
        d.push_str("var<private> hg_state: u32;\n");
        d.push_str("var<private> hg_bar: u32;\n");
        d.push_str("var<private> hg_blk: u32;\n");
        d.push_str("var<private> hg_tid: vec3<u32>;\n");
        d.push_str("var<private> hg_ctaid: vec3<u32>;\n");
        d.push_str("var<private> hg_nctaid: vec3<u32>;\n");
        d.push_str("var<private> hg_gid: u32;\n");
        d.push_str("var<private> hg_tick: u32;\n");
        d.push_str("var<private> hg_chunks: u32;\n");
        let depth = self.k.facts.max_call_depth;
        if depth > 0 {
            d.push_str("var<private> hg_sp: u32;\n");
            let _ = writeln!(d, "var<private> hg_stack: array<u32, {depth}>;");
        }
        for (i, p) in self.k.params.iter().enumerate() {
            if let ParamKind::Scalar(ty) = p.kind {
                let _ = writeln!(
                    d,
                    "var<private> p{i}: {}; // {}",
                    types::reg_type(ty),
                    types::comment_safe(&p.name)
                );
            }
        }
        for (i, r) in self.k.regs.iter().enumerate() {
            let _ = writeln!(
                d,
                "var<private> r{i}: {}; // %{}",
                types::reg_type(r.ty),
                types::comment_safe(&r.name)
            );
        }
        d.push_str(ERROR_FUNCTIONS);
        d
    }

    /// The statements of `main` that set up the lane's state from the launch words: `hg_zero`,
    /// the budget, the grid, scalar parameters (everything but the lane's position).
    pub(crate) fn setup_lines(&self) -> String {
        let mut m = String::new();
        // hg_zero is 0, but read from memory so no compiler can fold it (see types::literal).
        m.push_str("    hg_zero = hg_args[5];\n");
        m.push_str("    hg_tick = hg_args[6];\n");
        m.push_str("    hg_chunks = hg_args[7];\n");
        m.push_str("    hg_nctaid = vec3<u32>(hg_args[0], hg_args[1], hg_args[2]);\n");
        m.push_str(&self.scalar_lines());
        m
    }

    /// `p<i> = ...;` for every scalar parameter.
    fn scalar_lines(&self) -> String {
        let mut m = String::new();
        for (i, p) in self.k.params.iter().enumerate() {
            if let ParamKind::Scalar(ty) = p.kind {
                let w = param_word(i as u32);
                let lo = format!("hg_args[{w}]");
                let hi = format!("hg_args[{}]", w + 1);
                let e = match ty {
                    Type::U32 => lo,
                    Type::U8 => format!("({lo} & 0xffu)"),
                    Type::U16 => format!("({lo} & 0xffffu)"),
                    Type::I32 => format!("bitcast<i32>({lo})"),
                    Type::I8 => format!("(bitcast<i32>({lo} << 24u) >> 24u)"),
                    Type::I16 => format!("(bitcast<i32>({lo} << 16u) >> 16u)"),
                    Type::F32 => format!("bitcast<f32>({lo})"),
                    Type::F16 => format!("hg_h2f({lo} & 0xffffu)"),
                    Type::BF16 => format!("hg_b2f({lo} & 0xffffu)"),
                    Type::Pred => format!("({lo} != 0u)"),
                    Type::U64 => format!("(u64({lo}) | (u64({hi}) << 32u))"),
                    Type::I64 => format!("bitcast<i64>(u64({lo}) | (u64({hi}) << 32u))"),
                    Type::F64 => format!("bitcast<f64>(u64({lo}) | (u64({hi}) << 32u))"),
                };
                let _ = writeln!(m, "    p{i} = {e};");
            }
        }
        m
    }

    /// The generic compute entry point (`name` None), or the same code as a function called
    /// `name` taking the entry point's built-ins; with it, the argument list that calls it from
    /// an entry point declaring the same built-in names.
    pub(crate) fn generic_main(&mut self, name: Option<&str>) -> (String, String) {
        let [bx, by, bz] = self.opts.block;
        let mut m = String::new();
        // Kernels with barriers that report per subgroup need the lane's place in its subgroup
        // (which WGSL gives only for one-dimensional workgroups).
        let per_subgroup = self.barrier_mode && self.opts.subgroups && by == 1 && bz == 1;
        let call = if per_subgroup {
            "hg_lid, hg_lidx, hg_wid, hg_nwg, hg_sid"
        } else {
            "hg_lid, hg_lidx, hg_wid, hg_nwg"
        }
        .to_string();
        match name {
            None => {
                let sid = if per_subgroup {
                    ", @builtin(subgroup_invocation_id) hg_sid: u32"
                } else {
                    ""
                };
                let _ = writeln!(m, "@compute @workgroup_size({bx}, {by}, {bz})");
                let _ = writeln!(m, "fn main(@builtin(local_invocation_id) hg_lid: vec3<u32>, @builtin(local_invocation_index) hg_lidx: u32, @builtin(workgroup_id) hg_wid: vec3<u32>, @builtin(num_workgroups) hg_nwg: vec3<u32>{sid}) {{");
            }
            Some(f) => {
                let sid = if per_subgroup { ", hg_sid: u32" } else { "" };
                let _ = writeln!(m, "fn {f}(hg_lid: vec3<u32>, hg_lidx: u32, hg_wid: vec3<u32>, hg_nwg: vec3<u32>{sid}) {{");
            }
        }
        (self.generic_body(m), call)
    }

    /// The body of the generic entry point, appended to its header `m`.
    fn generic_body(&mut self, mut m: String) -> String {
        let [bx, by, bz] = self.opts.block;
        let per_subgroup = self.barrier_mode && self.opts.subgroups && by == 1 && bz == 1;
        // hg_zero is 0, but read from memory so no compiler can fold it (see types::literal).
        m.push_str("    hg_zero = hg_args[5];\n");
        m.push_str("    hg_tick = hg_args[6];\n");
        m.push_str("    hg_chunks = hg_args[7];\n");
        m.push_str("    hg_nctaid = vec3<u32>(hg_args[0], hg_args[1], hg_args[2]);\n");
        m.push_str("    if (hg_args[3] != 0u) {\n");
        m.push_str(
            "        // The grid was folded to fit the dispatch limits: unfold the linear index.\n",
        );
        m.push_str("        let l = hg_wid.x + hg_nwg.x * (hg_wid.y + hg_nwg.y * hg_wid.z);\n");
        m.push_str("        if (l >= hg_args[4]) { return; }\n");
        m.push_str("        hg_ctaid = vec3<u32>(l % hg_nctaid.x, (l / hg_nctaid.x) % hg_nctaid.y, l / (hg_nctaid.x * hg_nctaid.y));\n");
        m.push_str("    } else {\n");
        m.push_str("        hg_ctaid = hg_wid;\n");
        m.push_str("    }\n");
        m.push_str("    hg_tid = hg_lid;\n");
        m.push_str(
            "    hg_blk = hg_ctaid.x + hg_nctaid.x * (hg_ctaid.y + hg_nctaid.y * hg_ctaid.z);\n",
        );
        // x fastest over the whole launch: gid.x + gid.y * width + gid.z * width * height.
        let _ = writeln!(
            m,
            "    hg_gid = (hg_ctaid.x * {bx}u + hg_lid.x) + (hg_ctaid.y * {by}u + hg_lid.y) * (hg_nctaid.x * {bx}u) + (hg_ctaid.z * {bz}u + hg_lid.z) * (hg_nctaid.x * {bx}u * hg_nctaid.y * {by}u);"
        );
        m.push_str(&self.scalar_lines());
        if !self.barrier_mode {
            m.push_str("    hg_run();\n");
            if self.canary {
                m.push_str(LOOP_CANARY);
            }
            m.push_str("}\n");
            return m;
        }
        m.push_str(BARRIER_PHASES);
        m.push_str(if per_subgroup { PARK_SUBGROUPS } else { PARK });
        m.push_str(BARRIER_MEET);
        m.push_str("}\n");
        m
    }
}

/// Error reporting: the first lane to fault records what happened in `hg_err`.
const ERROR_FUNCTIONS: &str = r#"fn hg_oob(site: u32, lo: u32, hi: u32) {
    hg_state = 2u;
    if (atomicAdd(&hg_err[0], 1u) == 0u) {
        atomicStore(&hg_err[1], 1u);
        atomicStore(&hg_err[2], site);
        atomicStore(&hg_err[3], lo);
        atomicStore(&hg_err[4], hi);
    }
}
fn hg_report(kind: u32, a: u32, b: u32) {
    hg_state = 2u;
    if (atomicAdd(&hg_err[0], 1u) == 0u) {
        atomicStore(&hg_err[1], kind);
        atomicStore(&hg_err[2], hg_blk);
        atomicStore(&hg_err[3], a);
        atomicStore(&hg_err[4], b);
    }
}
fn hg_diverged(a: u32, b: u32) {
    hg_report(2u, a, b);
}
fn hg_refill() {
    if (atomicLoad(&hg_err[0]) != 0u) {
        hg_state = 2u;
    } else if (hg_chunks == 0u) {
        hg_report(3u, 0u, 0u);
    } else {
        if (hg_chunks != 0xffffffffu) { hg_chunks = hg_chunks - 1u; }
        hg_tick = 65536u;
    }
}
"#;

/// The end of a straight-line kernel whose helpers loop: two passes of a loop the compiler
/// cannot count (`hg_zero` comes from memory); one pass means the driver's loop limiter is
/// spent, so some helper loop was cut short.
const LOOP_CANARY: &str = r#"    var hg_pass = 0u;
    loop {
        hg_pass = hg_pass + 1u;
        if (hg_pass >= 2u + hg_zero) { break; }
    }
    if (hg_pass < 2u) { hg_report(4u, 0u, 0u); }
"#;

/// The phase loop of kernels with barriers. Each phase runs every live lane until it exits or
/// parks at a barrier; then, at the top level of `main` (uniform control flow), the workgroup
/// finds whether any lane parked and whether all parked lanes wait at the same barrier: the
/// largest `barrier + 1` and the largest `!barrier` of the parked lanes ([`PARK`]: one pair of
/// workgroup atomics per parked lane, or per subgroup with [`PARK_SUBGROUPS`], where 256 lanes
/// hitting one word serialize). `hg_sync` holds two sets of these words used in alternate
/// phases, so one set is cleared while the other is read.
const BARRIER_PHASES: &str = r#"    var hg_phase = 0u;
    loop {
        if (hg_state == 0u) { hg_run(); }
        let par = (hg_phase & 1u) * 3u;
"#;

/// Parked lanes report their barrier, one lane at a time.
const PARK: &str = r#"        if (hg_state == 1u) {
            atomicMax(&hg_sync[par + 1u], hg_bar + 1u);
            atomicMax(&hg_sync[par + 2u], ~hg_bar);
        }
"#;

/// Parked lanes report their barrier, one subgroup at a time: its first active lane (lanes that
/// are not parked add zeros, which change no maximum).
const PARK_SUBGROUPS: &str = r#"        let hg_parked = hg_state == 1u;
        let hg_hi = subgroupMax(select(0u, hg_bar + 1u, hg_parked));
        let hg_lo = subgroupMax(select(0u, ~hg_bar, hg_parked));
        if (hg_hi != 0u && hg_sid == subgroupBroadcastFirst(hg_sid)) {
            atomicMax(&hg_sync[par + 1u], hg_hi);
            atomicMax(&hg_sync[par + 2u], hg_lo);
        }
"#;

/// The rest of the phase loop.
const BARRIER_MEET: &str = r#"        storageBarrier();
        workgroupBarrier();
        let bmax1 = atomicLoad(&hg_sync[par + 1u]);
        let bmax = bmax1 - 1u;
        let bmin = ~atomicLoad(&hg_sync[par + 2u]);
        if (hg_lidx == 0u) {
            let q = 3u - par;
            atomicStore(&hg_sync[q], 0u);
            atomicStore(&hg_sync[q + 1u], 0u);
            atomicStore(&hg_sync[q + 2u], 0u);
        }
        workgroupBarrier();
        // No lane parked: every lane has ended.
        if (bmax1 == 0u) { return; }
        if (bmin != bmax) {
            if (hg_lidx == 0u) { hg_diverged(bmin, bmax); }
            return;
        }
        if (hg_state == 1u) { hg_state = 0u; }
        hg_phase = hg_phase + 1u;
    }
    // The loop only ends by `return`: the driver cut it (see the module documentation).
    hg_report(4u, 0u, 0u);
"#;

/// Unary operations whose f64 form has an exact WGSL implementation.
pub(crate) fn f64_unary_exact(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Abs
            | UnaryOp::Neg
            | UnaryOp::Sqrt
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::Trunc
    )
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod dedicated_tests;
