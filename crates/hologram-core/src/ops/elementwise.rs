//! Element-wise operations, recorded lazily and fused into one kernel.

use std::sync::Arc;

use hologram_isa::CmpOp;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::expr::{BinaryFn, Graph, Node, NodeId, UnaryFn};
use crate::tensor::layout::broadcast_shapes;
use smallvec::SmallVec;

use crate::executor::Executor;
use crate::tensor::lazy::{scalar_value, Builder, LazyTensor};
use crate::tensor::{Source, Tensor};

/// A scalar or tensor right-hand side.
pub enum Rhs<'a> {
    /// Another tensor.
    Tensor(&'a Tensor),
    /// A number, taking the tensor's dtype (a float with an integer tensor gives f32).
    Scalar(f64),
}

impl<'a> From<&'a Tensor> for Rhs<'a> {
    fn from(t: &'a Tensor) -> Self {
        Rhs::Tensor(t)
    }
}

impl From<f64> for Rhs<'_> {
    fn from(v: f64) -> Self {
        Rhs::Scalar(v)
    }
}

/// An element-wise result before it is wrapped as a tensor: it becomes a lazy tensor, or runs
/// straight into an existing tensor (the `out` forms, which skip the lazy tensor).
enum Pending {
    /// An expression of the given dtype on the executor.
    Expr {
        exec: Executor,
        dtype: DType,
        lazy: LazyTensor,
    },
    /// A result that needs no expression (`abs` of an unsigned tensor is the tensor).
    Ready(Tensor),
}

impl Pending {
    fn into_tensor(self) -> Tensor {
        match self {
            Pending::Expr { exec, dtype, lazy } => Tensor {
                exec,
                dtype,
                layout: crate::tensor::Layout::contiguous(lazy.shape()),
                src: Source::Lazy(Arc::new(lazy)),
            },
            Pending::Ready(t) => t,
        }
    }

    /// Writes the result into `out`: the expression runs into it directly when shape and dtype
    /// match, else the result is broadcast and converted as by [`Tensor::copy_into`].
    fn run_into(self, out: &Tensor) -> Result<()> {
        match self {
            Pending::Expr { exec, dtype, lazy }
                if exec.same_as(&out.exec) && dtype == out.dtype && lazy.shape() == out.shape() =>
            {
                crate::tensor::lazy::run_into(&exec, &lazy, out)
            }
            other => other.into_tensor().copy_into(out),
        }
    }
}

/// A lazy tensor of operands with `build` adding nodes over their roots.
fn combine(
    parts: &[&Tensor],
    shape: &[usize],
    dtype: DType,
    build: impl Fn(&mut Graph, &[NodeId]) -> NodeId,
    scalars: &[(f64, DType)],
) -> Result<Tensor> {
    pending(parts, shape, dtype, build, scalars).map(Pending::into_tensor)
}

/// The expression of operands with `build` adding nodes over their roots.
fn pending(
    parts: &[&Tensor],
    shape: &[usize],
    dtype: DType,
    build: impl Fn(&mut Graph, &[NodeId]) -> NodeId,
    scalars: &[(f64, DType)],
) -> Result<Pending> {
    let exec = parts[0].exec.clone();
    for p in parts {
        parts[0].check_same_executor(p)?;
    }
    let make = |realize: bool| -> Result<(Graph, NodeId, Vec<crate::tensor::lazy::Input>)> {
        let mut b = Builder::new(shape);
        let mut roots: SmallVec<[NodeId; 4]> = SmallVec::new();
        for p in parts {
            roots.push(if realize {
                b.tensor(&p.realize()?)?
            } else {
                b.tensor(p)?
            });
        }
        for &(v, dt) in scalars {
            roots.push(b.scalar(scalar_value(v, dt), dt));
        }
        let root = build(&mut b.graph, &roots);
        Ok((b.graph, root, b.inputs))
    };
    let (mut graph, mut root, mut inputs) = make(false)?;
    if LazyTensor::is_large(&graph, &inputs) {
        (graph, root, inputs) = make(true)?;
    }
    Ok(Pending::Expr {
        exec,
        dtype,
        lazy: LazyTensor::new(graph, root, inputs, shape),
    })
}

fn cast_node(g: &mut Graph, n: NodeId, to: DType) -> NodeId {
    if g.dtype(n) == to {
        n
    } else {
        g.push(Node::Cast(n), to)
    }
}

/// The dtype a scalar takes next to a tensor of `t` (Python-scalar rules: it keeps the tensor's
/// dtype unless a float meets an integer or bool tensor, which gives f32).
fn scalar_dtype(t: DType, v: f64) -> DType {
    let integral = v.fract() == 0.0 && v.is_finite();
    match t {
        t if t.is_float() => t,
        DType::Bool if integral => DType::I64,
        t if integral && t != DType::Bool => t,
        _ => DType::F32,
    }
}

fn check_unary(f: UnaryFn, d: DType) -> Result<()> {
    use UnaryFn::*;
    let ok = match f {
        Not => !d.is_float(),
        Abs | Neg | Relu | Square => d != DType::Bool,
        _ => d.is_float(),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::TypeMismatch(format!(
            "{f:?} is not defined for {d} tensors"
        )))
    }
}

impl Tensor {
    /// Applies an element-wise function.
    pub fn unary(&self, f: UnaryFn) -> Result<Tensor> {
        Ok(self.unary_pending(f)?.into_tensor())
    }

    /// `out = f(self)`, run at once into `out` (any view; the result is broadcast and converted
    /// to it as by [`Tensor::copy_into`]).
    pub fn unary_into(&self, f: UnaryFn, out: &Tensor) -> Result<()> {
        self.unary_pending(f)?.run_into(out)
    }

    fn unary_pending(&self, f: UnaryFn) -> Result<Pending> {
        check_unary(f, self.dtype)?;
        if matches!(f, UnaryFn::Abs) && !self.dtype.is_signed() {
            return Ok(Pending::Ready(self.clone()));
        }
        pending(
            &[self],
            self.shape(),
            self.dtype,
            |g, r| g.push(Node::Unary(f, r[0]), g.dtype(r[0])),
            &[],
        )
    }

    /// Applies an element-wise function of two operands, broadcasting and promoting dtypes.
    pub fn binary<'a>(&self, f: BinaryFn, rhs: impl Into<Rhs<'a>>) -> Result<Tensor> {
        Ok(self.binary_pending(f, rhs.into())?.into_tensor())
    }

    /// `out = self OP rhs`, run at once into `out` (any view; the result is broadcast and
    /// converted to it as by [`Tensor::copy_into`]) without recording a lazy tensor: PyTorch's
    /// `out=` form.
    pub fn binary_into<'a>(
        &self,
        f: BinaryFn,
        rhs: impl Into<Rhs<'a>>,
        out: &Tensor,
    ) -> Result<()> {
        self.binary_pending(f, rhs.into())?.run_into(out)
    }

    fn binary_pending(&self, f: BinaryFn, rhs: Rhs<'_>) -> Result<Pending> {
        let other = match rhs {
            Rhs::Tensor(t) => t,
            Rhs::Scalar(v) => {
                let dt = scalar_dtype(self.dtype, v);
                return self.binary_scalar(f, v, dt, false);
            }
        };
        let dtype = DType::promote(self.dtype, other.dtype);
        check_binary(f, dtype)?;
        let shape = broadcast_shapes(self.shape(), other.shape())?;
        pending(
            &[self, other],
            &shape,
            dtype,
            |g, r| {
                let a = cast_node(g, r[0], dtype);
                let b = cast_node(g, r[1], dtype);
                g.push(Node::Binary(f, a, b), dtype)
            },
            &[],
        )
    }

    /// `self OP v`, or `v OP self` when `reversed`, with the scalar of dtype `sdt`.
    fn binary_scalar(&self, f: BinaryFn, v: f64, sdt: DType, reversed: bool) -> Result<Pending> {
        let dtype = DType::promote(self.dtype, sdt);
        check_binary(f, dtype)?;
        pending(
            &[self],
            self.shape(),
            dtype,
            |g, r| {
                let a = cast_node(g, r[0], dtype);
                let b = cast_node(g, r[1], dtype);
                let (l, r) = if reversed { (b, a) } else { (a, b) };
                g.push(Node::Binary(f, l, r), dtype)
            },
            &[(v, dtype)],
        )
    }

    /// `scalar OP self` (for non-commutative ops such as `2 - x`, `1 / x`).
    pub fn rbinary(&self, f: BinaryFn, v: f64) -> Result<Tensor> {
        Ok(self
            .binary_scalar(f, v, scalar_dtype(self.dtype, v), true)?
            .into_tensor())
    }

    /// Element-wise comparison, giving a bool tensor.
    pub fn compare<'a>(&self, cmp: CmpOp, rhs: impl Into<Rhs<'a>>) -> Result<Tensor> {
        match rhs.into() {
            Rhs::Tensor(other) => {
                let dtype = DType::promote(self.dtype, other.dtype);
                let shape = broadcast_shapes(self.shape(), other.shape())?;
                if dtype == DType::Bool && !matches!(cmp, CmpOp::Eq | CmpOp::Ne) {
                    return self.cast(DType::U8)?.compare(cmp, &other.cast(DType::U8)?);
                }
                combine(
                    &[self, other],
                    &shape,
                    DType::Bool,
                    |g, r| {
                        let a = cast_node(g, r[0], dtype);
                        let b = cast_node(g, r[1], dtype);
                        g.push(Node::Compare(cmp, a, b), DType::Bool)
                    },
                    &[],
                )
            }
            Rhs::Scalar(v) => {
                let sdt = scalar_dtype(self.dtype, v);
                let dtype = DType::promote(self.dtype, sdt);
                if dtype == DType::Bool && !matches!(cmp, CmpOp::Eq | CmpOp::Ne) {
                    return self.cast(DType::U8)?.compare(cmp, v);
                }
                let shape = self.shape().to_vec();
                combine(
                    &[self],
                    &shape,
                    DType::Bool,
                    |g, r| {
                        let a = cast_node(g, r[0], dtype);
                        let b = cast_node(g, r[1], dtype);
                        g.push(Node::Compare(cmp, a, b), DType::Bool)
                    },
                    &[(v, dtype)],
                )
            }
        }
    }

    /// `cond ? a : b` element-wise (`cond` is cast to bool; all three broadcast).
    pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let dtype = DType::promote(a.dtype, b.dtype);
        let shape = broadcast_shapes(&broadcast_shapes(cond.shape(), a.shape())?, b.shape())?;
        combine(
            &[cond, a, b],
            &shape,
            dtype,
            |g, r| {
                let c = cast_node(g, r[0], DType::Bool);
                let x = cast_node(g, r[1], dtype);
                let y = cast_node(g, r[2], dtype);
                g.push(Node::Where(c, x, y), dtype)
            },
            &[],
        )
    }

    /// Converts to another dtype (float to integer truncates and saturates; NaN gives 0).
    pub fn cast(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype {
            return Ok(self.clone());
        }
        let shape = self.shape().to_vec();
        combine(
            &[self],
            &shape,
            dtype,
            |g, r| cast_node(g, r[0], dtype),
            &[],
        )
    }

    /// Clamps to `[lo, hi]` (either bound optional).
    pub fn clip(&self, lo: Option<f64>, hi: Option<f64>) -> Result<Tensor> {
        let mut t = self.clone();
        if let Some(lo) = lo {
            t = t.binary(BinaryFn::Max, lo)?;
        }
        if let Some(hi) = hi {
            t = t.binary(BinaryFn::Min, hi)?;
        }
        Ok(t)
    }
}

fn check_binary(f: BinaryFn, d: DType) -> Result<()> {
    use BinaryFn::*;
    let ok = match f {
        And | Or | Xor => !d.is_float(),
        Pow => d.is_float(),
        _ => d != DType::Bool,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::TypeMismatch(format!(
            "{f:?} is not defined for {d} tensors"
        )))
    }
}

macro_rules! unary_methods {
    ($($name:ident => $f:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Element-wise `", stringify!($name), "`.")]
                pub fn $name(&self) -> Result<Tensor> {
                    self.unary(UnaryFn::$f)
                }
            )*
        }
    };
}

unary_methods! {
    abs => Abs, neg => Neg, sqrt => Sqrt, rsqrt => Rsqrt, exp => Exp, log => Log, sin => Sin,
    cos => Cos, tan => Tan, tanh => Tanh, sigmoid => Sigmoid, relu => Relu, gelu => Gelu,
    silu => Silu, erf => Erf, floor => Floor, ceil => Ceil, round => Round, trunc => Trunc,
    logical_not => Not, recip => Recip, square => Square,
}

macro_rules! binary_methods {
    ($($name:ident => $f:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Element-wise `", stringify!($name), "` with broadcasting (a tensor or a number).")]
                pub fn $name<'a>(&self, rhs: impl Into<Rhs<'a>>) -> Result<Tensor> {
                    self.binary(BinaryFn::$f, rhs)
                }
            )*
        }
    };
}

binary_methods! {
    add => Add, sub => Sub, mul => Mul, div => Div, rem => Rem, pow => Pow,
    minimum => Min, maximum => Max, bitand => And, bitor => Or, bitxor => Xor,
}

macro_rules! compare_methods {
    ($($name:ident => $c:ident),* $(,)?) => {
        impl Tensor {
            $(
                #[doc = concat!("Element-wise `", stringify!($name), "`, giving bool.")]
                pub fn $name<'a>(&self, rhs: impl Into<Rhs<'a>>) -> Result<Tensor> {
                    self.compare(CmpOp::$c, rhs)
                }
            )*
        }
    };
}

compare_methods! { eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge }
