//! Realizing several pending tensors at once: values of one shape computed from shared inputs
//! (a linear layer's output with the bias added, and the activation of it that the next layer
//! reads) run as one kernel with an output each, instead of one kernel per value that reads the
//! inputs again.

use std::sync::Arc;

use super::fused::Fused;
use super::lazy::{Builder, LazyTensor};
use super::{Source, Tensor};
use crate::error::Result;

impl Tensor {
    /// Runs the pending expressions of `tensors` (stored ones are left as they are). Those of
    /// the first pending tensor's shape, on its executor and not reading element positions, run
    /// as one kernel when it is small enough; the rest one by one. Afterwards every tensor (and
    /// every reshape of it) is stored.
    ///
    /// ```
    /// use hologram_core::{DType, Executor, Tensor};
    /// let exec = Executor::cpu();
    /// let x = Tensor::rand(&exec, &[4, 8], 1, DType::F32)?.realize()?;
    /// let pre = x.add(1.0)?;
    /// let act = pre.relu()?;
    /// let before = exec.launch_count();
    /// Tensor::realize_all(&[&pre, &act])?;
    /// assert_eq!(exec.launch_count() - before, 1);
    /// assert!(!pre.is_lazy() && !act.is_lazy());
    /// # Ok::<(), hologram_core::Error>(())
    /// ```
    pub fn realize_all(tensors: &[&Tensor]) -> Result<()> {
        let pending: Vec<(&Tensor, &Arc<LazyTensor>)> = tensors
            .iter()
            .filter_map(|t| match &t.src {
                Source::Lazy(l) if !l.is_done() => Some((*t, l)),
                _ => None,
            })
            .collect();
        let Some(&(first, _)) = pending.first() else {
            return Ok(());
        };
        let (together, rest): (Vec<_>, Vec<_>) = pending.iter().partition(|(t, l)| {
            t.shape() == first.shape()
                && Arc::ptr_eq(&t.exec.inner, &first.exec.inner)
                && l.pending(t.shape(), |e| !e.graph.reads_positions()) == Some(true)
        });
        if together.len() < 2 || !run_together(&together)? {
            for (t, _) in &together {
                t.realize()?;
            }
        }
        for (t, _) in rest {
            t.realize()?;
        }
        Ok(())
    }
}

/// Runs `values` (pending, of one shape) as one kernel into fresh storage that each becomes
/// the result of. False (nothing run) when the kernel would be too large.
fn run_together(values: &[&(&Tensor, &Arc<LazyTensor>)]) -> Result<bool> {
    let shape = values[0].0.shape().to_vec();
    let mut b = Builder::new(&shape);
    let mut roots = Vec::with_capacity(values.len());
    for (t, _) in values {
        roots.push(b.tensor(t)?);
    }
    if !b.fits_one_kernel() {
        return Ok(false);
    }
    let exec = values[0].0.executor();
    let outs = values
        .iter()
        .map(|(t, _)| Tensor::uninit(exec, &shape, t.dtype))
        .collect::<Result<Vec<_>>>()?;
    let out_refs: Vec<&Tensor> = outs.iter().collect();
    Fused {
        graph: &b.graph,
        roots: &roots,
        inputs: &b.inputs,
        shape: &shape,
    }
    .run(exec, &out_refs)?;
    for ((_, lazy), out) in values.iter().zip(&outs) {
        lazy.set_done(out.storage()?.0);
    }
    Ok(true)
}
