//! Results: the table on stdout, the JSON file (the row schema of `bench/run.py`), the machine
//! description and the progress bar on stderr.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use hologram_core::Executor;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Map, Value};

use super::measure::{format_secs, Timing};
use super::plan::Case;
use crate::error::CliError;

/// The `impl` column of every row this command writes.
pub const IMPL: &str = "hologram-rust";

/// One result: a timing with its rate, or the error that stopped the case.
pub struct Row {
    /// The case measured.
    pub case: Case,
    /// The timing, or why there is none.
    pub result: Result<Timing, String>,
    /// A remark (what exactly was timed).
    pub note: String,
}

impl Row {
    /// Work per second in the case's unit (GB/s, GFLOP/s), if it has one.
    pub fn rate(&self) -> Option<(f64, &'static str)> {
        let t = self.result.as_ref().ok()?;
        let (work, unit) = self.case.work()?;
        (t.median > 0.0).then(|| (work / t.median / 1e9, unit))
    }

    /// The row as `bench/run.py` writes it: `workload, size, impl, median_us, min_us, note`,
    /// and `rate, unit` where the case has a rate; an `error` instead of times when it failed.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("workload".into(), self.case.workload().into());
        m.insert("size".into(), self.case.size().into());
        m.insert("impl".into(), IMPL.into());
        match &self.result {
            Ok(t) => {
                m.insert("median_us".into(), (t.median * 1e6).into());
                m.insert("min_us".into(), (t.min * 1e6).into());
                if let Some((rate, unit)) = self.rate() {
                    m.insert("rate".into(), rate.into());
                    m.insert("unit".into(), unit.into());
                }
                m.insert("note".into(), self.note.clone().into());
            }
            Err(e) => {
                m.insert("error".into(), e.clone().into());
            }
        }
        Value::Object(m)
    }
}

/// The table's header line.
pub fn header() -> String {
    format!(
        "{:<22} {:>11} {:>12} {:>12} {:>16}  note",
        "workload", "size", "median", "min", "rate"
    )
}

/// A rate with about four significant digits.
fn format_rate(r: f64) -> String {
    if r >= 1000.0 {
        format!("{r:.0}")
    } else if r >= 100.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// One table line.
pub fn line(row: &Row) -> String {
    let (workload, size) = (row.case.workload(), row.case.size());
    match &row.result {
        Ok(t) => {
            let rate = row
                .rate()
                .map(|(r, unit)| format!("{} {unit}", format_rate(r)))
                .unwrap_or_default();
            format!(
                "{workload:<22} {size:>11} {:>12} {:>12} {rate:>16}  {}",
                format_secs(t.median),
                format_secs(t.min),
                row.note
            )
        }
        Err(e) => format!("{workload:<22} {size:>11}  failed: {e}"),
    }
}

/// The first "model name" of `/proc/cpuinfo` (Linux), if any.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The machine and device, with the keys `bench/run.py` uses where they mean the same.
pub fn machine(exec: &Executor) -> Value {
    let info = exec.info();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    json!({
        "platform": format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        "cores": cores,
        "cpu": cpu_model(),
        "hologram": env!("CARGO_PKG_VERSION"),
        "hologram_device": {
            "backend": exec.backend_type().name(),
            "name": info.name,
            "arch": info.arch,
            "memory_bytes": info.memory_bytes,
            "compute_units": info.compute_units,
            "driver": info.driver,
            "host_memory": exec.capabilities().host_memory,
        },
    })
}

/// Everything a JSON results file holds.
pub struct Report<'a> {
    /// The backend name (`cpu`, `cuda`, ...), like `--device` of `bench/run.py`.
    pub device: &'a str,
    /// From [`machine`].
    pub machine: Value,
    /// Seconds the whole run took.
    pub seconds: f64,
    /// The measurements.
    pub rows: &'a [Row],
    /// Cases left out, with the reason.
    pub skipped: &'a [(Case, String)],
    /// The timing budget, for the record.
    pub budget: Value,
}

/// Writes the results file (creating its folder).
pub fn write_json(path: &Path, r: &Report<'_>) -> Result<(), CliError> {
    let skipped: Vec<Value> = r
        .skipped
        .iter()
        .map(|(c, why)| json!({"workload": c.workload(), "size": c.size(), "reason": why}))
        .collect();
    let doc = json!({
        "device": r.device,
        "impl": IMPL,
        "machine": r.machine,
        "budget": r.budget,
        "seconds": r.seconds,
        "rows": r.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "skipped": skipped,
    });
    let io = |e| CliError::Io(path.display().to_string(), e);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| CliError::Failed(format!("cannot encode the results as JSON: {e}")))?;
    std::fs::write(path, text + "\n").map_err(io)
}

/// A progress bar over `len` cases on stderr; hidden when stderr is not a terminal or `hide`.
pub fn progress(len: usize, hide: bool) -> ProgressBar {
    if hide || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_the_schema_of_run_py() {
        let row = Row {
            case: Case::Add(1000),
            result: Ok(Timing {
                median: 1e-6,
                min: 0.5e-6,
                reps: 7,
            }),
            note: String::new(),
        };
        let v = row.to_json();
        assert_eq!(v["workload"], "add");
        assert_eq!(v["size"], 1000);
        assert_eq!(v["impl"], "hologram-rust");
        assert_eq!(v["unit"], "GB/s");
        assert!((v["median_us"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        assert!((v["rate"].as_f64().unwrap() - 12.0).abs() < 1e-9);
        let latency = Row {
            case: Case::Latency,
            ..row
        };
        assert!(latency.to_json().get("rate").is_none());
        assert!(line(&latency).starts_with("tiny kernel latency"));
    }
}
