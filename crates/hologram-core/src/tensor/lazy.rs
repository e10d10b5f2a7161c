//! Recording element-wise expressions, evaluated at most once (as one kernel, see
//! [`super::fused`]) when their result is needed.

use std::sync::{Arc, Mutex};

use hologram_isa::semantics::{eval, Value};
use smallvec::SmallVec;

use super::expr::{Graph, Node, NodeId};
use super::fused::Fused;
use super::layout::{Dims, Layout};
use super::{Source, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::storage::Storage;

/// Most nodes one fused kernel evaluates; longer chains are cut by realizing operands.
pub(crate) const MAX_NODES: usize = 96;
/// Most input tensors of one fused kernel.
pub(crate) const MAX_INPUTS: usize = 12;

/// A stored tensor an expression reads, with its layout relative to the expression's shape.
#[derive(Clone)]
pub(crate) struct Input {
    pub storage: Arc<Storage>,
    pub layout: Layout,
    pub dtype: DType,
}

impl Input {
    fn same(&self, other: &Input) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
            && self.layout == other.layout
            && self.dtype == other.dtype
    }
}

/// What a pending tensor computes: a graph over stored inputs, in the shape it was recorded in.
pub(crate) struct Expr {
    pub graph: Graph,
    pub root: NodeId,
    pub inputs: Vec<Input>,
}

/// An expression in a tensor's own shape, borrowed while it is pending ([`LazyTensor::pending`]).
#[derive(Clone, Copy)]
pub(crate) struct ExprRef<'a> {
    pub graph: &'a Graph,
    pub root: NodeId,
    pub inputs: &'a [Input],
}

/// A lazy tensor's expression until it has run, then its result. The expression is dropped when
/// it runs, so a result does not keep the memory of the tensors it was computed from alive.
enum State {
    Pending(Expr),
    Done(Arc<Storage>),
}

/// An expression over stored inputs, evaluated at most once. A tensor holding it may view it
/// in another shape of as many elements (a reshape, [`LazyTensor::can_view_as`]): the tensor's
/// shape is its layout's, and the expression's inputs are viewed in it when it is read.
pub(crate) struct LazyTensor {
    /// The shape the expression was recorded in.
    shape: Dims,
    /// The expression or its result.
    state: Mutex<State>,
}

/// A tensor's part in a new expression: its graph (one input node for a stored tensor), root
/// and inputs.
#[derive(Clone)]
pub(crate) struct Operand {
    pub graph: Graph,
    pub root: NodeId,
    pub inputs: Vec<Input>,
    pub shape: Vec<usize>,
}

/// The value `x` as a `dtype` constant (by the `cvt` rules; bool is `x != 0`).
pub(crate) fn scalar_value(x: f64, dtype: DType) -> Value {
    match dtype {
        DType::Bool => Value::Pred(x != 0.0),
        // What `cvt` gives, without its generic dispatch (a visible part of a one-element op).
        DType::F32 => Value::F32(x as f32),
        DType::F64 => Value::F64(x),
        _ => eval::cvt(Value::F64(x), dtype.storage()).unwrap_or(Value::F64(x)),
    }
}

impl Operand {
    /// The operand for a tensor (realizing nothing: pending expressions are inlined).
    pub fn of(t: &Tensor) -> Result<Operand> {
        if let Source::Lazy(l) = &t.src {
            let pending = l.pending(t.shape(), |e| Operand {
                graph: e.graph.clone(),
                root: e.root,
                inputs: e.inputs.to_vec(),
                shape: t.shape().to_vec(),
            });
            if let Some(op) = pending {
                return Ok(op);
            }
        }
        let (storage, layout) = t.storage()?;
        let mut graph = Graph::default();
        let root = graph.push(Node::Input(0), t.dtype);
        Ok(Operand {
            graph,
            root,
            inputs: vec![Input {
                storage,
                layout,
                dtype: t.dtype,
            }],
            shape: t.shape().to_vec(),
        })
    }

    /// A constant operand.
    pub fn scalar(v: Value, dtype: DType) -> Operand {
        let mut graph = Graph::default();
        let root = graph.push(Node::Scalar(v), dtype);
        Operand {
            graph,
            root,
            inputs: Vec::new(),
            shape: Vec::new(),
        }
    }

    /// The operand broadcast to `shape`.
    pub fn broadcast(mut self, shape: &[usize]) -> Result<Operand> {
        if self.shape == shape {
            return Ok(self);
        }
        for i in &mut self.inputs {
            i.layout = i.layout.broadcast_to(shape)?;
        }
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// Wraps the operand as an expression of the given shape.
    pub fn into_lazy(self, shape: &[usize]) -> LazyTensor {
        LazyTensor::new(self.graph, self.root, self.inputs, shape)
    }
}

/// An expression being assembled from tensors into one graph: pending expressions are inlined,
/// stored tensors become inputs (identical ones shared), all broadcast to one shape.
pub(crate) struct Builder<'s> {
    pub graph: Graph,
    pub inputs: Vec<Input>,
    shape: &'s [usize],
}

impl<'s> Builder<'s> {
    pub fn new(shape: &'s [usize]) -> Self {
        Builder {
            graph: Graph {
                nodes: Vec::with_capacity(8),
            },
            inputs: Vec::with_capacity(4),
            shape,
        }
    }

    /// True when the expression built so far (of one or more values) still fits one kernel.
    pub fn fits_one_kernel(&self) -> bool {
        self.graph.nodes.len() <= 2 * MAX_NODES && self.inputs.len() <= MAX_INPUTS
    }

    fn input(&mut self, input: Input) -> u32 {
        match self.inputs.iter().position(|j| j.same(&input)) {
            Some(p) => p as u32,
            None => {
                self.inputs.push(input);
                self.inputs.len() as u32 - 1
            }
        }
    }

    /// Adds a tensor; returns the node of its value.
    pub fn tensor(&mut self, t: &Tensor) -> Result<NodeId> {
        if let Source::Lazy(l) = &t.src {
            let inlined = l.pending(t.shape(), |e| {
                // A graph that reads element positions (`arange`, random numbers) cannot be
                // evaluated at the positions of another shape: it runs first.
                if e.graph.reads_positions() && t.shape() != self.shape {
                    None
                } else {
                    Some(self.inline(e, t.shape()))
                }
            });
            match inlined {
                Some(Some(node)) => return node,
                Some(None) => return self.stored(&t.realize()?),
                None => {}
            }
        }
        self.stored(t)
    }

    fn stored(&mut self, t: &Tensor) -> Result<NodeId> {
        let (storage, mut layout) = t.storage()?;
        if t.shape() != self.shape {
            layout = layout.broadcast_to(self.shape)?;
        }
        let k = self.input(Input {
            storage,
            layout,
            dtype: t.dtype,
        });
        Ok(self.graph.push(Node::Input(k), t.dtype))
    }

    /// Adds a pending expression of shape `shape`.
    fn inline(&mut self, e: ExprRef<'_>, shape: &[usize]) -> Result<NodeId> {
        let broadcast = shape != self.shape;
        let mut map: SmallVec<[u32; 8]> = SmallVec::with_capacity(e.inputs.len());
        for i in e.inputs {
            let mut i = i.clone();
            if broadcast {
                i.layout = i.layout.broadcast_to(self.shape)?;
            }
            map.push(self.input(i));
        }
        let base = self.graph.append(e.graph, 0);
        for (node, _) in &mut self.graph.nodes[base as usize..] {
            if let Node::Input(k) = node {
                *k = map[*k as usize];
            }
        }
        Ok(e.root + base)
    }

    /// Adds a constant.
    pub fn scalar(&mut self, v: Value, dtype: DType) -> NodeId {
        self.graph.push(Node::Scalar(v), dtype)
    }
}

impl LazyTensor {
    /// A constant-valued expression (used by `full`).
    pub fn constant(v: Value, dtype: DType, shape: &[usize]) -> LazyTensor {
        Operand::scalar(v, dtype).into_lazy(shape)
    }

    pub fn new(graph: Graph, root: NodeId, inputs: Vec<Input>, shape: &[usize]) -> LazyTensor {
        LazyTensor {
            shape: Dims::from_slice(shape),
            state: Mutex::new(State::Pending(Expr {
                graph,
                root,
                inputs,
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when a tensor may hold the pending expression in `shape` (of as many elements),
    /// evaluated at most once together with the tensors holding it in other shapes (they share
    /// the result, whose contiguous elements are the same in every shape): the inputs take the
    /// shape as views (`Layout::reshape`). False when it has run, when an input's layout has no
    /// such view, or when the expression reads element positions (`arange`, random numbers)
    /// that depend on the shape.
    pub fn can_view_as(&self, shape: &[usize]) -> bool {
        match &*self.state() {
            State::Pending(e) => {
                !e.graph.reads_positions()
                    && e.inputs.iter().all(|i| i.layout.reshape(shape).is_some())
            }
            State::Done(_) => false,
        }
    }

    /// Calls `f` with the expression viewed in `shape` (the holding tensor's, see
    /// [`LazyTensor::can_view_as`]) while it is pending, holding it: `f` must not read this
    /// expression again. `None` once it has run.
    pub fn pending<R>(&self, shape: &[usize], f: impl FnOnce(ExprRef<'_>) -> R) -> Option<R> {
        let state = self.state();
        let State::Pending(e) = &*state else {
            return None;
        };
        if shape == self.shape.as_slice() {
            return Some(f(ExprRef {
                graph: &e.graph,
                root: e.root,
                inputs: &e.inputs,
            }));
        }
        // A reshape: the recorded inputs viewed in its shape (`can_view_as` allowed it).
        let inputs: Vec<Input> = e
            .inputs
            .iter()
            .map(|i| Input {
                storage: i.storage.clone(),
                layout: i.layout.reshape(shape).unwrap_or_else(|| i.layout.clone()),
                dtype: i.dtype,
            })
            .collect();
        Some(f(ExprRef {
            graph: &e.graph,
            root: e.root,
            inputs: &inputs,
        }))
    }

    /// True when the expression is too large to extend.
    pub fn is_large(graph: &Graph, inputs: &[Input]) -> bool {
        graph.nodes.len() > MAX_NODES || inputs.len() > MAX_INPUTS
    }

    /// The shape the expression was recorded in.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn is_done(&self) -> bool {
        matches!(*self.state(), State::Done(_))
    }

    /// Records `storage` (contiguous, of the expression's elements, computed elsewhere) as the
    /// result, unless one was already recorded.
    pub fn set_done(&self, storage: Arc<Storage>) {
        let mut state = self.state();
        if let State::Pending(_) = &*state {
            *state = State::Done(storage);
        }
    }

    /// Runs the expression once into new contiguous storage.
    pub fn materialize(&self, exec: &Executor, dtype: DType) -> Result<Arc<Storage>> {
        let mut state = self.state();
        let e = match &*state {
            State::Done(s) => return Ok(s.clone()),
            State::Pending(e) => e,
        };
        // In the recorded shape: a reshape's contiguous result is the same elements.
        let shape = self.shape.as_slice();
        let out = Tensor::uninit(exec, shape, dtype)?;
        Fused {
            graph: &e.graph,
            roots: &[e.root],
            inputs: &e.inputs,
            shape,
        }
        .run(exec, &[&out])?;
        let storage = match out.src {
            Source::Stored(s) => s,
            Source::Lazy(_) => return Err(Error::Internal("a fresh output tensor is lazy".into())),
        };
        *state = State::Done(storage.clone());
        Ok(storage)
    }
}

/// Evaluates an expression, viewed in `out`'s shape (see [`LazyTensor::can_view_as`]), into a
/// stored tensor view.
pub(crate) fn run_into(exec: &Executor, lazy: &LazyTensor, out: &Tensor) -> Result<()> {
    let shape = out.shape();
    let ran = lazy.pending(shape, |e| {
        Fused {
            graph: e.graph,
            roots: &[e.root],
            inputs: e.inputs,
            shape,
        }
        .run(exec, &[out])
    });
    match ran {
        Some(r) => r,
        // It ran meanwhile (another thread): copy its result.
        None => {
            let storage = lazy.materialize(exec, out.dtype)?;
            Tensor::stored(exec, out.dtype, Layout::contiguous(shape), storage).copy_into(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_values_are_what_cvt_gives() {
        let xs = [
            0.0,
            -0.0,
            1.0,
            0.1,
            -2.5,
            1e-40,
            3.4028235677973366e38,
            1e300,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        for dtype in [DType::F32, DType::F64, DType::F16, DType::I32, DType::U8] {
            for &x in &xs {
                let want = eval::cvt(Value::F64(x), dtype.storage()).unwrap();
                let got = scalar_value(x, dtype);
                assert_eq!(got.to_bits(), want.to_bits(), "{x} as {dtype}");
                assert_eq!(got.ty(), want.ty());
            }
        }
    }
}
