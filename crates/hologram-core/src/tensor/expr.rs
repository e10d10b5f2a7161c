//! Lazy element-wise expressions: chains of element-wise ops are recorded as a graph and run as
//! one kernel when their result is needed.

use hologram_isa::semantics::Value;
use hologram_isa::CmpOp;

use crate::dtype::DType;

/// Element-wise functions of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum UnaryFn {
    Abs,
    Neg,
    Sqrt,
    Rsqrt,
    Exp,
    Log,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sigmoid,
    Relu,
    /// Exact GELU: `x/2 · (1 + erf(x/√2))`.
    Gelu,
    /// `x · sigmoid(x)`.
    Silu,
    Erf,
    Floor,
    Ceil,
    /// Half to even.
    Round,
    Trunc,
    /// Logical not (bool) or bitwise not (integers).
    Not,
    /// `1 / x`
    Recip,
    /// `x · x`
    Square,
}

/// Element-wise functions of two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BinaryFn {
    Add,
    Sub,
    Mul,
    /// Floats: IEEE division. Integers: truncating, `x / 0 == x`.
    Div,
    Rem,
    Pow,
    Min,
    Max,
    And,
    Or,
    Xor,
}

/// Index of a node in a [`Graph`].
pub(crate) type NodeId = u32;

/// One node of an expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// Input tensor `k` of the expression.
    Input(u32),
    /// A constant of the node's dtype.
    Scalar(Value),
    Unary(UnaryFn, NodeId),
    Binary(BinaryFn, NodeId, NodeId),
    Compare(CmpOp, NodeId, NodeId),
    /// `cond ? a : b`
    Where(NodeId, NodeId, NodeId),
    /// Conversion to the node's dtype.
    Cast(NodeId),
    /// The element's row-major index in the expression's shape (u32).
    Index,
    /// A pseudo-random f32 per element from a counter-based hash of (seed, index): uniform in
    /// [0, 1), or standard normal (Box–Muller). Identical on every backend.
    Random {
        seed: u64,
        normal: bool,
    },
    /// Like [`Node::Random`], with the seed the u32 value of node `salt` (a tensor's element):
    /// the numbers change when the tensor does, without a new kernel (a plan's dropout masks).
    RandomSalted {
        salt: NodeId,
        normal: bool,
    },
}

/// An expression DAG; every node has a dtype; nodes only refer to earlier nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Graph {
    pub nodes: Vec<(Node, DType)>,
}

impl Graph {
    pub fn push(&mut self, node: Node, dtype: DType) -> NodeId {
        self.nodes.push((node, dtype));
        self.nodes.len() as NodeId - 1
    }

    /// True when a node reads the element's position (`Index`, random numbers).
    pub fn reads_positions(&self) -> bool {
        self.nodes.iter().any(|(n, _)| {
            matches!(
                n,
                Node::Index | Node::Random { .. } | Node::RandomSalted { .. }
            )
        })
    }

    pub fn dtype(&self, n: NodeId) -> DType {
        self.nodes[n as usize].1
    }

    /// Appends another graph; its node ids shift by the returned offset and its input ids by
    /// `input_offset`.
    pub fn append(&mut self, other: &Graph, input_offset: u32) -> u32 {
        let base = self.nodes.len() as u32;
        for (node, dt) in &other.nodes {
            let n = match node {
                Node::Input(k) => Node::Input(k + input_offset),
                Node::Scalar(v) => Node::Scalar(*v),
                Node::Unary(f, a) => Node::Unary(*f, a + base),
                Node::Binary(f, a, b) => Node::Binary(*f, a + base, b + base),
                Node::Compare(c, a, b) => Node::Compare(*c, a + base, b + base),
                Node::Where(c, a, b) => Node::Where(c + base, a + base, b + base),
                Node::Cast(a) => Node::Cast(a + base),
                Node::Index => Node::Index,
                Node::Random { seed, normal } => Node::Random {
                    seed: *seed,
                    normal: *normal,
                },
                Node::RandomSalted { salt, normal } => Node::RandomSalted {
                    salt: salt + base,
                    normal: *normal,
                },
            };
            self.nodes.push((n, *dt));
        }
        base
    }
}
