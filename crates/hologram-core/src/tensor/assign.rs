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

use super::expr::{Graph, NodeId};
use super::fused::{is_dense, Fused};
use super::lazy::{Builder, Input};
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
        let pending: Vec<usize> = (0..pairs.len())
            .filter(|&i| !is_same_view(&pairs[i].0, &pairs[i].1))
            .collect();
        // Values of one shape reading one another's operands (a parameter and its moments) run
        // as one kernel with several outputs where they can.
        let mut units = fused_units(pairs, &pending)?;
        // Greedy: write a unit's destinations once no value outside it still to be written
        // reads them. Each round writes at least one unit, or stops (a cycle: a, b = b, a).
        loop {
            let before = units.len();
            let mut k = 0;
            while k < units.len() {
                let members = units[k].members();
                let free = units.iter().enumerate().all(|(u, other)| {
                    u == k
                        || other.members().iter().all(|&j| {
                            !reads[j]
                                .iter()
                                .any(|m| members.iter().any(|&i| overlaps(m, &dsts[i])))
                        })
                });
                let written = free
                    && match &units[k] {
                        Unit::Fused(f) => {
                            f.run(pairs)?;
                            true
                        }
                        Unit::One(i) => {
                            let (new, dst) = &pairs[*i];
                            runs_in_place(new, dst) && {
                                new.copy_into(dst)?;
                                true
                            }
                        }
                    };
                if written {
                    units.remove(k);
                } else {
                    k += 1;
                }
            }
            if units.len() == before || units.is_empty() {
                break;
            }
        }
        let pending: Vec<usize> = units.iter().flat_map(|u| u.members()).collect();
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
    let pending = match &t.src {
        Source::Lazy(l) => l.pending(t.shape(), |e| {
            e.inputs
                .iter()
                .map(|i| i.storage.memory().clone())
                .collect()
        }),
        Source::Stored(_) => None,
    };
    match pending {
        Some(memories) => Ok(memories),
        None => Ok(vec![t.storage()?.0.memory().clone()]),
    }
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
    if new.dtype != dst.dtype || new.shape() != dst.shape() {
        return false;
    }
    let Source::Stored(out) = &dst.src else {
        return false;
    };
    let aligned =
        |i: &Input| Arc::ptr_eq(&i.storage, out) && i.layout == dst.layout && i.dtype == dst.dtype;
    l.pending(new.shape(), |e| {
        e.inputs
            .iter()
            .all(|i| !overlaps(i.storage.memory(), out.memory()) || aligned(i))
    })
    .unwrap_or(false)
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

/// Most values one fused update kernel writes.
const MAX_FUSED: usize = 4;

/// Pending values written together or alone.
enum Unit {
    One(usize),
    Fused(FusedUnit),
}

impl Unit {
    fn members(&self) -> Vec<usize> {
        match self {
            Unit::One(i) => vec![*i],
            Unit::Fused(f) => f.members.clone(),
        }
    }
}

/// Values of one shape computed by one kernel with an output per destination.
struct FusedUnit {
    members: Vec<usize>,
    graph: Graph,
    roots: Vec<NodeId>,
    inputs: Vec<Input>,
    shape: Vec<usize>,
}

impl FusedUnit {
    fn run(&self, pairs: &[(Tensor, Tensor)]) -> Result<()> {
        let outs: Vec<&Tensor> = self.members.iter().map(|&i| &pairs[i].1).collect();
        let fused = Fused {
            graph: &self.graph,
            roots: &self.roots,
            inputs: &self.inputs,
            shape: &self.shape,
        };
        fused.run(&pairs[self.members[0]].1.exec, &outs)
    }
}

/// True when pair `(new, dst)` may be one output of a fused kernel: a pending expression of
/// `dst`'s shape and dtype, `dst` dense.
fn fusable(new: &Tensor, dst: &Tensor) -> bool {
    match &new.src {
        Source::Lazy(l) => {
            new.dtype == dst.dtype
                && new.shape() == dst.shape()
                && is_dense(dst)
                && l.pending(new.shape(), |e| !e.graph.reads_positions()) == Some(true)
        }
        _ => false,
    }
}

/// The full-size (not broadcast) buffers a pending value reads.
fn full_inputs(t: &Tensor) -> Vec<Memory> {
    match &t.src {
        Source::Lazy(l) => l
            .pending(t.shape(), |e| {
                e.inputs
                    .iter()
                    .filter(|i| {
                        i.layout
                            .strides
                            .iter()
                            .zip(&i.layout.shape)
                            .all(|(&s, &d)| s != 0 || d == 1)
                    })
                    .map(|i| i.storage.memory().clone())
                    .collect()
            })
            .unwrap_or_default(),
        Source::Stored(_) => Vec::new(),
    }
}

/// Splits `pending` into units: fusable values of one shape that read a full-size buffer in
/// common (a gradient, a moment) are grouped, up to [`MAX_FUSED`], where one kernel can write
/// them all in place; every other value is a unit of its own.
fn fused_units(pairs: &[(Tensor, Tensor)], pending: &[usize]) -> Result<Vec<Unit>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let full: Vec<Vec<Memory>> = pairs.iter().map(|(n, _)| full_inputs(n)).collect();
    for &i in pending {
        let (new, dst) = &pairs[i];
        let join = fusable(new, dst)
            .then(|| {
                groups.iter().position(|g| {
                    let (n0, d0) = &pairs[g[0]];
                    g.len() < MAX_FUSED
                        && fusable(n0, d0)
                        && n0.shape() == new.shape()
                        && g.iter().any(|&j| {
                            full[j]
                                .iter()
                                .any(|m| full[i].iter().any(|x| Arc::ptr_eq(m, x)))
                        })
                })
            })
            .flatten();
        match join {
            Some(g) => groups[g].push(i),
            None => groups.push(vec![i]),
        }
    }
    let mut units = Vec::with_capacity(groups.len());
    for g in groups {
        match (g.len() > 1)
            .then(|| fuse(pairs, &g))
            .transpose()?
            .flatten()
        {
            Some(f) => units.push(Unit::Fused(f)),
            None => units.extend(g.into_iter().map(Unit::One)),
        }
    }
    Ok(units)
}

/// The values of `members` as one expression, when it is small enough for one kernel and
/// every lane reads each destination (if at all) only at the element it writes there.
fn fuse(pairs: &[(Tensor, Tensor)], members: &[usize]) -> Result<Option<FusedUnit>> {
    let shape = pairs[members[0]].1.shape().to_vec();
    let mut b = Builder::new(&shape);
    let mut roots = Vec::with_capacity(members.len());
    for &i in members {
        roots.push(b.tensor(&pairs[i].0)?);
    }
    if !b.fits_one_kernel() {
        return Ok(None);
    }
    let dst_storage = |i: usize| match &pairs[i].1.src {
        Source::Stored(s) => Some(s.clone()),
        Source::Lazy(_) => None,
    };
    for (a, &i) in members.iter().enumerate() {
        let Some(out) = dst_storage(i) else {
            return Ok(None);
        };
        // Destinations must not share bytes with each other.
        for &j in &members[a + 1..] {
            if overlaps(out.memory(), pairs[j].1.storage()?.0.memory()) {
                return Ok(None);
            }
        }
        let dst = &pairs[i].1;
        let aligned = |inp: &Input| {
            Arc::ptr_eq(&inp.storage, &out) && inp.layout == dst.layout && inp.dtype == dst.dtype
        };
        if !b
            .inputs
            .iter()
            .all(|inp| !overlaps(inp.storage.memory(), out.memory()) || aligned(inp))
        {
            return Ok(None);
        }
    }
    Ok(Some(FusedUnit {
        members: members.to_vec(),
        graph: b.graph,
        roots,
        inputs: b.inputs,
        shape,
    }))
}
