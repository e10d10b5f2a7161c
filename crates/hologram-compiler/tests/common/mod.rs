//! A generator of random valid kernels, and a runner that executes them on the CPU backend.

#![allow(dead_code)]

use hologram_backends::{Backend, BufferArg, CpuBackend, KernelArg, LaunchConfig};
use hologram_isa::semantics::Value;
use hologram_isa::{Kernel, Type};

/// Lanes per launch (one block, so atomics are deterministic).
pub const LANES: u32 = 64;
/// Registers each output buffer holds per lane.
pub const SLOTS: usize = 8;

/// Types the generator uses.
pub const TYPES: [Type; 8] = [
    Type::U32,
    Type::I32,
    Type::F32,
    Type::F64,
    Type::U8,
    Type::I64,
    Type::F16,
    Type::BF16,
];

/// A small deterministic RNG (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

fn name(t: Type) -> &'static str {
    t.name()
}

struct Gen {
    rng: Rng,
    lines: Vec<String>,
    regs: Vec<Vec<String>>, // per TYPES index
    preds: Vec<String>,
    counter: usize,
    label: usize,
}

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("%{prefix}{}", self.counter)
    }

    fn literal(&mut self, t: Type) -> String {
        let r = &mut self.rng;
        match t {
            Type::U8 => return format!("{}", r.below(256)),
            Type::U32 => *r.pick(&["0", "1", "2", "7", "31", "255", "4294967295", "123456"]),
            Type::I32 => *r.pick(&[
                "0",
                "1",
                "-1",
                "3",
                "-7",
                "2147483647",
                "-2147483648",
                "1000",
            ]),
            Type::I64 => *r.pick(&["0", "1", "-1", "5", "9223372036854775807", "-12345678901"]),
            _ => *r.pick(&[
                "0.0", "1.0", "-1.0", "0.5", "2.0", "-0.0", "3.25", "inf", "nan", "1e-3",
            ]),
        }
        .to_string()
    }

    /// An operand of type `t`: a register (usually), a literal, or a parameter/special.
    fn operand(&mut self, ti: usize) -> String {
        let t = TYPES[ti];
        let roll = self.rng.below(10);
        if roll < 7 && !self.regs[ti].is_empty() {
            let regs = self.regs[ti].clone();
            return self.rng.pick(&regs).clone();
        }
        if roll == 7 {
            match t {
                Type::U32 => {
                    return self
                        .rng
                        .pick(&["%gid", "%tid.x", "n", "%ntid.x"])
                        .to_string()
                }
                Type::F32 => return "s".to_string(),
                Type::I32 => return "k".to_string(),
                _ => {}
            }
        }
        self.literal(t)
    }

    fn pred(&mut self) -> String {
        if self.preds.is_empty() || self.rng.chance(30) {
            let ti = self.rng.below(TYPES.len());
            let t = TYPES[ti];
            let cmp = *self.rng.pick(&["eq", "ne", "lt", "le", "gt", "ge"]);
            let (a, b) = (self.operand(ti), self.operand(ti));
            let p = self.fresh("p");
            self.lines
                .push(format!("    setp.{cmp}.{} {p}, {a}, {b};", name(t)));
            self.preds.push(p.clone());
            return p;
        }
        let preds = self.preds.clone();
        self.rng.pick(&preds).clone()
    }

    /// A destination of type index `ti`: a new register or, sometimes, an existing one.
    fn dst(&mut self, ti: usize) -> String {
        if !self.regs[ti].is_empty() && self.rng.chance(35) {
            let regs = self.regs[ti].clone();
            return self.rng.pick(&regs).clone();
        }
        let r = self.fresh(&format!("{}_", name(TYPES[ti])));
        self.regs[ti].push(r.clone());
        r
    }

    fn instruction(&mut self) {
        let ti = self.rng.below(TYPES.len());
        let t = TYPES[ti];
        let ty = name(t);
        let guard = if self.rng.chance(15) {
            let p = self.pred();
            format!("@{}{p} ", if self.rng.chance(50) { "!" } else { "" })
        } else {
            String::new()
        };
        let is_float = t.is_float();
        let kind = self.rng.below(10);
        let line = match kind {
            0..=2 => {
                let mut ops = vec!["add", "sub", "mul", "div", "rem", "min", "max"];
                if is_float {
                    ops.push("pow");
                } else {
                    ops.extend(["and", "or", "xor", "shl", "shr"]);
                }
                let op = *self.rng.pick(&ops);
                let (a, b) = (self.operand(ti), self.operand(ti));
                let d = self.dst(ti);
                format!("{op}.{ty} {d}, {a}, {b};")
            }
            3 => {
                let mut ops = vec!["abs", "neg"];
                if is_float {
                    ops.extend([
                        "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "floor", "round", "erf",
                        "rsqrt",
                    ]);
                } else {
                    ops.push("not");
                }
                if matches!(t, Type::U32 | Type::U8) {
                    ops.retain(|o| *o == "not");
                }
                let op = *self.rng.pick(&ops);
                let a = self.operand(ti);
                let d = self.dst(ti);
                format!("{op}.{ty} {d}, {a};")
            }
            4 => {
                let op = if is_float && self.rng.chance(50) {
                    "fma"
                } else {
                    "mad"
                };
                let (a, b, c) = (self.operand(ti), self.operand(ti), self.operand(ti));
                let d = self.dst(ti);
                format!("{op}.{ty} {d}, {a}, {b}, {c};")
            }
            5 => {
                let fi = self.rng.below(TYPES.len());
                let a = self.operand(fi);
                let d = self.dst(ti);
                format!("cvt.{ty}.{} {d}, {a};", name(TYPES[fi]))
            }
            6 => {
                let p = self.pred();
                let (a, b) = (self.operand(ti), self.operand(ti));
                let d = self.dst(ti);
                format!("selp.{ty} {d}, {a}, {b}, {p};")
            }
            7 => {
                let a = self.operand(ti);
                let d = self.dst(ti);
                format!("mov.{ty} {d}, {a};")
            }
            8 => {
                let d = self.dst(ti);
                let idx = if self.rng.chance(50) {
                    "%gid".to_string()
                } else {
                    format!("{}", self.rng.below(LANES as usize))
                };
                format!("ld.{ty} {d}, in_{ty}[{idx}];")
            }
            _ => {
                // Recompute something already computed: value numbering's food.
                let (a, b) = (self.operand(ti), self.operand(ti));
                let d1 = self.dst(ti);
                let d2 = self.dst(ti);
                format!("add.{ty} {d1}, {a}, {b};\n    add.{ty} {d2}, {b}, {a};")
            }
        };
        self.lines.push(format!("    {guard}{line}"));
    }

    fn block(&mut self, len: usize, depth: usize) {
        for _ in 0..len {
            match self.rng.below(14) {
                0 if depth < 2 => {
                    // Forward branch over a block.
                    let p = self.pred();
                    self.label += 1;
                    let l = format!("SKIP{}", self.label);
                    self.lines.push(format!("@{p} bra {l};"));
                    let saved = self.regs.clone();
                    self.block(3, depth + 1);
                    self.regs = saved;
                    self.lines.push(format!("{l}:"));
                }
                1 if depth < 2 => {
                    // A counted loop.
                    self.label += 1;
                    let l = format!("LOOP{}", self.label);
                    let c = self.fresh("c");
                    let k = 1 + self.rng.below(3);
                    self.lines.push(format!("    mov.u32 {c}, {k};"));
                    self.lines.push(format!("{l}:"));
                    let saved = self.regs.clone();
                    self.block(3, depth + 1);
                    self.regs = saved;
                    self.lines.push(format!("    loop {c}, {l};"));
                }
                _ => self.instruction(),
            }
        }
    }
}

/// A random valid kernel (its text).
pub fn random_program(seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        lines: Vec::new(),
        regs: vec![Vec::new(); TYPES.len()],
        preds: Vec::new(),
        counter: 0,
        label: 0,
    };
    let mut head = vec![".kernel random".to_string()];
    for t in TYPES {
        head.push(format!(".param .buf.{0} in_{0}", name(t)));
        head.push(format!(".param .buf.{0} out_{0} .rw", name(t)));
    }
    head.push(".param .u32 n".into());
    head.push(".param .f32 s".into());
    head.push(".param .i32 k".into());
    head.push(".param .buf.u32 hist .rw".into());
    // Start every type with a value loaded from its input.
    for (ti, t) in TYPES.iter().enumerate() {
        let r = g.dst(ti);
        g.lines
            .push(format!("    ld.{0} {r}, in_{0}[%gid];", name(*t)));
    }
    let len = 6 + g.rng.below(30);
    g.block(len, 0);
    if g.rng.chance(30) {
        let v = g.operand(0);
        let o = g.fresh("old");
        g.lines.push(format!("    and.u32 {o}, {v}, 7;"));
        g.lines.push(format!("    atom.add.u32 {o}, hist[{o}], 1;"));
    }
    // Store up to SLOTS registers of every type.
    for (ti, t) in TYPES.iter().enumerate() {
        let regs = g.regs[ti].clone();
        for (j, r) in regs.iter().rev().take(SLOTS).enumerate() {
            let idx = g.fresh("ix");
            g.lines
                .push(format!("    mad.u32 {idx}, %gid, {SLOTS}, {j};"));
            g.lines
                .push(format!("    st.{0} out_{0}[{idx}], {r};", name(*t)));
        }
    }
    head.extend(g.lines);
    head.join("\n") + "\n"
}

/// Runs a kernel on fixed pseudo-random inputs; returns every output buffer's bytes, or the
/// error text.
pub fn run(cpu: &CpuBackend, kernel: &Kernel, seed: u64) -> Result<Vec<Vec<u8>>, String> {
    let compiled = cpu
        .compile(&hologram_compiler::Canonical::as_written(kernel).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let mut rng = Rng::new(seed ^ 0xABCDEF);
    let mut args = Vec::new();
    let mut outs = Vec::new();
    for p in &kernel.params {
        let arg = match (p.name.as_str(), p.ty()) {
            ("n", _) => KernelArg::Scalar(Value::U32(LANES - 3)),
            ("s", _) => KernelArg::Scalar(Value::F32(1.5)),
            ("k", _) => KernelArg::Scalar(Value::I32(-3)),
            (name, ty) => {
                let elems = if name.starts_with("out") {
                    LANES as usize * SLOTS
                } else if name == "hist" {
                    8
                } else {
                    LANES as usize
                };
                let bytes = elems * ty.size_bytes();
                let mut data = vec![0u8; bytes];
                if name.starts_with("in") {
                    for chunk in data.chunks_mut(ty.size_bytes()) {
                        let v = rng.next();
                        // Mostly small, well-behaved values; sometimes raw bits (NaNs, extremes).
                        let bits = if rng.chance(80) {
                            let small = (v % 17) as i64 - 8;
                            Value::from_imm(hologram_isa::Imm::Int(small as i128), ty).to_bits()
                        } else {
                            v
                        };
                        chunk.copy_from_slice(&bits.to_le_bytes()[..ty.size_bytes()]);
                    }
                }
                let mem = cpu.allocate(bytes).map_err(|e| e.to_string())?;
                cpu.copy_in(&mem, 0, &data).map_err(|e| e.to_string())?;
                if !name.starts_with("in") {
                    outs.push(mem.clone());
                }
                KernelArg::Buffer(BufferArg::whole(mem))
            }
        };
        args.push(arg);
    }
    cpu.launch(&compiled, &LaunchConfig::linear(1, LANES), &args)
        .map_err(|e| e.to_string())?;
    let out_types: Vec<Type> = kernel
        .params
        .iter()
        .filter(|p| p.is_buffer() && !p.name.starts_with("in"))
        .map(|p| p.ty())
        .collect();
    let mut result = Vec::new();
    for (m, ty) in outs.into_iter().zip(out_types) {
        let mut out = vec![0u8; m.size()];
        cpu.copy_out(&m, 0, &mut out).map_err(|e| e.to_string())?;
        normalize_nans(&mut out, ty);
        result.push(out);
    }
    Ok(result)
}

/// Replaces every NaN by one canonical NaN: which NaN an operation returns when several operands
/// are NaN is unspecified in the ISA (as in IEEE 754), so results compare bit for bit otherwise.
pub fn normalize_nans(bytes: &mut [u8], ty: Type) {
    if !ty.is_float() {
        return;
    }
    let size = ty.size_bytes();
    for chunk in bytes.chunks_mut(size) {
        let mut b = [0u8; 8];
        b[..size].copy_from_slice(chunk);
        let bits = u64::from_le_bytes(b);
        let nan = match ty {
            Type::F16 => half::f16::from_bits(bits as u16).is_nan(),
            Type::BF16 => half::bf16::from_bits(bits as u16).is_nan(),
            Type::F32 => f32::from_bits(bits as u32).is_nan(),
            _ => f64::from_bits(bits).is_nan(),
        };
        if nan {
            chunk.fill(0xff);
        }
    }
}
