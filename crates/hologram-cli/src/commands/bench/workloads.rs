//! Running one case: its inputs are made (untimed), then [`measure`] times the operation.
//!
//! Tensor cases realize their result, so the lazily recorded element-wise expression really
//! runs; [`measure`] synchronizes before each timer stops.

use std::time::{SystemTime, UNIX_EPOCH};

use hologram_core::{Buffer, DType, Executor, LaunchConfig, Tensor};
use hologram_isa::semantics::Value;
use hologram_isa::Kernel;

use super::measure::{measure, Budget, Timing};
use super::plan::{Case, COMPILE_N, SOFTMAX_ROW};
use crate::error::CliError;

/// The wgpu backend's split of a run's host time (launch, submit, GPU wait, error read).
mod wgpu_profile {
    use hologram_core::{BackendType, Executor};

    #[cfg(feature = "wgpu")]
    pub type Mark = hologram_backends::wgpu::profile::QueueProfile;
    #[cfg(not(feature = "wgpu"))]
    pub type Mark = ();

    /// The counters now.
    pub fn start() -> Mark {
        #[cfg(feature = "wgpu")]
        return hologram_backends::wgpu::profile::queue_profile();
        #[cfg(not(feature = "wgpu"))]
        ()
    }

    /// `; per run: ...` means since `start` (over waits), on wgpu backends.
    pub fn split(exec: &Executor, start: Mark) -> Option<String> {
        if !matches!(
            exec.backend_type(),
            BackendType::Vulkan | BackendType::Metal | BackendType::Dx12
        ) {
            return None;
        }
        #[cfg(feature = "wgpu")]
        {
            let d = hologram_backends::wgpu::profile::queue_profile().since(&start);
            let waits = d.waits.max(1) as f64;
            let us = |t: std::time::Duration| t.as_secs_f64() * 1e6 / waits;
            Some(format!(
                "; per run: {:.1} launches {:.1} us, submit {:.1} us (finish {:.1}, queue.submit {:.1}), GPU wait {:.1} us, error read {:.1} us",
                d.launches as f64 / waits,
                us(d.launch),
                us(d.submit),
                us(d.finish),
                us(d.queue_submit),
                us(d.gpu_wait),
                us(d.error_read)
            ))
        }
        #[cfg(not(feature = "wgpu"))]
        {
            let () = start;
            None
        }
    }
}

/// At most this many kernels are compiled for the first-run case (warm-up and timed each).
const COLD_COMPILES: usize = 32;

/// What one case measured.
pub struct Outcome {
    /// The timing.
    pub timing: Timing,
    /// A remark for the row (what exactly was timed, anything unusual).
    pub note: String,
}

impl Outcome {
    fn plain(timing: Timing) -> Outcome {
        Outcome {
            timing,
            note: String::new(),
        }
    }
}

/// Two f32 vectors of normal random numbers, on the device.
fn pair(exec: &Executor, n: usize) -> Result<(Tensor, Tensor), CliError> {
    let a = Tensor::randn(exec, &[n], 1, DType::F32)?.realize()?;
    let b = Tensor::randn(exec, &[n], 2, DType::F32)?.realize()?;
    exec.synchronize()?;
    Ok((a, b))
}

/// Runs one case; on wgpu backends the note of a tensor case ends with where a run's host time
/// went (see [`wgpu_profile::split`]).
pub fn run(exec: &Executor, budget: &Budget, case: Case) -> Result<Outcome, CliError> {
    let split = matches!(
        case,
        Case::Add(_) | Case::Sigmoid(_) | Case::Chain(_) | Case::Sum(_) | Case::Softmax(_)
    );
    let profile = wgpu_profile::start();
    let mut outcome = run_case(exec, budget, case)?;
    if split {
        if let Some(split) = wgpu_profile::split(exec, profile) {
            let split = if outcome.note.is_empty() {
                split.trim_start_matches("; ")
            } else {
                &split
            };
            outcome.note.push_str(split);
        }
    }
    Ok(outcome)
}

fn run_case(exec: &Executor, budget: &Budget, case: Case) -> Result<Outcome, CliError> {
    match case {
        Case::Add(n) => {
            let (a, b) = pair(exec, n)?;
            measure(exec, budget, || Ok(a.add(&b)?.realize()?)).map(Outcome::plain)
        }
        Case::Sigmoid(n) => {
            let (a, _) = pair(exec, n)?;
            measure(exec, budget, || Ok(a.sigmoid()?.realize()?)).map(Outcome::plain)
        }
        Case::Chain(n) => {
            let (a, b) = pair(exec, n)?;
            let t = measure(exec, budget, || {
                Ok(a.add(&b)?.relu()?.mul(&b)?.realize()?)
            })?;
            Ok(Outcome {
                timing: t,
                note: "one fused kernel".into(),
            })
        }
        Case::Sum(n) => {
            let (a, _) = pair(exec, n)?;
            measure(exec, budget, || Ok(a.sum(&[], false)?.realize()?)).map(Outcome::plain)
        }
        Case::Softmax(n) => {
            let x =
                Tensor::randn(exec, &[n / SOFTMAX_ROW, SOFTMAX_ROW], 3, DType::F32)?.realize()?;
            let t = measure(exec, budget, || Ok(x.softmax(-1)?.realize()?))?;
            Ok(Outcome {
                timing: t,
                note: format!("{} x {SOFTMAX_ROW}", n / SOFTMAX_ROW),
            })
        }
        Case::Matmul(n) => {
            let a = Tensor::randn(exec, &[n, n], 4, DType::F32)?.realize()?;
            let b = Tensor::randn(exec, &[n, n], 5, DType::F32)?.realize()?;
            measure(exec, budget, || Ok(a.matmul(&b)?.realize()?)).map(Outcome::plain)
        }
        Case::Latency => {
            let x = Tensor::ones(exec, &[1], DType::F32)?;
            // One run first, so the split leaves out the pipeline's first dispatch.
            drop(x.add(1.0)?.realize()?);
            exec.synchronize()?;
            let profile = wgpu_profile::start();
            let t = measure(exec, budget, || Ok(x.add(1.0)?.realize()?))?;
            let mut note = "x + 1 on one element, realized and synchronized".to_string();
            if let Some(split) = wgpu_profile::split(exec, profile) {
                note.push_str(&split);
            }
            Ok(Outcome { timing: t, note })
        }
        Case::FirstRun => first_run(exec, budget),
        Case::WarmRun => warm_run(exec, budget),
        Case::HostToDevice(n) => {
            let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let buf: Buffer<f32> = exec.allocate(n)?;
            let t = measure(exec, budget, || Ok(buf.write(&host)?))?;
            Ok(Outcome {
                timing: t,
                note: "Buffer::write from a Vec".into(),
            })
        }
        Case::DeviceToHost(n) => {
            let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let buf = exec.from_slice(&host)?;
            let mut out = vec![0.0f32; n];
            let t = measure(exec, budget, || Ok(buf.read_into(&mut out)?))?;
            if out != host {
                return Err(CliError::Failed(
                    "device->host: the copy read back differs from what was written".into(),
                ));
            }
            Ok(Outcome {
                timing: t,
                note: "Buffer::read_into a Vec".into(),
            })
        }
    }
}

/// A kernel `y[i] += c` over [`COMPILE_N`] u32 elements; a different `c` is a different
/// canonical program, so a different cache key.
fn compile_kernel(c: u32) -> Result<Kernel, CliError> {
    let text = format!(
        ".kernel bench_compile
.param .buf.u32 y .rw
.param .u32 n
    setp.ge.u32 %p, %gid, n;
@%p exit;
    ld.u32 %v, y[%gid];
    add.u32 %v, %v, {c};
    st.u32 y[%gid], %v;
"
    );
    hologram_isa::assemble(&text).map_err(|error| CliError::Asm {
        file: "<bench compile kernel>".into(),
        error: Box::new(error),
    })
}

/// A constant no earlier run of this program has likely used (the disk cache of GPU binaries
/// outlives the process): derived from the clock and the process id, never 0.
fn fresh_base() -> u32 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mixed = nanos ^ (u64::from(std::process::id()) << 32);
    ((mixed ^ (mixed >> 29)) as u32) | (1 << 31)
}

fn compile_launch(exec: &Executor, kernel: &Kernel, y: &Buffer<u32>) -> Result<(), CliError> {
    let compiled = exec.compile_kernel(kernel)?;
    exec.launch(
        &compiled,
        &LaunchConfig::for_elements(COMPILE_N as u64, 256),
        &[y.arg(), Value::U32(COMPILE_N as u32).into()],
    )?;
    Ok(())
}

/// Kernels never seen before: each timed run canonicalizes, compiles (NVRTC, WGSL pipeline or
/// CPU lowering), launches and synchronizes a kernel with a new constant. Parsing is untimed.
fn first_run(exec: &Executor, budget: &Budget) -> Result<Outcome, CliError> {
    let budget = budget.capped(COLD_COMPILES);
    let base = fresh_base();
    let kernels: Vec<Kernel> = (0..2 * budget.max_reps as u32)
        .map(|i| compile_kernel(base.wrapping_add(i)))
        .collect::<Result<_, _>>()?;
    let y: Buffer<u32> = exec.zeros(COMPILE_N)?;
    let compiles_before = exec.kernel_cache_stats().compiles;
    let mut next = kernels.iter();
    let mut calls = 0u64;
    let timing = measure(exec, &budget, || {
        let kernel = next
            .next()
            .ok_or_else(|| CliError::Failed("first run: ran out of fresh kernels".into()))?;
        calls += 1;
        compile_launch(exec, kernel, &y)
    })?;
    let compiled = exec.kernel_cache_stats().compiles - compiles_before;
    let mut note = "compile + launch + synchronize of a kernel not seen before".to_string();
    if compiled < calls {
        note = format!(
            "{note}; {} of {calls} runs hit the kernel cache",
            calls - compiled
        );
    }
    Ok(Outcome { timing, note })
}

/// One kernel run again and again: each run looks it up in the kernel cache (canonical form and
/// digest, as `Executor.run` in Python does), launches and synchronizes.
fn warm_run(exec: &Executor, budget: &Budget) -> Result<Outcome, CliError> {
    let kernel = compile_kernel(3)?;
    let y: Buffer<u32> = exec.zeros(COMPILE_N)?;
    compile_launch(exec, &kernel, &y)?;
    exec.synchronize()?;
    let compiles_before = exec.kernel_cache_stats().compiles;
    let timing = measure(exec, budget, || compile_launch(exec, &kernel, &y))?;
    let mut note = "cache lookup + launch + synchronize".to_string();
    let compiled = exec.kernel_cache_stats().compiles - compiles_before;
    if compiled > 0 {
        note = format!("{note}; {compiled} runs compiled again");
    }
    Ok(Outcome { timing, note })
}
