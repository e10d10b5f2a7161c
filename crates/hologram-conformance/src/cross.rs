//! Cross-checking two backends: every program of the suite runs on both with the same inputs,
//! and every buffer is compared afterwards, whatever the spec expects. Integers must be
//! identical; floats identical or within a relative 1e-6 (any NaN matches any NaN), and outputs
//! the spec marks with an ulp tolerance (transcendentals, whose accuracy differs between math
//! libraries) within that many ulps. Launches that fail must fail alike (same error kind, array
//! and length).

use std::fmt::Write;

use hologram_backends::{Backend, BackendError, BufferArg, KernelArg, LaunchConfig};
use hologram_isa::semantics::Value;
use hologram_isa::{ParamKind, Type};
use serde_json::Value as Json;

use crate::data::{self, Tolerance};
use crate::run::Outcome;
use crate::{Case, Suite};

/// Relative difference allowed between two backends' float results.
pub const RELATIVE: f64 = 1e-6;

/// One program's comparison.
#[derive(Debug, Clone)]
pub struct CrossResult {
    /// Test name.
    pub name: String,
    /// Passed when both backends agree.
    pub outcome: Outcome,
}

/// A whole suite compared on two backends.
#[derive(Debug, Clone)]
pub struct CrossReport {
    /// The two devices, reference first.
    pub devices: (String, String),
    /// Per-program results in suite order.
    pub results: Vec<CrossResult>,
}

impl CrossReport {
    /// Programs on which the backends disagree.
    pub fn mismatches(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
            .count()
    }

    /// A line per mismatch and a count line.
    pub fn summary(&self) -> String {
        let mut s = format!("cross-check: {} vs {}\n", self.devices.0, self.devices.1);
        for r in &self.results {
            match &r.outcome {
                Outcome::Failed(d) => {
                    let _ = writeln!(s, "  {:<36} DIFFERS      {d}", r.name);
                }
                Outcome::Unsupported(d) => {
                    let _ = writeln!(s, "  {:<36} unsupported  {d}", r.name);
                }
                Outcome::Passed => {}
            }
        }
        let _ = writeln!(
            s,
            "{} programs: {} identical or within tolerance, {} differ",
            self.results.len(),
            self.results.len() - self.mismatches(),
            self.mismatches()
        );
        s
    }
}

/// What a launch left behind.
pub(crate) struct Run {
    pub launch: Result<(), BackendError>,
    /// Every buffer parameter: name, element type, contents.
    pub buffers: Vec<(String, Type, Vec<u8>)>,
}

fn dims(spec: &Json, key: &str) -> [u32; 3] {
    let mut d = [1u32; 3];
    for (i, v) in spec
        .get(key)
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .take(3)
        .enumerate()
    {
        d[i] = v.as_u64().and_then(|v| u32::try_from(v).ok()).unwrap_or(1);
    }
    d
}

pub(crate) fn execute(case: &Case, backend: &dyn Backend) -> Result<Run, Outcome> {
    let failed = |s: String| Outcome::Failed(s);
    let compiled = match backend.compile(&case.canonical) {
        Ok(c) => c,
        Err(BackendError::Unsupported { feature, .. }) => {
            return Err(Outcome::Unsupported(feature))
        }
        Err(e) => return Err(failed(format!("compile: {e}"))),
    };
    let spec = &case.spec;
    let args_spec = spec
        .get("args")
        .ok_or_else(|| failed("spec has no args".into()))?;
    let mut args = Vec::new();
    let mut bound = Vec::new();
    for p in &case.kernel.params {
        let a = args_spec
            .get(&p.name)
            .ok_or_else(|| failed(format!("no argument for '{}'", p.name)))?;
        match p.kind {
            ParamKind::Scalar(ty) => {
                let v = a
                    .get("scalar")
                    .ok_or_else(|| failed(format!("'{}' needs a scalar", p.name)))?;
                args.push(KernelArg::Scalar(data::element(ty, v).map_err(failed)?));
            }
            ParamKind::Buffer { elem, .. } => {
                let values: Vec<Value> = match a.get("data").and_then(|d| d.as_array()) {
                    Some(d) => d
                        .iter()
                        .map(|j| data::element(elem, j))
                        .collect::<Result<_, _>>()
                        .map_err(failed)?,
                    None => {
                        let fill = a
                            .get("fill")
                            .ok_or_else(|| failed(format!("'{}' needs data or fill", p.name)))?;
                        let len = a.get("len").and_then(|l| l.as_u64()).unwrap_or(0) as usize;
                        vec![data::element(elem, fill).map_err(failed)?; len]
                    }
                };
                let bytes = data::to_bytes(&values);
                let memory = backend
                    .allocate(bytes.len())
                    .map_err(|e| failed(e.to_string()))?;
                backend
                    .copy_in(&memory, 0, &bytes)
                    .map_err(|e| failed(e.to_string()))?;
                args.push(KernelArg::Buffer(BufferArg::whole(memory.clone())));
                bound.push((p.name.clone(), elem, memory, bytes.len()));
            }
        }
    }
    let mut config = LaunchConfig::new(dims(spec, "grid"), dims(spec, "block"));
    config.timeout = data::timeout(spec).map_err(failed)?;
    let launch = backend
        .launch(&compiled, &config, &args)
        .and_then(|_| backend.synchronize());
    let mut buffers = Vec::new();
    for (name, ty, memory, len) in bound {
        let mut out = vec![0u8; len];
        backend
            .copy_out(&memory, 0, &mut out)
            .map_err(|e| failed(format!("reading '{name}': {e}")))?;
        buffers.push((name, ty, out));
    }
    Ok(Run { launch, buffers })
}

/// Whether two floats agree within `RELATIVE` or `ulp` ulps (NaN matches NaN).
fn close(a: Value, b: Value, ulp: u64) -> bool {
    if data::matches(a, b, Tolerance { ulp, abs: 0.0 }) {
        return true;
    }
    let (x, y) = (as_f64(a), as_f64(b));
    x.is_finite() && y.is_finite() && (x - y).abs() <= RELATIVE * x.abs().max(y.abs())
}

fn as_f64(v: Value) -> f64 {
    match v {
        Value::F16(h) => h.to_f64(),
        Value::BF16(h) => h.to_f64(),
        Value::F32(f) => f as f64,
        Value::F64(f) => f,
        _ => f64::NAN,
    }
}

pub(crate) fn same_error(a: &BackendError, b: &BackendError) -> bool {
    match (a, b) {
        (
            BackendError::OutOfBounds {
                array: x, len: lx, ..
            },
            BackendError::OutOfBounds {
                array: y, len: ly, ..
            },
        ) => x == y && lx == ly,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

fn compare(case: &Case, r: &Run, c: &Run) -> Outcome {
    match (&r.launch, &c.launch) {
        (Ok(()), Ok(())) => {}
        (Err(a), Err(b)) if same_error(a, b) => return Outcome::Passed,
        (a, b) => return Outcome::Failed(format!("launches differ: {a:?} vs {b:?}")),
    }
    let mut problems = Vec::new();
    for ((name, ty, x), (_, _, y)) in r.buffers.iter().zip(&c.buffers) {
        let ulp = case
            .spec
            .get("expect")
            .and_then(|e| e.get(name))
            .and_then(|e| e.get("ulp"))
            .and_then(|u| u.as_u64())
            .unwrap_or(0);
        let (xs, ys) = (data::from_bytes(*ty, x), data::from_bytes(*ty, y));
        let bad: Vec<usize> = (0..xs.len().min(ys.len()))
            .filter(|&i| {
                if ty.is_float() {
                    !close(xs[i], ys[i], ulp)
                } else {
                    xs[i].to_bits() != ys[i].to_bits()
                }
            })
            .collect();
        if let Some(&i) = bad.first() {
            problems.push(format!(
                "{name}: {} of {} differ; first [{i}]: {} vs {}",
                bad.len(),
                xs.len(),
                xs[i],
                ys[i]
            ));
        }
    }
    if problems.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(problems.join("; "))
    }
}

/// Runs every program on `reference` and `candidate` and compares all their buffers.
pub fn cross_check(suite: &Suite, reference: &dyn Backend, candidate: &dyn Backend) -> CrossReport {
    let results = suite
        .cases
        .iter()
        .map(|case| {
            let outcome = match (execute(case, reference), execute(case, candidate)) {
                (Ok(r), Ok(c)) => compare(case, &r, &c),
                (Err(Outcome::Unsupported(f)), _) | (_, Err(Outcome::Unsupported(f))) => {
                    Outcome::Unsupported(f)
                }
                (Err(e), _) | (_, Err(e)) => e,
            };
            CrossResult {
                name: case.name.clone(),
                outcome,
            }
        })
        .collect();
    let (ri, ci) = (reference.info(), candidate.info());
    CrossReport {
        devices: (
            format!("{} ({})", ri.kind, ri.name),
            format!("{} ({})", ci.kind, ci.name),
        ),
        results,
    }
}
