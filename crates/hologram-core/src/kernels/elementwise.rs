//! One kernel for a whole element-wise expression: loads every input with its own layout
//! (contiguous, broadcast scalar or strided), evaluates the graph in registers, stores once.

use std::fmt::Write;

use hologram_isa::Type;

use super::{lit, literal};
use crate::dtype::DType;
use crate::tensor::expr::{BinaryFn, Graph, Node, NodeId, UnaryFn};
use crate::tensor::layout::{contiguous_strides, Layout};

/// How an input (or the output) is addressed relative to the output's element index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// Element `i` is at `i` (offset 0: the index is `%gid` itself, which the CPU backend
    /// recognizes as an element-wise map).
    Dense,
    /// Element `i` is at `offset + i`.
    Contiguous,
    /// Every element is at `offset` (a broadcast scalar).
    Scalar,
    /// Element at coordinates `c` is at `offset + Σ c[d]·stride[d]`.
    Strided,
}

impl Access {
    pub fn of(layout: &Layout) -> Access {
        if layout.strides.iter().all(|&s| s == 0) {
            Access::Scalar
        } else if layout.strides == contiguous_strides(&layout.shape) && layout.offset == 0 {
            Access::Dense
        } else if layout.strides == contiguous_strides(&layout.shape) {
            Access::Contiguous
        } else {
            Access::Strided
        }
    }
}

/// Everything that determines the kernel text (shapes, strides and offsets are parameters, so
/// one kernel serves every size).
pub(crate) struct Spec<'a> {
    pub graph: &'a Graph,
    pub root: NodeId,
    pub inputs: Vec<(DType, Access)>,
    pub rank: usize,
    pub out: (DType, Access),
}

struct Gen<'a> {
    spec: &'a Spec<'a>,
    text: String,
    tmp: usize,
}

fn compute(d: DType) -> Type {
    d.compute()
}

impl Gen<'_> {
    fn line(&mut self, s: String) {
        self.text.push_str("    ");
        self.text.push_str(&s);
        self.text.push('\n');
    }

    fn tmp(&mut self) -> String {
        self.tmp += 1;
        format!("%t{}", self.tmp)
    }

    fn reg(n: NodeId) -> String {
        format!("%v{n}")
    }

    /// Operand text for node `n`: scalars become literals.
    fn opnd(&self, n: NodeId) -> String {
        match &self.spec.graph.nodes[n as usize] {
            (Node::Scalar(v), d) => {
                let t = compute(*d);
                match (v, t) {
                    (hologram_isa::semantics::Value::Pred(_), _) => literal(*v),
                    _ => {
                        let widened = hologram_isa::semantics::eval::cvt(*v, t).unwrap_or(*v);
                        literal(widened)
                    }
                }
            }
            _ => Self::reg(n),
        }
    }

    /// The element index register for an access kind.
    fn index(&mut self, name: &str, access: Access) -> String {
        if access == Access::Dense {
            return "%gid".to_string();
        }
        let idx = self.tmp();
        match access {
            Access::Dense => {}
            Access::Contiguous => self.line(format!("add.u32 {idx}, %gid, o{name};")),
            Access::Scalar => self.line(format!("mov.u32 {idx}, o{name};")),
            Access::Strided => {
                self.line(format!("mov.u32 {idx}, o{name};"));
                for d in 0..self.spec.rank {
                    self.line(format!("mad.u32 {idx}, %c{d}, s{name}_{d}, {idx};"));
                }
            }
        }
        idx
    }

    fn node(&mut self, n: NodeId) {
        let (node, dt) = self.spec.graph.nodes[n as usize].clone();
        let t = compute(dt);
        let v = Self::reg(n);
        match node {
            Node::Scalar(_) => {}
            Node::Input(k) => {
                let (idt, access) = self.spec.inputs[k as usize];
                let idx = self.index(&k.to_string(), access);
                let st = idt.storage();
                if st == t {
                    self.line(format!("ld.{st} {v}, in{k}[{idx}];"));
                } else {
                    let raw = self.tmp();
                    self.line(format!("ld.{st} {raw}, in{k}[{idx}];"));
                    if t == Type::Pred {
                        self.line(format!("setp.ne.{st} {v}, {raw}, 0;"));
                    } else {
                        self.line(format!("cvt.{t}.{st} {v}, {raw};"));
                    }
                }
            }
            Node::Unary(f, a) => self.unary(f, t, &v, a),
            Node::Binary(f, a, b) => {
                let (x, y) = (self.opnd(a), self.opnd(b));
                let op = match f {
                    BinaryFn::Add => "add",
                    BinaryFn::Sub => "sub",
                    BinaryFn::Mul => "mul",
                    BinaryFn::Div => "div",
                    BinaryFn::Rem => "rem",
                    BinaryFn::Pow => "pow",
                    BinaryFn::Min => "min",
                    BinaryFn::Max => "max",
                    BinaryFn::And => "and",
                    BinaryFn::Or => "or",
                    BinaryFn::Xor => "xor",
                };
                self.line(format!("{op}.{t} {v}, {x}, {y};"));
            }
            Node::Compare(c, a, b) => {
                let ct = compute(self.spec.graph.dtype(a));
                let (x, y) = (self.opnd(a), self.opnd(b));
                self.line(format!("setp.{}.{ct} {v}, {x}, {y};", c.name()));
            }
            Node::Where(c, a, b) => {
                let (p, x, y) = (self.opnd(c), self.opnd(a), self.opnd(b));
                self.line(format!("selp.{t} {v}, {x}, {y}, {p};"));
            }
            Node::Cast(a) => self.cast(a, dt, &v),
            Node::Index => self.line(format!("mov.u32 {v}, %gid;")),
            Node::Random { seed, normal } => self.random(seed, normal, &v),
        }
    }

    /// Murmur3's finalizer over (index, seed): a well-mixed u32 per element.
    fn hash(&mut self, salt: u32) -> String {
        let h = self.tmp();
        let t = self.tmp();
        self.line(format!("mad.u32 {h}, %gid, 2654435769, {salt};"));
        for (shift, mul) in [
            (16, Some(0x85EB_CA6Bu32)),
            (13, Some(0xC2B2_AE35)),
            (16, None),
        ] {
            self.line(format!("shr.u32 {t}, {h}, {shift};"));
            self.line(format!("xor.u32 {h}, {h}, {t};"));
            if let Some(m) = mul {
                self.line(format!("mul.u32 {h}, {h}, {m};"));
            }
        }
        h
    }

    /// A uniform f32 in [0, 1) (or (0, 1] with `open_low`) from a hash.
    fn unit(&mut self, salt: u32, open_low: bool) -> String {
        let h = self.hash(salt);
        let (top, f) = (self.tmp(), self.tmp());
        self.line(format!("shr.u32 {top}, {h}, 8;"));
        if open_low {
            self.line(format!("add.u32 {top}, {top}, 1;"));
        }
        self.line(format!("cvt.f32.u32 {f}, {top};"));
        self.line(format!("mul.f32 {f}, {f}, 5.960464477539063e-8;"));
        f
    }

    fn random(&mut self, seed: u64, normal: bool, v: &str) {
        let (lo, hi) = (seed as u32, (seed >> 32) as u32 ^ 0x68E3_1DA4);
        if !normal {
            let u = self.unit(lo, false);
            self.line(format!("mov.f32 {v}, {u};"));
            return;
        }
        let u1 = self.unit(lo, true);
        let u2 = self.unit(hi, false);
        let (l, r, c) = (self.tmp(), self.tmp(), self.tmp());
        self.line(format!("log.f32 {l}, {u1};"));
        self.line(format!("mul.f32 {l}, {l}, -2.0;"));
        self.line(format!("sqrt.f32 {r}, {l};"));
        self.line(format!("mul.f32 {c}, {u2}, 6.283185307179586;"));
        self.line(format!("cos.f32 {c}, {c};"));
        self.line(format!("mul.f32 {v}, {r}, {c};"));
    }

    fn unary(&mut self, f: UnaryFn, t: Type, v: &str, a: NodeId) {
        let x = self.opnd(a);
        let simple = |name: &str| format!("{name}.{t} {v}, {x};");
        let line = match f {
            UnaryFn::Abs => simple("abs"),
            UnaryFn::Neg => simple("neg"),
            UnaryFn::Sqrt => simple("sqrt"),
            UnaryFn::Rsqrt => simple("rsqrt"),
            UnaryFn::Exp => simple("exp"),
            UnaryFn::Log => simple("log"),
            UnaryFn::Sin => simple("sin"),
            UnaryFn::Cos => simple("cos"),
            UnaryFn::Tan => simple("tan"),
            UnaryFn::Tanh => simple("tanh"),
            UnaryFn::Sigmoid => simple("sigmoid"),
            UnaryFn::Erf => simple("erf"),
            UnaryFn::Floor => simple("floor"),
            UnaryFn::Ceil => simple("ceil"),
            UnaryFn::Round => simple("round"),
            UnaryFn::Trunc => simple("trunc"),
            UnaryFn::Not => simple("not"),
            UnaryFn::Relu => format!("max.{t} {v}, {x}, {};", lit(t, 0.0)),
            UnaryFn::Recip => format!("div.{t} {v}, {}, {x};", lit(t, 1.0)),
            UnaryFn::Square => format!("mul.{t} {v}, {x}, {x};"),
            UnaryFn::Silu => {
                let s = self.tmp();
                self.line(format!("sigmoid.{t} {s}, {x};"));
                format!("mul.{t} {v}, {x}, {s};")
            }
            UnaryFn::Gelu => {
                let (a1, a2, a3, a4) = (self.tmp(), self.tmp(), self.tmp(), self.tmp());
                self.line(format!(
                    "mul.{t} {a1}, {x}, {};",
                    lit(t, std::f64::consts::FRAC_1_SQRT_2)
                ));
                self.line(format!("erf.{t} {a2}, {a1};"));
                self.line(format!("add.{t} {a3}, {a2}, {};", lit(t, 1.0)));
                self.line(format!("mul.{t} {a4}, {x}, {a3};"));
                format!("mul.{t} {v}, {a4}, {};", lit(t, 0.5))
            }
        };
        self.line(line);
    }

    fn cast(&mut self, a: NodeId, to: DType, v: &str) {
        let from = self.spec.graph.dtype(a);
        let (ft, tt) = (compute(from), compute(to));
        let x = self.opnd(a);
        if ft == Type::Pred {
            self.line(format!(
                "selp.{tt} {v}, {}, {}, {x};",
                lit(tt, 1.0),
                lit(tt, 0.0)
            ));
        } else if tt == Type::Pred {
            self.line(format!("setp.ne.{ft} {v}, {x}, {};", lit(ft, 0.0)));
        } else if matches!(to, DType::F16 | DType::BF16) {
            // Compute type stays f32, but the value must be one the 16-bit type holds.
            let h = self.tmp();
            let st = to.storage();
            self.line(format!("cvt.{st}.{ft} {h}, {x};"));
            self.line(format!("cvt.{tt}.{st} {v}, {h};"));
        } else if ft == tt {
            self.line(format!("mov.{tt} {v}, {x};"));
        } else {
            self.line(format!("cvt.{tt}.{ft} {v}, {x};"));
        }
    }
}

/// The kernel text for a spec.
pub(crate) fn kernel_text(spec: &Spec<'_>) -> String {
    let mut head = String::from(".kernel elementwise\n");
    let strided =
        spec.inputs.iter().any(|(_, a)| *a == Access::Strided) || spec.out.1 == Access::Strided;
    for (k, (dt, access)) in spec.inputs.iter().enumerate() {
        let _ = writeln!(head, ".param .buf.{} in{k}", dt.storage());
        if *access != Access::Dense {
            let _ = writeln!(head, ".param .u32 o{k}");
        }
        if *access == Access::Strided {
            for d in 0..spec.rank {
                let _ = writeln!(head, ".param .u32 s{k}_{d}");
            }
        }
    }
    let _ = writeln!(head, ".param .buf.{} out .rw", spec.out.0.storage());
    if spec.out.1 != Access::Dense {
        let _ = writeln!(head, ".param .u32 oout");
    }
    if spec.out.1 == Access::Strided {
        for d in 0..spec.rank {
            let _ = writeln!(head, ".param .u32 sout_{d}");
        }
    }
    let _ = writeln!(head, ".param .u32 n");
    if strided {
        for d in 0..spec.rank {
            let _ = writeln!(head, ".param .u32 d{d}");
        }
    }
    let mut g = Gen {
        spec,
        text: String::new(),
        tmp: 0,
    };
    g.line("setp.ge.u32 %done, %gid, n;".into());
    g.text.push_str("@%done exit;\n");
    if strided {
        // Coordinates of element %gid in the output shape, last dimension fastest.
        g.line("mov.u32 %rest, %gid;".into());
        for d in (0..spec.rank).rev() {
            if d == 0 {
                g.line("mov.u32 %c0, %rest;".into());
            } else {
                g.line(format!("rem.u32 %c{d}, %rest, d{d};"));
                g.line(format!("div.u32 %rest, %rest, d{d};"));
            }
        }
    }
    // Nodes reachable from the root, in order.
    let mut needed = vec![false; spec.graph.nodes.len()];
    needed[spec.root as usize] = true;
    for i in (0..spec.graph.nodes.len()).rev() {
        if !needed[i] {
            continue;
        }
        let deps: Vec<NodeId> = match &spec.graph.nodes[i].0 {
            Node::Unary(_, a) | Node::Cast(a) => vec![*a],
            Node::Binary(_, a, b) | Node::Compare(_, a, b) => vec![*a, *b],
            Node::Where(c, a, b) => vec![*c, *a, *b],
            _ => vec![],
        };
        for d in deps {
            needed[d as usize] = true;
        }
    }
    for (i, &need) in needed.iter().enumerate() {
        if need {
            g.node(i as NodeId);
        }
    }
    let (odt, oaccess) = spec.out;
    let idx = g.index("out", oaccess);
    let root_dt = spec.graph.dtype(spec.root);
    let mut val = g.opnd(spec.root);
    let st = odt.storage();
    let ct = compute(root_dt);
    if matches!(spec.graph.nodes[spec.root as usize].0, Node::Scalar(_)) {
        // A constant root (fill): materialize it in a register of the compute type.
        let r = g.tmp();
        g.line(format!("mov.{ct} {r}, {val};"));
        val = r;
    }
    if ct == Type::Pred {
        let r = g.tmp();
        g.line(format!("selp.{st} {r}, 1, 0, {val};"));
        val = r;
    } else if ct != st {
        let r = g.tmp();
        g.line(format!("cvt.{st}.{ct} {r}, {val};"));
        val = r;
    }
    g.line(format!("st.{st} out[{idx}], {val};"));
    head + &g.text
}
