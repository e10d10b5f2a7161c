//! Dedicated WGSL for the reduction templates (`hologram_compiler::patterns::reduce_templates`;
//! see [`super::dedicated`] for what "dedicated" keeps and changes).
//!
//! - **Block** (one workgroup of [`BLOCK`] lanes per row chunk): lane `t` folds elements
//!   `t, t + BLOCK, ...` of the chunk in order, eight loads in flight per step as in the
//!   template; then the tree halves the accumulators as the template does (`t` folds `t + s`
//!   for `s = 128, 64, ..., 1`). Levels run through workgroup memory with one barrier each;
//!   where the adapter has subgroups and the accumulator is 32 bits wide, the levels below the
//!   subgroup size run in the first subgroup with `subgroupShuffleDown` (lane `t` reads lane
//!   `t + s`: the same tree, no barrier). That assumes the first subgroup holds invocations
//!   `0 .. subgroup_size` in order, which every Vulkan, Metal and D3D12 driver does for
//!   one-dimensional workgroups.
//! - **Lane** (one lane per output): the template's loop over the reduced axis, four loads in
//!   flight per step.
//!
//! Results are bit for bit the generic code's: the same folds in the same order.

use hologram_compiler::patterns::reduce_templates::Combine;
use hologram_compiler::patterns::{ReduceKind, ReducePattern};
use hologram_isa::semantics::Value;
use hologram_isa::{BinaryOp, Imm, Type};

use super::dedicated::{scalar, Lines};
use super::fold::{arg_tree_fold, fold};
use super::inst::binary;
use super::types::{literal, reg_type};
use super::{CodegenError, Gen};

/// Lanes per workgroup of the block kernel (the template's `BLOCK`).
pub const BLOCK: u32 = hologram_compiler::patterns::reduce_templates::BLOCK;
const BLOCK_UNROLL: u32 = hologram_compiler::patterns::reduce_templates::BLOCK_UNROLL;
const LANE_UNROLL: u32 = hologram_compiler::patterns::reduce_templates::LANE_UNROLL;

/// Largest chunk end the block kernel's fast path accepts: its step `pos + 7·BLOCK` and the
/// lane's first position `start + t` then never wrap.
const SAFE_END: u32 = u32::MAX - BLOCK * BLOCK_UNROLL;

/// The identity of `c` in type `t`, as a literal formed at run time.
fn init(c: Combine, t: Type) -> String {
    let (lo, hi) = t.int_range().unwrap_or((0, 0));
    let imm = match c {
        Combine::Sum => Imm::Int(0),
        Combine::Prod => Imm::Int(1),
        Combine::Max | Combine::ArgMax if t.is_float() => Imm::Float(f64::NEG_INFINITY),
        Combine::Min | Combine::ArgMin if t.is_float() => Imm::Float(f64::INFINITY),
        Combine::Max | Combine::ArgMax => Imm::Int(lo),
        Combine::Min | Combine::ArgMin => Imm::Int(hi),
    };
    let imm = match (imm, t.is_float()) {
        (Imm::Int(i), true) => Imm::Float(i as f64),
        (i, _) => i,
    };
    literal(Value::from_imm(imm, t), true)
}

/// The body of the dedicated entry point.
pub(crate) fn body(
    g: &mut Gen<'_>,
    p: &ReducePattern,
    generic_call: &str,
) -> Result<String, CodegenError> {
    match p.kind {
        ReduceKind::Block { index_input } => Ok(block(g, p, index_input, generic_call)),
        ReduceKind::Lane => Ok(lane(g, p, generic_call)),
    }
}

/// A load of element `i` of buffer parameter `param`, converted to `acc`.
fn load(g: &Gen<'_>, param: usize, i: &str, acc: Type) -> String {
    let a = &g.arrays[param];
    g.convert(acc, a.elem, &a.load(i))
}

/// Statements storing `v` (of type `from`) as element `i` of array `array`, converted to the
/// array's element type.
fn store(g: &Gen<'_>, array: usize, i: &str, v: &str, from: Type) -> String {
    let a = &g.arrays[array];
    let v = g.convert(a.elem, from, v);
    format!("{{ {} }}", a.store(i, &v).join(" "))
}

fn block(g: &mut Gen<'_>, p: &ReducePattern, index_input: bool, generic_call: &str) -> String {
    let (c, acc) = (p.combine, p.acc);
    let arg = c.is_arg();
    let f64_ok = g.opts.float64;
    let x = 0usize;
    let xix = index_input.then_some(1usize);
    let out = 1 + usize::from(index_input);
    let outix = arg.then_some(out + 1);
    let s0 = out + 1 + usize::from(arg);
    let (off, rlen, chunks, clen) = (scalar(s0), scalar(s0 + 1), scalar(s0 + 2), scalar(s0 + 3));
    let np = g.k.params.len();
    let (sacc, six) = (np, np + 1);
    let ty = reg_type(acc);
    let mut l = Lines::new(1);
    l.line("let hd_t = hg_lid.x;");
    l.line("let hd_c = hd_ctaid.x;");
    let div = binary(BinaryOp::Div, Type::U32, "hd_c", &chunks, false);
    let rem = binary(BinaryOp::Rem, Type::U32, "hd_c", &chunks, false);
    l.line(&format!("let hd_row = {div};"));
    l.line(&format!("let hd_chunk = {rem};"));
    l.line(&format!("let hd_start = hd_chunk * {clen};"));
    l.line(&format!("let hd_stop = min(hd_start + {clen}, {rlen});"));
    l.line(&format!("let hd_rowbase = hd_row * {rlen} + {off};"));
    if g.opts.bounds_checks {
        // Every access of the workgroup: x (and xix) at rowbase + [start, stop), out (and
        // outix) at its block index.
        let mut safe = format!(
            "hd_c < {} && hd_start <= {SAFE_END}u && hd_stop <= {SAFE_END}u",
            g.arrays[out].len_expr()
        );
        if let Some(o) = outix {
            safe.push_str(&format!(" && hd_c < {}", g.arrays[o].len_expr()));
        }
        l.line(&format!("var hd_safe = {safe};"));
        let mut inputs = format!("hd_last < {}", g.arrays[x].len_expr());
        if let Some(ix) = xix {
            inputs.push_str(&format!(" && hd_last < {}", g.arrays[ix].len_expr()));
        }
        l.block("if (hd_start < hd_stop)", |l| {
            l.line("let hd_last = hd_rowbase + (hd_stop - 1u);");
            l.line(&format!(
                "hd_safe = hd_safe && hd_rowbase <= 0xffffffffu - (hd_stop - 1u) && {inputs};"
            ));
        });
        l.line(&format!(
            "if (!hd_safe) {{ hg_generic({generic_call}); return; }}"
        ));
    }
    l.line(&format!("var hd_acc: {ty} = {};", init(c, acc)));
    l.line("var hd_best = 0u;");
    l.line("var hd_pos = hd_start + hd_t;");
    let u = BLOCK_UNROLL;
    let far = (u - 1) * BLOCK;
    let src = |g: &Gen<'_>, i: &str| match xix {
        Some(ix) => g.arrays[ix].load(i),
        None => format!("({i} - hd_rowbase)"),
    };
    l.block("loop", |l| {
        l.line(&format!("if (hd_pos + {far}u >= hd_stop) {{ break; }}"));
        l.line("let hd_i0 = hd_rowbase + hd_pos;");
        for k in 1..u {
            l.line(&format!("let hd_i{k} = hd_i{} + {BLOCK}u;", k - 1));
        }
        for k in 0..u {
            l.line(&format!(
                "let hd_x{k} = {};",
                load(g, x, &format!("hd_i{k}"), acc)
            ));
        }
        if arg {
            for k in 0..u {
                l.line(&format!("let hd_s{k} = {};", src(g, &format!("hd_i{k}"))));
            }
        }
        for k in 0..u {
            let (xk, sk) = (format!("hd_x{k}"), format!("hd_s{k}"));
            l.line(&fold(c, acc, "hd_acc", &xk, Some(("hd_best", &sk)), f64_ok));
        }
        l.line(&format!("hd_pos = hd_pos + {}u;", u * BLOCK));
    });
    l.line(&format!(
        "if (hd_pos + {far}u < hd_stop) {{ hd_cut = true; }}"
    ));
    l.block("loop", |l| {
        l.line("if (hd_pos >= hd_stop) { break; }");
        l.line("let hd_i = hd_rowbase + hd_pos;");
        l.line(&format!("let hd_x = {};", load(g, x, "hd_i", acc)));
        l.line(&format!("let hd_s = {};", src(g, "hd_i")));
        l.line(&fold(
            c,
            acc,
            "hd_acc",
            "hd_x",
            Some(("hd_best", "hd_s")),
            f64_ok,
        ));
        l.line(&format!("hd_pos = hd_pos + {BLOCK}u;"));
    });
    l.line("if (hd_pos < hd_stop) { hd_cut = true; }");

    // The tree: lane t folds t + s, s = BLOCK/2 .. 1.
    let sh = &g.arrays[sacc];
    let ix_sh = arg.then(|| &g.arrays[six]);
    l.line(&format!("{{ {} }}", sh.store("hd_t", "hd_acc").join(" ")));
    if let Some(a) = ix_sh {
        l.line(&format!("{{ {} }}", a.store("hd_t", "hd_best").join(" ")));
    }
    l.line("workgroupBarrier();");
    let tree_fold = |mine: (&str, &str), other: (&str, &str)| {
        if arg {
            arg_tree_fold(c, acc, mine, other)
        } else {
            fold(c, acc, mine.0, other.0, None, f64_ok)
        }
    };
    let shuffle = g.opts.subgroups && acc.size_bytes() == 4;
    let stop_at = if shuffle { "hg_sgsize" } else { "1u" };
    l.line(&format!("var hd_s = {}u;", BLOCK / 2));
    l.block("loop", |l| {
        l.line(&format!("if (hd_s < {stop_at}) {{ break; }}"));
        l.block("if (hd_t < hd_s)", |l| {
            l.line("let hd_o = hd_t + hd_s;");
            l.line(&format!("var hd_mine = {};", sh.load("hd_t")));
            l.line(&format!("let hd_other = {};", sh.load("hd_o")));
            if let Some(a) = ix_sh {
                l.line(&format!("var hd_mix = {};", a.load("hd_t")));
                l.line(&format!("let hd_oix = {};", a.load("hd_o")));
            }
            l.line(&tree_fold(("hd_mine", "hd_mix"), ("hd_other", "hd_oix")));
            l.line(&format!("{{ {} }}", sh.store("hd_t", "hd_mine").join(" ")));
            if let Some(a) = ix_sh {
                l.line(&format!("{{ {} }}", a.store("hd_t", "hd_mix").join(" ")));
            }
        });
        l.line("workgroupBarrier();");
        l.line("hd_s = hd_s >> 1u;");
    });
    l.line(&format!("if (hd_s >= {stop_at}) {{ hd_cut = true; }}"));
    // The result, from lane 0 (with shuffles: after the last levels in the first subgroup).
    let write = |g: &Gen<'_>, l: &mut Lines, v: &str, vix: &str| {
        if arg {
            l.line(&store(g, out, "hd_c", v, acc));
            if let Some(o) = outix {
                l.line(&store(g, o, "hd_c", vix, Type::U32));
            }
        } else {
            l.line(&store(g, out, "hd_c", v, acc));
        }
    };
    if shuffle {
        l.block("if (hg_lidx < hg_sgsize)", |l| {
            l.line(&format!("var hd_v = {};", sh.load("hd_t")));
            l.line(&format!(
                "var hd_vix = {};",
                ix_sh.map_or("0u".to_string(), |a| a.load("hd_t"))
            ));
            l.block("loop", |l| {
                l.line("if (hd_s == 0u) { break; }");
                l.line("let hd_other = subgroupShuffleDown(hd_v, hd_s);");
                l.line("let hd_oix = subgroupShuffleDown(hd_vix, hd_s);");
                l.block("if (hd_t < hd_s)", |l| {
                    l.line(&tree_fold(("hd_v", "hd_vix"), ("hd_other", "hd_oix")));
                });
                l.line("hd_s = hd_s >> 1u;");
            });
            l.line("if (hd_s != 0u) { hd_cut = true; }");
            l.block("if (hd_t == 0u)", |l| write(g, l, "hd_v", "hd_vix"));
        });
    } else {
        l.block("if (hd_t == 0u)", |l| {
            l.line(&format!("let hd_v = {};", sh.load("0u")));
            let vix = ix_sh.map_or("0u".to_string(), |a| a.load("0u"));
            l.line(&format!("let hd_vix = {vix};"));
            write(g, l, "hd_v", "hd_vix");
        });
    }
    l.text
}

fn lane(g: &mut Gen<'_>, p: &ReducePattern, generic_call: &str) -> String {
    let (c, acc) = (p.combine, p.acc);
    let f64_ok = g.opts.float64;
    let (x, out) = (0usize, 1usize);
    let (off, rlen, inner, n) = (scalar(2), scalar(3), scalar(4), scalar(5));
    let [bx, by, bz] = g.opts.block;
    let ty = reg_type(acc);
    let mut l = Lines::new(1);
    l.line(&format!(
        "let hd_gid = (hd_ctaid.x * {bx}u + hg_lid.x) + (hd_ctaid.y * {by}u + hg_lid.y) * (hg_nctaid.x * {bx}u) + (hd_ctaid.z * {bz}u + hg_lid.z) * (hg_nctaid.x * {bx}u * hg_nctaid.y * {by}u);"
    ));
    l.line(&format!("if (hd_gid >= {n}) {{ return; }}"));
    let div = binary(BinaryOp::Div, Type::U32, "hd_gid", &inner, false);
    let rem = binary(BinaryOp::Rem, Type::U32, "hd_gid", &inner, false);
    l.line(&format!("let hd_o = {div};"));
    l.line(&format!("let hd_in = {rem};"));
    l.line(&format!(
        "var hd_idx = hd_o * ({rlen} * {inner}) + hd_in + {off};"
    ));
    if g.opts.bounds_checks {
        // This lane's accesses: out at gid, x at idx + r·inner for r < rlen (no wrap).
        l.line(&format!(
            "var hd_safe = hd_gid < {};",
            g.arrays[out].len_expr()
        ));
        l.block(&format!("if ({rlen} != 0u)"), |l| {
            l.line(&format!(
                "let hd_span = select(({rlen} - 1u) <= (0xffffffffu - hd_idx) / {inner}, true, {inner} == 0u);"
            ));
            l.line(&format!(
                "hd_safe = hd_safe && hd_span && hd_idx + ({rlen} - 1u) * {inner} < {};",
                g.arrays[x].len_expr()
            ));
        });
        // No barriers: a lane that cannot be proved in bounds runs the generic code alone.
        l.line(&format!(
            "if (!hd_safe) {{ hg_generic({generic_call}); return; }}"
        ));
    }
    l.line(&format!("var hd_acc: {ty} = {};", init(c, acc)));
    l.line("var hd_best = 0u;");
    l.line("var hd_r = 0u;");
    l.line(&format!(
        "let hd_full = {rlen} & {:#x}u;",
        !(LANE_UNROLL - 1)
    ));
    let u = LANE_UNROLL;
    l.block("loop", |l| {
        l.line("if (hd_r >= hd_full) { break; }");
        l.line("let hd_i0 = hd_idx;");
        for k in 1..u {
            l.line(&format!("let hd_i{k} = hd_i{} + {inner};", k - 1));
        }
        for k in 0..u {
            l.line(&format!(
                "let hd_x{k} = {};",
                load(g, x, &format!("hd_i{k}"), acc)
            ));
        }
        for k in 0..u {
            let (xk, rk) = (format!("hd_x{k}"), format!("(hd_r + {k}u)"));
            l.line(&fold(c, acc, "hd_acc", &xk, Some(("hd_best", &rk)), f64_ok));
        }
        l.line(&format!("hd_idx = hd_i{} + {inner};", u - 1));
        l.line(&format!("hd_r = hd_r + {u}u;"));
    });
    l.line("if (hd_r < hd_full) { hd_cut = true; }");
    l.block("loop", |l| {
        l.line(&format!("if (hd_r >= {rlen}) {{ break; }}"));
        l.line(&format!("let hd_x = {};", load(g, x, "hd_idx", acc)));
        l.line(&fold(
            c,
            acc,
            "hd_acc",
            "hd_x",
            Some(("hd_best", "hd_r")),
            f64_ok,
        ));
        l.line(&format!("hd_idx = hd_idx + {inner};"));
        l.line("hd_r = hd_r + 1u;");
    });
    l.line(&format!("if (hd_r < {rlen}) {{ hd_cut = true; }}"));
    if c.is_arg() {
        l.line(&store(g, out, "hd_gid", "hd_best", Type::U32));
    } else {
        l.line(&store(g, out, "hd_gid", "hd_acc", acc));
    }
    l.text
}
