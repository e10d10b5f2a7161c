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
        let out = Tensor::uninit(&first.exec, &shape, dtype)?;
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
