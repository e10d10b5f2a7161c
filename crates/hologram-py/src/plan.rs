//! `hologram._native.Recording` and `Plan`: a function of tensors recorded once, replayed by one
//! call (see `hologram_core::plan`).

use hologram_core::plan::{Plan, PlanStats, Recording};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{IntoPy, PyRes, ValidationError};
use crate::executor::nogil;
use crate::tensor::PyTensor;

fn tensors(list: &[PyRef<'_, PyTensor>]) -> Vec<hologram_core::Tensor> {
    list.iter().map(|t| t.t.clone()).collect()
}

fn wrap_all(list: Vec<hologram_core::Tensor>) -> Vec<PyTensor> {
    list.into_iter().map(|t| PyTensor { t }).collect()
}

/// A plan being recorded: compute with `inputs()`, then `finish(outputs)`. Every device op this
/// thread queues on the executor until then becomes part of the plan; `abort()` (or dropping the
/// recording) stops it.
#[pyclass(name = "Recording", module = "hologram._native", unsendable)]
pub struct PyRecording {
    rec: Option<Recording>,
}

#[pymethods]
impl PyRecording {
    /// Starts recording on the executor of `inputs` (whose values the recording run uses).
    /// Inputs whose `direct[i]` is true are read where they are (no copy on replay); every
    /// replay must then pass the same tensors (parameters, another plan's outputs).
    #[new]
    #[pyo3(signature = (exec, inputs, direct = None))]
    fn new(
        exec: &crate::executor::PyExecutor,
        inputs: Vec<PyRef<'_, PyTensor>>,
        direct: Option<Vec<bool>>,
    ) -> PyRes<Self> {
        let direct = direct.unwrap_or_default();
        Ok(PyRecording {
            rec: Some(Recording::begin_bound(&exec.e, &tensors(&inputs), &direct).py()?),
        })
    }

    /// The tensors to compute with (in the plan's input buffers).
    fn inputs(&self) -> PyRes<Vec<PyTensor>> {
        let rec = self.rec.as_ref().ok_or_else(finished)?;
        Ok(wrap_all(rec.inputs().to_vec()))
    }

    /// Ends the recording with the results; returns the plan and the results: copies, or views
    /// of the plan's buffers where `alias[i]` (valid until the next replay).
    #[pyo3(signature = (outputs, alias = None))]
    fn finish(
        &mut self,
        outputs: Vec<PyRef<'_, PyTensor>>,
        alias: Option<Vec<bool>>,
    ) -> PyRes<(PyPlan, Vec<PyTensor>)> {
        let rec = self.rec.take().ok_or_else(finished)?;
        let alias = alias.unwrap_or_default();
        let (plan, first) = rec.finish_with(&tensors(&outputs), &alias).py()?;
        Ok((PyPlan { plan }, wrap_all(first)))
    }

    /// Stops the recording without a plan.
    fn abort(&mut self) {
        self.rec = None;
    }
}

fn finished() -> PyErr {
    ValidationError::new_err("this recording is already finished or aborted")
}

/// A recorded function of tensors: `run(inputs)` replays it on new inputs of the same shapes
/// and dtypes and returns fresh output tensors.
#[pyclass(name = "Plan", module = "hologram._native", frozen)]
pub struct PyPlan {
    pub(crate) plan: Plan,
}

fn stats_dict<'py>(py: Python<'py>, s: &PlanStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("steps", s.steps)?;
    d.set_item("launches", s.launches)?;
    d.set_item("gemms", s.gemms)?;
    d.set_item("copies", s.copies)?;
    d.set_item("peak_bytes", s.peak_bytes)?;
    d.set_item("constant_bytes", s.constant_bytes)?;
    d.set_item("constants_in_place", s.constants_in_place)?;
    d.set_item("captured", s.captured)?;
    d.set_item("edge_steps", s.edge_steps)?;
    d.set_item("replays", s.replays)?;
    d.set_item("bound_graphs", s.bound_graphs)?;
    d.set_item("bound_replays", s.bound_replays)?;
    Ok(d)
}

#[pymethods]
impl PyPlan {
    /// Replays the plan on `inputs`; returns fresh output tensors, or views of the plan's
    /// buffers where `alias[i]` (valid until the next replay).
    #[pyo3(signature = (inputs, alias = None))]
    fn run(
        &self,
        py: Python<'_>,
        inputs: Vec<PyRef<'_, PyTensor>>,
        alias: Option<Vec<bool>>,
    ) -> PyRes<Vec<PyTensor>> {
        let inputs = tensors(&inputs);
        let alias = alias.unwrap_or_default();
        Ok(wrap_all(nogil(py, || self.plan.run_with(&inputs, &alias))?))
    }

    /// `run(inputs, alias)` when `accepts(inputs)` and `outputs_free()`, else `None`: the three
    /// in one native call (the per-call path of compiled graphs).
    #[pyo3(signature = (inputs, alias = None))]
    fn try_run(
        &self,
        py: Python<'_>,
        inputs: Vec<PyRef<'_, PyTensor>>,
        alias: Option<Vec<bool>>,
    ) -> PyRes<Option<Vec<PyTensor>>> {
        let inputs = tensors(&inputs);
        if !self.plan.accepts(&inputs) || !self.plan.outputs_free() {
            return Ok(None);
        }
        let alias = alias.unwrap_or_default();
        Ok(Some(wrap_all(nogil(py, || {
            self.plan.run_with(&inputs, &alias)
        })?)))
    }

    /// True when `inputs` can be replayed (shapes, dtypes, and in-place inputs where recorded).
    fn accepts(&self, inputs: Vec<PyRef<'_, PyTensor>>) -> bool {
        self.plan.accepts(&tensors(&inputs))
    }

    /// True when no outside tensor holds one of the plan's output buffers.
    fn outputs_free(&self) -> bool {
        self.plan.outputs_free()
    }

    /// Counters: steps, launches, gemms, copies, peak_bytes, constant_bytes,
    /// constants_in_place, captured, edge_steps, replays, bound_graphs, bound_replays.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.plan.stats())
    }

    /// With `HOLOGRAM_PLAN_PROFILE=1`: time per kind of step over the replays so far.
    fn profile(&self) -> Option<String> {
        self.plan.profile_report()
    }

    /// With `HOLOGRAM_PLAN_HOST_PROFILE=1`: `{phase: (calls, seconds)}` of the host time of
    /// each phase of the replays so far (inputs, fresh, head, graph, tail, outputs).
    fn host_profile(&self) -> Option<std::collections::HashMap<&'static str, (u64, f64)>> {
        Some(
            self.plan
                .host_profile()?
                .into_iter()
                .map(|(p, n, s)| (p, (n, s)))
                .collect(),
        )
    }

    /// `(shape, dtype)` of each input.
    fn input_specs(&self) -> Vec<(Vec<usize>, &'static str)> {
        self.plan
            .input_specs()
            .into_iter()
            .map(|s| (s.shape, s.dtype.name()))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.plan)
    }
}
