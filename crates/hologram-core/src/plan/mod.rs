//! Plans: a function of tensors recorded once and replayed by one call.
//!
//! Recording runs the function once on real inputs, with lazy fusion of element-wise chains as
//! always, and keeps every piece of device work it queues (kernel launches, GEMMs, device copies,
//! uploaded constants) with the buffers it touched. Memory comes from the plan's own arena: a
//! value freed during the recording gives its memory to later values, so the plan holds only as
//! much as the recording had live at once (its peak is [`PlanStats::peak_bytes`]). A replay
//! copies new inputs into the input buffers, queues the same work again without running any of
//! the function's host code (no Python, no shape logic, no kernel lookups), and copies the
//! outputs into fresh tensors. On CUDA the work is captured once as a CUDA graph, so a replay is
//! one launch from the host (plus the input and output copies).
//!
//! ```
//! use hologram_core::{DType, Executor, Tensor};
//! use hologram_core::plan::Plan;
//!
//! let exec = Executor::cpu();
//! let x = Tensor::from_slice(&exec, &[1.0f32, -2.0, 3.0], &[3])?;
//! let w = Tensor::from_slice(&exec, &[0.5f32, 0.5, 0.5], &[3])?;
//! let (plan, first) = Plan::record(&exec, &[x.clone(), w.clone()], |t| {
//!     Ok(vec![t[0].mul(&t[1])?.relu()?.sum(&[0], false)?])
//! })?;
//! assert_eq!(first[0].to_vec::<f32>()?, vec![2.0]);
//! let y = Tensor::from_slice(&exec, &[4.0f32, 4.0, -4.0], &[3])?;
//! assert_eq!(plan.run(&[y, w])?[0].to_vec::<f32>()?, vec![4.0]);
//! assert_eq!(plan.stats().replays, 1);
//! # Ok::<(), hologram_core::Error>(())
//! ```

pub(crate) mod step;

use std::sync::{Arc, Mutex};

use hologram_backends::Replay;

use crate::alloc::arena::Arena;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::storage::Storage;
use crate::tensor::{Source, Tensor};

use step::Step;

/// What a plan holds and has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Pieces of device work a replay queues.
    pub steps: usize,
    /// Kernel launches among them.
    pub launches: usize,
    /// GEMMs among them.
    pub gemms: usize,
    /// Device copies among them (constants included).
    pub copies: usize,
    /// Bytes of device memory the plan holds for its values (the recording's live peak).
    pub peak_bytes: u64,
    /// Bytes of constants the plan keeps on the device.
    pub constant_bytes: u64,
    /// True when replays run as one captured device graph (CUDA graphs).
    pub captured: bool,
    /// Replays so far.
    pub replays: u64,
}

/// A tensor's shape and dtype: what a plan's input must be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    /// Shape.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// The spec of a tensor.
    pub fn of(t: &Tensor) -> TensorSpec {
        TensorSpec {
            shape: t.shape().to_vec(),
            dtype: t.dtype(),
        }
    }
}

/// A stored, contiguous buffer of a plan: an input slot or an output.
struct Slot {
    storage: Arc<Storage>,
    /// Byte offset of the first element.
    offset: usize,
    spec: TensorSpec,
}

impl Slot {
    fn bytes(&self) -> usize {
        self.spec.shape.iter().product::<usize>() * self.spec.dtype.size()
    }
}

/// A plan being recorded: the function's inputs are [`Recording::inputs`]; every device op the
/// recording thread queues on the executor until [`Recording::finish`] becomes part of the plan.
/// Dropping it unfinished stops the recording.
pub struct Recording {
    exec: Executor,
    arena: Arc<Arena>,
    inputs: Vec<Tensor>,
    slots: Vec<Slot>,
    done: bool,
}

impl Recording {
    /// Starts recording a plan on `exec` whose inputs look like `inputs`; their values become
    /// the recording's inputs (copied into the plan's input buffers).
    pub fn begin(exec: &Executor, inputs: &[Tensor]) -> Result<Recording> {
        let arena = Arc::new(Arena::new(exec.backend().clone()));
        exec.allocate_in(Some(arena.clone()));
        let bound = Self::input_slots(exec, inputs);
        exec.allocate_in(None);
        let (tensors, slots) = bound?;
        exec.begin_recording(arena.clone())?;
        Ok(Recording {
            exec: exec.clone(),
            arena,
            inputs: tensors,
            slots,
            done: false,
        })
    }

    fn input_slots(exec: &Executor, inputs: &[Tensor]) -> Result<(Vec<Tensor>, Vec<Slot>)> {
        let mut tensors = Vec::with_capacity(inputs.len());
        let mut slots = Vec::with_capacity(inputs.len());
        for x in inputs {
            if !x.executor().same_as(exec) {
                return Err(Error::DeviceMismatch(
                    "a plan's inputs must be on the executor it is recorded on".into(),
                ));
            }
            let t = Tensor::uninit(exec, x.shape(), x.dtype())?;
            bind(x, &t)?;
            let (storage, layout) = t.storage()?;
            slots.push(Slot {
                storage,
                offset: layout.offset * x.dtype().size(),
                spec: TensorSpec::of(x),
            });
            tensors.push(t);
        }
        Ok((tensors, slots))
    }

    /// The inputs to compute with: tensors in the plan's input buffers.
    pub fn inputs(&self) -> &[Tensor] {
        &self.inputs
    }

    /// Ends the recording with the function's results and returns the plan and fresh copies of
    /// the results. The results are realized (and made contiguous) as part of the plan.
    pub fn finish(mut self, outputs: &[Tensor]) -> Result<(Plan, Vec<Tensor>)> {
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
            std::mem::take(&mut self.slots),
            out_slots,
            steps,
            self.arena.clone(),
        )?;
        let first = plan.collect_outputs()?;
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

/// Copies `x` into the contiguous stored tensor `slot` (same shape and dtype): one device copy
/// when `x` is stored contiguously, else a copy kernel.
fn bind(x: &Tensor, slot: &Tensor) -> Result<()> {
    if x.shape() != slot.shape() || x.dtype() != slot.dtype() {
        return Err(Error::ShapeMismatch(format!(
            "a plan input of {} {:?} was given a {} {:?} tensor",
            slot.dtype(),
            slot.shape(),
            x.dtype(),
            x.shape()
        )));
    }
    match &x.src {
        Source::Stored(s) if x.is_contiguous() => {
            let (dst, layout) = slot.storage()?;
            let size = x.dtype().size();
            x.exec.copy_device(
                s.memory(),
                x.layout.offset * size,
                dst.memory(),
                layout.offset * size,
                x.numel() * size,
            )
        }
        _ => x.copy_into(slot),
    }
}

struct PlanState {
    replays: u64,
    /// With `HOLOGRAM_PLAN_PROFILE=1`: seconds and counts per step kind, printed when the plan
    /// is dropped.
    profile: Option<std::collections::HashMap<String, (u64, f64)>>,
}

/// A recorded function of tensors, replayed by [`Plan::run`]. See the [module](self) docs.
pub struct Plan {
    exec: Executor,
    inputs: Vec<Slot>,
    outputs: Vec<Slot>,
    steps: Vec<Step>,
    graph: Option<Box<dyn Replay>>,
    /// Device memory for the values; kept alive with the plan.
    arena: Arc<Arena>,
    /// Device copies of the constants the recording uploaded.
    _constants: Vec<hologram_backends::Memory>,
    stats: PlanStats,
    state: Mutex<PlanState>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plan({:?})", self.stats())
    }
}

impl Plan {
    /// Records `f` on `inputs` and returns the plan with the results of the recording run.
    pub fn record(
        exec: &Executor,
        inputs: &[Tensor],
        f: impl FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<(Plan, Vec<Tensor>)> {
        let rec = Recording::begin(exec, inputs)?;
        let outputs = f(rec.inputs())?;
        rec.finish(&outputs)
    }

    fn build(
        exec: &Executor,
        inputs: Vec<Slot>,
        outputs: Vec<Slot>,
        mut steps: Vec<Step>,
        arena: Arc<Arena>,
    ) -> Result<Plan> {
        // Constants: uploaded once into device memory of the plan's own, copied on replay
        // (their buffers may hold other values between uses).
        let backend = exec.backend();
        let mut constants = Vec::new();
        let mut constant_bytes = 0u64;
        for step in &mut steps {
            if let Step::Upload {
                memory,
                offset,
                data,
            } = step
            {
                let c = backend.allocate(data.len().max(1))?;
                backend.copy_in(&c, 0, data)?;
                constant_bytes += data.len() as u64;
                *step = Step::Copy {
                    src: c.clone(),
                    src_offset: 0,
                    dst: memory.clone(),
                    dst_offset: *offset,
                    len: data.len(),
                };
                constants.push(c);
            }
        }
        let count = |f: fn(&Step) -> bool| steps.iter().filter(|s| f(s)).count();
        let mut stats = PlanStats {
            steps: steps.len(),
            launches: count(|s| matches!(s, Step::Launch { .. })),
            gemms: count(|s| matches!(s, Step::Gemm { .. })),
            copies: count(|s| matches!(s, Step::Copy { .. })),
            peak_bytes: arena.bytes().1,
            constant_bytes,
            ..PlanStats::default()
        };
        let profile = std::env::var_os("HOLOGRAM_PLAN_PROFILE").is_some_and(|v| v != "0");
        let graph = if profile || std::env::var_os("HOLOGRAM_PLAN_NO_CAPTURE").is_some() {
            None
        } else {
            backend.capture(&mut || steps.iter().try_for_each(|s| s.run(backend.as_ref())))?
        };
        stats.captured = graph.is_some();
        Ok(Plan {
            exec: exec.clone(),
            inputs,
            outputs,
            steps,
            graph,
            arena,
            _constants: constants,
            stats,
            state: Mutex::new(PlanState {
                replays: 0,
                profile: profile.then(Default::default),
            }),
        })
    }

    /// With `HOLOGRAM_PLAN_PROFILE=1` set when the plan was made: a table of the time each
    /// kind of step took over the replays so far (steps synchronized one by one, so the times
    /// are device times plus launch costs). `None` without profiling.
    pub fn profile_report(&self) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let p = state.profile.as_ref()?;
        let mut rows: Vec<_> = p.iter().collect();
        rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        let total: f64 = rows.iter().map(|r| r.1 .1).sum();
        let per = state.replays.max(1) as f64;
        let mut out = format!(
            "{} replays, {:.3} ms per replay\n",
            state.replays,
            total * 1e3 / per
        );
        for (name, (n, secs)) in rows.iter().take(40) {
            out += &format!(
                "  {:9.3} ms/replay {:5} x/replay  {name}\n",
                secs * 1e3 / per,
                *n as f64 / per
            );
        }
        Some(out)
    }

    /// What each input must be.
    pub fn input_specs(&self) -> Vec<TensorSpec> {
        self.inputs.iter().map(|s| s.spec.clone()).collect()
    }

    /// What the outputs are.
    pub fn output_specs(&self) -> Vec<TensorSpec> {
        self.outputs.iter().map(|s| s.spec.clone()).collect()
    }

    /// Counters of the plan.
    pub fn stats(&self) -> PlanStats {
        let mut s = self.stats;
        s.replays = self.state.lock().unwrap_or_else(|p| p.into_inner()).replays;
        s.peak_bytes = self.arena.bytes().1;
        s
    }

    /// Runs the plan on new inputs (same shapes and dtypes as the recording's) and returns fresh
    /// output tensors. Replays of one plan run one at a time.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::LengthMismatch(format!(
                "the plan takes {} inputs, {} were given",
                self.inputs.len(),
                inputs.len()
            )));
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for (x, slot) in inputs.iter().zip(&self.inputs) {
            if !x.executor().same_as(&self.exec) {
                return Err(Error::DeviceMismatch(
                    "a plan's inputs must be on the executor it was recorded on".into(),
                ));
            }
            let t = Tensor::stored(
                &self.exec,
                slot.spec.dtype,
                crate::tensor::Layout::contiguous(&slot.spec.shape),
                slot.storage.clone(),
            );
            bind(x, &t)?;
        }
        // A recording in progress on this thread records the replayed work step by step (a plan
        // used inside another plan); otherwise the captured graph, if any, runs it.
        match &self.graph {
            Some(g) if !self.exec.recording_here() => g.replay()?,
            _ => {
                for step in &self.steps {
                    let timer = match &state.profile {
                        Some(_) => {
                            self.exec.synchronize()?;
                            Some(std::time::Instant::now())
                        }
                        None => None,
                    };
                    match step {
                        Step::Launch {
                            kernel,
                            config,
                            args,
                        } => self.exec.launch(kernel, config, args)?,
                        Step::Gemm { desc, a, b, c } => self.exec.gemm(desc, a, b, c)?,
                        Step::Copy {
                            src,
                            src_offset,
                            dst,
                            dst_offset,
                            len,
                        } => self
                            .exec
                            .copy_device(src, *src_offset, dst, *dst_offset, *len)?,
                        Step::Upload { .. } => step.run(self.exec.backend().as_ref())?,
                    }
                    if let (Some(t), Some(p)) = (timer, state.profile.as_mut()) {
                        self.exec.synchronize()?;
                        let e = p.entry(step.describe()).or_default();
                        e.0 += 1;
                        e.1 += t.elapsed().as_secs_f64();
                    }
                }
            }
        }
        state.replays += 1;
        self.collect_outputs()
    }

    /// Fresh tensors holding copies of the output buffers.
    fn collect_outputs(&self) -> Result<Vec<Tensor>> {
        self.outputs
            .iter()
            .map(|slot| {
                let t = Tensor::uninit(&self.exec, &slot.spec.shape, slot.spec.dtype)?;
                let (dst, layout) = t.storage()?;
                self.exec.copy_device(
                    slot.storage.memory(),
                    slot.offset,
                    dst.memory(),
                    layout.offset * slot.spec.dtype.size(),
                    slot.bytes(),
                )?;
                Ok(t)
            })
            .collect()
    }
}
