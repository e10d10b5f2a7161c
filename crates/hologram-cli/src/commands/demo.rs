//! `hologram demo`: a short tour on the best available backend.

use std::time::Instant;

use hologram_core::LaunchConfig;
use hologram_isa::semantics::Value;

use crate::error::CliError;

const SAXPY: &str = include_str!("../../../../examples/kernels/saxpy.hasm");
const BLOCK_SUM: &str = include_str!("../../../../examples/kernels/block_sum.hasm");
const HISTOGRAM: &str = include_str!("../../../../examples/kernels/histogram.hasm");
const COLLATZ: &str = include_str!("../../../../examples/kernels/collatz.hasm");

fn time<T>(f: impl FnOnce() -> Result<T, CliError>) -> Result<(T, f64), CliError> {
    let t = Instant::now();
    let v = f()?;
    Ok((v, t.elapsed().as_secs_f64() * 1e3))
}

fn check(ok: bool, what: &str) -> Result<(), CliError> {
    if ok {
        Ok(())
    } else {
        Err(CliError::Failed(format!("demo result wrong: {what}")))
    }
}

pub fn run(backend: &str, n: usize) -> Result<(), CliError> {
    let exec = super::executor(backend)?;
    let info = exec.info();
    outln!(
        "Hologram demo on {} — {} ({})\n",
        exec.backend_type(),
        info.name,
        info.arch
    )?;
    let n = n.max(1);
    let n32 = u32::try_from(n).map_err(|_| CliError::Usage("--n must fit in u32".into()))?;
    let cfg = LaunchConfig::for_elements(n as u64, 256);

    // 1. saxpy
    let saxpy = exec.assemble(SAXPY)?;
    let xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let (x, y) = (exec.from_slice(&xs)?, exec.from_slice(&ys)?);
    let args = [
        Value::F32(2.0).into(),
        x.arg(),
        y.arg(),
        Value::U32(n32).into(),
    ];
    let (_, ms) = time(|| {
        exec.launch(&saxpy, &cfg, &args)?;
        Ok(exec.synchronize()?)
    })?;
    let out = y.to_vec()?;
    check(
        out.iter()
            .zip(xs.iter().zip(&ys))
            .all(|(o, (x, y))| *o == 2.0f32.mul_add(*x, *y)),
        "saxpy",
    )?;
    outln!(
        "1. saxpy  y = 2x + y over {n} floats: {ms:.2} ms ({:.2} GB/s), y[{}] = {}",
        12.0 * n as f64 / ms / 1e6,
        n - 1,
        out[n - 1]
    )?;

    // 2. block sums with shared memory and barriers
    let block_sum = exec.assemble(BLOCK_SUM)?;
    let blocks = n.div_ceil(256);
    let partial = exec.zeros::<f32>(blocks)?;
    let ones = exec.from_slice(&vec![1.0f32; n])?;
    let (_, ms) = time(|| {
        exec.launch(
            &block_sum,
            &cfg,
            &[ones.arg(), partial.arg(), Value::U32(n32).into()],
        )?;
        Ok(exec.synchronize()?)
    })?;
    let total: f64 = partial.to_vec()?.iter().map(|&v| v as f64).sum();
    check(total == n as f64, "block sums")?;
    outln!("2. tree reduction in shared memory: {blocks} block sums in {ms:.2} ms, total {total}")?;

    // 3. histogram with atomics
    let histogram = exec.assemble(HISTOGRAM)?;
    let values: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let (vals, bins) = (exec.from_slice(&values)?, exec.zeros::<u32>(16)?);
    let (_, ms) = time(|| {
        exec.launch(
            &histogram,
            &cfg,
            &[vals.arg(), bins.arg(), Value::U32(n32).into()],
        )?;
        Ok(exec.synchronize()?)
    })?;
    let counts = bins.to_vec()?;
    let mut want = [0u32; 16];
    for v in &values {
        want[(v & 15) as usize] += 1;
    }
    check(counts == want, "histogram")?;
    outln!(
        "3. histogram with atomics: 16 bins in {ms:.2} ms, bins[0..4] = {:?}",
        &counts[..4]
    )?;

    // 4. divergent loops
    let collatz = exec.assemble(COLLATZ)?;
    let m = n.min(1 << 18);
    let starts: Vec<u32> = (1..=m as u32).collect();
    let (s, steps) = (exec.from_slice(&starts)?, exec.zeros::<u32>(m)?);
    let (_, ms) = time(|| {
        exec.launch(
            &collatz,
            &LaunchConfig::for_elements(m as u64, 256),
            &[s.arg(), steps.arg(), Value::U32(m as u32).into()],
        )?;
        Ok(exec.synchronize()?)
    })?;
    let st = steps.to_vec()?;
    check(
        st.get(26).copied() == Some(111),
        "collatz(27) takes 111 steps",
    )?;
    let (longest, at) = st
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, i + 1))
        .max()
        .unwrap_or((0, 0));
    outln!("4. divergent loops (Collatz) for {m} starts: {ms:.2} ms, longest {longest} steps from {at}")?;

    // 5. bounds checks: every lane stores past the end, so no backend writes anything (GPUs
    // stop only the lanes that go out of bounds). Launches may be asynchronous: the error can
    // come from the launch or from the synchronize after it.
    let oob = exec.assemble(
        ".kernel spill\n.param .buf.f32 y .rw\n    add.u32 %j, %gid, 8;\n    st.f32 y[%j], 1.0;\n",
    )?;
    let small = exec.zeros::<f32>(8)?;
    match exec
        .launch(&oob, &LaunchConfig::linear(1, 8), &[small.arg()])
        .and_then(|()| exec.synchronize())
    {
        Err(e) => outln!("5. an out-of-bounds store is caught: {e}")?,
        Ok(()) => {
            return Err(CliError::Failed(
                "the out-of-bounds store was not caught".into(),
            ))
        }
    }
    check(
        small.to_vec()?.iter().all(|&v| v == 0.0),
        "buffer intact after the failed launch",
    )?;

    let stats = exec.allocator_stats();
    let kstats = exec.kernel_cache_stats();
    outln!(
        "\nallocator: {} allocations, {} served from cache; kernels: {} compiled",
        stats.allocations,
        stats.cache_hits,
        kstats.compiles
    )?;
    Ok(())
}
