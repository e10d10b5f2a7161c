//! Parallel assignment: tensors overwritten with new values that were all computed from the old
//! ones, as an optimizer step writes parameters and their state back.
//!
//! Realizing every new value and then copying it over its destination is always right, and
//! costs a buffer and a copy per destination. A pending element-wise value that reads its
//! destination only at the element it writes can instead run straight into the destination, once
//! no other value still to be written reads that destination: an Adam step writes a parameter
//! (reading the old moments), then the moments, with no copies.

use std::sync::Arc;

use hologram_backends::Memory;

use super::lazy::Input;
use super::{Source, Tensor};
use crate::error::{Error, Result};

impl Tensor {
    /// Overwrites each `dst` with its `new` value, as if every new value were computed before
    /// any destination is written (a parallel assignment). `new` is broadcast to `dst`'s shape
    /// and converted to its dtype, as [`Tensor::copy_into`] does; a pair whose `new` is `dst`
    /// itself is left as it is.
    ///
    /// Values that can run straight into their destinations do (no temporary, no copy); the rest
    /// are realized first and then copied.
    ///
    /// ```
    /// use hologram_core::{Executor, Tensor};
    /// let exec = Executor::cpu();
    /// let a = Tensor::from_slice(&exec, &[1.0f32, 2.0], &[2])?;
    /// let b = Tensor::from_slice(&exec, &[10.0f32, 20.0], &[2])?;
    /// // a, b = a + b, a * b: both right-hand sides see the old a and b.
    /// Tensor::assign_all(&[(a.add(&b)?, a.clone()), (a.mul(&b)?, b.clone())])?;
    /// assert_eq!(a.to_vec::<f32>()?, vec![11.0, 22.0]);
    /// assert_eq!(b.to_vec::<f32>()?, vec![10.0, 40.0]);
    /// # Ok::<(), hologram_core::Error>(())
    /// ```
    pub fn assign_all(pairs: &[(Tensor, Tensor)]) -> Result<()> {
        let mut reads = Vec::with_capacity(pairs.len());
        let mut dsts = Vec::with_capacity(pairs.len());
        for (new, dst) in pairs {
            new.check_same_executor(dst)?;
            let Source::Stored(storage) = &dst.src else {
                return Err(Error::InvalidArgument(
                    "assign_all writes into stored tensors; realize the destination first".into(),
                ));
            };
            dsts.push(storage.memory().clone());
            reads.push(read_set(new)?);
        }
        let mut pending: Vec<usize> = (0..pairs.len())
            .filter(|&i| !is_same_view(&pairs[i].0, &pairs[i].1))
            .collect();
        // Greedy: write a destination once no other pending value reads it. Each round writes at
        // least one, or stops (a cycle: a, b = b, a).
        loop {
            let before = pending.len();
            let mut k = 0;
            while k < pending.len() {
                let i = pending[k];
                let (new, dst) = &pairs[i];
                let free = pending
                    .iter()
                    .all(|&j| j == i || !reads[j].iter().any(|m| overlaps(m, &dsts[i])));
                if free && runs_in_place(new, dst) {
                    new.copy_into(dst)?;
                    pending.remove(k);
                } else {
                    k += 1;
                }
            }
            if pending.len() == before || pending.is_empty() {
                break;
            }
        }
        // The rest through temporaries: all computed, then all written.
        let mut temps = Vec::with_capacity(pending.len());
        for &i in &pending {
            let (new, _) = &pairs[i];
            let temp = if new.is_lazy() {
                new.realize()?
            } else {
                // A stored value may be a view of some destination.
                let out = Tensor::uninit(&new.exec, new.shape(), new.dtype)?;
                new.copy_into(&out)?;
                out
            };
            temps.push(temp);
        }
        for (&i, temp) in pending.iter().zip(&temps) {
            temp.copy_into(&pairs[i].1)?;
        }
        Ok(())
    }
}

/// The device memory `t`'s elements are computed from.
fn read_set(t: &Tensor) -> Result<Vec<Memory>> {
    Ok(match &t.src {
        Source::Lazy(l) if !l.is_done() => l
            .inputs()
            .iter()
            .map(|i| i.storage.memory().clone())
            .collect(),
        _ => vec![t.storage()?.0.memory().clone()],
    })
}

/// True when `new` is exactly the elements of `dst` (nothing to write).
fn is_same_view(new: &Tensor, dst: &Tensor) -> bool {
    match (&new.src, &dst.src) {
        (Source::Stored(a), Source::Stored(b)) => {
            Arc::ptr_eq(a, b) && new.layout == dst.layout && new.dtype == dst.dtype
        }
        _ => false,
    }
}

/// True when `new` runs as one element-wise kernel written into `dst` in which every lane reads
/// `dst` (if at all) only at the element it writes: then writing in place is the same as writing
/// a temporary.
fn runs_in_place(new: &Tensor, dst: &Tensor) -> bool {
    let Source::Lazy(l) = &new.src else {
        return false;
    };
    if l.is_done() || new.dtype != dst.dtype || l.shape() != dst.shape() {
        return false;
    }
    let Source::Stored(out) = &dst.src else {
        return false;
    };
    let aligned =
        |i: &Input| Arc::ptr_eq(&i.storage, out) && i.layout == dst.layout && i.dtype == dst.dtype;
    l.inputs()
        .iter()
        .all(|i| !overlaps(i.storage.memory(), out.memory()) || aligned(i))
}

/// True when two allocations may share bytes: by address range where the backend gives one,
/// else only when they are the same allocation.
fn overlaps(a: &Memory, b: &Memory) -> bool {
    let range = |m: &Memory| {
        m.device_ptr()
            .or_else(|| m.host_ptr().map(|p| p as u64))
            .map(|start| (start, start + m.size() as u64))
    };
    match (range(a), range(b)) {
        (Some((a0, a1)), Some((b0, b1))) => a0 < b1 && b0 < a1,
        _ => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
    }
}
