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
//! one launch from the host (plus the input and output copies); a loop that hands the plan the
//! same memory again (a training loop does) gets a graph bound to that memory, which copies
//! nothing (see `bound.rs`).
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

mod binding;
mod bound;
mod constants;
mod edges;
mod host_profile;
mod recording;
pub(crate) mod step;

use std::sync::{Arc, Mutex};

use hologram_backends::Replay;

use crate::alloc::arena::Arena;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::executor::Executor;
use crate::storage::Storage;
use crate::tensor::Tensor;

use binding::{Input, Slot};
pub use host_profile::HOST_PHASES;
use host_profile::{HostClock, HostTimes};
pub use recording::Recording;
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
    /// Constants the steps read in place (a replay copies only the others).
    pub constants_in_place: usize,
    /// True when replays run as one captured device graph (CUDA graphs).
    pub captured: bool,
    /// Steps that read an input where the caller keeps it or write an output into a fresh
    /// tensor (no input or output copy): with a captured graph, those of large inputs and
    /// outputs, run before and after the graph; without one, every step that can.
    pub edge_steps: usize,
    /// Replays so far.
    pub replays: u64,
    /// Graphs captured bound to a caller's memory (see [`Plan::run_with`]).
    pub bound_graphs: usize,
    /// Replays that ran a bound graph (no input or output copies).
    pub bound_replays: u64,
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

struct PlanState {
    replays: u64,
    /// With `HOLOGRAM_PLAN_PROFILE=1`: seconds and counts per step kind, printed when the plan
    /// is dropped.
    profile: Option<std::collections::HashMap<String, (u64, f64)>>,
    /// With `HOLOGRAM_PLAN_HOST_PROFILE=1`: host time per phase of a replay.
    host: Option<HostTimes>,
    /// Graphs bound to callers' memory.
    bound: bound::BoundGraphs,
}

/// A recorded function of tensors, replayed by [`Plan::run`]. See the [module](self) docs.
pub struct Plan {
    exec: Executor,
    inputs: Vec<Input>,
    outputs: Vec<Slot>,
    /// How many of the plan's own buffers (input slots and outputs) share each output's
    /// storage: the output is free to overwrite when nothing else holds it.
    own_refs: Vec<usize>,
    steps: Vec<Step>,
    /// Steps that run outside the graph (see `edges.rs`).
    edges: edges::Edges,
    graph: Option<Box<dyn Replay>>,
    /// With a captured graph: the inputs and outputs a graph bound to the caller's memory uses
    /// in place (`None`: no bound graphs, as without a graph or with none to move).
    bound_edges: Option<edges::Edges>,
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

    pub(crate) fn build(
        exec: &Executor,
        inputs: Vec<Input>,
        outputs: Vec<Slot>,
        mut steps: Vec<Step>,
        arena: Arc<Arena>,
    ) -> Result<Plan> {
        // Constants: uploaded once into device memory of the plan's own, read there in place
        // or copied back on replay (see `constants.rs`).
        let backend = exec.backend();
        let slots: Vec<&hologram_backends::Memory> = outputs
            .iter()
            .map(|o| o.storage.memory())
            .chain(inputs.iter().filter_map(|i| match i {
                Input::Slot(s) => Some(s.storage.memory()),
                Input::Direct { .. } => None,
            }))
            .collect();
        let constants::Constants {
            memory: constants,
            bytes: constant_bytes,
            in_place: constants_in_place,
        } = constants::bind(backend, &arena, &mut steps, &slots)?;
        let count = |f: fn(&Step) -> bool| steps.iter().filter(|s| f(s)).count();
        let mut stats = PlanStats {
            steps: steps.len(),
            launches: count(|s| matches!(s, Step::Launch { .. })),
            gemms: count(|s| matches!(s, Step::Gemm { .. } | Step::Conv { .. })),
            copies: count(|s| matches!(s, Step::Copy { .. })),
            peak_bytes: arena.bytes().1,
            constant_bytes,
            constants_in_place,
            ..PlanStats::default()
        };
        let own_refs: Vec<usize> = outputs
            .iter()
            .map(|o| {
                let same = |s: &Arc<Storage>| Arc::ptr_eq(s, &o.storage);
                outputs.iter().filter(|p| same(&p.storage)).count()
                    + inputs
                        .iter()
                        .filter(|i| matches!(i, Input::Slot(s) if same(&s.storage)))
                        .count()
            })
            .collect();
        // `HOLOGRAM_PLAN_EDGES=0` keeps every step in the graph (input and output copies), for
        // comparison.
        let use_edges = std::env::var_os("HOLOGRAM_PLAN_EDGES").is_none_or(|v| v != "0");
        let mut edges = if use_edges {
            edges::find(&steps, &inputs, &outputs, &own_refs, true)
        } else {
            edges::Edges::default()
        };
        // Both switches: set and not `0` (an empty value is off too).
        let on = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
        let profile = on("HOLOGRAM_PLAN_PROFILE");
        let middle: Vec<&Step> = (0..steps.len())
            .filter(|&i| !edges.outside(i))
            .map(|i| &steps[i])
            .collect();
        let graph = if profile || on("HOLOGRAM_PLAN_NO_CAPTURE") || middle.is_empty() {
            None
        } else {
            backend.capture(&mut || middle.iter().try_for_each(|s| s.run(backend.as_ref())))?
        };
        stats.captured = graph.is_some();
        // Every step runs from the host (no graph), or a bound graph holds every step: each
        // input and output its steps can use in place. `HOLOGRAM_PLAN_BOUND=0` keeps the
        // copies of a captured plan, for comparison.
        let bound_on = std::env::var_os("HOLOGRAM_PLAN_BOUND").is_none_or(|v| v != "0");
        let mut bound_edges = None;
        if use_edges && (graph.is_none() || bound_on) {
            let in_place = edges::find(&steps, &inputs, &outputs, &own_refs, false);
            if graph.is_none() {
                edges = in_place;
            } else if !(in_place.inputs.is_empty() && in_place.outputs.is_empty()) {
                bound_edges = Some(in_place);
            }
        }
        stats.edge_steps = edges.head.len() + edges.tail.len();
        Ok(Plan {
            exec: exec.clone(),
            inputs,
            outputs,
            own_refs,
            steps,
            edges,
            graph,
            bound_edges,
            arena,
            _constants: constants,
            stats,
            state: Mutex::new(PlanState {
                replays: 0,
                profile: profile.then(Default::default),
                host: on("HOLOGRAM_PLAN_HOST_PROFILE").then_some([(0, 0.0); HOST_PHASES.len()]),
                bound: Default::default(),
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

    /// With `HOLOGRAM_PLAN_HOST_PROFILE=1` set when the plan was made: `(phase, calls,
    /// seconds)` of the host time of each phase of the replays so far (see [`HOST_PHASES`]);
    /// `None` without it.
    pub fn host_profile(&self) -> Option<Vec<(&'static str, u64, f64)>> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let t = state.host.as_ref()?;
        Some(
            HOST_PHASES
                .iter()
                .zip(t)
                .map(|(p, &(n, s))| (*p, n, s))
                .collect(),
        )
    }

    /// What each input must be.
    pub fn input_specs(&self) -> Vec<TensorSpec> {
        self.inputs.iter().map(|s| s.spec().clone()).collect()
    }

    /// True when `inputs` can be this plan's inputs: their shapes and dtypes match, and inputs
    /// read in place (see [`Recording::begin_bound`]) are the recorded tensors.
    pub fn accepts(&self, inputs: &[Tensor]) -> bool {
        inputs.len() == self.inputs.len()
            && inputs
                .iter()
                .zip(&self.inputs)
                .all(|(x, i)| x.executor().same_as(&self.exec) && i.accepts(x))
    }

    /// True when no tensor outside the plan holds one of its output buffers (returned as views
    /// by [`Plan::run_with`]), so a replay may overwrite them.
    pub fn outputs_free(&self) -> bool {
        self.outputs
            .iter()
            .zip(&self.own_refs)
            .all(|(o, &own)| Arc::strong_count(&o.storage) <= own)
    }

    /// What the outputs are.
    pub fn output_specs(&self) -> Vec<TensorSpec> {
        self.outputs.iter().map(|s| s.spec.clone()).collect()
    }

    /// Counters of the plan.
    pub fn stats(&self) -> PlanStats {
        let mut s = self.stats;
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.replays = state.replays;
        s.bound_graphs = state.bound.made;
        s.bound_replays = state.bound.replays;
        s.peak_bytes = self.arena.bytes().1;
        s
    }

    /// Runs the plan on new inputs (same shapes and dtypes as the recording's) and returns fresh
    /// output tensors. Replays of one plan run one at a time.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.run_with(inputs, &[])
    }

    /// Like [`Plan::run`]; the outputs whose `alias[i]` is true are returned as views of the
    /// plan's own output buffers, without a copy. Such a view holds the values of this replay
    /// only until the next one: replay again only when [`Plan::outputs_free`] says nothing
    /// holds them any more, or the next replay overwrites them (this is checked: a replay while
    /// an aliased output is held is an error).
    pub fn run_with(&self, inputs: &[Tensor], alias: &[bool]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::LengthMismatch(format!(
                "the plan takes {} inputs, {} were given",
                self.inputs.len(),
                inputs.len()
            )));
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let state = &mut *state;
        let mut clock = HostClock::start(state.host.is_some());
        if !self.outputs_free() {
            return Err(Error::InvalidArgument(
                "a plan output from an earlier replay is still in use as a view of the plan's \
                 buffers; drop it (or copy it) before replaying"
                    .into(),
            ));
        }
        for (i, (x, input)) in inputs.iter().zip(&self.inputs).enumerate() {
            if !x.executor().same_as(&self.exec) {
                return Err(Error::DeviceMismatch(
                    "a plan's inputs must be on the executor it was recorded on".into(),
                ));
            }
            if matches!(input, Input::Direct { .. }) && !input.accepts(x) {
                return Err(Error::InvalidArgument(format!(
                    "plan input {i} is read where it was recorded, and this call gives \
                     another tensor (a different buffer, offset or layout): record a plan \
                     for it"
                )));
            }
        }
        // Every output not handed out as a view gets its tensor first, in output order, so that
        // a loop's allocations (and with them a bound graph's key) repeat from call to call.
        let aliased = |i: usize| alias.get(i).copied().unwrap_or(false);
        let mut fresh = (0..self.outputs.len())
            .map(|i| {
                let slot = &self.outputs[i];
                (!aliased(i))
                    .then(|| Tensor::uninit(&self.exec, &slot.spec.shape, slot.spec.dtype))
                    .transpose()
            })
            .collect::<Result<Vec<Option<Tensor>>>>()?;
        // A graph bound to these inputs' and outputs' memory, when the plan has one for them
        // (or makes one now); else the plan's graph with the large inputs and outputs at its
        // edges (see `edges.rs`); else every step from the host.
        let mut mode = Mode::Plain;
        if let Some(be) = &self.bound_edges {
            if !self.exec.recording_here() {
                let key = self.bound_key(be, inputs, &fresh)?;
                mode = match state.bound.lookup(&key) {
                    bound::Lookup::Hit(i) => Mode::Bound(i),
                    bound::Lookup::Capture => Mode::Capture(key),
                    bound::Lookup::Miss => Mode::Plain,
                };
            }
        }
        let edges = match (&mode, &self.bound_edges) {
            (Mode::Bound(_) | Mode::Capture(_), Some(be)) => be,
            _ => &self.edges,
        };
        let mut moves = Vec::new();
        for (i, (x, input)) in inputs.iter().zip(&self.inputs).enumerate() {
            let Input::Slot(slot) = input else { continue };
            match edges
                .inputs
                .contains(&i)
                .then(|| slot.place_of(x))
                .flatten()
            {
                Some(m) => moves.push(m),
                None => slot.fill(x, &self.exec)?,
            }
        }
        clock.lap(&mut state.host, 0);
        let mut moved_out = vec![false; self.outputs.len()];
        for &i in &edges.outputs {
            if let Some(t) = &fresh[i] {
                moves.push(self.output_move(i, t)?);
                moved_out[i] = true;
            }
        }
        let backend = self.exec.backend();
        match (mode, &self.graph) {
            (Mode::Bound(i), _) => {
                clock.lap(&mut state.host, 1);
                state.bound.get(i).replay()?;
                clock.lap(&mut state.host, 3);
            }
            (Mode::Capture(key), _) => {
                clock.lap(&mut state.host, 1);
                let captured = backend.capture(&mut || {
                    self.steps.iter().try_for_each(|s| match s.moved(&moves) {
                        Some(moved) => moved.run(backend.as_ref()),
                        None => s.run(backend.as_ref()),
                    })
                })?;
                match captured {
                    Some(g) => state.bound.insert(key, g).replay()?,
                    None => {
                        // The capture queued nothing that runs: run the steps one by one.
                        state.bound.give_up();
                        for step in &self.steps {
                            self.run_step(step, &moves)?;
                        }
                    }
                }
                clock.lap(&mut state.host, 3);
            }
            // A recording in progress on this thread records the replayed work step by step (a
            // plan used inside another plan); otherwise the captured graph runs the middle.
            (Mode::Plain, Some(g)) if !self.exec.recording_here() => {
                clock.lap(&mut state.host, 1);
                for &i in &self.edges.head {
                    self.run_step(&self.steps[i], &moves)?;
                }
                clock.lap(&mut state.host, 2);
                g.replay()?;
                clock.lap(&mut state.host, 3);
                for &i in &self.edges.tail {
                    self.run_step(&self.steps[i], &moves)?;
                }
                clock.lap(&mut state.host, 4);
            }
            (Mode::Plain, _) => {
                for step in &self.steps {
                    let timer = match &state.profile {
                        Some(_) => {
                            self.exec.synchronize()?;
                            Some(std::time::Instant::now())
                        }
                        None => None,
                    };
                    self.run_step(step, &moves)?;
                    if let (Some(t), Some(p)) = (timer, state.profile.as_mut()) {
                        self.exec.synchronize()?;
                        let e = p.entry(step.describe()).or_default();
                        e.0 += 1;
                        e.1 += t.elapsed().as_secs_f64();
                    }
                }
                // Without a captured graph, "graph" is every step queued one by one.
                clock.lap(&mut state.host, 3);
            }
        }
        state.replays += 1;
        let outputs = self.outputs(alias, &moved_out, &mut fresh);
        clock.lap(&mut state.host, 5);
        outputs
    }

    /// The key of a bound graph for this call (see `bound.rs`): where each input and output
    /// the bound graph uses in place is, in the caller's memory.
    fn bound_key(
        &self,
        be: &edges::Edges,
        inputs: &[Tensor],
        fresh: &[Option<Tensor>],
    ) -> Result<Vec<u64>> {
        let mut key = Vec::with_capacity(be.inputs.len() + be.outputs.len());
        for &i in &be.inputs {
            let place = match &self.inputs[i] {
                Input::Slot(slot) => slot.place_of(&inputs[i]),
                Input::Direct { .. } => None,
            };
            key.push(place.map_or(bound::NOT_MOVED, |m| {
                binding::address_of(&m.to) + m.to_offset as u64
            }));
        }
        for &i in &be.outputs {
            key.push(match &fresh[i] {
                Some(t) => {
                    let (storage, layout) = t.storage()?;
                    binding::address_of(storage.memory())
                        + (layout.offset * t.dtype().size()) as u64
                }
                None => bound::NOT_MOVED,
            });
        }
        Ok(key)
    }

    /// The move of output `i`'s bytes into the fresh tensor `t`.
    fn output_move(&self, i: usize, t: &Tensor) -> Result<edges::Move> {
        let slot = &self.outputs[i];
        let (storage, layout) = t.storage()?;
        Ok(edges::Move {
            from: slot.storage.memory().clone(),
            range: slot.offset..slot.offset + slot.bytes(),
            to: storage.memory().clone(),
            to_offset: layout.offset * slot.spec.dtype.size(),
        })
    }

    /// Queues one step through the executor, its arguments moved by `moves`.
    fn run_step(&self, step: &Step, moves: &[edges::Move]) -> Result<()> {
        match step.moved(moves) {
            Some(moved) => self.exec.queue_step(&moved),
            None => self.exec.queue_step(step),
        }
    }

    /// The outputs: the fresh tensors the steps wrote where `moved[i]`, views of the plan's
    /// buffers where `alias[i]` (and no fresh tensor), else the fresh tensors (made here where
    /// `fresh` has none) with the plan's outputs copied in.
    fn outputs(
        &self,
        alias: &[bool],
        moved: &[bool],
        fresh: &mut [Option<Tensor>],
    ) -> Result<Vec<Tensor>> {
        self.outputs
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                let t = match fresh.get_mut(i).and_then(Option::take) {
                    Some(t) => t,
                    None if alias.get(i).copied().unwrap_or(false) => {
                        let t = slot.tensor(&self.exec);
                        let m = slot.storage.memory();
                        let address = binding::address_of(m) + slot.offset as u64;
                        self.exec.register_plan_buffer(address, m, slot.offset);
                        return Ok(t);
                    }
                    None => Tensor::uninit(&self.exec, &slot.spec.shape, slot.spec.dtype)?,
                };
                if !moved.get(i).copied().unwrap_or(false) {
                    let (dst, layout) = t.storage()?;
                    self.exec.copy_device(
                        slot.storage.memory(),
                        slot.offset,
                        dst.memory(),
                        layout.offset * slot.spec.dtype.size(),
                        slot.bytes(),
                    )?;
                }
                Ok(t)
            })
            .collect()
    }
}

/// How a replay runs the plan's work.
enum Mode {
    /// The plan's graph (or its steps) with the usual edges.
    Plain,
    /// The bound graph at this index of the plan's [`bound::BoundGraphs`].
    Bound(usize),
    /// Capture a bound graph for this key, then launch it.
    Capture(Vec<u64>),
}
