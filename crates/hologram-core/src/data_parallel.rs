//! Data-parallel training: every rank computes the gradients of its share of the batch, and
//! [`GradientBuckets`] averages them across ranks. Gradients are copied into flat buckets (about
//! 25 MiB, as PyTorch's DDP) as they are produced; a full bucket is all-reduced at once, so the
//! collective is queued while the host is still producing later gradients. Buckets are launched
//! in the same order on every rank, which NCCL requires.
//!
//! [`assign_buckets`] is the bucketing rule (the same as `hologram_torch`'s); it needs no GPU.

use crate::dtype::DType;

/// The bucket size PyTorch's DDP uses by default (`bucket_cap_mb=25`).
pub const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// Groups parameters, given as `(element count, dtype)` in registration order, into buckets
/// of at most `cap_bytes` bytes (a parameter larger than that gets its own), listing parameter
/// indices per bucket. Gradients arrive roughly in reverse registration order (the last layer's
/// first), so buckets are filled from the last parameter backwards; a bucket holds one dtype,
/// since it is one flat tensor.
pub fn assign_buckets(params: &[(usize, DType)], cap_bytes: usize) -> Vec<Vec<usize>> {
    let mut buckets = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let (mut bytes, mut dtype) = (0usize, None);
    for (i, &(numel, ty)) in params.iter().enumerate().rev() {
        let size = numel.saturating_mul(ty.size());
        if !current.is_empty() && (dtype != Some(ty) || bytes.saturating_add(size) > cap_bytes) {
            buckets.push(std::mem::take(&mut current));
            bytes = 0;
        }
        current.push(i);
        bytes = bytes.saturating_add(size);
        dtype = Some(ty);
    }
    if !current.is_empty() {
        buckets.push(current);
    }
    buckets
}

#[cfg(feature = "cuda")]
pub use gradients::GradientBuckets;

#[cfg(feature = "cuda")]
mod gradients {
    use std::sync::Arc;

    use super::assign_buckets;
    use crate::collective::{Communicator, ReduceOp};
    use crate::dtype::DType;
    use crate::error::{Error, Result};
    use crate::tensor::Tensor;

    struct Bucket {
        flat: Tensor,
        members: Vec<usize>,
        ready: Vec<bool>,
        filled: usize,
    }

    /// Gradient buckets of one rank: [`add`](GradientBuckets::add) each gradient as it is
    /// produced, then [`finish`](GradientBuckets::finish) returns them averaged over the ranks.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use hologram_core::collective::{Communicator, UniqueId};
    /// use hologram_core::data_parallel::{GradientBuckets, DEFAULT_BUCKET_BYTES};
    /// use hologram_core::{DType, Executor, Tensor};
    /// # let (rank, size, id) = (0, 1, UniqueId::new()?);
    /// let exec = Executor::cuda(rank)?;
    /// let comm = Arc::new(Communicator::init_rank(&exec, &id, rank, size)?);
    /// let shapes = vec![(vec![512, 256], DType::F32), (vec![256], DType::F32)];
    /// let mut buckets = GradientBuckets::new(comm, &shapes, DEFAULT_BUCKET_BYTES)?;
    /// // ... backward produces the bias gradient first, then the weight's:
    /// buckets.add(1, &Tensor::ones(&exec, &[256], DType::F32)?)?;
    /// buckets.add(0, &Tensor::ones(&exec, &[512, 256], DType::F32)?)?;
    /// let averaged = buckets.finish()?; // in parameter order
    /// # Ok::<(), hologram_core::Error>(())
    /// ```
    pub struct GradientBuckets {
        comm: Arc<Communicator>,
        shapes: Vec<Vec<usize>>,
        /// Parameter `i` lives in bucket `place[i].0` at element `place[i].1`.
        place: Vec<(usize, usize)>,
        buckets: Vec<Bucket>,
        /// The next bucket to launch: they go in order, the same on every rank.
        next: usize,
    }

    impl GradientBuckets {
        /// Buckets for parameters of the given shapes and dtypes (registration order), at most
        /// `cap_bytes` each, on the communicator's executor.
        pub fn new(
            comm: Arc<Communicator>,
            params: &[(Vec<usize>, DType)],
            cap_bytes: usize,
        ) -> Result<GradientBuckets> {
            if cap_bytes == 0 {
                return Err(Error::InvalidArgument(
                    "the bucket size must be at least one byte".into(),
                ));
            }
            let sizes: Vec<(usize, DType)> = params
                .iter()
                .map(|(shape, ty)| (shape.iter().product(), *ty))
                .collect();
            let mut place = vec![(0, 0); params.len()];
            let mut buckets = Vec::new();
            for (b, members) in assign_buckets(&sizes, cap_bytes).into_iter().enumerate() {
                let mut total = 0;
                for &i in &members {
                    place[i] = (b, total);
                    total += sizes[i].0;
                }
                let dtype = sizes[members[0]].1;
                buckets.push(Bucket {
                    flat: Tensor::zeros(comm.executor(), &[total], dtype)?,
                    ready: vec![false; members.len()],
                    members,
                    filled: 0,
                });
            }
            Ok(GradientBuckets {
                comm,
                shapes: params.iter().map(|(s, _)| s.clone()).collect(),
                place,
                buckets,
                next: 0,
            })
        }

        /// The number of buckets.
        pub fn bucket_count(&self) -> usize {
            self.buckets.len()
        }

        /// Parameter `index`'s slot in its bucket, shaped like the parameter (a view).
        fn slot(&self, index: usize) -> Result<Tensor> {
            let (b, offset) = self.place[index];
            let n: usize = self.shapes[index].iter().product();
            let shape: Vec<isize> = self.shapes[index].iter().map(|&d| d as isize).collect();
            self.buckets[b]
                .flat
                .slice(0, offset, offset + n, 1)?
                .reshape(&shape)
        }

        /// Copies parameter `index`'s gradient into its bucket; every bucket that is full and
        /// whose predecessors went is all-reduced (mean) now.
        pub fn add(&mut self, index: usize, grad: &Tensor) -> Result<()> {
            let Some(&(b, _)) = self.place.get(index) else {
                return Err(Error::InvalidArgument(format!(
                    "parameter {index} of {}",
                    self.place.len()
                )));
            };
            if grad.shape() != self.shapes[index].as_slice() {
                return Err(Error::ShapeMismatch(format!(
                    "the gradient of parameter {index} has shape {:?}, the parameter {:?}",
                    grad.shape(),
                    self.shapes[index]
                )));
            }
            let grad = grad.to_device(self.comm.executor())?;
            grad.copy_into(&self.slot(index)?)?;
            let bucket = &mut self.buckets[b];
            let j = bucket
                .members
                .iter()
                .position(|&m| m == index)
                .ok_or_else(|| Error::Internal("a parameter missing from its bucket".into()))?;
            if !bucket.ready[j] {
                bucket.ready[j] = true;
                bucket.filled += 1;
            }
            self.launch_ready()
        }

        fn launch_ready(&mut self) -> Result<()> {
            while let Some(bucket) = self.buckets.get(self.next) {
                if bucket.filled < bucket.members.len() {
                    break;
                }
                self.comm.all_reduce(&bucket.flat, ReduceOp::Mean)?;
                self.next += 1;
            }
            Ok(())
        }

        /// Launches what is left (parameters that got no gradient count as zeros: every rank
        /// must launch every bucket) and returns the averaged gradients in parameter order.
        /// They are views of the buckets: use them before the next round's first `add`.
        pub fn finish(&mut self) -> Result<Vec<Tensor>> {
            for b in self.next..self.buckets.len() {
                let missing: Vec<usize> = {
                    let bucket = &self.buckets[b];
                    (0..bucket.members.len())
                        .filter(|&j| !bucket.ready[j])
                        .map(|j| bucket.members[j])
                        .collect()
                };
                for index in missing {
                    let slot = self.slot(index)?;
                    Tensor::zeros(self.comm.executor(), slot.shape(), slot.dtype())?
                        .copy_into(&slot)?;
                }
                let bucket = &mut self.buckets[b];
                bucket.filled = bucket.members.len();
            }
            self.launch_ready()?;
            let out = (0..self.shapes.len())
                .map(|i| self.slot(i))
                .collect::<Result<Vec<_>>>()?;
            for bucket in &mut self.buckets {
                bucket.ready.iter_mut().for_each(|r| *r = false);
                bucket.filled = 0;
            }
            self.next = 0;
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_backwards_up_to_the_cap() {
        let f32s = |n: usize| (n, DType::F32);
        // 100, 200, 300, 400 bytes; cap 500.
        let params = [f32s(25), f32s(50), f32s(75), f32s(100)];
        assert_eq!(
            assign_buckets(&params, 500),
            vec![vec![3], vec![2, 1], vec![0]]
        );
        assert_eq!(assign_buckets(&params, 10_000), vec![vec![3, 2, 1, 0]]);
        // Larger than the cap: a bucket of its own.
        assert_eq!(
            assign_buckets(&[f32s(10), f32s(1000), f32s(10)], 100),
            vec![vec![2], vec![1], vec![0]]
        );
        // One dtype per bucket.
        assert_eq!(
            assign_buckets(&[f32s(1), (1, DType::F16), (1, DType::F16)], 1 << 20),
            vec![vec![2, 1], vec![0]]
        );
        assert!(assign_buckets(&[], 100).is_empty());
        let mut all: Vec<usize> = assign_buckets(&params, 300).concat();
        all.sort();
        assert_eq!(all, vec![0, 1, 2, 3]);
    }
}
