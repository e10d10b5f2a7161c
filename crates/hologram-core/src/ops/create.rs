//! Creating tensors: ranges, seeded random numbers, concatenation.

use std::sync::Arc;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::tensor::expr::{Graph, Node};
use crate::tensor::layout::axis as norm_axis;
use crate::tensor::lazy::LazyTensor;
use crate::tensor::{Layout, Source, Tensor};

fn generated(exec: &Executor, graph: Graph, root: u32, shape: &[usize], dtype: DType) -> Tensor {
    let lazy = LazyTensor::new(graph, root, Vec::new(), shape);
    Tensor {
        exec: exec.clone(),
        dtype,
        layout: Layout::contiguous(shape),
        src: Source::Lazy(Arc::new(lazy)),
    }
}

impl Tensor {
    /// `start, start + step, ...` below `stop` (above it for a negative step).
    pub fn arange(
        exec: &Executor,
        start: f64,
        stop: f64,
        step: f64,
        dtype: DType,
    ) -> Result<Tensor> {
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
            return Err(Error::ShapeMismatch(format!(
                "arange({start}, {stop}, {step}) is not a finite range"
            )));
        }
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        let mut g = Graph::default();
        let i = g.push(Node::Index, DType::U32);
        let compute = if dtype.is_float() || step.fract() != 0.0 || start.fract() != 0.0 {
            DType::F64
        } else {
            DType::I64
        };
        let fi = g.push(Node::Cast(i), compute);
        let s = g.push(
            Node::Scalar(crate::tensor::lazy::scalar_value(step, compute)),
            compute,
        );
        let a = g.push(
            Node::Scalar(crate::tensor::lazy::scalar_value(start, compute)),
            compute,
        );
        let m = g.push(Node::Binary(crate::BinaryFn::Mul, fi, s), compute);
        let v = g.push(Node::Binary(crate::BinaryFn::Add, m, a), compute);
        let root = if compute == dtype {
            v
        } else {
            g.push(Node::Cast(v), dtype)
        };
        Ok(generated(exec, g, root, &[n], dtype))
    }

    /// Uniform random numbers in [0, 1), reproducible for a seed on every backend.
    pub fn rand(exec: &Executor, shape: &[usize], seed: u64, dtype: DType) -> Result<Tensor> {
        Tensor::random(exec, shape, seed, false, dtype)
    }

    /// Standard normal random numbers, reproducible for a seed on every backend.
    pub fn randn(exec: &Executor, shape: &[usize], seed: u64, dtype: DType) -> Result<Tensor> {
        Tensor::random(exec, shape, seed, true, dtype)
    }

    fn random(
        exec: &Executor,
        shape: &[usize],
        seed: u64,
        normal: bool,
        dtype: DType,
    ) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(Error::TypeMismatch(format!(
                "random tensors are float, not {dtype}"
            )));
        }
        let mut g = Graph::default();
        let r = g.push(Node::Random { seed, normal }, DType::F32);
        let root = if dtype == DType::F32 {
            r
        } else {
            g.push(Node::Cast(r), dtype)
        };
        Ok(generated(exec, g, root, shape, dtype))
    }

    /// Uniform random numbers in [0, 1) (standard normal with `normal`) whose seed is the
    /// value of `seed`, a one-element integer tensor: the same kernel gives new numbers when the
    /// tensor's value changes (so a plan's replays draw new dropout masks). Reproducible for a
    /// seed on every backend.
    pub fn rand_seeded(
        seed: &Tensor,
        shape: &[usize],
        normal: bool,
        dtype: DType,
    ) -> Result<Tensor> {
        if !dtype.is_float() {
            return Err(Error::TypeMismatch(format!(
                "random tensors are float, not {dtype}"
            )));
        }
        if seed.numel() != 1 {
            return Err(Error::ShapeMismatch(format!(
                "a random seed is one element, got shape {:?}",
                seed.shape()
            )));
        }
        let s = seed.cast(DType::U32)?.reshape(&[])?;
        let op = crate::tensor::Operand::of(&s)?.broadcast(shape)?;
        let mut g = op.graph;
        let r = g.push(
            Node::RandomSalted {
                salt: op.root,
                normal,
            },
            DType::F32,
        );
        let root = if dtype == DType::F32 {
            r
        } else {
            g.push(Node::Cast(r), dtype)
        };
        let lazy = LazyTensor::new(g, root, op.inputs, shape);
        Ok(Tensor {
            exec: seed.exec.clone(),
            dtype,
            layout: Layout::contiguous(shape),
            src: Source::Lazy(Arc::new(lazy)),
        })
    }

    /// Concatenates tensors along `axis` (dtypes promote; other dimensions must agree).
    pub fn cat(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let first = tensors
            .first()
            .ok_or_else(|| Error::ShapeMismatch("cat of no tensors".into()))?;
        let a = norm_axis(axis, first.rank())?;
        let mut shape = first.shape().to_vec();
        let mut dtype = first.dtype();
        shape[a] = 0;
        for t in tensors {
            first.check_same_executor(t)?;
            let s = t.shape();
            if s.len() != first.rank()
                || s.iter()
                    .enumerate()
                    .any(|(i, &d)| i != a && d != first.shape()[i])
            {
                return Err(Error::ShapeMismatch(format!(
                    "cat along axis {a}: shape {s:?} does not match {:?}",
                    first.shape()
                )));
            }
            shape[a] += s[a];
            dtype = DType::promote(dtype, t.dtype());
        }
        Tensor::cat_copy(tensors, a, &shape, dtype)
    }

    /// [`Tensor::cat`], but when the tensors are views of one buffer lying next to each other
    /// along `axis`, in order (the parts of a `split`, or gradients an op wrote side by side),
    /// the result is the view of that buffer covering them: it shares their memory, so a later
    /// write into one of them shows through. For graphs that never write into a value after
    /// making it (the torch.compile lowering), where `cat` would copy what is already in place.
    ///
    /// ```
    /// use hologram_core::{Executor, Tensor};
    /// let exec = Executor::cpu();
    /// let x = Tensor::from_slice(&exec, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// let (a, b) = (x.slice(1, 0, 1, 1)?, x.slice(1, 1, 3, 1)?);
    /// let y = Tensor::cat_views(&[&a, &b], 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// # Ok::<(), hologram_core::Error>(())
    /// ```
    pub fn cat_views(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        if let Some(t) = Tensor::adjacent_views(tensors, axis) {
            return Ok(t);
        }
        Tensor::cat(tensors, axis)
    }

    /// The view covering `tensors` when they are stored views of one buffer with one dtype and
    /// strides, equal shapes but along `axis`, each starting where the one before ends.
    fn adjacent_views(tensors: &[&Tensor], axis: isize) -> Option<Tensor> {
        let first = tensors.first()?;
        let a = norm_axis(axis, first.rank()).ok()?;
        let Source::Stored(storage) = &first.src else {
            return None;
        };
        let stride = first.layout.strides[a];
        let mut end = first.layout.offset;
        let mut len = 0;
        for t in tensors {
            let Source::Stored(s) = &t.src else {
                return None;
            };
            let same_other_dims = t.rank() == first.rank()
                && (0..t.rank()).all(|i| i == a || t.shape()[i] == first.shape()[i]);
            if !Arc::ptr_eq(s, storage)
                || t.dtype() != first.dtype()
                || t.layout.strides != first.layout.strides
                || !same_other_dims
                || t.layout.offset != end
                || t.shape()[a] == 0
                || stride == 0
            {
                return None;
            }
            end += t.shape()[a] * stride;
            len += t.shape()[a];
        }
        let mut layout = first.layout.clone();
        layout.shape[a] = len;
        Some(Tensor {
            layout,
            ..(*first).clone()
        })
    }

    /// Copies `tensors` one after the other along axis `a` into a new tensor of `shape`.
    fn cat_copy(tensors: &[&Tensor], a: usize, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let first = tensors
            .first()
            .ok_or_else(|| Error::ShapeMismatch("cat of no tensors".into()))?;
        let out = Tensor::uninit(&first.exec, shape, dtype)?;
        let mut at = 0;
        for t in tensors {
            let len = t.shape()[a];
            if len > 0 {
                t.copy_into(&out.slice(a as isize, at, at + len, 1)?)?;
            }
            at += len;
        }
        Ok(out)
    }
}
