//! Dedicated WGSL for the fused row kernels (`hologram_compiler::patterns::softmax_templates`:
//! softmax, log-softmax, the attention variants and their backward ops; see
//! [`super::dedicated`] for what "dedicated" keeps and changes).
//!
//! A workgroup of [`ROW_BLOCK`] lanes handles `ROW_BLOCK / G` rows, `G` lanes per row; lane `l`
//! visits elements `l, l + G, ...` of its row. Rows of up to `resident · G` elements are loaded
//! once into registers (one variable per element, the passes unrolled when the WGSL is
//! written; the loads of a live row under one branch, each at its index clamped to the row's
//! last element, the elements past the end replaced by the padding: one branch per element
//! cost NVIDIA's Vulkan compiler about 2.5 us per launch); longer rows are read once per pass,
//! eight elements in flight per step. The group
//! reductions are the template's: every lane writes its value, the group's first eight lanes
//! fold `G / 8` slots each in order, every lane folds the eight partials in order (two
//! barriers per reduction). Same operations in the same order as the template, so the same
//! bits as the generic code.

use hologram_compiler::patterns::softmax_templates::{RowOp, PARTIALS, ROW_UNROLL};
use hologram_compiler::patterns::RowPattern;
use hologram_isa::semantics::Value;
use hologram_isa::{BinaryOp, Type, UnaryOp};

use super::dedicated::{scalar, Lines};
use super::fold::fold;
use super::inst::{binary, unary};
use super::math::opaque;
use super::types::{literal, reg_type};
use super::{CodegenError, Gen};
use hologram_compiler::patterns::reduce_templates::Combine;

/// Lanes per workgroup of the row kernels (the templates' `ROW_BLOCK`).
pub const ROW_BLOCK: u32 = hologram_compiler::patterns::softmax_templates::ROW_BLOCK;

/// Buffer and scalar parameters of the template for `op`.
pub fn params(op: RowOp) -> (usize, usize) {
    let extra = usize::from(op.is_attention()) + usize::from(op == RowOp::CausalAttentionSoftmax);
    if op.is_backward() {
        (3, 4 + extra)
    } else {
        (2, 3 + extra)
    }
}

/// Float arithmetic in the compute type, as the generic code writes each instruction.
struct Arith {
    t: Type,
    f64_ok: bool,
}

impl Arith {
    fn add(&self, a: &str, b: &str) -> String {
        binary(BinaryOp::Add, self.t, a, b, self.f64_ok)
    }
    /// The subtrahend is shielded, as the generic code shields every float `sub`'s.
    fn sub(&self, a: &str, b: &str) -> String {
        binary(BinaryOp::Sub, self.t, a, &opaque(self.t, b), self.f64_ok)
    }
    fn mul(&self, a: &str, b: &str) -> String {
        binary(BinaryOp::Mul, self.t, a, b, self.f64_ok)
    }
    fn div(&self, a: &str, b: &str) -> String {
        binary(BinaryOp::Div, self.t, a, b, self.f64_ok)
    }
    fn unary(&self, op: UnaryOp, a: &str) -> String {
        unary(op, self.t, a, self.f64_ok)
    }
    fn lit(&self, x: f64) -> String {
        let v = if self.t == Type::F64 {
            Value::F64(x)
        } else {
            Value::F32(x as f32)
        };
        literal(v, true)
    }
}

/// The body of the dedicated entry point.
pub(crate) fn body(
    g: &mut Gen<'_>,
    p: &RowPattern,
    generic_call: &str,
) -> Result<String, CodegenError> {
    let op = p.op;
    let (st, acc) = (p.storage, p.acc());
    let a = Arith {
        t: acc,
        f64_ok: g.opts.float64,
    };
    let ty = reg_type(acc);
    let gl = p.g;
    let rows_per = ROW_BLOCK / gl;
    let backward = op.is_backward();
    let attention = op.is_attention();
    let causal = op == RowOp::CausalAttentionSoftmax;
    // Parameters: inputs (array, offset), the output, rows, cols, scale, qlen.
    let (inputs, y, s0): (Vec<(usize, String)>, usize, usize) = if backward {
        (vec![(0, scalar(3)), (1, scalar(4))], 2, 5)
    } else {
        (vec![(0, scalar(2))], 1, 3)
    };
    let (rows, cols) = (scalar(s0), scalar(s0 + 1));
    let scale = scalar(s0 + 2);
    let qlen = scalar(s0 + 3);
    let np = g.k.params.len();
    let (sred, spart) = (np, np + 1);
    let resident = p.resident as usize;
    let guarded = resident > 0;

    let mut l = Lines::new(1);
    l.line("let hd_t = hg_lid.x;");
    l.line(&format!("let hd_grp = hd_t >> {}u;", gl.trailing_zeros()));
    l.line(&format!("let hd_l = hd_t & {}u;", gl - 1));
    l.line(&format!("let hd_row = hd_ctaid.x * {rows_per}u + hd_grp;"));
    l.line(&format!("let hd_live = hd_row < {rows};"));
    l.line(&format!("let hd_len = select(0u, {cols}, hd_live);"));
    l.line(&format!("let hd_rowbase = hd_row * {cols};"));
    if g.opts.bounds_checks {
        // The workgroup's live rows [first, first + live) read each input at
        // off + [first·cols, end) and write y at [first·cols, end), end = (first + live)·cols.
        l.line(&format!("let hd_first = hd_ctaid.x * {rows_per}u;"));
        l.line(&format!(
            "var hd_safe = hd_ctaid.x <= {}u && {cols} <= {}u;",
            u32::MAX / rows_per - 1,
            u32::MAX - ROW_UNROLL * ROW_BLOCK
        ));
        let mut ends = format!("hd_end <= {}", g.arrays[y].len_expr());
        for (arr, off) in &inputs {
            let len = g.arrays[*arr].len_expr();
            ends.push_str(&format!(" && hd_end <= {len} && {off} <= {len} - hd_end"));
        }
        l.block(
            &format!("if (hd_safe && hd_first < {rows} && {cols} != 0u)"),
            |l| {
                l.line(&format!(
                    "let hd_nrows = min(hd_first + {rows_per}u, {rows});"
                ));
                l.line(&format!("hd_safe = hd_nrows <= 0xffffffffu / {cols};"));
                l.block("if (hd_safe)", |l| {
                    l.line(&format!("let hd_end = hd_nrows * {cols};"));
                    l.line(&format!("hd_safe = {ends};"));
                });
            },
        );
        l.line(&format!(
            "if (!hd_safe) {{ hg_generic({generic_call}); return; }}"
        ));
    }
    if attention && !backward {
        // Columns at or past `hd_lim` are masked (the row's end; for causal rows, past the
        // query's position).
        if causal {
            let qi = binary(BinaryOp::Rem, Type::U32, "hd_row", &qlen, false);
            l.line(&format!("let hd_lim = min({qi} + 1u, hd_len);"));
        } else {
            l.line("let hd_lim = hd_len;");
        }
    }
    // Registers of the elements a step handles: inputs v<i>_<k>, exponentials x<k>, indexes
    // e<k>, and (resident rows) in<k>.
    let slots = resident.max(ROW_UNROLL as usize);
    for k in 0..slots {
        for i in 0..inputs.len() {
            l.line(&format!("var hd_v{i}_{k}: {ty};"));
        }
        l.line(&format!("var hd_x{k}: {ty};"));
        l.line(&format!("var hd_e{k}: u32;"));
        l.line(&format!("var hd_in{k}: bool;"));
    }
    l.line("var hd_pos: u32;");

    // The forward ops' value of element k: the input or, for attention, the scaled score
    // (-inf where masked).
    let ninf = a.lit(f64::NEG_INFINITY);
    let value = |l: &mut Lines, k: usize| -> String {
        if !attention {
            return format!("hd_v0_{k}");
        }
        l.line(&format!("let hd_c{k} = hd_e{k} - hd_rowbase;"));
        l.line(&format!("let hd_ok{k} = hd_c{k} < hd_lim;"));
        l.line(&format!(
            "let hd_sx{k} = {};",
            a.mul(&format!("hd_v0_{k}"), &scale)
        ));
        l.line(&format!(
            "let hd_z{k} = select({ninf}, hd_sx{k}, hd_ok{k});"
        ));
        format!("hd_z{k}")
    };
    // Resident rows store element k only where it is in the row, unless the lane's elements
    // all are (`whole`, see `final_pass`).
    let whole = std::cell::Cell::new(false);
    let store = |g: &Gen<'_>, l: &mut Lines, k: usize| {
        let arr = &g.arrays[y];
        let v = g.convert(st, acc, &format!("hd_r{k}"));
        let s = format!("{{ {} }}", arr.store(&format!("hd_e{k}"), &v).join(" "));
        if guarded && !whole.get() {
            l.line(&format!("if (hd_in{k}) {s}"));
        } else {
            l.line(&s);
        }
    };
    // The pass that stores: for resident rows written twice, without the per-element tests
    // where every element of the lane is in the row (the common case: a row as long as the
    // registers hold) and with them elsewhere; a branch per store cost NVIDIA's Vulkan
    // compiler about 0.7 us per launch.
    let final_pass = |l: &mut Lines, emit: &mut dyn FnMut(&mut Lines)| {
        if !guarded {
            return emit(l);
        }
        l.line(&format!(
            "let hd_whole = hd_l + {}u < hd_len;",
            (resident as u32 - 1) * gl
        ));
        whole.set(true);
        l.block("if (hd_whole)", &mut *emit);
        whole.set(false);
        l.block("else", &mut *emit);
    };

    let mut pass = PassGen {
        inputs: &inputs,
        st,
        acc,
        g: gl,
        resident,
        loaded: false,
    };
    let zero = a.lit(0.0);
    if !backward {
        l.line(&format!("var hd_m: {ty} = {ninf};"));
        pass.pass(g, &mut l, &mut |_g, l, k| {
            let v = value(l, k);
            l.line(&fold(Combine::Max, acc, "hd_m", &v, None, a.f64_ok));
        });
        group_reduce(g, &mut l, Combine::Max, "hd_m", acc, gl, (sred, spart));
        l.line(&format!("var hd_s: {ty} = {zero};"));
        pass.pass(g, &mut l, &mut |_g, l, k| {
            let v = value(l, k);
            l.line(&format!("let hd_d{k} = {};", a.sub(&v, "hd_m")));
            l.line(&format!(
                "hd_x{k} = {};",
                a.unary(UnaryOp::Exp, &format!("hd_d{k}"))
            ));
            l.line(&format!("hd_s = {};", a.add("hd_s", &format!("hd_x{k}"))));
        });
        group_reduce(g, &mut l, Combine::Sum, "hd_s", acc, gl, (sred, spart));
        if op == RowOp::LogSoftmax {
            l.line(&format!("let hd_lse = {};", a.unary(UnaryOp::Log, "hd_s")));
        }
        final_pass(&mut l, &mut |l| {
            pass.pass(g, l, &mut |g, l, k| {
                if op != RowOp::LogSoftmax {
                    // A resident row still holds its exponentials from the sum's pass.
                    if !guarded {
                        let v = value(l, k);
                        l.line(&format!("let hd_d{k} = {};", a.sub(&v, "hd_m")));
                        l.line(&format!(
                            "hd_x{k} = {};",
                            a.unary(UnaryOp::Exp, &format!("hd_d{k}"))
                        ));
                    }
                    l.line(&format!(
                        "let hd_r{k} = {};",
                        a.div(&format!("hd_x{k}"), "hd_s")
                    ));
                } else {
                    let v = value(l, k);
                    l.line(&format!("let hd_d{k} = {};", a.sub(&v, "hd_m")));
                    l.line(&format!(
                        "let hd_r{k} = {};",
                        a.sub(&format!("hd_d{k}"), "hd_lse")
                    ));
                }
                store(g, l, k);
            })
        });
    } else {
        let soft = op != RowOp::LogSoftmaxBackward;
        l.line(&format!("var hd_s: {ty} = {zero};"));
        pass.pass(g, &mut l, &mut |_g, l, k| {
            let (yk, gk) = (format!("hd_v0_{k}"), format!("hd_v1_{k}"));
            if soft {
                l.line(&format!("let hd_p{k} = {};", a.mul(&gk, &yk)));
                l.line(&format!("hd_s = {};", a.add("hd_s", &format!("hd_p{k}"))));
            } else {
                l.line(&format!("hd_s = {};", a.add("hd_s", &gk)));
            }
        });
        group_reduce(g, &mut l, Combine::Sum, "hd_s", acc, gl, (sred, spart));
        final_pass(&mut l, &mut |l| {
            pass.pass(g, l, &mut |g, l, k| {
                let (yk, gk) = (format!("hd_v0_{k}"), format!("hd_v1_{k}"));
                if attention {
                    l.line(&format!("let hd_d{k} = {};", a.sub(&gk, "hd_s")));
                    l.line(&format!(
                        "let hd_u{k} = {};",
                        a.mul(&yk, &format!("hd_d{k}"))
                    ));
                    l.line(&format!(
                        "let hd_r{k} = {};",
                        a.mul(&format!("hd_u{k}"), &scale)
                    ));
                } else if soft {
                    l.line(&format!("let hd_d{k} = {};", a.sub(&gk, "hd_s")));
                    l.line(&format!(
                        "let hd_r{k} = {};",
                        a.mul(&yk, &format!("hd_d{k}"))
                    ));
                } else {
                    l.line(&format!("let hd_ex{k} = {};", a.unary(UnaryOp::Exp, &yk)));
                    l.line(&format!(
                        "let hd_p{k} = {};",
                        a.mul(&format!("hd_ex{k}"), "hd_s")
                    ));
                    l.line(&format!(
                        "let hd_r{k} = {};",
                        a.sub(&gk, &format!("hd_p{k}"))
                    ));
                }
                store(g, l, k);
            })
        });
    }
    Ok(l.text)
}

/// The passes over a lane's elements of its row (the template's `Gen::pass`).
struct PassGen<'a> {
    /// (buffer parameter, its offset parameter's value) of each input.
    inputs: &'a [(usize, String)],
    st: Type,
    acc: Type,
    g: u32,
    resident: usize,
    loaded: bool,
}

type Body<'b> = dyn FnMut(&Gen<'_>, &mut Lines, usize) + 'b;

impl PassGen<'_> {
    /// Loads of elements `0..count` of the step at `hd_pos` into `hd_v<i>_<k>`, then the bodies
    /// in element order.
    fn loads(&self, gen: &Gen<'_>, l: &mut Lines, count: usize, body: &mut Body<'_>) {
        l.line("hd_e0 = hd_rowbase + hd_pos;");
        for k in 1..count {
            l.line(&format!("hd_e{k} = hd_e{} + {}u;", k - 1, self.g));
        }
        for (i, (arr, off)) in self.inputs.iter().enumerate() {
            let a = &gen.arrays[*arr];
            for k in 0..count {
                let ld = a.load(&format!("(hd_e{k} + {off})"));
                l.line(&format!(
                    "hd_v{i}_{k} = {};",
                    gen.convert(self.acc, self.st, &ld)
                ));
            }
        }
        for k in 0..count {
            l.block("", |l| body(gen, l, k));
        }
    }

    fn pass(&mut self, gen: &Gen<'_>, l: &mut Lines, body: &mut Body<'_>) {
        if self.resident > 0 {
            return self.resident_pass(gen, l, body);
        }
        let (g, u) = (self.g, ROW_UNROLL);
        l.line("hd_pos = hd_l;");
        l.block("loop", |l| {
            l.line(&format!(
                "if (hd_pos + {}u >= hd_len) {{ break; }}",
                (u - 1) * g
            ));
            self.loads(gen, l, u as usize, body);
            l.line(&format!("hd_pos = hd_pos + {}u;", u * g));
        });
        l.line(&format!(
            "if (hd_pos + {}u < hd_len) {{ hd_cut = true; }}",
            (u - 1) * g
        ));
        l.block("loop", |l| {
            l.line("if (hd_pos >= hd_len) { break; }");
            self.loads(gen, l, 1, body);
            l.line(&format!("hd_pos = hd_pos + {g}u;"));
        });
        l.line("if (hd_pos < hd_len) { hd_cut = true; }");
    }

    /// Resident rows: the first pass loads lane `l`'s elements `l + k·G` (padding past the
    /// row's end: -inf for the forward ops, 0 for the backward ones); every pass runs the
    /// bodies for every element.
    fn resident_pass(&mut self, gen: &Gen<'_>, l: &mut Lines, body: &mut Body<'_>) {
        let e = self.resident;
        if !self.loaded {
            self.loaded = true;
            let pad_value = if self.inputs.len() == 1 {
                f64::NEG_INFINITY
            } else {
                0.0
            };
            let pad = Arith {
                t: self.acc,
                f64_ok: gen.opts.float64,
            }
            .lit(pad_value);
            let raw_ty = reg_type(self.acc);
            for k in 0..e {
                l.line(&format!(
                    "hd_in{k} = hd_l + {}u < hd_len;",
                    k as u32 * self.g
                ));
                l.line(&format!(
                    "hd_e{k} = hd_rowbase + (hd_l + {}u);",
                    k as u32 * self.g
                ));
            }
            // One branch for the row, not one per element: every element of a live row is
            // loaded at its index clamped to the row's last element (inside the buffer, as the
            // row is), and the elements past the row's end are replaced by the padding. A
            // register not loaded reads as zero, as in the template.
            for (i, _) in self.inputs.iter().enumerate() {
                for k in 0..e {
                    l.line(&format!("var hd_w{i}_{k}: {raw_ty};"));
                }
            }
            l.block("if (hd_len != 0u)", |l| {
                l.line("let hd_lastel = hd_rowbase + (hd_len - 1u);");
                for (i, (arr, off)) in self.inputs.iter().enumerate() {
                    let a = &gen.arrays[*arr];
                    for k in 0..e {
                        let at = format!("(min(hd_e{k}, hd_lastel) + {off})");
                        let ld = gen.convert(self.acc, self.st, &a.load(&at));
                        l.line(&format!("hd_w{i}_{k} = {ld};"));
                    }
                }
            });
            for i in 0..self.inputs.len() {
                for k in 0..e {
                    l.line(&format!(
                        "hd_v{i}_{k} = select({pad}, hd_w{i}_{k}, hd_in{k});"
                    ));
                }
            }
        }
        for k in 0..e {
            l.block("", |l| body(gen, l, k));
        }
    }
}

/// The template's group reduction of `reg` (`c` is Sum or Max) over the row's `g` lanes,
/// leaving the result in `reg` of every lane of the group.
fn group_reduce(
    gen: &Gen<'_>,
    l: &mut Lines,
    c: Combine,
    reg: &str,
    acc: Type,
    g: u32,
    (sred, spart): (usize, usize),
) {
    let f64_ok = gen.opts.float64;
    let (red, part) = (&gen.arrays[sred], &gen.arrays[spart]);
    let parts = PARTIALS.min(g);
    let fan = g / parts;
    l.line(&format!("{{ {} }}", red.store("hd_t", reg).join(" ")));
    l.line("workgroupBarrier();");
    l.block(&format!("if (hd_l < {parts}u)"), |l| {
        l.line(&format!("var hd_mine = {};", red.load("hd_t")));
        for w in 1..fan {
            l.line(&format!(
                "let hd_other{w} = {};",
                red.load(&format!("(hd_t + {}u)", w * parts))
            ));
        }
        for w in 1..fan {
            l.line(&fold(
                c,
                acc,
                "hd_mine",
                &format!("hd_other{w}"),
                None,
                f64_ok,
            ));
        }
        l.line(&format!(
            "{{ {} }}",
            part.store(&format!("(hd_grp * {parts}u + hd_l)"), "hd_mine")
                .join(" ")
        ));
    });
    l.line("workgroupBarrier();");
    l.block("", |l| {
        l.line(&format!("let hd_pbase = hd_grp * {parts}u;"));
        l.line(&format!("{reg} = {};", part.load("hd_pbase")));
        for w in 1..parts {
            l.line(&format!(
                "let hd_other{w} = {};",
                part.load(&format!("(hd_pbase + {w}u)"))
            ));
        }
        for w in 1..parts {
            l.line(&fold(c, acc, reg, &format!("hd_other{w}"), None, f64_ok));
        }
    });
}
