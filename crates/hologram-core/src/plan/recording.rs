//! Recording a plan: the inputs are bound, the function runs with the executor recording, and
//! the outputs are realized into buffers of the plan.

use std::sync::Arc;

use super::binding::{bind, Input, Place, Slot};
use super::{Plan, TensorSpec};
use crate::alloc::arena::Arena;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::storage::Storage;
use crate::tensor::{Source, Tensor};

/// A plan being recorded: the function's inputs are [`Recording::inputs`]; every device op the
/// recording thread queues on the executor until [`Recording::finish`] becomes part of the plan.
/// Dropping it unfinished stops the recording.
pub struct Recording {
    exec: Executor,
    arena: Arc<Arena>,
    inputs: Vec<Tensor>,
    bindings: Vec<Input>,
    done: bool,
}

impl Recording {
    /// Starts recording a plan on `exec` whose inputs look like `inputs`; their values become
    /// the recording's inputs (copied into the plan's input buffers).
    pub fn begin(exec: &Executor, inputs: &[Tensor]) -> Result<Recording> {
        Self::begin_bound(exec, inputs, &[])
    }

    /// Like [`Recording::begin`], but the inputs whose `direct[i]` is true are read where they
    /// are (no copy): every replay must then be given a tensor at the same place (the same buffer,
    /// offset, layout and dtype), as parameters are from step to step. A pending expression is
    /// always copied.
    pub fn begin_bound(exec: &Executor, inputs: &[Tensor], direct: &[bool]) -> Result<Recording> {
        let arena = Arc::new(Arena::new(exec.backend().clone()));
        exec.allocate_in(Some(arena.clone()));
        let bound = Self::bind_inputs(exec, inputs, direct);
        exec.allocate_in(None);
        let (tensors, bindings) = bound?;
        exec.begin_recording(arena.clone())?;
        Ok(Recording {
            exec: exec.clone(),
            arena,
            inputs: tensors,
            bindings,
            done: false,
        })
    }

    fn bind_inputs(
        exec: &Executor,
        inputs: &[Tensor],
        direct: &[bool],
    ) -> Result<(Vec<Tensor>, Vec<Input>)> {
        let mut tensors = Vec::with_capacity(inputs.len());
        let mut bindings = Vec::with_capacity(inputs.len());
        for (i, x) in inputs.iter().enumerate() {
            if !x.executor().same_as(exec) {
                return Err(Error::DeviceMismatch(
                    "a plan's inputs must be on the executor it is recorded on".into(),
                ));
            }
            if direct.get(i).copied().unwrap_or(false) {
                if let (Source::Stored(_), Some(place)) = (&x.src, Place::of(x)) {
                    // Another plan's output buffer coming back (imported from another library):
                    // read the buffer itself, so this plan does not keep the import (and with it
                    // the other library's tensor and the other plan's output) alive.
                    let bytes = x.layout.span().saturating_sub(x.layout.offset) * x.dtype().size();
                    let t = match exec.plan_buffer(place.address, bytes) {
                        Some((memory, offset)) => {
                            let mut layout = x.layout.clone();
                            layout.offset = offset / x.dtype().size();
                            let storage = Arc::new(Storage::external(exec, memory));
                            Tensor::stored(exec, x.dtype(), layout, storage)
                        }
                        None => x.clone(),
                    };
                    bindings.push(Input::Direct { place });
                    tensors.push(t);
                    continue;
                }
            }
            let t = Tensor::uninit(exec, x.shape(), x.dtype())?;
            bind(x, &t)?;
            let (storage, layout) = t.storage()?;
            bindings.push(Input::Slot(Slot {
                storage,
                offset: layout.offset * x.dtype().size(),
                spec: TensorSpec::of(x),
            }));
            tensors.push(t);
        }
        Ok((tensors, bindings))
    }

    /// The inputs to compute with: tensors in the plan's input buffers (or the caller's, for
    /// inputs read where they are).
    pub fn inputs(&self) -> &[Tensor] {
        &self.inputs
    }

    /// Ends the recording with the function's results and returns the plan and fresh copies of
    /// the results. The results are realized (and made contiguous) as part of the plan.
    pub fn finish(self, outputs: &[Tensor]) -> Result<(Plan, Vec<Tensor>)> {
        let aliased = vec![false; outputs.len()];
        self.finish_with(outputs, &aliased)
    }

    /// Like [`Recording::finish`]; the results whose `alias[i]` is true are returned as views of
    /// the plan's own output buffers instead of copies (see [`Plan::run_with`]).
    pub fn finish_with(
        mut self,
        outputs: &[Tensor],
        alias: &[bool],
    ) -> Result<(Plan, Vec<Tensor>)> {
        let mut out_slots = Vec::with_capacity(outputs.len());
        for o in outputs {
            let c = o.contiguous()?;
            let (storage, layout) = c.storage()?;
            out_slots.push(Slot {
                storage,
                offset: layout.offset * c.dtype().size(),
                spec: TensorSpec::of(&c),
            });
        }
        self.done = true;
        let steps = self.exec.end_recording();
        let plan = Plan::build(
            &self.exec,
            std::mem::take(&mut self.bindings),
            out_slots,
            steps,
            self.arena.clone(),
        )?;
        let first = plan.outputs(alias, &[], &mut [])?;
        Ok((plan, first))
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.done {
            self.exec.end_recording();
        }
    }
}
