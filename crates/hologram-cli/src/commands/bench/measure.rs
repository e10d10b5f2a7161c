//! Timing in the style of criterion: warm-up runs, then timed repetitions until a time budget
//! is spent (and at least a minimum number of them), reported as median and minimum.
//!
//! Every timed repetition synchronizes the executor before its timer stops, so asynchronous
//! backends (CUDA, wgpu) are timed to completion, not to submission. What a repetition returns
//! is dropped after the timer stops.

use std::time::{Duration, Instant};

use hologram_core::Executor;

use crate::error::CliError;

/// How long to warm up and to measure each case.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Warm-up runs continue until this much time has passed (at least one run).
    pub warmup: Duration,
    /// Timed runs continue until this much time has passed ...
    pub time: Duration,
    /// ... and at least this many have run.
    pub min_reps: usize,
    /// Never more than this many runs, warm-up and timed each.
    pub max_reps: usize,
}

impl Budget {
    /// The default budget (about 1.5 s a case), or a short one for `--quick` (about 0.2 s).
    pub fn new(quick: bool) -> Budget {
        if quick {
            Budget {
                warmup: Duration::from_millis(50),
                time: Duration::from_millis(200),
                min_reps: 5,
                max_reps: 100_000,
            }
        } else {
            Budget {
                warmup: Duration::from_millis(300),
                time: Duration::from_millis(1500),
                min_reps: 5,
                max_reps: 100_000,
            }
        }
    }

    /// The same budget with at most `max_reps` runs.
    pub fn capped(self, max_reps: usize) -> Budget {
        Budget {
            max_reps: max_reps.max(self.min_reps),
            ..self
        }
    }
}

/// Median and minimum of the timed repetitions, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Median seconds per run.
    pub median: f64,
    /// Fastest run, in seconds.
    pub min: f64,
    /// Timed runs.
    pub reps: usize,
}

impl Timing {
    /// The median and minimum of `samples` (seconds), or `None` when there are none.
    pub fn from_samples(mut samples: Vec<f64>) -> Option<Timing> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n % 2 == 1 {
            samples[n / 2]
        } else {
            0.5 * (samples[n / 2 - 1] + samples[n / 2])
        };
        Some(Timing {
            median,
            min: samples[0],
            reps: n,
        })
    }
}

/// Times `f`: warm-up runs, then timed runs, each followed by `exec.synchronize()` inside the
/// timed region.
pub fn measure<T>(
    exec: &Executor,
    budget: &Budget,
    mut f: impl FnMut() -> Result<T, CliError>,
) -> Result<Timing, CliError> {
    let start = Instant::now();
    let mut runs = 0;
    loop {
        let out = f()?;
        exec.synchronize()?;
        drop(out);
        runs += 1;
        if runs >= budget.max_reps || start.elapsed() >= budget.warmup {
            break;
        }
    }
    let mut samples = Vec::with_capacity(budget.min_reps.max(16));
    let start = Instant::now();
    loop {
        let t = Instant::now();
        let out = f()?;
        exec.synchronize()?;
        let secs = t.elapsed().as_secs_f64();
        drop(out);
        samples.push(secs);
        let n = samples.len();
        if n >= budget.max_reps || (n >= budget.min_reps && start.elapsed() >= budget.time) {
            break;
        }
    }
    Timing::from_samples(samples).ok_or_else(|| CliError::Failed("no timed runs".into()))
}

/// A duration in seconds as text with a unit that keeps 3-4 significant digits.
pub fn format_secs(secs: f64) -> String {
    let (v, unit) = if secs < 1e-6 {
        (secs * 1e9, "ns")
    } else if secs < 1e-3 {
        (secs * 1e6, "us")
    } else if secs < 1.0 {
        (secs * 1e3, "ms")
    } else {
        (secs, "s")
    };
    if v < 10.0 {
        format!("{v:.3} {unit}")
    } else if v < 100.0 {
        format!("{v:.2} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let t = Timing::from_samples(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((t.median, t.min, t.reps), (2.0, 1.0, 3));
        let t = Timing::from_samples(vec![4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!((t.median, t.min), (2.5, 1.0));
        assert!(Timing::from_samples(Vec::new()).is_none());
    }

    #[test]
    fn measure_runs_at_least_min_reps() {
        let exec = Executor::cpu();
        let budget = Budget {
            warmup: Duration::ZERO,
            time: Duration::ZERO,
            min_reps: 5,
            max_reps: 100,
        };
        let mut calls = 0;
        let t = measure(&exec, &budget, || {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(t.reps, 5);
        assert_eq!(calls, 6);
        assert!(t.min <= t.median);
    }

    #[test]
    fn durations_are_formatted_with_units() {
        assert_eq!(format_secs(1.5e-6), "1.500 us");
        assert_eq!(format_secs(0.0125), "12.50 ms");
        assert_eq!(format_secs(250e-9), "250.0 ns");
        assert_eq!(format_secs(2.0), "2.000 s");
    }
}
