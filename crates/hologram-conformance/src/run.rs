//! Running cases on a backend and reporting.

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

use hologram_backends::{Backend, BackendError, BufferArg, KernelArg, LaunchConfig, Memory};
use hologram_isa::ParamKind;
use serde_json::Value as Json;

use crate::data::{self, Tolerance};
use crate::{Case, Suite};

/// How one test ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Results matched.
    Passed,
    /// Results did not match, or the run failed; the text says how.
    Failed(String),
    /// The backend rejected the kernel as unsupported on this device (reason given).
    Unsupported(String),
}

/// One test's outcome.
#[derive(Debug, Clone)]
pub struct TestResult {
    /// Test name.
    pub name: String,
    /// Outcome.
    pub outcome: Outcome,
    /// Wall time of compile, launch and read-back.
    pub seconds: f64,
}

/// Outcomes of a whole suite on one backend.
#[derive(Debug, Clone)]
pub struct Report {
    /// Backend and device.
    pub device: String,
    /// Per-test results, in suite order.
    pub results: Vec<TestResult>,
}

impl Report {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.results.iter().filter(|r| f(&r.outcome)).count()
    }

    /// Tests that passed.
    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Passed))
    }

    /// Tests that failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed(_)))
    }

    /// Tests the device does not support.
    pub fn unsupported(&self) -> Vec<&TestResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Unsupported(_)))
            .collect()
    }

    /// True when nothing failed (unsupported tests are listed separately, not failures).
    pub fn all_passed(&self) -> bool {
        self.failed() == 0
    }

    /// A table of every test and a count line.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "conformance on {}", self.device);
        for r in &self.results {
            let (status, detail) = match &r.outcome {
                Outcome::Passed => ("pass", String::new()),
                Outcome::Failed(d) => ("FAIL", d.clone()),
                Outcome::Unsupported(d) => ("unsupported", d.clone()),
            };
            let _ = writeln!(
                s,
                "  {:<36} {:<11} {:>8.2} ms  {}",
                r.name,
                status,
                r.seconds * 1e3,
                detail
            );
        }
        let _ = writeln!(
            s,
            "{} tests: {} passed, {} failed, {} unsupported",
            self.results.len(),
            self.passed(),
            self.failed(),
            self.unsupported().len()
        );
        s
    }
}

pub(crate) fn run_suite(suite: &Suite, backend: &dyn Backend) -> Report {
    let info = backend.info();
    let results = suite
        .cases
        .iter()
        .map(|case| {
            let start = Instant::now();
            let outcome = run_case(case, backend).unwrap_or_else(Outcome::Failed);
            TestResult {
                name: case.name.clone(),
                outcome,
                seconds: start.elapsed().as_secs_f64(),
            }
        })
        .collect();
    Report {
        device: format!("{} ({})", info.kind, info.name),
        results,
    }
}

fn dims(spec: &Json, key: &str) -> Result<[u32; 3], String> {
    let mut d = [1u32; 3];
    if let Some(arr) = spec.get(key).and_then(|v| v.as_array()) {
        for (i, v) in arr.iter().take(3).enumerate() {
            d[i] = v
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or(format!("bad {key}"))?;
        }
    }
    Ok(d)
}

struct Bound {
    memory: Memory,
    initial: Vec<u8>,
}

fn run_case(case: &Case, backend: &dyn Backend) -> Result<Outcome, String> {
    let kernel = &case.kernel;
    let spec = &case.spec;
    if let Some(reason) = crate::requires::missing(spec, backend)? {
        return Ok(Outcome::Unsupported(reason));
    }
    let compiled = match backend.compile(&case.canonical) {
        Ok(c) => c,
        Err(BackendError::Unsupported { feature, .. }) => return Ok(Outcome::Unsupported(feature)),
        Err(e) => return Err(format!("compile: {e}")),
    };
    let mut config = LaunchConfig::new(dims(spec, "grid")?, dims(spec, "block")?);
    config.timeout = crate::data::timeout(spec)?;
    let args_spec = spec.get("args").ok_or("spec has no args")?;
    let mut args = Vec::new();
    let mut buffers: HashMap<String, Bound> = HashMap::new();
    for param in &kernel.params {
        let a = args_spec
            .get(&param.name)
            .ok_or(format!("no argument for '{}'", param.name))?;
        match param.kind {
            ParamKind::Scalar(ty) => {
                let v = data::element(
                    ty,
                    a.get("scalar")
                        .ok_or(format!("'{}' needs a scalar", param.name))?,
                )?;
                args.push(KernelArg::Scalar(v));
            }
            ParamKind::Buffer { elem, .. } => {
                let values = if let Some(d) = a.get("data").and_then(|d| d.as_array()) {
                    d.iter()
                        .map(|j| data::element(elem, j))
                        .collect::<Result<Vec<_>, _>>()?
                } else {
                    let fill = data::element(
                        elem,
                        a.get("fill")
                            .ok_or(format!("'{}' needs data or fill", param.name))?,
                    )?;
                    let len = a
                        .get("len")
                        .and_then(|l| l.as_u64())
                        .ok_or(format!("'{}' needs len", param.name))?;
                    vec![fill; len as usize]
                };
                let bytes = data::to_bytes(&values);
                let memory = backend.allocate(bytes.len()).map_err(|e| e.to_string())?;
                backend
                    .copy_in(&memory, 0, &bytes)
                    .map_err(|e| e.to_string())?;
                args.push(KernelArg::Buffer(BufferArg {
                    memory: memory.clone(),
                    offset: 0,
                    len: bytes.len(),
                }));
                buffers.insert(
                    param.name.clone(),
                    Bound {
                        memory,
                        initial: bytes,
                    },
                );
            }
        }
    }
    let result = backend
        .launch(&compiled, &config, &args)
        .and_then(|_| backend.synchronize());
    // A device that cannot run the kernel as launched (a driver that cuts long loops) says so
    // at launch time; like a compile-time refusal, that is no wrong result.
    if let Err(BackendError::Unsupported { feature, .. }) = &result {
        return Ok(Outcome::Unsupported(feature.clone()));
    }
    let read = |name: &str| -> Result<(Vec<u8>, hologram_isa::Type), String> {
        let b = buffers
            .get(name)
            .ok_or(format!("'{name}' is not a buffer argument"))?;
        let mut out = vec![0u8; b.initial.len()];
        backend
            .copy_out(&b.memory, 0, &mut out)
            .map_err(|e| e.to_string())?;
        let ty = kernel
            .params
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.ty())
            .ok_or("unknown buffer")?;
        Ok((out, ty))
    };
    if let Some(want) = spec.get("expect_error") {
        let err = match result {
            Ok(()) => {
                return Ok(Outcome::Failed(
                    "the launch succeeded; an error was expected".into(),
                ))
            }
            Err(e) => e,
        };
        let kind = want.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        match (&err, kind) {
            (
                BackendError::OutOfBounds {
                    array, index, len, ..
                },
                "OutOfBounds",
            ) => {
                if want
                    .get("array")
                    .and_then(|v| v.as_str())
                    .is_some_and(|a| a != array)
                {
                    return Ok(Outcome::Failed(format!("wrong array in {err}")));
                }
                if want
                    .get("len")
                    .and_then(|v| v.as_u64())
                    .is_some_and(|l| l != *len)
                {
                    return Ok(Outcome::Failed(format!("wrong length in {err}")));
                }
                if want
                    .get("index")
                    .and_then(|v| v.as_i64())
                    .is_some_and(|i| i as i128 != *index)
                {
                    return Ok(Outcome::Failed(format!("wrong index in {err}")));
                }
            }
            (BackendError::BarrierDivergence { .. }, "BarrierDivergence") => {}
            (BackendError::LaunchTimeout { stuck: false, .. }, "LaunchTimeout") => {}
            _ => {
                return Ok(Outcome::Failed(format!(
                    "expected a {kind} error, got: {err}"
                )))
            }
        }
        for name in spec
            .get("unchanged")
            .and_then(|u| u.as_array())
            .into_iter()
            .flatten()
        {
            let name = name.as_str().unwrap_or("");
            let (bytes, _) = read(name)?;
            if bytes != buffers[name].initial {
                return Ok(Outcome::Failed(format!(
                    "'{name}' changed although the launch failed"
                )));
            }
        }
        return Ok(Outcome::Passed);
    }
    if let Err(e) = result {
        return Ok(Outcome::Failed(format!("launch: {e}")));
    }
    let expect = spec
        .get("expect")
        .and_then(|e| e.as_object())
        .ok_or("spec has no expect")?;
    let mut problems = Vec::new();
    for (name, want) in expect {
        let (bytes, ty) = read(name)?;
        let got = data::from_bytes(ty, &bytes);
        let want_vals = want
            .get("data")
            .and_then(|d| d.as_array())
            .ok_or(format!("expect.{name} has no data"))?
            .iter()
            .map(|j| data::element(ty, j))
            .collect::<Result<Vec<_>, _>>()?;
        let tol = Tolerance {
            ulp: want.get("ulp").and_then(|v| v.as_u64()).unwrap_or(0),
            abs: want.get("abs").and_then(|v| v.as_f64()).unwrap_or(0.0),
        };
        if got.len() != want_vals.len() {
            problems.push(format!(
                "{name}: {} elements, expected {}",
                got.len(),
                want_vals.len()
            ));
            continue;
        }
        let bad: Vec<usize> = (0..got.len())
            .filter(|&i| !data::matches(got[i], want_vals[i], tol))
            .collect();
        if let Some(&i) = bad.first() {
            problems.push(format!(
                "{name}: {} of {} elements differ; first at [{i}]: got {}, expected {}",
                bad.len(),
                got.len(),
                got[i],
                want_vals[i]
            ));
        }
    }
    Ok(if problems.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(problems.join("; "))
    })
}
