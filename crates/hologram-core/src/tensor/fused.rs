//! One element-wise kernel for one or more values of one shape over shared stored inputs:
//! its launch spec (dense, broadcast and strided operands, merged dimensions), the launch
//! cache, and the arguments.

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_isa::semantics::Value;
use smallvec::SmallVec;

use super::expr::{Graph, NodeId};
use super::layout::{Dims, Layout};
use super::lazy::Input;
use super::{Source, Tensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::kernels::elementwise::{self, broadcast_walk, Access, Spec};
use crate::kernels::launch_cache;

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
