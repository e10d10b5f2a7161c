//! `hologram bench`: the Rust half of the benchmark suite.
//!
//! Times tensor workloads on one backend with warm-up and a time budget per case (median and
//! minimum of the timed runs, each synchronized): element-wise add and sigmoid, the fused chain
//! `relu(a+b)*b`, sum, softmax over rows of 1024, f32 matmul, a tiny kernel's latency, a new
//! kernel's first run (compile) against a cached one, and host<->device copies. Prints a table
//! and, with `--json PATH`, writes rows in the schema of `bench/run.py` (`impl` is
//! `hologram-rust`), so a report can merge both files.
//!
//! - [`plan`]: the cases, their names, sizes and work;
//! - [`workloads`]: running one case;
//! - [`measure`]: warm-up and timed repetitions;
//! - [`output`]: table, JSON, machine description, progress bar.

pub mod measure;
pub mod output;
pub mod plan;
pub mod workloads;

use std::path::PathBuf;
use std::time::Instant;

use hologram_core::BackendType;
use serde_json::json;

use crate::error::CliError;
use measure::Budget;
use output::{Report, Row};
use plan::{Case, PlanOptions};

/// Arguments of `hologram bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Backend (auto, cpu, cuda, metal, vulkan, dx12).
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Short warm-up and budget per case (about 0.25 s instead of 1.8 s).
    #[arg(long)]
    quick: bool,
    /// Largest element-wise, reduction and transfer size is 2^MAX_LOG2 (default 24 on the CPU,
    /// 28 on GPUs; cases that do not fit in device memory are skipped).
    #[arg(long, value_parser = clap::value_parser!(u32).range(10..=30))]
    max_log2: Option<u32>,
    /// Also run matmul 4096 on the CPU (GPUs always run it).
    #[arg(long)]
    large: bool,
    /// Write the results as JSON (the row schema of bench/run.py) to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Run only the workloads whose name contains one of these (comma-separated, e.g.
    /// `--only latency,softmax`): for measuring one change without the whole run.
    #[arg(long, value_delimiter = ',', value_name = "WORKLOAD")]
    only: Vec<String>,
}

/// Fraction of the device memory a case may hold.
const MEMORY_SHARE: f64 = 0.8;

/// Runs the benchmarks.
pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    let started = Instant::now();
    let exec = super::executor(&args.backend)?;
    let backend = exec.backend_type();
    let gpu = backend != BackendType::Cpu;
    let max_log2 = args.max_log2.unwrap_or(if gpu { 28 } else { 24 });
    let budget = Budget::new(args.quick);
    let info = exec.info();

    let mut cases = Vec::new();
    let mut skipped: Vec<(Case, String)> = Vec::new();
    for case in plan::plan(&PlanOptions {
        max_log2,
        gpu,
        large: args.large,
    }) {
        if !args.only.is_empty()
            && !args
                .only
                .iter()
                .any(|w| case.workload().contains(w.as_str()))
        {
            continue;
        }
        match info.memory_bytes {
            Some(mem) if case.device_bytes() as f64 > MEMORY_SHARE * mem as f64 => {
                skipped.push((
                    case,
                    format!(
                        "needs {:.1} GiB of the device's {:.1} GiB",
                        case.device_bytes() as f64 / (1u64 << 30) as f64,
                        mem as f64 / (1u64 << 30) as f64
                    ),
                ));
            }
            _ => cases.push(case),
        }
    }

    outln!(
        "hologram bench on {backend}: {} ({}), {} cases, {:.2} s budget per case",
        info.name,
        info.arch,
        cases.len(),
        (budget.warmup + budget.time).as_secs_f64()
    )?;
    outln!("{}", output::header())?;
    let bar = output::progress(cases.len(), args.json.is_some());
    let mut rows = Vec::with_capacity(cases.len());
    for case in cases {
        bar.set_message(format!("{} {}", case.workload(), case.size()));
        let row = match workloads::run(&exec, &budget, case) {
            Ok(o) => Row {
                case,
                result: Ok(o.timing),
                note: o.note,
            },
            Err(e) => Row {
                case,
                result: Err(e.to_string()),
                note: String::new(),
            },
        };
        // Give the case's memory back, so large later cases find room.
        exec.empty_cache();
        bar.suspend(|| outln!("{}", output::line(&row)))?;
        bar.inc(1);
        rows.push(row);
    }
    bar.finish_and_clear();
    for (case, why) in &skipped {
        outln!(
            "{:<22} {:>11}  skipped: {why}",
            case.workload(),
            case.size()
        )?;
    }

    if let Some(path) = &args.json {
        output::write_json(
            path,
            &Report {
                device: backend.name(),
                machine: output::machine(&exec),
                seconds: started.elapsed().as_secs_f64(),
                rows: &rows,
                skipped: &skipped,
                budget: json!({
                    "quick": args.quick,
                    "warmup_s": budget.warmup.as_secs_f64(),
                    "time_s": budget.time.as_secs_f64(),
                    "min_reps": budget.min_reps,
                    "max_log2": max_log2,
                }),
            },
        )?;
        outln!("wrote {}", path.display())?;
    }
    let failed: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.result
                .as_ref()
                .err()
                .map(|e| format!("{} {}: {e}", r.case.workload(), r.case.size()))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "{} of {} cases failed (the others are reported above): {}",
            failed.len(),
            rows.len(),
            failed.join("; ")
        )))
    }
}
