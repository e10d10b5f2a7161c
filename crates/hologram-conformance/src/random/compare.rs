//! Running one random program on several backends and comparing every buffer.

use hologram_backends::Backend;
use hologram_isa::semantics::Value;
use hologram_isa::Type;

use crate::cross::{execute, same_error, Run};
use crate::data;
use crate::run::Outcome;
use crate::Case;

/// How two backends disagreed on a program.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The backend whose result differs from the reference's (by its position in the list).
    pub backend: usize,
    /// What differs.
    pub what: String,
}

/// Whether two values of an exact computation agree: the same bits, or both NaN (which NaN is
/// unspecified).
fn exact(a: Value, b: Value) -> bool {
    a.to_bits() == b.to_bits() || (is_nan(a) && is_nan(b))
}

fn is_nan(v: Value) -> bool {
    match v {
        Value::F16(x) => x.is_nan(),
        Value::BF16(x) => x.is_nan(),
        Value::F32(x) => x.is_nan(),
        Value::F64(x) => x.is_nan(),
        _ => false,
    }
}

/// Whether two transcendental results agree within a relative tolerance (with a floor of a
/// few of the smallest subnormals, where relative error means little).
fn close(a: Value, b: Value, rel: f64) -> bool {
    if exact(a, b) {
        return true;
    }
    let (Value::F32(x), Value::F32(y)) = (a, b) else {
        return false;
    };
    let (x, y) = (x as f64, y as f64);
    if !x.is_finite() || !y.is_finite() {
        return false;
    }
    (x - y).abs() <= (rel * x.abs().max(y.abs())).max(rel * 1e-30)
}

fn tolerance(case: &Case, index: usize) -> f64 {
    let list = case
        .spec
        .get("approx_tolerance")
        .and_then(|t| t.as_array())
        .filter(|l| !l.is_empty());
    match list {
        Some(l) => l[index % l.len()].as_f64().unwrap_or(0.0),
        None => 0.0,
    }
}

fn differences(case: &Case, r: &Run, c: &Run) -> Option<String> {
    match (&r.launch, &c.launch) {
        (Ok(()), Ok(())) => {}
        // Where a launch fails, what it left in memory differs legitimately (the CPU stores
        // nothing of a faulting instruction; GPU lanes stop one by one).
        (Err(a), Err(b)) if same_error(a, b) => return None,
        (a, b) => return Some(format!("launches differ: {a:?} vs {b:?}")),
    }
    let mut problems = Vec::new();
    for ((name, ty, x), (_, _, y)) in r.buffers.iter().zip(&c.buffers) {
        let (xs, ys) = (data::from_bytes(*ty, x), data::from_bytes(*ty, y));
        let approx = name == "approx" && *ty == Type::F32;
        let bad: Vec<usize> = (0..xs.len().min(ys.len()))
            .filter(|&i| {
                if approx {
                    !close(xs[i], ys[i], tolerance(case, i))
                } else {
                    !exact(xs[i], ys[i])
                }
            })
            .collect();
        if let Some(&i) = bad.first() {
            problems.push(format!(
                "{name}: {} of {} differ; first [{i}]: {} (bits {:#x}) vs {} (bits {:#x})",
                bad.len(),
                xs.len(),
                xs[i],
                xs[i].to_bits(),
                ys[i],
                ys[i].to_bits()
            ));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Runs `case` on every backend and compares each one's buffers with the first's: integers and
/// exact float results bit for bit (any NaN matches any NaN), the `approx` buffer within the
/// spec's `approx_tolerance`. A failed launch must fail alike (same error kind, array and length)
/// everywhere. A backend that cannot run the program at all is a difference too.
pub fn compare(case: &Case, backends: &[&dyn Backend]) -> Vec<Difference> {
    let runs: Vec<(&Case, &dyn Backend)> = backends.iter().map(|b| (case, *b)).collect();
    compare_each(&runs)
}

/// [`compare`] where each backend runs its own form of one program (the same spec: e.g. the
/// canonical form on one, the program as written on another).
pub fn compare_each(runs: &[(&Case, &dyn Backend)]) -> Vec<Difference> {
    compare_timed(runs, &mut vec![std::time::Duration::ZERO; runs.len()])
}

/// [`compare_each`], adding the time each run took to `spent` (one entry per run).
pub fn compare_timed(
    runs: &[(&Case, &dyn Backend)],
    spent: &mut [std::time::Duration],
) -> Vec<Difference> {
    let results: Vec<Result<Run, Outcome>> = runs
        .iter()
        .zip(spent.iter_mut())
        .map(|((case, b), t)| {
            let start = std::time::Instant::now();
            let r = execute(case, *b);
            *t += start.elapsed();
            r
        })
        .collect();
    let Some(((case, _), Ok(reference))) = runs.first().zip(results.first()) else {
        let what = match results.first() {
            Some(Err(o)) => format!("the reference could not run it: {o:?}"),
            _ => "no backends".to_string(),
        };
        return vec![Difference { backend: 0, what }];
    };
    let mut out = Vec::new();
    for (i, run) in results.iter().enumerate().skip(1) {
        let what = match run {
            Ok(run) => differences(case, reference, run),
            Err(o) => Some(format!("could not run it: {o:?}")),
        };
        if let Some(what) = what {
            out.push(Difference { backend: i, what });
        }
    }
    out
}
