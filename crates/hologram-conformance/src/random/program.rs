//! The text of a random valid kernel.
//!
//! Registers are named after their type (`%f16_3`), so every write agrees with the first. Values
//! whose bits differ legitimately between backends never reach another instruction: a
//! transcendental's result goes straight to `approx`, an atomic's old value to a register nobody
//! reads, and a float is made NaN-free before its bits are taken (a NaN's payload is
//! unspecified). Loops have bounded trip counts, barriers sit at the top level only, and each
//! lane stores to elements of its own, so every valid outcome is one outcome.

use std::collections::HashMap;
use std::fmt::Write;

use hologram_isa::Type;

use super::spec::Shape;
use super::Rng;

/// Elements of each output buffer per lane.
const SLOTS: u32 = 6;
/// Elements of `approx` per lane.
const APPROX_SLOTS: u32 = 4;
/// Elements of `.scratch` per lane.
const SCRATCH: u32 = 8;
/// Counters of `hist` and `histi`.
const HIST: u32 = 16;

const ALL_TYPES: [Type; 12] = [
    Type::U32,
    Type::I32,
    Type::F32,
    Type::F64,
    Type::U8,
    Type::I8,
    Type::U16,
    Type::I16,
    Type::I64,
    Type::U64,
    Type::F16,
    Type::BF16,
];

/// A buffer parameter.
#[derive(Debug, Clone)]
pub(crate) struct Buffer {
    pub name: String,
    pub ty: Type,
    pub len: u32,
    pub input: bool,
}

/// A generated program and what its spec needs to know.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    pub text: String,
    pub buffers: Vec<Buffer>,
    pub scalars: Vec<(String, Type)>,
    /// The value of scalar `n` (lanes with `%gid >= n` exit first in map-shaped programs).
    pub n: u32,
    /// Relative tolerance of `approx` element `i`: entry `i % len`.
    pub approx_tolerance: Vec<f64>,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    types: Vec<Type>,
    /// Registers holding exact values, by type.
    regs: HashMap<Type, Vec<String>>,
    preds: Vec<String>,
    lines: Vec<String>,
    counter: u32,
    labels: u32,
    in_len: u32,
    /// A map-shaped program: straight-line, loads and stores at `%gid`, no guards.
    map: bool,
    shared: bool,
    scratch: bool,
    subs: u32,
    /// The atomic operation on `hist` and on `histi`.
    atomic_ops: [&'static str; 2],
    /// Tolerance per approx slot (the loosest type stored there).
    approx_slots: Vec<f64>,
    approx_tol: Vec<f64>,
}

fn t(ty: Type) -> &'static str {
    ty.name()
}

impl Gen<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("%{prefix}{}", self.counter)
    }

    fn emit(&mut self, line: String) {
        self.lines.push(format!("    {line}"));
    }

    fn label(&mut self, name: &str) -> String {
        self.labels += 1;
        format!("{name}{}", self.labels)
    }

    /// A literal of type `ty` that fits it.
    fn literal(&mut self, ty: Type) -> String {
        let choices: &[&str] = match ty {
            Type::U8 => return self.rng.below(256).to_string(),
            Type::I8 => &["0", "1", "-1", "127", "-128", "5", "-77"],
            Type::U16 => &["0", "1", "65535", "256", "4097", "3"],
            Type::I16 => &["0", "1", "-1", "7", "-300", "32767", "-32768", "255"],
            Type::U32 => &["0", "1", "2", "3", "7", "31", "255", "4294967295", "65537"],
            Type::I32 => &[
                "0",
                "1",
                "-1",
                "3",
                "-7",
                "2147483647",
                "-2147483648",
                "1000",
            ],
            Type::U64 => &["0", "1", "5", "18446744073709551615", "4294967296", "63"],
            Type::I64 => &["0", "1", "-1", "5", "9223372036854775807", "-12345678901"],
            Type::F16 => &[
                "0.0", "-0.0", "1.0", "-1.5", "0.5", "3.25", "inf", "-inf", "nan", "65504.0",
                "6e-8", "1e-3",
            ],
            _ => &[
                "0.0", "-0.0", "1.0", "-1.5", "0.5", "3.25", "inf", "-inf", "nan", "1e-3", "1e30",
                "1e-40", "-7.0",
            ],
        };
        self.rng.pick(choices).to_string()
    }

    /// A source of type `ty`: usually a register, else a literal, parameter or special.
    fn operand(&mut self, ty: Type) -> String {
        let roll = self.rng.below(10);
        let regs = self.regs.get(&ty).cloned().unwrap_or_default();
        if roll < 7 && !regs.is_empty() {
            return self.rng.pick(&regs).clone();
        }
        if roll == 7 {
            match ty {
                Type::U32 => {
                    let specials: &[&str] = if self.map {
                        &["%gid", "n"]
                    } else {
                        &[
                            "%gid",
                            "%tid.x",
                            "%tid.y",
                            "%ctaid.x",
                            "%ctaid.z",
                            "%ntid.x",
                            "%nctaid.y",
                            "%gid.y",
                            "%gid.z",
                            "n",
                        ]
                    };
                    return self.rng.pick(specials).to_string();
                }
                Type::I32 => return "k".into(),
                Type::F32 => return "s".into(),
                Type::F64 => return "d".into(),
                Type::I64 => return "q".into(),
                _ => {}
            }
        }
        self.literal(ty)
    }

    /// A destination of type `ty`: a new register, or sometimes one that exists.
    fn dst(&mut self, ty: Type) -> String {
        let regs = self.regs.get(&ty).cloned().unwrap_or_default();
        if !regs.is_empty() && self.rng.chance(30) {
            return self.rng.pick(&regs).clone();
        }
        let r = self.fresh(&format!("{}_", t(ty)));
        self.regs.entry(ty).or_default().push(r.clone());
        r
    }

    fn ty(&mut self) -> Type {
        *self.rng.pick(&self.types.clone())
    }

    fn pred(&mut self) -> String {
        if self.preds.is_empty() || self.rng.chance(35) {
            let ty = self.ty();
            let cmp = *self.rng.pick(&["eq", "ne", "lt", "le", "gt", "ge"]);
            let (a, b) = (self.operand(ty), self.operand(ty));
            let p = self.fresh("p");
            self.emit(format!("setp.{cmp}.{} {p}, {a}, {b};", t(ty)));
            self.preds.push(p.clone());
            return p;
        }
        self.rng.pick(&self.preds.clone()).clone()
    }

    /// A u32 register holding an index in `0..len`.
    fn index_below(&mut self, len: u32) -> String {
        let v = self.operand(Type::U32);
        let ix = self.fresh("ix");
        self.emit(format!("rem.u32 {ix}, {v}, {len};"));
        ix
    }

    /// A float register of type `ty` that is not a NaN (its bits are then the same everywhere).
    fn nan_free(&mut self, ty: Type) -> String {
        let x = self.operand(ty);
        let p = self.fresh("nan");
        let y = self.fresh(&format!("{}_", t(ty)));
        self.emit(format!("setp.ne.{0} {p}, {x}, {x};", t(ty)));
        self.emit(format!("selp.{0} {y}, 0.0, {x}, {p};", t(ty)));
        y
    }

    /// One straight-line instruction (or a short sequence) computing an exact value.
    fn compute(&mut self) {
        let ty = self.ty();
        let name = t(ty);
        let guard = if !self.map && self.rng.chance(12) {
            let p = self.pred();
            format!("@{}{p} ", if self.rng.chance(50) { "!" } else { "" })
        } else {
            String::new()
        };
        match self.rng.below(12) {
            0..=3 => {
                let mut ops = vec!["add", "sub", "mul", "div", "rem", "min", "max"];
                if ty.is_int() {
                    ops.extend(["and", "or", "xor", "shl", "shr"]);
                }
                let op = *self.rng.pick(&ops);
                let (a, b) = (self.operand(ty), self.operand(ty));
                let d = self.dst(ty);
                self.emit(format!("{guard}{op}.{name} {d}, {a}, {b};"));
            }
            4 => {
                let ops: &[&str] = if ty.is_float() {
                    if ty == Type::F64 {
                        &["abs", "neg", "sqrt", "floor", "ceil", "round", "trunc"]
                    } else {
                        &[
                            "abs", "neg", "sqrt", "rsqrt", "floor", "ceil", "round", "trunc",
                        ]
                    }
                } else if ty.is_signed_int() {
                    &["abs", "neg", "not"]
                } else {
                    &["not"]
                };
                let op = *self.rng.pick(ops);
                let a = self.operand(ty);
                let d = self.dst(ty);
                self.emit(format!("{guard}{op}.{name} {d}, {a};"));
            }
            5 => {
                let op = if ty.is_float() && self.rng.chance(50) {
                    "fma"
                } else {
                    "mad"
                };
                let (a, b, c) = (self.operand(ty), self.operand(ty), self.operand(ty));
                let d = self.dst(ty);
                self.emit(format!("{guard}{op}.{name} {d}, {a}, {b}, {c};"));
            }
            6 => {
                let from = self.ty();
                let a = self.operand(from);
                let d = self.dst(ty);
                self.emit(format!("{guard}cvt.{name}.{} {d}, {a};", t(from)));
            }
            7 => {
                let same: Vec<Type> = self
                    .types
                    .iter()
                    .copied()
                    .filter(|f| f.bits() == ty.bits() && *f != ty)
                    .collect();
                if same.is_empty() {
                    let a = self.operand(ty);
                    let d = self.dst(ty);
                    self.emit(format!("{guard}mov.{name} {d}, {a};"));
                    return;
                }
                let from = *self.rng.pick(&same);
                let a = if from.is_float() {
                    self.nan_free(from)
                } else {
                    self.operand(from)
                };
                let d = self.dst(ty);
                self.emit(format!("{guard}bitcast.{name}.{} {d}, {a};", t(from)));
            }
            8 => {
                let p = self.pred();
                let (a, b) = (self.operand(ty), self.operand(ty));
                let d = self.dst(ty);
                self.emit(format!("{guard}selp.{name} {d}, {a}, {b}, {p};"));
            }
            9 => {
                let d = self.dst(ty);
                let index = if self.rng.chance(if self.map { 75 } else { 50 }) {
                    "%gid".to_string()
                } else {
                    self.index_below(self.in_len)
                };
                self.emit(format!("{guard}ld.{name} {d}, in_{name}[{index}];"));
            }
            10 => self.approx(),
            _ => {
                let a = self.operand(ty);
                let d = self.dst(ty);
                self.emit(format!("{guard}mov.{name} {d}, {a};"));
            }
        }
    }

    /// A transcendental of an exact value, stored straight to `approx`.
    fn approx(&mut self) {
        let floats: Vec<Type> = self
            .types
            .iter()
            .copied()
            .filter(|t| matches!(t, Type::F32 | Type::F16 | Type::BF16))
            .collect();
        if floats.is_empty() {
            return;
        }
        let ty = *self.rng.pick(&floats);
        let name = t(ty);
        let op = *self.rng.pick(&[
            "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "sigmoid", "erf",
            "pow",
        ]);
        let a = self.operand(ty);
        let r = self.fresh("approx");
        if op == "pow" {
            let b = self.operand(ty);
            self.emit(format!("{op}.{name} {r}, {a}, {b};"));
        } else {
            self.emit(format!("{op}.{name} {r}, {a};"));
        }
        let stored = if ty == Type::F32 {
            r
        } else {
            let w = self.fresh("approx");
            self.emit(format!("cvt.f32.{name} {w}, {r};"));
            w
        };
        let slot = self.rng.below(APPROX_SLOTS as usize);
        // Relative tolerance: a few ulps of the computing type.
        let tol = match ty {
            Type::F32 => 16.0 * f32::EPSILON as f64,
            Type::F16 => 2.0 * 2f64.powi(-10),
            _ => 2.0 * 2f64.powi(-7),
        };
        self.approx_slots[slot] = self.approx_slots[slot].max(tol);
        let o = self.fresh("ao");
        let index = if self.map {
            "%gid".to_string()
        } else {
            self.emit(format!("mad.u32 {o}, %gid, {APPROX_SLOTS}, {slot};"));
            o
        };
        self.emit(format!("st.f32 approx[{index}], {stored};"));
    }

    /// A store of an exact value to one of this lane's output elements.
    fn store(&mut self) {
        let ty = self.ty();
        let name = t(ty);
        let v = self.operand(ty);
        let index = if self.map {
            "%gid".to_string()
        } else {
            let o = self.fresh("o");
            let slot = self.rng.below(SLOTS as usize);
            self.emit(format!("mad.u32 {o}, %gid, {SLOTS}, {slot};"));
            o
        };
        let guard = if !self.map && self.rng.chance(15) {
            let p = self.pred();
            format!("@{p} ")
        } else {
            String::new()
        };
        self.emit(format!("{guard}st.{name} out_{name}[{index}], {v};"));
    }

    /// Order-independent read-modify-writes: one operation per array (add and min, say, do not
    /// commute with each other); the old values are never read.
    fn atomic(&mut self) {
        let signed = self.rng.chance(40);
        let (ty, arr, op) = if signed {
            (Type::I32, "histi", self.atomic_ops[1])
        } else {
            (Type::U32, "hist", self.atomic_ops[0])
        };
        let ix = self.index_below(HIST);
        let v = self.operand(ty);
        let junk = self.fresh("old");
        self.emit(format!("atom.{op}.{} {junk}, {arr}[{ix}], {v};", t(ty)));
    }

    fn scratch_access(&mut self) {
        let ix = self.index_below(SCRATCH);
        if self.rng.chance(50) {
            let v = self.operand(Type::U32);
            self.emit(format!("st.u32 sc[{ix}], {v};"));
        } else {
            let d = self.dst(Type::U32);
            self.emit(format!("ld.u32 {d}, sc[{ix}];"));
        }
    }

    /// Statements of a block; `depth` bounds nesting.
    fn block(&mut self, len: usize, depth: usize, in_sub: bool) {
        for _ in 0..len {
            let roll = self.rng.below(20);
            match roll {
                0 if depth < 2 => self.if_else(depth, in_sub),
                1 if depth < 2 => self.counted_loop(depth, in_sub),
                2 if depth < 2 => self.while_loop(depth, in_sub),
                3 | 4 => self.store(),
                5 => self.atomic(),
                6 if self.scratch => self.scratch_access(),
                7 if !in_sub && self.subs > 0 && self.rng.chance(50) => {
                    let k = self.rng.below(self.subs as usize);
                    let guard = if self.rng.chance(30) {
                        format!("@{} ", self.pred())
                    } else {
                        String::new()
                    };
                    self.emit(format!("{guard}call SUB{k};"));
                }
                8 if depth > 0 && self.rng.chance(15) => {
                    // At the top level `ret` ends the lane like `exit`.
                    let p = self.pred();
                    let end = if !in_sub && self.rng.chance(30) {
                        "ret"
                    } else {
                        "exit"
                    };
                    self.emit(format!("@{p} {end};"));
                }
                9 if self.rng.chance(20) => {
                    let scope = *self.rng.pick(&["block", "device"]);
                    self.emit(format!("fence.{scope};"));
                }
                _ => self.compute(),
            }
        }
    }

    /// Registers defined in a nested block may not have been written on every path; they stay
    /// usable (they read zero where unwritten, on every backend).
    fn if_else(&mut self, depth: usize, in_sub: bool) {
        let p = self.pred();
        let (else_l, end_l) = (self.label("ELSE"), self.label("END"));
        self.lines.push(format!("@!{p} bra {else_l};"));
        let n = 1 + self.rng.below(4);
        self.block(n, depth + 1, in_sub);
        if self.rng.chance(60) {
            self.emit(format!("bra {end_l};"));
            self.lines.push(format!("{else_l}:"));
            let n = 1 + self.rng.below(4);
            self.block(n, depth + 1, in_sub);
            self.lines.push(format!("{end_l}:"));
        } else {
            self.lines.push(format!("{else_l}:"));
        }
    }

    fn counted_loop(&mut self, depth: usize, in_sub: bool) {
        let c = self.fresh("c");
        let l = self.label("LOOP");
        let trips = 1 + self.rng.below(4);
        self.emit(format!("mov.u32 {c}, {trips};"));
        self.lines.push(format!("{l}:"));
        let n = 1 + self.rng.below(4);
        self.block(n, depth + 1, in_sub);
        self.emit(format!("loop {c}, {l};"));
    }

    /// A loop whose trip count (0..7) depends on the lane's data: lanes diverge and reconverge.
    fn while_loop(&mut self, depth: usize, in_sub: bool) {
        let v = self.operand(Type::U32);
        let w = self.fresh("w");
        let done = self.fresh("wd");
        let (top, end) = (self.label("WHILE"), self.label("WEND"));
        self.emit(format!("and.u32 {w}, {v}, 7;"));
        self.lines.push(format!("{top}:"));
        self.emit(format!("setp.eq.u32 {done}, {w}, 0;"));
        self.lines.push(format!("@{done} bra {end};"));
        let n = 1 + self.rng.below(3);
        self.block(n, depth + 1, in_sub);
        self.emit(format!("sub.u32 {w}, {w}, 1;"));
        self.emit(format!("bra {top};"));
        self.lines.push(format!("{end}:"));
    }

    /// Every live lane writes its `.shared` element, waits, reads another lane's, and waits
    /// again before the next round of writes.
    fn exchange(&mut self, lane: &str, block_lanes: u32) {
        let v = self.operand(Type::U32);
        self.emit(format!("st.u32 sh[{lane}], {v};"));
        self.emit("barrier;".into());
        let off = self.fresh("nb");
        let step = 1 + self.rng.below(block_lanes as usize);
        self.emit(format!("add.u32 {off}, {lane}, {step};"));
        self.emit(format!("rem.u32 {off}, {off}, {block_lanes};"));
        let d = self.dst(Type::U32);
        self.emit(format!("ld.u32 {d}, sh[{off}];"));
        self.emit("barrier;".into());
    }
}

/// A random program for a launch of `shape`.
pub(crate) fn generate(rng: &mut Rng, seed: u64, shape: &Shape) -> Program {
    let lanes = shape.lanes();
    let mut types = vec![Type::U32];
    let extra = 2 + rng.below(4);
    while types.len() < 1 + extra {
        let ty = *rng.pick(&ALL_TYPES);
        if !types.contains(&ty) {
            types.push(ty);
        }
    }
    let map = rng.chance(33);
    let in_len = lanes.max(64);
    let mut g = Gen {
        rng,
        types: types.clone(),
        regs: HashMap::new(),
        preds: Vec::new(),
        lines: Vec::new(),
        counter: 0,
        labels: 0,
        in_len,
        map,
        shared: false,
        scratch: false,
        subs: 0,
        atomic_ops: ["add", "add"],
        approx_slots: vec![0.0; APPROX_SLOTS as usize],
        approx_tol: Vec::new(),
    };
    if !map {
        for i in 0..2 {
            g.atomic_ops[i] = *g.rng.pick(&["add", "min", "max"]);
        }
        g.shared = g.rng.chance(30);
        g.scratch = g.rng.chance(30);
        g.subs = if g.rng.chance(30) {
            1 + g.rng.below(2) as u32
        } else {
            0
        };
    }
    let n = if g.rng.chance(70) {
        lanes - g.rng.below(lanes as usize / 4 + 1) as u32
    } else {
        lanes
    };
    // Out of bounds now and then: an input shorter than the lanes that load it at %gid.
    let short_input = g.rng.chance(4);

    if map && g.rng.chance(80) {
        g.emit("setp.ge.u32 %pn, %gid, n;".into());
        g.lines.push("@%pn exit;".into());
    }
    for ty in types.clone() {
        let r = g.dst(ty);
        g.emit(format!("ld.{0} {r}, in_{0}[%gid];", t(ty)));
    }
    let lane = "%lane".to_string();
    if g.shared {
        g.emit(format!("mad.u32 {lane}, %tid.z, %ntid.y, %tid.y;"));
        g.emit(format!("mad.u32 {lane}, {lane}, %ntid.x, %tid.x;"));
    }
    let len = 8 + g.rng.below(30);
    if map {
        for _ in 0..len {
            match g.rng.below(8) {
                0 => g.store(),
                _ => g.compute(),
            }
        }
    } else {
        let rounds = if g.shared { 1 + g.rng.below(2) } else { 1 };
        for _ in 0..rounds {
            g.block(len / rounds, 0, false);
            if g.shared {
                g.exchange(&lane, shape.block_lanes());
            }
        }
    }
    // Store the last value of every type, so that most computations are observed.
    for ty in types.clone() {
        if let Some(r) = g.regs.get(&ty).and_then(|r| r.last()).cloned() {
            let index = if map {
                "%gid".to_string()
            } else {
                let o = g.fresh("o");
                g.emit(format!("mad.u32 {o}, %gid, {SLOTS}, {};", SLOTS - 1));
                o
            };
            g.emit(format!("st.{0} out_{0}[{index}], {r};", t(ty)));
        }
    }
    if !map {
        g.emit("exit;".into());
        for k in 0..g.subs {
            g.lines.push(format!("SUB{k}:"));
            let n = 2 + g.rng.below(5);
            g.block(n, 1, true);
            g.emit("ret;".into());
        }
    }
    g.approx_tol = g.approx_slots.clone();

    let per_lane = if map { 1 } else { SLOTS };
    let mut buffers = Vec::new();
    for (i, ty) in types.iter().enumerate() {
        let len = if short_input && i == types.len() - 1 {
            lanes / 2
        } else {
            in_len
        };
        buffers.push(Buffer {
            name: format!("in_{}", t(*ty)),
            ty: *ty,
            len,
            input: true,
        });
        buffers.push(Buffer {
            name: format!("out_{}", t(*ty)),
            ty: *ty,
            len: lanes * per_lane,
            input: false,
        });
    }
    let approx_per_lane = if map { 1 } else { APPROX_SLOTS };
    buffers.push(Buffer {
        name: "approx".into(),
        ty: Type::F32,
        len: lanes * approx_per_lane,
        input: false,
    });
    if !map {
        for (name, ty) in [("hist", Type::U32), ("histi", Type::I32)] {
            buffers.push(Buffer {
                name: name.into(),
                ty,
                len: HIST,
                input: false,
            });
        }
    }
    let scalars = vec![
        ("n".to_string(), Type::U32),
        ("k".to_string(), Type::I32),
        ("s".to_string(), Type::F32),
        ("d".to_string(), Type::F64),
        ("q".to_string(), Type::I64),
    ];

    let mut text = String::new();
    let _ = writeln!(
        text,
        "// random program, seed {seed} (crates/hologram-conformance/src/random)"
    );
    let _ = writeln!(text, ".kernel rnd_{seed}");
    for b in &buffers {
        let rw = if b.input { "" } else { " .rw" };
        let _ = writeln!(text, ".param .buf.{} {}{rw}", t(b.ty), b.name);
    }
    for (name, ty) in &scalars {
        let _ = writeln!(text, ".param .{} {name}", t(*ty));
    }
    if g.shared {
        let _ = writeln!(text, ".shared .u32 sh[{}]", shape.block_lanes());
    }
    if g.scratch {
        let _ = writeln!(text, ".scratch .u32 sc[{SCRATCH}]");
    }
    for l in &g.lines {
        text.push_str(l);
        text.push('\n');
    }
    // Element i of `approx` is slot i % len of this list; a slot nothing was stored to has
    // tolerance 0 (it stays zero on every backend).
    let approx_tolerance = if map {
        vec![g.approx_tol.iter().copied().fold(0.0, f64::max)]
    } else {
        g.approx_tol.clone()
    };
    Program {
        text,
        buffers,
        scalars,
        n,
        approx_tolerance,
    }
}
