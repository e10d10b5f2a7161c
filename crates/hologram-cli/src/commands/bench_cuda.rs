//! `hologram bench-cuda`: the GPU benchmarks that bench/cuda_bench.py compares with PyTorch.
//!
//! - vector add, f32, 2^28 elements: effective bandwidth (3 × 4 bytes per element), for a few
//!   block sizes, bounds-checked and unchecked (the difference is the bounds check's cost);
//! - tiny kernel: launch-to-completion latency (launch + synchronize of a one-lane kernel);
//! - sgemm 4096: `Library::gemm` (cuBLAS on CUDA), exact f32 and TF32.
//!
//! Bandwidth and GEMM time back-to-back launches, synchronizing once at the end; latency times
//! each launch + synchronize.

use std::fmt::Write;
use std::time::Instant;

use hologram_backends::{BufferArg, GemmDesc, GemmPrecision, LaunchConfig};
use hologram_core::{Buffer, Executor};
use hologram_isa::semantics::Value;
use hologram_isa::Type;

use crate::error::CliError;

/// Arguments of `hologram bench-cuda`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Backend (cuda, or any other to compare).
    #[arg(long, default_value = "cuda")]
    backend: String,
    /// Vector add length is 2^log2n.
    #[arg(long, default_value_t = 28)]
    log2n: u32,
    /// GEMM size (n × n × n).
    #[arg(long, default_value_t = 4096)]
    gemm: usize,
    /// Timed repetitions of the bandwidth and GEMM runs.
    #[arg(long, default_value_t = 20)]
    repeat: usize,
    /// Launches timed for latency.
    #[arg(long, default_value_t = 2000)]
    latency_iters: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

const VADD: &str = ".kernel vadd
.param .buf.f32 x
.param .buf.f32 y
.param .buf.f32 z .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.f32 %a, x[%i];
    ld.f32 %b, y[%i];
    add.f32 %c, %a, %b;
    st.f32 z[%i], %c;
";

/// The same sum with four elements per lane (`q = n / 4` apart, so every load stays coalesced),
/// all loads issued before the adds.
const VADD4: &str = ".kernel vadd4
.param .buf.f32 x
.param .buf.f32 y
.param .buf.f32 z .rw
.param .u32 q
    mov.u32 %i0, %gid;
    setp.ge.u32 %p, %i0, q;
@%p exit;
    add.u32 %i1, %i0, q;
    add.u32 %i2, %i1, q;
    add.u32 %i3, %i2, q;
    ld.f32 %a0, x[%i0];
    ld.f32 %a1, x[%i1];
    ld.f32 %a2, x[%i2];
    ld.f32 %a3, x[%i3];
    ld.f32 %b0, y[%i0];
    ld.f32 %b1, y[%i1];
    ld.f32 %b2, y[%i2];
    ld.f32 %b3, y[%i3];
    add.f32 %c0, %a0, %b0;
    add.f32 %c1, %a1, %b1;
    add.f32 %c2, %a2, %b2;
    add.f32 %c3, %a3, %b3;
    st.f32 z[%i0], %c0;
    st.f32 z[%i1], %c1;
    st.f32 z[%i2], %c2;
    st.f32 z[%i3], %c3;
";

const TINY: &str = ".kernel tiny
.param .buf.f32 y .rw
    ld.f32 %v, y[0];
    add.f32 %v, %v, 1.0;
    st.f32 y[0], %v;
";

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

struct VaddRow {
    kernel: &'static str,
    block: u32,
    checked: bool,
    ms: f64,
    gbps: f64,
}

fn vadd(exec: &Executor, log2n: u32, repeat: usize) -> Result<Vec<VaddRow>, CliError> {
    let n = 1usize << log2n;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.5).collect();
    let (bx, by) = (exec.from_slice(&x)?, exec.from_slice(&y)?);
    let bz: Buffer<f32> = exec.allocate(n)?;
    let mut rows = Vec::new();
    for (name, text, per_lane) in [("vadd", VADD, 1usize), ("vadd4", VADD4, 4)] {
        let kernel = exec.assemble(text)?;
        let lanes = n / per_lane;
        let args = [
            bx.arg(),
            by.arg(),
            bz.arg(),
            Value::U32(lanes as u32).into(),
        ];
        for checked in [true, false] {
            for block in [256u32, 512, 1024] {
                let mut config = LaunchConfig::for_elements(lanes as u64, block);
                if !checked {
                    // SAFETY: both kernels exit in lanes at or past their bound (`lanes`), and
                    // lane i < lanes indexes i + k·lanes for k < per_lane, below
                    // n = per_lane · lanes, the length of x, y and z.
                    config = unsafe { config.without_bounds_checks() };
                }
                for _ in 0..3 {
                    exec.launch(&kernel, &config, &args)?;
                }
                exec.synchronize()?;
                let t = Instant::now();
                for _ in 0..repeat {
                    exec.launch(&kernel, &config, &args)?;
                }
                exec.synchronize()?;
                let ms = ms_since(t) / repeat as f64;
                rows.push(VaddRow {
                    kernel: name,
                    block,
                    checked,
                    ms,
                    gbps: 12.0 * n as f64 / (ms * 1e6),
                });
            }
        }
        let z = bz.to_vec()?;
        let step = (n / 4096).max(1);
        if let Some(i) = (0..n).step_by(step).find(|&i| z[i] != x[i] + y[i]) {
            return Err(CliError::Failed(format!(
                "{name} is wrong at {i}: {} != {} + {}",
                z[i], x[i], y[i]
            )));
        }
        bz.write(&vec![0.0; n])?;
    }
    Ok(rows)
}

struct Latency {
    median_us: f64,
    mean_us: f64,
    min_us: f64,
    enqueue_us: f64,
}

fn latency(exec: &Executor, iters: usize) -> Result<Latency, CliError> {
    let kernel = exec.assemble(TINY)?;
    let y = exec.from_slice(&[0.0f32])?;
    let args = [y.arg()];
    let config = LaunchConfig::linear(1, 1);
    for _ in 0..100 {
        exec.launch(&kernel, &config, &args)?;
        exec.synchronize()?;
    }
    let mut total = Vec::with_capacity(iters);
    let mut enqueue = 0.0;
    for _ in 0..iters {
        let t = Instant::now();
        exec.launch(&kernel, &config, &args)?;
        enqueue += t.elapsed().as_secs_f64() * 1e6;
        exec.synchronize()?;
        total.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let want = (100 + iters) as f32;
    let got = y.to_vec()?[0];
    if got != want {
        return Err(CliError::Failed(format!(
            "tiny kernel ran {got} times, expected {want}"
        )));
    }
    let mean = total.iter().sum::<f64>() / iters.max(1) as f64;
    total.sort_by(f64::total_cmp);
    Ok(Latency {
        median_us: total[total.len() / 2],
        mean_us: mean,
        min_us: total[0],
        enqueue_us: enqueue / iters.max(1) as f64,
    })
}

struct Gemm {
    ms: f64,
    tflops: f64,
    tf32_ms: f64,
    tf32_tflops: f64,
}

fn sgemm(exec: &Executor, n: usize, repeat: usize) -> Result<Gemm, CliError> {
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7) % 17) as f32 / 17.0 - 0.5)
        .collect();
    let b: Vec<f32> = (0..n * n)
        .map(|i| ((i * 5) % 13) as f32 / 13.0 - 0.5)
        .collect();
    let (ba, bb) = (exec.from_slice(&a)?, exec.from_slice(&b)?);
    let bc: Buffer<f32> = exec.allocate(n * n)?;
    let whole = |buf: &Buffer<f32>| BufferArg::whole(buf.memory().clone());
    let (aa, ab, ac) = (whole(&ba), whole(&bb), whole(&bc));
    let backend = exec.backend();
    let time = |precision: GemmPrecision| -> Result<f64, CliError> {
        let mut desc = GemmDesc::new(Type::F32, n, n, n);
        desc.precision = precision;
        let run = || {
            backend
                .gemm(&desc, &aa, &ab, &ac)
                .map_err(hologram_core::Error::from)
        };
        run()?;
        exec.synchronize()?;
        let t = Instant::now();
        for _ in 0..repeat {
            run()?;
        }
        exec.synchronize()?;
        Ok(ms_since(t) / repeat as f64)
    };
    let tf32_ms = time(GemmPrecision::Tf32)?;
    let ms = time(GemmPrecision::Exact)?;
    // Spot-check a few entries of the exact product against f64 sums.
    let c = bc.to_vec()?;
    for &(i, j) in &[(0usize, 0usize), (n / 2, n / 3), (n - 1, n - 1)] {
        let want: f64 = (0..n)
            .map(|k| a[i * n + k] as f64 * b[k * n + j] as f64)
            .sum();
        let got = c[i * n + j] as f64;
        if (got - want).abs() > 1e-3 * want.abs().max(1.0) {
            return Err(CliError::Failed(format!(
                "sgemm is wrong at ({i}, {j}): {got} vs {want}"
            )));
        }
    }
    let flops = 2.0 * (n as f64).powi(3);
    Ok(Gemm {
        ms,
        tflops: flops / (ms * 1e9),
        tf32_ms,
        tf32_tflops: flops / (tf32_ms * 1e9),
    })
}

pub fn run(a: &BenchArgs) -> Result<(), CliError> {
    let exec = super::executor(&a.backend)?;
    let info = exec.info();
    let rows = vadd(&exec, a.log2n, a.repeat)?;
    let lat = latency(&exec, a.latency_iters)?;
    let gemm = sgemm(&exec, a.gemm, a.repeat)?;
    let best = |checked: bool| {
        rows.iter()
            .filter(|r| r.checked == checked)
            .min_by(|x, y| x.ms.total_cmp(&y.ms))
    };
    let (Some(bc), Some(bu)) = (best(true), best(false)) else {
        return Err(CliError::Failed("no vector-add measurement".into()));
    };
    // The bounds checks' cost: the same kernel, its best block size, checked vs unchecked.
    let cost = |kernel: &str| {
        let best = |checked: bool| {
            rows.iter()
                .filter(|r| r.kernel == kernel && r.checked == checked)
                .map(|r| r.ms)
                .fold(f64::INFINITY, f64::min)
        };
        best(true) / best(false) - 1.0
    };
    let (cost1, cost4) = (cost("vadd"), cost("vadd4"));
    let stats = hologram_backends::cuda::stats();
    if a.json {
        let mut per_block = String::new();
        for (i, r) in rows.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(
                per_block,
                "{sep}{{\"kernel\": \"{}\", \"block\": {}, \"checked\": {}, \"ms\": {:.5}, \"gbps\": {:.2}}}",
                r.kernel, r.block, r.checked, r.ms, r.gbps
            );
        }
        outln!(
            "{{\"device\": \"{}\", \"arch\": \"{}\", \"driver\": \"{}\", \"vadd\": {{\"n\": {}, \"checked\": {{\"kernel\": \"{}\", \"block\": {}, \"ms\": {:.5}, \"gbps\": {:.2}}}, \"unchecked\": {{\"kernel\": \"{}\", \"block\": {}, \"ms\": {:.5}, \"gbps\": {:.2}}}, \"check_cost\": {{\"vadd\": {cost1:.5}, \"vadd4\": {cost4:.5}}}, \"per_block\": [{per_block}]}}, \"latency\": {{\"median_us\": {:.2}, \"mean_us\": {:.2}, \"min_us\": {:.2}, \"enqueue_us\": {:.2}, \"iters\": {}}}, \"sgemm\": {{\"n\": {}, \"ms\": {:.4}, \"tflops\": {:.2}, \"tf32_ms\": {:.4}, \"tf32_tflops\": {:.2}}}, \"cache\": \"{stats}\"}}",
            info.name.replace('"', "'"),
            info.arch,
            info.driver.unwrap_or_default().replace('"', "'"),
            1u64 << a.log2n,
            bc.kernel, bc.block, bc.ms, bc.gbps, bu.kernel, bu.block, bu.ms, bu.gbps,
            lat.median_us, lat.mean_us, lat.min_us, lat.enqueue_us, a.latency_iters,
            a.gemm, gemm.ms, gemm.tflops, gemm.tf32_ms, gemm.tf32_tflops,
        )?;
        return Ok(());
    }
    outln!(
        "bench on {} ({}, {})",
        info.name,
        info.arch,
        info.driver.unwrap_or_default()
    )?;
    outln!("vector add f32, n = 2^{}:", a.log2n)?;
    for r in &rows {
        outln!(
            "  {:<6} block {:>4} {:<9} {:>8.3} ms  {:>7.1} GB/s",
            r.kernel,
            r.block,
            if r.checked { "checked" } else { "unchecked" },
            r.ms,
            r.gbps
        )?;
    }
    outln!(
        "  bounds-check cost: vadd {:+.2}%, vadd4 {:+.2}% time (best block, checked vs unchecked)",
        cost1 * 100.0,
        cost4 * 100.0
    )?;
    outln!(
        "tiny kernel launch+sync: median {:.2} us, mean {:.2} us, min {:.2} us (enqueue {:.2} us)",
        lat.median_us,
        lat.mean_us,
        lat.min_us,
        lat.enqueue_us
    )?;
    outln!(
        "sgemm {n}: {:.3} ms, {:.1} TFLOP/s; TF32 {:.3} ms, {:.1} TFLOP/s",
        gemm.ms,
        gemm.tflops,
        gemm.tf32_ms,
        gemm.tf32_tflops,
        n = a.gemm
    )?;
    outln!("cuda kernel cache: {stats}")?;
    Ok(())
}
