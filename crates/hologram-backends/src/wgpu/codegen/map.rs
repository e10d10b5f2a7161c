//! Element-wise maps, four lanes per invocation (the WGSL twin of the CUDA backend's
//! `cuda/codegen/map.rs`).
//!
//! A kernel that [`hologram_compiler::patterns::recognize_map`] recognizes, with every load and
//! store at `%gid`, is one independent computation per lane. Its 4-lane form gives each
//! invocation [`LANES`] lanes, `T` apart (`T` = invocations launched), so each load is still
//! coalesced across a subgroup, and emits the body instruction by instruction for the four lanes
//! together, so the four loads of an operand are in flight at once (a memory-bound map needs
//! several loads in flight per invocation to reach the memory's bandwidth).
//!
//! Meaning is unchanged: each lane runs its instructions in order, and lanes of a map never
//! touch each other's elements. Invocations whose four lanes all lie inside the launch, under
//! the map's bound and (with bounds checks) inside every buffer take the fast path, which has
//! no per-access test; the others run each lane alone through the generic `hg_run`, with the
//! usual checks, so a lane that goes out of bounds reports it as in the generic form.
//!
//! The launch words end with one more word: the lanes of the original launch
//! ([`total_word`]). The launcher dispatches `ceil(lanes / 4 / MAP_BLOCK)` workgroups of
//! [`MAP_BLOCK`], folded into 2-D past the per-dimension limit.

use std::fmt::Write;

use hologram_compiler::patterns::{recognize_map, MapPattern};
use hologram_isa::Kernel;

use super::{param_word, types, CodegenError, Gen, LOOP_CANARY};

/// Lanes each invocation runs.
pub const LANES: u64 = 4;

/// Invocations per workgroup of a 4-lane map launch.
pub const MAP_BLOCK: u32 = 256;

/// Most lanes a 4-lane launch covers (lane indexes and `t + 3·T` stay below 2^32).
pub const MAX_LANES: u64 = 1 << 31;

/// The map pattern of `kernel` if it has a 4-lane form: a recognized element-wise map whose
/// loads all read at `%gid`.
pub fn vectorizable(kernel: &Kernel) -> Option<MapPattern> {
    recognize_map(kernel).filter(|m| !m.gather)
}

/// What bounds the lanes of a 4-lane map: the launch proves from it, on the host, that no lane
/// can go out of bounds (then the launch cannot report an error and its error slot need not be
/// read back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapChecks {
    /// The scalar parameter bounding `%gid`, if any.
    pub bound: Option<u32>,
    /// The buffer parameters loaded or stored at `%gid`.
    pub buffers: Vec<u32>,
    /// Basic blocks a lane passes at most through the generic code (its instructions: a map has
    /// no back edge), for the timeout budget.
    pub max_blocks: u64,
}

impl MapChecks {
    pub(crate) fn of(kernel: &Kernel, m: &MapPattern) -> MapChecks {
        let buffers = m
            .inputs
            .iter()
            .chain(&m.outputs)
            .copied()
            .filter(|p| {
                kernel
                    .params
                    .get(*p as usize)
                    .is_some_and(|p| p.is_buffer())
            })
            .collect();
        MapChecks {
            bound: m.bound,
            buffers,
            max_blocks: kernel.insts.len() as u64 + 2,
        }
    }

    /// True when a launch of `lanes` lanes cannot fault: every lane below the map's limit
    /// (`lanes`, and the bound parameter's value `bound_value`) is inside every buffer
    /// (`len_of(param)` elements), and the timeout budget (`budget_blocks`, `None`: none)
    /// covers a lane's blocks. The same test the 4-lane form makes on the device, so such a
    /// launch runs every lane in bounds.
    pub fn cannot_fault(
        &self,
        lanes: u64,
        bound_value: Option<u64>,
        len_of: impl Fn(u32) -> u64,
        budget_blocks: Option<u64>,
    ) -> bool {
        if budget_blocks.is_some_and(|b| b < self.max_blocks) {
            return false;
        }
        let limit = match (self.bound, bound_value) {
            (Some(_), Some(n)) => lanes.min(n),
            (Some(_), None) => return false,
            (None, _) => lanes,
        };
        self.buffers.iter().all(|&p| len_of(p) >= limit)
    }
}

/// The argument word holding the original launch's lane count.
pub fn total_word(kernel: &Kernel) -> usize {
    param_word(kernel.params.len() as u32).max(super::ARGS_HEADER_WORDS)
}

/// The workgroups of a 4-lane launch covering `lanes` lanes, as a dispatch within `max` per
/// dimension. `None` when `lanes` is 0 or above [`MAX_LANES`].
pub fn dispatch(lanes: u64, max: u32) -> Option<[u32; 3]> {
    if lanes == 0 || lanes > MAX_LANES {
        return None;
    }
    let groups = lanes.div_ceil(LANES).div_ceil(MAP_BLOCK as u64);
    let max = max as u64;
    if groups <= max {
        return Some([groups as u32, 1, 1]);
    }
    // As few idle workgroups as possible: y rows of x, x * y just above the total.
    let rows = groups.div_ceil(max);
    (rows <= max).then_some([groups.div_ceil(rows) as u32, rows as u32, 1])
}

/// `main` of the 4-lane form (the generic `hg_run` is generated as usual and runs the tail).
pub(crate) fn main_function(g: &mut Gen<'_>, pattern: &MapPattern) -> Result<String, CodegenError> {
    let k = g.k;
    // The fast path: the body without per-access tests (every lane is live and in bounds).
    let fast = {
        let opts = super::CodegenOptions {
            bounds_checks: false,
            ..g.opts.clone()
        };
        let mut f = Gen {
            k,
            opts: &opts,
            arrays: g.arrays.clone(),
            pools: g.pools.clone(),
            sites: Vec::new(),
            out: String::new(),
            indent: 0,
            barrier_mode: false,
            canary: false,
            live_checks: false,
        };
        let mut statements = Vec::new();
        for pc in pattern.body_start..k.insts.len() {
            f.emit_at(pc as u32)?;
            statements.push(std::mem::take(&mut f.out));
        }
        statements
    };

    let mut m = String::new();
    let _ = writeln!(m, "@compute @workgroup_size({MAP_BLOCK}, 1, 1)");
    m.push_str("fn main(@builtin(local_invocation_id) hg_lid: vec3<u32>, @builtin(workgroup_id) hg_wid: vec3<u32>, @builtin(num_workgroups) hg_nwg: vec3<u32>) {\n");
    m.push_str(&g.setup_lines());
    let _ = writeln!(m, "    let hg_T = hg_nwg.x * hg_nwg.y * {MAP_BLOCK}u;");
    let _ = writeln!(
        m,
        "    let hg_t = (hg_wid.x + hg_nwg.x * hg_wid.y) * {MAP_BLOCK}u + hg_lid.x;"
    );
    let _ = writeln!(m, "    var hg_limit = hg_args[{}];", total_word(k));
    if let Some(b) = pattern.bound {
        let _ = writeln!(m, "    hg_limit = min(hg_limit, p{b});");
    }
    m.push_str("    var hg_safe = hg_limit;\n");
    if g.opts.bounds_checks {
        // The same buffers the launcher's host-side proof reads (`MapChecks::cannot_fault`).
        for p in MapChecks::of(k, pattern).buffers {
            let _ = writeln!(
                m,
                "    hg_safe = min(hg_safe, hg_args[{}]);",
                param_word(p) + 1
            );
        }
    }
    let last = LANES - 1;
    let _ = writeln!(m, "    if (hg_t + {last}u * hg_T < hg_safe) {{");
    for v in 0..LANES {
        let _ = writeln!(m, "        let hg_gid_{v} = hg_t + {v}u * hg_T;");
    }
    for v in 0..LANES {
        for (r, info) in k.regs.iter().enumerate() {
            let _ = writeln!(m, "        var r{r}_{v}: {};", types::reg_type(info.ty));
        }
    }
    for s in &fast {
        for v in 0..LANES {
            for line in s.lines() {
                let _ = writeln!(m, "        {}", rename_lane(line, v));
            }
        }
    }
    m.push_str("        return;\n    }\n");
    // The tail: each lane alone, through the generic code with its checks.
    for v in 0..LANES {
        let _ = writeln!(m, "    if (hg_t + {v}u * hg_T < hg_limit) {{");
        let _ = writeln!(m, "        hg_gid = hg_t + {v}u * hg_T;");
        m.push_str("        hg_state = 0u;\n");
        for (r, info) in k.regs.iter().enumerate() {
            let _ = writeln!(m, "        r{r} = {}();", types::reg_type(info.ty));
        }
        m.push_str("        hg_run();\n    }\n");
    }
    if g.canary {
        m.push_str(LOOP_CANARY);
    }
    m.push_str("}\n");
    Ok(m)
}

/// `statement` with lane `v`'s registers (`r<k>` -> `r<k>_<v>`) and position (`hg_gid` ->
/// `hg_gid_<v>`). Identifiers are whole words of letters, digits and `_` not starting with a
/// digit; the generator names registers `r<k>` and nothing else so (helpers and built-in state
/// start with `hg_`, parameters with `p` or `b`), and numbers (`0x3u`) are skipped whole.
fn rename_lane(statement: &str, v: u64) -> String {
    let mut out = String::with_capacity(statement.len() + 16);
    let bytes = statement.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphanumeric() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &statement[start..i];
            out.push_str(word);
            let is_reg = word.len() > 1
                && word.starts_with('r')
                && word[1..].bytes().all(|b| b.is_ascii_digit());
            if !c.is_ascii_digit() && (is_reg || word == "hg_gid") {
                let _ = write!(out, "_{v}");
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str = ".kernel add\n.param .buf.f32 a\n.param .buf.f32 b\n.param .buf.f32 c .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.f32 %x, a[%gid];\n    ld.f32 %y, b[%gid];\n    add.f32 %z, %x, %y;\n    st.f32 c[%gid], %z;\n";

    fn validate(wgsl: &str) {
        let module = naga::front::wgsl::parse_str(wgsl)
            .unwrap_or_else(|e| panic!("{}\n{wgsl}", e.emit_to_string(wgsl)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}\n{wgsl}", e.emit_to_string(wgsl)));
    }

    fn options(checks: bool) -> super::super::CodegenOptions {
        super::super::CodegenOptions {
            bounds_checks: checks,
            vector_map: true,
            ..super::super::CodegenOptions::core([64, 1, 1])
        }
    }

    #[test]
    fn a_launch_cannot_fault_only_when_every_lane_under_the_limit_is_in_every_buffer() {
        let checks = MapChecks {
            bound: Some(4),
            buffers: vec![0, 1, 2],
            max_blocks: 10,
        };
        let lens = |short: u64| move |p: u32| if p == 2 { short } else { 1000 };
        // The bound (or the lanes, whichever is less) is the limit.
        assert!(checks.cannot_fault(4096, Some(1000), lens(1000), None));
        assert!(!checks.cannot_fault(4096, Some(1000), lens(999), None));
        assert!(checks.cannot_fault(500, Some(1000), lens(500), None));
        assert!(!checks.cannot_fault(501, Some(1000), lens(500), None));
        // A bound parameter without its value, or a budget below the lane's blocks: may fault.
        assert!(!checks.cannot_fault(10, None, lens(1000), None));
        assert!(!checks.cannot_fault(10, Some(10), lens(1000), Some(9)));
        assert!(checks.cannot_fault(10, Some(10), lens(1000), Some(10)));
        let unbounded = MapChecks {
            bound: None,
            ..checks
        };
        assert!(unbounded.cannot_fault(1000, None, lens(1000), None));
        assert!(!unbounded.cannot_fault(1001, None, lens(1000), None));
    }

    #[test]
    fn lanes_get_their_own_registers() {
        assert_eq!(
            rename_lane(
                "r12 = bitcast<f32>(b0[(hg_args[8] + hg_gid)]) + r1x + 0x3u;",
                3
            ),
            "r12_3 = bitcast<f32>(b0[(hg_args[8] + hg_gid_3)]) + r1x + 0x3u;"
        );
    }

    #[test]
    fn a_map_gets_four_interleaved_lanes_and_a_checked_tail() {
        let k = hologram_isa::assemble(ADD).expect("valid kernel");
        for checks in [true, false] {
            let g = super::super::generate(&k, &options(checks)).expect("generates");
            validate(&g.wgsl);
            assert!(g.vector_map);
            assert_eq!(g.args_words, total_word(&k) + 1);
            let code = &g.wgsl;
            let fast = &code[code
                .find("if (hg_t + 3u * hg_T < hg_safe)")
                .expect("fast path")..];
            let fast = &fast[..fast.find("return;").expect("end of the fast path")];
            // The four loads of `a` come before any load of `b`, with no test in between.
            let a3 = fast.find("r1_3 = ").expect("the last load of a");
            let b0 = fast.find("r2_0 = ").expect("the first load of b");
            assert!(a3 < b0, "{code}");
            assert!(
                !fast.contains("hg_oob") && !fast.contains("hg_state"),
                "{code}"
            );
            // The bound and, with checks, every buffer's length limit the fast path.
            assert!(code.contains("hg_limit = min(hg_limit, p3);"));
            assert_eq!(code.contains("hg_safe = min(hg_safe, hg_args[9]);"), checks);
            // The tail runs the generic, checked code.
            assert_eq!(code.matches("hg_run();").count(), 4);
            assert_eq!(code.contains("hg_oob(0u,"), checks);
        }
    }

    #[test]
    fn gathers_keep_the_generic_form() {
        let gather = ".kernel g\n.param .buf.f32 a\n.param .buf.f32 c .rw\n    shr.u32 %i, %gid, 1;\n    ld.f32 %x, a[%i];\n    st.f32 c[%gid], %x;\n";
        let k = hologram_isa::assemble(gather).expect("valid kernel");
        let g = super::super::generate(&k, &options(true)).expect("generates");
        assert!(!g.vector_map);
        assert!(!g.wgsl.contains("hg_safe"));
    }

    #[test]
    fn dispatch_covers_every_lane_within_the_limits() {
        assert_eq!(dispatch(0, 65535), None);
        assert_eq!(dispatch(MAX_LANES + 1, 65535), None);
        for lanes in [1u64, 1000, 1 << 20, 1 << 26, 1 << 28, MAX_LANES] {
            let d = dispatch(lanes, 65535).expect("fits");
            assert!(d.iter().all(|&x| x <= 65535), "{d:?}");
            let invocations = d[0] as u64 * d[1] as u64 * MAP_BLOCK as u64;
            assert!(invocations * LANES >= lanes, "{lanes}: {d:?}");
            let groups = lanes.div_ceil(LANES).div_ceil(MAP_BLOCK as u64);
            assert!(
                d[0] as u64 * d[1] as u64 - groups < d[1] as u64,
                "{lanes}: {d:?}"
            );
        }
    }
}
