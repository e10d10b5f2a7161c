//! Recording element-wise expressions and running them as one kernel.

use std::sync::{Arc, Mutex};

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_isa::semantics::{eval, Value};

use super::expr::{Graph, Node, NodeId};
use smallvec::SmallVec;

use super::layout::{Dims, Layout};
use super::{Source, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::kernels::elementwise::{self, broadcast_walk, Access, Spec};
use crate::kernels::launch_cache;
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

/// An expression over stored inputs, evaluated at most once.
pub(crate) struct LazyTensor {
    graph: Graph,
    root: NodeId,
    inputs: Vec<Input>,
    shape: Dims,
    /// The result once run: shared with the expression's reshapes ([`LazyTensor::reshaped`]),
    /// whose contiguous results are the same elements in the same order.
    done: Arc<Mutex<Option<Arc<Storage>>>>,
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
    if dtype == DType::Bool {
        return Value::Pred(x != 0.0);
    }
    eval::cvt(Value::F64(x), dtype.storage()).unwrap_or(Value::F64(x))
}

impl Operand {
    /// The operand for a tensor (realizing nothing: pending expressions are inlined).
    pub fn of(t: &Tensor) -> Result<Operand> {
        match &t.src {
            Source::Lazy(l) if !l.is_done() => Ok(Operand {
                graph: l.graph.clone(),
                root: l.root,
                inputs: l.inputs.clone(),
                shape: l.shape.to_vec(),
            }),
            _ => {
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
        }
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
        LazyTensor {
            graph: self.graph,
            root: self.root,
            inputs: self.inputs,
            shape: Dims::from_slice(shape),
            done: Arc::new(Mutex::new(None)),
        }
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
            if !l.is_done() {
                // A graph that reads element positions (`arange`, random numbers) cannot be
                // evaluated at the positions of another shape: it runs first.
                if l.graph.reads_positions() && l.shape.as_slice() != self.shape {
                    return self.stored(&t.realize()?);
                }
                return self.inline(l);
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

    fn inline(&mut self, l: &LazyTensor) -> Result<NodeId> {
        let broadcast = l.shape.as_slice() != self.shape;
        let mut map: SmallVec<[u32; 8]> = SmallVec::with_capacity(l.inputs.len());
        for i in &l.inputs {
            let mut i = i.clone();
            if broadcast {
                i.layout = i.layout.broadcast_to(self.shape)?;
            }
            map.push(self.input(i));
        }
        let base = self.graph.append(&l.graph, 0);
        for (node, _) in &mut self.graph.nodes[base as usize..] {
            if let Node::Input(k) = node {
                *k = map[*k as usize];
            }
        }
        Ok(l.root + base)
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
            graph,
            root,
            inputs,
            shape: Dims::from_slice(shape),
            done: Arc::new(Mutex::new(None)),
        }
    }

    /// The same expression with another shape of as many elements, evaluated at most once
    /// together with this one (they share the result): the inputs take the new shape as views
    /// (`Layout::reshape`). `None` when an input's layout has no such view, or when the
    /// expression reads element positions (`arange`, random numbers) that depend on the shape.
    pub fn reshaped(&self, shape: &[usize]) -> Option<LazyTensor> {
        if self.graph.reads_positions() {
            return None;
        }
        let inputs = self
            .inputs
            .iter()
            .map(|i| {
                Some(Input {
                    storage: i.storage.clone(),
                    layout: i.layout.reshape(shape)?,
                    dtype: i.dtype,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(LazyTensor {
            graph: self.graph.clone(),
            root: self.root,
            inputs,
            shape: Dims::from_slice(shape),
            done: self.done.clone(),
        })
    }

    /// True when the expression is too large to extend.
    pub fn is_large(graph: &Graph, inputs: &[Input]) -> bool {
        graph.nodes.len() > MAX_NODES || inputs.len() > MAX_INPUTS
    }

    /// The expression's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The expression.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The stored tensors the expression reads.
    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }

    pub fn is_done(&self) -> bool {
        self.done.lock().map(|d| d.is_some()).unwrap_or(false)
    }

    /// Records `storage` (contiguous, of the expression's elements, computed elsewhere) as the
    /// result, unless one was already recorded.
    pub fn set_done(&self, storage: Arc<Storage>) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if done.is_none() {
            *done = Some(storage);
        }
    }

    /// Runs the expression once into new contiguous storage.
    pub fn materialize(&self, exec: &Executor, dtype: DType) -> Result<Arc<Storage>> {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = done.as_ref() {
            return Ok(s.clone());
        }
        let out = Tensor::uninit(exec, &self.shape, dtype)?;
        run_into(exec, self, &out)?;
        let storage = match out.src {
            Source::Stored(s) => s,
            Source::Lazy(_) => return Err(Error::Internal("a fresh output tensor is lazy".into())),
        };
        *done = Some(storage.clone());
        Ok(storage)
    }
}

/// Evaluates an expression into a stored tensor view (its shape must be the expression's).
pub(crate) fn run_into(exec: &Executor, lazy: &LazyTensor, out: &Tensor) -> Result<()> {
    let expr = Fused {
        graph: &lazy.graph,
        roots: &[lazy.root],
        inputs: &lazy.inputs,
        shape: &lazy.shape,
    };
    expr.run(exec, &[out])
}

/// Several values of one shape over shared inputs, computed by one kernel.
pub(crate) struct Fused<'a> {
    pub graph: &'a Graph,
    /// The value of each output.
    pub roots: &'a [NodeId],
    pub inputs: &'a [Input],
    pub shape: &'a [usize],
}

/// True when `l` addresses a dense row-major array of `shape` from element 0 of its buffer.
pub(crate) fn dense_as(l: &Layout, shape: &[usize]) -> bool {
    l.offset == 0 && l.shape.as_slice() == shape && l.is_contiguous()
}

/// True when `t` is stored dense: contiguous from element 0 of its buffer.
pub(crate) fn is_dense(t: &Tensor) -> bool {
    matches!(t.src, Source::Stored(_)) && t.layout.offset == 0 && t.layout.is_contiguous()
}

impl Fused<'_> {
    /// Writes root `k` into `outs[k]` (stored views of the expression's shape; every output
    /// after the first dense), all in one kernel whose lanes load every input before storing.
    pub fn run(&self, exec: &Executor, outs: &[&Tensor]) -> Result<()> {
        let lazy = self;
        let (Some(out), Some(&root)) = (outs.first(), self.roots.first()) else {
            return Ok(());
        };
        if outs.len() != self.roots.len() || (outs.len() > 1 && !outs.iter().all(|o| is_dense(o))) {
            return Err(Error::Internal(
                "a fused kernel's extra outputs must be dense, one per value".into(),
            ));
        }
        let Source::Stored(out_storage) = &out.src else {
            return Err(Error::Internal(
                "the output of a kernel is not stored".into(),
            ));
        };
        for o in outs {
            if o.shape() != self.shape {
                return Err(Error::ShapeMismatch(format!(
                    "cannot write {:?} into a view of shape {:?}",
                    self.shape,
                    o.shape()
                )));
            }
        }
        let n = out.numel();
        if n == 0 {
            return Ok(());
        }
        if outs.len() == 1 && super::small_map::run(exec, self, out)? {
            return Ok(());
        }
        // Dimensions that every operand walks as one (a broadcast mask over [batch, heads] rows, a
        // contiguous run) are merged, so kernels compute fewer coordinates per element. Dense
        // row-major operands (the common case) merge into one dimension walked at `%gid`, which
        // needs no layout work.
        let dense = |l: &Layout| dense_as(l, lazy.shape);
        let (shape, layouts, out_layout) =
            if dense(&out.layout) && lazy.inputs.iter().all(|i| dense(&i.layout)) {
                (smallvec::smallvec![n], SmallVec::new(), None)
            } else {
                let mut layouts: SmallVec<[Layout; 4]> =
                    lazy.inputs.iter().map(|i| i.layout.clone()).collect();
                layouts.push(out.layout.clone());
                let shape = coalesce(lazy.shape, &mut layouts);
                let out_layout = layouts.pop();
                (shape, layouts, out_layout)
            };
        let rank = shape.len();
        // Pushed one by one: `collect` into an inline vector went through the generic
        // iterator path, a measurable part of a one-element launch.
        let mut inputs: SmallVec<[(DType, Access); 8]> = SmallVec::new();
        for (k, i) in lazy.inputs.iter().enumerate() {
            inputs.push((i.dtype, layouts.get(k).map_or(Access::Dense, Access::of)));
        }
        share_walks(&mut inputs, &layouts);
        let out_access = match out_layout.as_ref().map_or(Access::Dense, Access::of) {
            Access::Scalar if n > 1 => Access::Strided,
            Access::Broadcast { .. } => Access::Strided,
            a => a,
        };
        let mut spec = Spec {
            graph: lazy.graph,
            root,
            inputs,
            rank,
            out: (out.dtype, out_access),
            extra: SmallVec::new(),
        };
        for (&r, o) in self.roots[1..].iter().zip(&outs[1..]) {
            spec.extra.push((r, o.dtype));
        }
        let key = launch_cache::key(&spec);
        let kernel = match exec.inner.launch_cache.get(&key) {
            Some(k) => k,
            None => {
                let program = elementwise::program(&spec);
                // Written at `%gid` (a dense output): an element-wise map, run by the backends' map
                // paths.
                let map = out_access == Access::Dense;
                let k = exec.compile(&crate::kernels::generated_kernel(program, map)?)?;
                exec.inner.launch_cache.insert(&key, k.clone());
                k
            }
        };
        let strided =
            spec.inputs.iter().any(|(_, a)| *a == Access::Strided) || out_access == Access::Strided;
        let u = |v: usize| KernelArg::Scalar(Value::U32(v as u32));
        let mut args: SmallVec<[KernelArg; 12]> = SmallVec::with_capacity(
            2 * spec.inputs.len()
                + 2
                + if strided {
                    (spec.inputs.len() + 2) * rank
                } else {
                    0
                },
        );
        for (k, (input, (_, access))) in lazy.inputs.iter().zip(&spec.inputs).enumerate() {
            args.push(KernelArg::Buffer(input.storage.arg(0, input.storage.bytes)));
            if let Some(layout) = layouts.get(k).filter(|_| *access != Access::Dense) {
                args.push(u(layout.offset));
                if *access == Access::Strided {
                    args.extend(layout.strides.iter().map(|&s| u(s)));
                }
                if let Access::Broadcast { div, rem } = *access {
                    let (p, m, _) = broadcast_walk(layout).unwrap_or((1, 1, false));
                    if div {
                        args.push(u(p));
                    }
                    if rem {
                        args.push(u(m));
                    }
                }
            }
        }
        args.push(KernelArg::Buffer(out_storage.arg(0, out_storage.bytes)));
        for o in &outs[1..] {
            let (s, _) = o.storage()?;
            args.push(KernelArg::Buffer(s.arg(0, s.bytes)));
        }
        if let Some(layout) = out_layout.as_ref().filter(|_| out_access != Access::Dense) {
            args.push(u(layout.offset));
            if out_access == Access::Strided {
                args.extend(layout.strides.iter().map(|&s| u(s)));
            }
        }
        args.push(u(n));
        if strided {
            args.extend(shape.iter().map(|&d| u(d)));
        }
        args.extend(elementwise::scalar_params(&spec).map(KernelArg::Scalar));
        exec.launch(&kernel, &LaunchConfig::for_elements(n as u64, 256), &args)
    }
}

/// Marks each broadcast input that walks exactly as an earlier one (same `p`, and same `m` where
/// it is used) [`Access::BroadcastAs`] that one, so the kernel computes the walk once.
fn share_walks(inputs: &mut [(DType, Access)], layouts: &[Layout]) {
    let walk_of = |k: usize, access: Access| match (access, layouts.get(k)) {
        (Access::Broadcast { rem, .. }, Some(layout)) => {
            broadcast_walk(layout).map(|(p, m, _)| (p, if rem { m } else { 0 }, access))
        }
        _ => None,
    };
    if inputs
        .iter()
        .filter(|(_, a)| matches!(a, Access::Broadcast { .. }))
        .count()
        < 2
    {
        return;
    }
    let walks: SmallVec<[_; 8]> = (0..inputs.len()).map(|k| walk_of(k, inputs[k].1)).collect();
    for k in 1..inputs.len() {
        let Some(mine) = walks[k] else {
            continue;
        };
        let owner = (0..k).find(|&j| walks[j] == Some(mine));
        if let Some(j) = owner.and_then(|j| u8::try_from(j).ok()) {
            inputs[k].1 = Access::BroadcastAs(j);
        }
    }
}

/// Merges neighbouring dimensions of `shape` that every layout walks as one (dimension `d` and
/// `d + 1` merge when each layout's stride of `d` is its stride of `d + 1` times the size of
/// `d + 1`) and drops dimensions of size 1; rewrites the layouts to the merged shape and returns
/// it. Row-major order is kept, so element `i` of the merged shape is element `i` of the original.
pub(crate) fn coalesce(shape: &[usize], layouts: &mut [Layout]) -> Dims {
    // Each merged dimension: its size, and the original dimension whose strides it takes (its
    // innermost one).
    let mut groups: SmallVec<[(usize, usize); 4]> = SmallVec::new();
    for (d, &size) in shape.iter().enumerate() {
        if size == 1 {
            continue;
        }
        if let Some((prev, inner)) = groups.last_mut() {
            if layouts
                .iter()
                .all(|l| l.strides[*inner] == l.strides[d] * size)
            {
                *prev *= size;
                *inner = d;
                continue;
            }
        }
        groups.push((size, d));
    }
    if groups.is_empty() {
        // One element: any stride addresses it; 1 keeps a plain output dense.
        for l in layouts.iter_mut() {
            l.shape = smallvec::smallvec![1];
            l.strides = smallvec::smallvec![1];
        }
        return smallvec::smallvec![1];
    }
    let merged: Dims = groups.iter().map(|&(size, _)| size).collect();
    for l in layouts.iter_mut() {
        l.strides = groups.iter().map(|&(_, d)| l.strides[d]).collect();
        l.shape = merged.clone();
    }
    merged
}
