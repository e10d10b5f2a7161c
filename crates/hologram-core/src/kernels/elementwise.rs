//! One kernel for a whole element-wise expression: loads every input with its own layout
//! (contiguous, broadcast scalar or strided), evaluates the graph in registers, stores once.
//! The kernel is built as IR ([`ProgramBuilder`]) and declared an element-wise map, which the
//! compiler checks, so backends run it on their map paths.

use hologram_isa::semantics::Value;
use hologram_isa::{BinaryOp, CmpOp, Operand, Program, ProgramBuilder, Special, Type, UnaryOp};

use super::{imm, lit};
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
    /// One dimension walks the operand with stride 1, every other is broadcast (a bias over
    /// rows, a per-row or per-channel value): element `i` is at `offset + (i / p) % m`, without
    /// the division when `p` is 1 (`div` false) and without the remainder when the walked
    /// dimension is the outermost (`rem` false). No coordinates are computed.
    Broadcast { div: bool, rem: bool },
    /// Walks as input `j` (a [`Access::Broadcast`] of the same `p` and `m`, and an earlier
    /// input): element `i` is at `offset + (i / p) % m` with input `j`'s walk, computed once
    /// for both (a batch norm's per-channel mean, scale, shift... share it).
    BroadcastAs(u8),
}

impl Access {
    pub fn of(layout: &Layout) -> Access {
        if layout.strides.iter().all(|&s| s == 0) {
            Access::Scalar
        } else if let Some((p, _, rem)) = broadcast_walk(layout) {
            Access::Broadcast { div: p > 1, rem }
        } else if layout.strides != contiguous_strides(&layout.shape) {
            Access::Strided
        } else if layout.offset == 0 {
            Access::Dense
        } else {
            Access::Contiguous
        }
    }
}

/// For a layout that walks one dimension with stride 1 and broadcasts every other (size-1
/// dimensions aside): `(p, m, rem)`, element `i` being at `offset + (i / p) % m` (`rem` false
/// when no dimension outside the walked one has more than one element, so no remainder is
/// needed). None for any other layout, and for one that is plainly contiguous.
pub(crate) fn broadcast_walk(layout: &Layout) -> Option<(usize, usize, bool)> {
    let walked: Vec<usize> = (0..layout.shape.len())
        .filter(|&d| layout.shape[d] > 1 && layout.strides[d] != 0)
        .collect();
    let &[k] = walked.as_slice() else {
        return None;
    };
    if layout.strides[k] != 1 {
        return None;
    }
    let p: usize = layout.shape[k + 1..].iter().product();
    let rem = layout.shape[..k].iter().any(|&d| d > 1);
    if p == 1 && !rem {
        return None;
    }
    Some((p, layout.shape[k], rem))
}

/// Everything that determines the kernel text (shapes, strides and offsets are parameters, so
/// one kernel serves every size).
pub(crate) struct Spec<'a> {
    pub graph: &'a Graph,
    pub root: NodeId,
    pub inputs: smallvec::SmallVec<[(DType, Access); 8]>,
    pub rank: usize,
    pub out: (DType, Access),
    /// More outputs, each a root and its dtype, stored densely at `%gid` into buffers `out1`,
    /// `out2`, ... after `out` (only with a dense `out`): one kernel for several values of one
    /// shape, an optimizer's new parameter and moments.
    pub extra: smallvec::SmallVec<[(NodeId, DType); 2]>,
}

struct Gen<'a> {
    spec: &'a Spec<'a>,
    b: ProgramBuilder,
    tmp: usize,
    /// The register holding each broadcast input's walk `(i / p) % m`, once computed.
    walks: Vec<Option<String>>,
}

/// The instruction of an element-wise binary function.
pub(crate) fn isa_op(f: BinaryFn) -> BinaryOp {
    match f {
        BinaryFn::Add => BinaryOp::Add,
        BinaryFn::Sub => BinaryOp::Sub,
        BinaryFn::Mul => BinaryOp::Mul,
        BinaryFn::Div => BinaryOp::Div,
        BinaryFn::Rem => BinaryOp::Rem,
        BinaryFn::Pow => BinaryOp::Pow,
        BinaryFn::Min => BinaryOp::Min,
        BinaryFn::Max => BinaryOp::Max,
        BinaryFn::And => BinaryOp::And,
        BinaryFn::Or => BinaryOp::Or,
        BinaryFn::Xor => BinaryOp::Xor,
    }
}

fn compute(d: DType) -> Type {
    d.compute()
}

const GID: Special = Special::GidLinear;

impl Gen<'_> {
    fn tmp(&mut self) -> String {
        self.tmp += 1;
        format!("%t{}", self.tmp)
    }

    /// Stores node `root`'s value, converted to `odt`'s storage type, at `idx` of `array`.
    fn store(&mut self, root: NodeId, odt: DType, array: &str, idx: Operand<String>) {
        let root_dt = self.spec.graph.dtype(root);
        let mut val = self.opnd(root);
        let st = odt.storage();
        let ct = compute(root_dt);
        if matches!(self.spec.graph.nodes[root as usize].0, Node::Scalar(_)) {
            // A constant root (fill): materialize it in a register of the compute type.
            let r = self.tmp();
            self.b.mov(ct, &r, val);
            val = Operand::Reg(r[1..].to_string());
        }
        if ct == Type::Pred {
            let r = self.tmp();
            self.b.selp(st, &r, 1u32, 0u32, val);
            val = Operand::Reg(r[1..].to_string());
        } else if ct != st {
            let r = self.tmp();
            self.b.cvt(st, ct, &r, val);
            val = Operand::Reg(r[1..].to_string());
        }
        self.b.st(st, array, idx, val);
    }

    fn reg(n: NodeId) -> String {
        format!("%v{n}")
    }

    /// Operand for node `n`: scalars become parameters (see [`scalar_value`]) or literals.
    fn opnd(&self, n: NodeId) -> Operand<String> {
        match &self.spec.graph.nodes[n as usize] {
            (Node::Scalar(v), d) => match scalar_param_type(*v, *d) {
                Some(_) => Operand::Param(scalar_param(n)),
                None => imm(scalar_value(*v, *d)),
            },
            _ => Operand::Reg(Self::reg(n)[1..].to_string()),
        }
    }

    /// The element index operand for an access kind.
    fn index(&mut self, name: &str, access: Access) -> Operand<String> {
        if access == Access::Dense {
            return Operand::Special(GID);
        }
        let idx = self.tmp();
        let off = format!("o{name}");
        match access {
            Access::Dense => {}
            Access::Contiguous => {
                self.b.add(Type::U32, &idx, GID, off.as_str());
            }
            Access::Scalar => {
                self.b.mov(Type::U32, &idx, off.as_str());
            }
            Access::Broadcast { .. } | Access::BroadcastAs(_) => {
                let walked = self.walk(name, access);
                self.b.add(Type::U32, &idx, walked.as_str(), off.as_str());
            }
            Access::Strided => {
                self.b.mov(Type::U32, &idx, off.as_str());
                for d in 0..self.spec.rank {
                    let (c, s) = (format!("%c{d}"), format!("s{name}_{d}"));
                    self.b
                        .mad(Type::U32, &idx, c.as_str(), s.as_str(), idx.as_str());
                }
            }
        }
        Operand::Reg(idx[1..].to_string())
    }

    /// The register holding `(%gid / p) % m` for input `name` (an input number) of a broadcast
    /// access: computed once per walk, shared by the inputs that walk as it.
    fn walk(&mut self, name: &str, access: Access) -> String {
        let owner = match access {
            Access::BroadcastAs(j) => j as usize,
            _ => name.parse().unwrap_or(usize::MAX),
        };
        if let Some(Some(r)) = self.walks.get(owner) {
            return r.clone();
        }
        let Some(&(_, Access::Broadcast { div, rem })) = self.spec.inputs.get(owner) else {
            // `spec` is built so this cannot happen; %gid itself keeps the program valid.
            let t = self.tmp();
            self.b.mov(Type::U32, &t, GID);
            return t;
        };
        // Each step in a register of its own (written once: the CPU backend recognizes the
        // chain and loads whole runs, see its `native_walk`).
        let (p, m) = (format!("p{owner}"), format!("m{owner}"));
        let (q, r) = (self.tmp(), self.tmp());
        let walked = match (div, rem) {
            (true, true) => {
                self.b.div(Type::U32, &q, GID, p.as_str());
                self.b.rem(Type::U32, &r, q.as_str(), m.as_str());
                r
            }
            (true, false) => {
                self.b.div(Type::U32, &q, GID, p.as_str());
                q
            }
            (false, _) => {
                self.b.rem(Type::U32, &r, GID, m.as_str());
                r
            }
        };
        if let Some(slot) = self.walks.get_mut(owner) {
            *slot = Some(walked.clone());
        }
        walked
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
                let arr = format!("in{k}");
                if st == t {
                    self.b.ld(st, &v, &arr, idx);
                } else {
                    let raw = self.tmp();
                    self.b.ld(st, &raw, &arr, idx);
                    if t == Type::Pred {
                        self.b.setp(CmpOp::Ne, st, &v, raw.as_str(), 0u32);
                    } else {
                        self.b.cvt(t, st, &v, raw.as_str());
                    }
                }
            }
            Node::Unary(f, a) => self.unary(f, t, &v, a),
            Node::Binary(f, a, b) => {
                let (x, y) = (self.opnd(a), self.opnd(b));
                self.b.binary(isa_op(f), t, &v, x, y);
            }
            Node::Compare(c, a, b) => {
                let ct = compute(self.spec.graph.dtype(a));
                let (x, y) = (self.opnd(a), self.opnd(b));
                self.b.setp(c, ct, &v, x, y);
            }
            Node::Where(c, a, b) => {
                let (p, x, y) = (self.opnd(c), self.opnd(a), self.opnd(b));
                self.b.selp(t, &v, x, y, p);
            }
            Node::Cast(a) => self.cast(a, dt, &v),
            Node::Index => {
                self.b.mov(Type::U32, &v, GID);
            }
            Node::Random { seed, normal } => {
                let (lo, hi) = (seed as u32, (seed >> 32) as u32 ^ 0x68E3_1DA4);
                self.random(
                    Operand::Imm(hologram_isa::Imm::Int(lo as i128)),
                    Operand::Imm(hologram_isa::Imm::Int(hi as i128)),
                    normal,
                    &v,
                )
            }
            Node::RandomSalted { salt, normal } => {
                let lo = self.opnd(salt);
                let hi = self.tmp();
                self.b.xor(Type::U32, &hi, lo.clone(), 0x68E3_1DA4u32);
                self.random(lo, Operand::Reg(hi[1..].to_string()), normal, &v)
            }
        }
    }

    /// Murmur3's finalizer over (index, seed): a well-mixed u32 per element.
    fn hash(&mut self, salt: Operand<String>) -> String {
        let h = self.tmp();
        let t = self.tmp();
        let (hs, ts) = (h.as_str(), t.as_str());
        self.b.mad(Type::U32, hs, GID, 2654435769u32, salt);
        for (shift, mul) in [
            (16u32, Some(0x85EB_CA6Bu32)),
            (13, Some(0xC2B2_AE35)),
            (16, None),
        ] {
            self.b.shr(Type::U32, ts, hs, shift);
            self.b.xor(Type::U32, hs, hs, ts);
            if let Some(m) = mul {
                self.b.mul(Type::U32, hs, hs, m);
            }
        }
        h
    }

    /// A uniform f32 in [0, 1) (or (0, 1] with `open_low`) from a hash.
    fn unit(&mut self, salt: Operand<String>, open_low: bool) -> String {
        let h = self.hash(salt);
        let (top, f) = (self.tmp(), self.tmp());
        self.b.shr(Type::U32, &top, h.as_str(), 8u32);
        if open_low {
            self.b.add(Type::U32, &top, top.as_str(), 1u32);
        }
        self.b.cvt(Type::F32, Type::U32, &f, top.as_str());
        self.b
            .mul(Type::F32, &f, f.as_str(), 5.960464477539063e-8f64);
        f
    }

    fn random(&mut self, lo: Operand<String>, hi: Operand<String>, normal: bool, v: &str) {
        let f = Type::F32;
        if !normal {
            let u = self.unit(lo, false);
            self.b.mov(f, v, u.as_str());
            return;
        }
        let u1 = self.unit(lo, true);
        let u2 = self.unit(hi, false);
        let (l, r, c) = (self.tmp(), self.tmp(), self.tmp());
        let (l, r, c) = (l.as_str(), r.as_str(), c.as_str());
        self.b.unary(UnaryOp::Log, f, l, u1.as_str());
        self.b.mul(f, l, l, -2.0f64);
        self.b.unary(UnaryOp::Sqrt, f, r, l);
        self.b.mul(f, c, u2.as_str(), std::f64::consts::TAU);
        self.b.unary(UnaryOp::Cos, f, c, c);
        self.b.mul(f, v, r, c);
    }

    fn unary(&mut self, f: UnaryFn, t: Type, v: &str, a: NodeId) {
        let x = self.opnd(a);
        let simple = |op| Some(op);
        let op = match f {
            UnaryFn::Abs => simple(UnaryOp::Abs),
            UnaryFn::Neg => simple(UnaryOp::Neg),
            UnaryFn::Sqrt => simple(UnaryOp::Sqrt),
            UnaryFn::Rsqrt => simple(UnaryOp::Rsqrt),
            UnaryFn::Exp => simple(UnaryOp::Exp),
            UnaryFn::Log => simple(UnaryOp::Log),
            UnaryFn::Sin => simple(UnaryOp::Sin),
            UnaryFn::Cos => simple(UnaryOp::Cos),
            UnaryFn::Tan => simple(UnaryOp::Tan),
            UnaryFn::Tanh => simple(UnaryOp::Tanh),
            UnaryFn::Sigmoid => simple(UnaryOp::Sigmoid),
            UnaryFn::Erf => simple(UnaryOp::Erf),
            UnaryFn::Floor => simple(UnaryOp::Floor),
            UnaryFn::Ceil => simple(UnaryOp::Ceil),
            UnaryFn::Round => simple(UnaryOp::Round),
            UnaryFn::Trunc => simple(UnaryOp::Trunc),
            UnaryFn::Not => simple(UnaryOp::Not),
            _ => None,
        };
        if let Some(op) = op {
            self.b.unary(op, t, v, x);
            return;
        }
        match f {
            UnaryFn::Relu => {
                self.b.max(t, v, x, lit(t, 0.0));
            }
            UnaryFn::Recip => {
                self.b.div(t, v, lit(t, 1.0), x);
            }
            UnaryFn::Square => {
                self.b.mul(t, v, x.clone(), x);
            }
            UnaryFn::Silu => {
                let s = self.tmp();
                self.b.unary(UnaryOp::Sigmoid, t, &s, x.clone());
                self.b.mul(t, v, x, s.as_str());
            }
            UnaryFn::Gelu => {
                let (a1, a2, a3, a4) = (self.tmp(), self.tmp(), self.tmp(), self.tmp());
                let b = &mut self.b;
                b.mul(t, &a1, x.clone(), lit(t, std::f64::consts::FRAC_1_SQRT_2));
                b.unary(UnaryOp::Erf, t, &a2, a1.as_str());
                b.add(t, &a3, a2.as_str(), lit(t, 1.0));
                b.mul(t, &a4, x, a3.as_str());
                b.mul(t, v, a4.as_str(), lit(t, 0.5));
            }
            _ => {}
        }
    }

    fn cast(&mut self, a: NodeId, to: DType, v: &str) {
        let from = self.spec.graph.dtype(a);
        let (ft, tt) = (compute(from), compute(to));
        let x = self.opnd(a);
        if ft == Type::Pred {
            self.b.selp(tt, v, lit(tt, 1.0), lit(tt, 0.0), x);
        } else if tt == Type::Pred {
            self.b.setp(CmpOp::Ne, ft, v, x, lit(ft, 0.0));
        } else if matches!(to, DType::F16 | DType::BF16) {
            // Compute type stays f32, but the value must be one the 16-bit type holds.
            let h = self.tmp();
            let st = to.storage();
            self.b.cvt(st, ft, &h, x);
            self.b.cvt(tt, st, v, h.as_str());
        } else if ft == tt {
            self.b.mov(tt, v, x);
        } else {
            self.b.cvt(tt, ft, v, x);
        }
    }
}

/// A kernel name that says what the expression does (`ew_add_relu_mul`), for profiles.
fn name_of(spec: &Spec<'_>, needed: &[bool]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (i, (node, _)) in spec.graph.nodes.iter().enumerate() {
        if !needed[i] {
            continue;
        }
        let part = match node {
            Node::Unary(f, _) => format!("{f:?}"),
            Node::Binary(f, _, _) => format!("{f:?}"),
            Node::Compare(c, _, _) => c.name().to_string(),
            Node::Where(..) => "where".into(),
            Node::Cast(_) => "cast".into(),
            Node::Random { .. } | Node::RandomSalted { .. } => "rand".into(),
            Node::Index => "index".into(),
            Node::Input(_) | Node::Scalar(_) => continue,
        };
        parts.push(part.to_ascii_lowercase());
    }
    if parts.is_empty() {
        parts.push("copy".into());
    }
    let mut name = String::from("ew");
    for p in parts {
        if name.len() + p.len() > 48 {
            name.push_str("_etc");
            break;
        }
        name.push('_');
        name.push_str(&p);
    }
    name
}

/// The nodes the root depends on.
fn needed_nodes(spec: &Spec<'_>) -> smallvec::SmallVec<[bool; 32]> {
    // Runs on every launch of an expression with a scalar parameter: no heap allocation for
    // graphs of up to 32 nodes, none per node.
    let mut needed: smallvec::SmallVec<[bool; 32]> =
        smallvec::smallvec![false; spec.graph.nodes.len()];
    needed[spec.root as usize] = true;
    for &(r, _) in &spec.extra {
        needed[r as usize] = true;
    }
    for i in (0..spec.graph.nodes.len()).rev() {
        if !needed[i] {
            continue;
        }
        let (deps, count): ([NodeId; 3], usize) = match &spec.graph.nodes[i].0 {
            Node::Unary(_, a) | Node::Cast(a) => ([*a, 0, 0], 1),
            Node::Binary(_, a, b) | Node::Compare(_, a, b) => ([*a, *b, 0], 2),
            Node::Where(c, a, b) => ([*c, *a, *b], 3),
            Node::RandomSalted { salt, .. } => ([*salt, 0, 0], 1),
            _ => ([0; 3], 0),
        };
        for &d in &deps[..count] {
            needed[d as usize] = true;
        }
    }
    needed
}

/// The parameter type of a scalar operand, or `None` when it is written as a literal.
///
/// Scalars of 32- and 64-bit compute types are kernel parameters, so `x * 0.5` and `x * 0.25`
/// (a learning rate, a step's bias correction) share one kernel instead of compiling one each
/// and growing the caches without bound. Booleans and narrow integers stay literals: they take
/// few values, and not every backend takes parameters of their types.
pub(crate) fn scalar_param_type(v: Value, d: DType) -> Option<Type> {
    let t = compute(d);
    let wide = matches!(
        t,
        Type::F32 | Type::F64 | Type::I32 | Type::U32 | Type::I64 | Type::U64
    );
    (wide && !matches!(v, Value::Pred(_))).then_some(t)
}

/// A scalar operand's value in its compute type.
pub(crate) fn scalar_value(v: Value, d: DType) -> Value {
    match v {
        Value::Pred(_) => v,
        _ => hologram_isa::semantics::eval::cvt(v, compute(d)).unwrap_or(v),
    }
}

/// The parameter holding scalar node `n`.
fn scalar_param(n: NodeId) -> String {
    format!("c{n}")
}

/// The scalar nodes the kernel of `spec` takes as parameters, in parameter order, with their
/// values (the launch passes them after the shape).
pub(crate) fn scalar_params<'a>(spec: &'a Spec<'a>) -> impl Iterator<Item = Value> + 'a {
    let is_param = |(node, d): &(Node, DType)| matches!(node, Node::Scalar(v) if scalar_param_type(*v, *d).is_some());
    // Runs on every launch: most expressions (`a + b`) have no scalar and skip the reachability
    // walk and its allocation.
    let needed = if spec.graph.nodes.iter().any(is_param) {
        needed_nodes(spec)
    } else {
        smallvec::SmallVec::new()
    };
    spec.graph
        .nodes
        .iter()
        .zip(needed)
        .filter_map(|((node, d), need)| match node {
            Node::Scalar(v) if need && scalar_param_type(*v, *d).is_some() => {
                Some(scalar_value(*v, *d))
            }
            _ => None,
        })
}

/// The kernel for a spec, as IR.
pub(crate) fn program(spec: &Spec<'_>) -> Program {
    let needed = needed_nodes(spec);
    let mut b = ProgramBuilder::new(name_of(spec, &needed));
    let strided =
        spec.inputs.iter().any(|(_, a)| *a == Access::Strided) || spec.out.1 == Access::Strided;
    for (k, (dt, access)) in spec.inputs.iter().enumerate() {
        b.buffer(&format!("in{k}"), dt.storage());
        if *access != Access::Dense {
            b.scalar(&format!("o{k}"), Type::U32);
        }
        if *access == Access::Strided {
            for d in 0..spec.rank {
                b.scalar(&format!("s{k}_{d}"), Type::U32);
            }
        }
        if let Access::Broadcast { div, rem } = *access {
            if div {
                b.scalar(&format!("p{k}"), Type::U32);
            }
            if rem {
                b.scalar(&format!("m{k}"), Type::U32);
            }
        }
    }
    b.buffer_rw("out", spec.out.0.storage());
    for (k, &(_, dt)) in spec.extra.iter().enumerate() {
        b.buffer_rw(&format!("out{}", k + 1), dt.storage());
    }
    if spec.out.1 != Access::Dense {
        b.scalar("oout", Type::U32);
    }
    if spec.out.1 == Access::Strided {
        for d in 0..spec.rank {
            b.scalar(&format!("sout_{d}"), Type::U32);
        }
    }
    b.scalar("n", Type::U32);
    if strided {
        for d in 0..spec.rank {
            b.scalar(&format!("d{d}"), Type::U32);
        }
    }
    for (i, ((node, d), &need)) in spec.graph.nodes.iter().zip(&needed).enumerate() {
        if let (Node::Scalar(v), true) = (node, need) {
            if let Some(t) = scalar_param_type(*v, *d) {
                b.scalar(&scalar_param(i as NodeId), t);
            }
        }
    }
    b.setp(CmpOp::Ge, Type::U32, "%done", GID, "n");
    b.guard("%done", false).exit();
    if strided {
        // Coordinates of element %gid in the output shape, last dimension fastest.
        b.mov(Type::U32, "%rest", GID);
        for d in (0..spec.rank).rev() {
            if d == 0 {
                b.mov(Type::U32, "%c0", "%rest");
            } else {
                let (c, dim) = (format!("%c{d}"), format!("d{d}"));
                b.rem(Type::U32, &c, "%rest", dim.as_str());
                b.div(Type::U32, "%rest", "%rest", dim.as_str());
            }
        }
    }
    let mut g = Gen {
        spec,
        b,
        tmp: 0,
        walks: vec![None; spec.inputs.len()],
    };
    // Nodes reachable from the root, in order.
    for (i, &need) in needed.iter().enumerate() {
        if need {
            g.node(i as NodeId);
        }
    }
    let (odt, oaccess) = spec.out;
    let idx = g.index("out", oaccess);
    g.store(spec.root, odt, "out", idx);
    for (k, &(root, dt)) in spec.extra.iter().enumerate() {
        g.store(root, dt, &format!("out{}", k + 1), Operand::Special(GID));
    }
    g.b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `((x - a) * b) * c + d`: four per-channel operands and the input `x`.
    fn batch_norm_spec(g: &mut Graph, walks: [Access; 4]) -> Program {
        let x = g.push(Node::Input(0), DType::F32);
        let ins: Vec<NodeId> = (1..5).map(|k| g.push(Node::Input(k), DType::F32)).collect();
        let s = g.push(Node::Binary(BinaryFn::Sub, x, ins[0]), DType::F32);
        let m = g.push(Node::Binary(BinaryFn::Mul, s, ins[1]), DType::F32);
        let m2 = g.push(Node::Binary(BinaryFn::Mul, m, ins[2]), DType::F32);
        let root = g.push(Node::Binary(BinaryFn::Add, m2, ins[3]), DType::F32);
        let mut inputs: smallvec::SmallVec<[(DType, Access); 8]> =
            smallvec::smallvec![(DType::F32, Access::Dense)];
        inputs.extend(walks.iter().map(|&a| (DType::F32, a)));
        program(&Spec {
            graph: g,
            root,
            inputs,
            rank: 1,
            out: (DType::F32, Access::Dense),
            extra: smallvec::SmallVec::new(),
        })
    }

    fn count(p: &Program, what: &str) -> usize {
        hologram_isa::print(p)
            .lines()
            .filter(|l| l.trim_start().starts_with(what))
            .count()
    }

    #[test]
    fn operands_with_one_walk_share_its_divisions() {
        let walk = Access::Broadcast {
            div: true,
            rem: true,
        };
        let shared = batch_norm_spec(
            &mut Graph::default(),
            [
                walk,
                Access::BroadcastAs(1),
                Access::BroadcastAs(1),
                Access::BroadcastAs(1),
            ],
        );
        hologram_isa::validate(&shared).expect("valid");
        assert_eq!(count(&shared, "div.u32"), 1);
        assert_eq!(count(&shared, "rem.u32"), 1);
        // Only the first takes p and m; every operand keeps its own offset.
        let text = hologram_isa::print(&shared);
        assert!(text.contains(".param .u32 p1") && text.contains(".param .u32 m1"));
        assert!(!text.contains(".param .u32 p2") && !text.contains(".param .u32 m4"));
        for k in 1..5 {
            assert!(text.contains(&format!(".param .u32 o{k}")), "{text}");
        }
        let separate = batch_norm_spec(&mut Graph::default(), [walk; 4]);
        assert_eq!(count(&separate, "div.u32"), 4);
    }
}
