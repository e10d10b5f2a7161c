//! Collectives on tensors across the GPUs of one host (NCCL): all-reduce (sum, mean, ...),
//! broadcast, all-gather and reduce-scatter, queued on each executor's stream.
//!
//! One process driving every GPU:
//!
//! ```no_run
//! use hologram_core::collective::{group, Communicator, ReduceOp};
//! use hologram_core::{DType, Executor, Tensor};
//! let execs = (0..hologram_core::cuda_device_count())
//!     .map(Executor::cuda)
//!     .collect::<hologram_core::Result<Vec<_>>>()?;
//! let comms = Communicator::init_all(&execs)?;
//! let grads: Vec<Tensor> = execs.iter().map(|e| Tensor::ones(e, &[1024], DType::F32)).collect::<Result<_, _>>()?;
//! group(|| comms.iter().zip(&grads).try_for_each(|(c, g)| c.all_reduce(g, ReduceOp::Mean)))?;
//! # Ok::<(), hologram_core::Error>(())
//! ```
//!
//! One process per GPU: rank 0 makes a [`UniqueId`], sends [`UniqueId::to_bytes`] to the others,
//! and each calls [`Communicator::init_rank`].

use hologram_backends::cuda::collective as nccl;
pub use hologram_backends::cuda::collective::{ReduceOp, UniqueId, UNIQUE_ID_BYTES};
use hologram_backends::BufferArg;

use crate::backend_type::BackendType;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::tensor::{Source, Tensor};

/// The loaded NCCL's version (`2.21.5`), or why NCCL cannot be used here.
pub fn nccl_version() -> Result<String> {
    Ok(nccl::nccl_version()?)
}

/// Runs the collectives `calls` issues as one NCCL group: required when one thread issues the
/// calls of several ranks (see [`Communicator::init_all`]); it also fuses small collectives.
pub fn group<T>(calls: impl FnOnce() -> Result<T>) -> Result<T> {
    let mut out = None;
    nccl::group(|| {
        out = Some(calls());
        Ok(())
    })?;
    out.unwrap_or_else(|| Err(Error::Internal("an NCCL group ran no calls".into())))
}

/// One rank of a communicator: an executor on one GPU and its place among the host's GPUs.
#[derive(Debug)]
pub struct Communicator {
    comm: nccl::Communicator,
    exec: Executor,
}

fn cuda_only(exec: &Executor) -> Result<()> {
    if exec.backend_type() == BackendType::Cuda {
        Ok(())
    } else {
        Err(Error::DeviceMismatch(format!(
            "collectives run on CUDA executors (NCCL); this executor runs on {}",
            exec.backend_type()
        )))
    }
}

impl Communicator {
    /// One communicator per executor, all driven by this process: rank `i` runs on
    /// `executors[i]`, each on a different GPU. Issue the ranks' calls inside one [`group`].
    pub fn init_all(executors: &[Executor]) -> Result<Vec<Communicator>> {
        executors.iter().try_for_each(cuda_only)?;
        let backends: Vec<_> = executors.iter().map(|e| e.backend().clone()).collect();
        let comms = nccl::Communicator::init_all(&backends)?;
        Ok(comms
            .into_iter()
            .zip(executors)
            .map(|(comm, exec)| Communicator {
                comm,
                exec: exec.clone(),
            })
            .collect())
    }

    /// Rank `rank` of `size`, one process per GPU: blocks until every rank has joined with
    /// the same `id` (made once by rank 0 with [`UniqueId::new`]).
    pub fn init_rank(exec: &Executor, id: &UniqueId, rank: usize, size: usize) -> Result<Self> {
        cuda_only(exec)?;
        let comm = nccl::Communicator::init_rank(exec.backend().clone(), id, rank, size)?;
        Ok(Communicator {
            comm,
            exec: exec.clone(),
        })
    }

    /// This communicator's rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// The executor the rank runs on.
    pub fn executor(&self) -> &Executor {
        &self.exec
    }

    /// The tensor's elements as one buffer argument: it must be this rank's, stored (not a
    /// pending expression) and contiguous, since the collective writes into it.
    fn whole(&self, t: &Tensor, what: &str) -> Result<BufferArg> {
        if self.exec.recording_here() {
            // A plan replays recorded steps; a collective left out would silently not run.
            return Err(Error::InvalidArgument(
                "collectives cannot be recorded into a plan; run them outside the recording".into(),
            ));
        }
        if !t.exec.same_as(&self.exec) {
            return Err(Error::DeviceMismatch(format!(
                "the {what} tensor is on {}, this rank runs on another executor ({}); move it \
                 with to_device()",
                t.device(),
                self.exec.device()
            )));
        }
        let storage = match &t.src {
            Source::Stored(s) => s.clone(),
            Source::Lazy(_) => {
                return Err(Error::InvalidArgument(format!(
                    "the {what} tensor is a pending expression; realize() it first"
                )))
            }
        };
        if !t.is_contiguous() {
            return Err(Error::ShapeMismatch(format!(
                "the {what} tensor must be contiguous; call contiguous() first"
            )));
        }
        let size = t.dtype.size();
        Ok(storage.arg(t.layout.offset * size, t.numel() * size))
    }

    /// Combines every rank's `tensor` with `op` and stores the result in it, on every rank.
    pub fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<()> {
        reducible(tensor.dtype, op)?;
        let buf = self.whole(tensor, "all-reduced")?;
        Ok(self
            .comm
            .all_reduce(&buf, &buf, tensor.numel(), tensor.dtype.storage(), op)?)
    }

    /// Overwrites every rank's `tensor` with rank `root`'s.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<()> {
        let buf = self.whole(tensor, "broadcast")?;
        Ok(self
            .comm
            .broadcast(&buf, &buf, tensor.numel(), tensor.dtype.storage(), root)?)
    }

    /// Every rank's `tensor` stacked along the first axis in rank order (shape `[size * d0,
    /// ...]`; a scalar becomes `[size]`), on every rank.
    pub fn all_gather(&self, tensor: &Tensor) -> Result<Tensor> {
        let send = self.whole(tensor, "gathered")?;
        let mut shape = tensor.shape().to_vec();
        match shape.first_mut() {
            Some(d0) => *d0 *= self.size(),
            None => shape.push(self.size()),
        }
        let out = Tensor::uninit(&self.exec, &shape, tensor.dtype)?;
        let recv = self.whole(&out, "gather result")?;
        self.comm
            .all_gather(&send, &recv, tensor.numel(), tensor.dtype.storage())?;
        Ok(out)
    }

    /// Combines every rank's `tensor` with `op` and returns this rank's block of the result:
    /// the first axis (a multiple of the number of ranks) split in `size` equal blocks, block
    /// `rank` here.
    pub fn reduce_scatter(&self, tensor: &Tensor, op: ReduceOp) -> Result<Tensor> {
        reducible(tensor.dtype, op)?;
        let n = self.size();
        let mut shape = tensor.shape().to_vec();
        match shape.first_mut() {
            Some(d0) if *d0 % n == 0 => *d0 /= n,
            _ => {
                return Err(Error::ShapeMismatch(format!(
                    "reduce-scatter splits the first axis in {n} equal blocks; shape {:?} does \
                     not split",
                    tensor.shape()
                )))
            }
        }
        let send = self.whole(tensor, "reduce-scattered")?;
        let out = Tensor::uninit(&self.exec, &shape, tensor.dtype)?;
        let recv = self.whole(&out, "reduce-scatter result")?;
        self.comm
            .reduce_scatter(&send, &recv, tensor.numel() / n, tensor.dtype.storage(), op)?;
        Ok(out)
    }

    /// An error a collective ran into asynchronously (a peer process died), or `Ok`.
    pub fn async_error(&self) -> Result<()> {
        Ok(self.comm.async_error()?)
    }
}

/// Reductions of bools make no sense to NCCL (they are bytes); everything else NCCL has works.
fn reducible(dtype: DType, _op: ReduceOp) -> Result<()> {
    if dtype == DType::Bool {
        return Err(Error::TypeMismatch(
            "bool tensors cannot be reduced; cast them to an integer type first".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_refuse_cpu_executors_with_a_reason() {
        let e = Communicator::init_all(&[Executor::cpu()]).unwrap_err();
        assert!(
            matches!(e, Error::DeviceMismatch(ref m) if m.contains("CUDA executors")),
            "{e}"
        );
        let id = UniqueId::from_bytes(&[0u8; UNIQUE_ID_BYTES]).unwrap();
        let e = Communicator::init_rank(&Executor::cpu(), &id, 0, 1).unwrap_err();
        assert!(matches!(e, Error::DeviceMismatch(_)), "{e}");
    }

    #[test]
    fn bools_are_not_reduced() {
        assert!(reducible(DType::Bool, ReduceOp::Sum).is_err());
        assert!(reducible(DType::F32, ReduceOp::Mean).is_ok());
    }
}
