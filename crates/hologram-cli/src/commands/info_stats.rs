//! `hologram info --stats`: what each backend's compiler, caches and launch paths do, shown by
//! running a small sample workload twice per available backend.
//!
//! The first pass compiles (or, on CUDA, loads from the disk cache a kernel an earlier process
//! compiled); the second pass is served from the executor's cache. Library launches are the
//! recognized patterns (element-wise maps, reductions, GEMM); generic launches ran the
//! kernel's own translation.

use hologram_core::{BackendType, DType, Executor, ExecutorStats, Tensor};

use crate::error::CliError;

/// Elements of the sample's vectors (rows of 256 for the softmax).
const N: usize = 1 << 16;

/// The sample: a fused element-wise chain, a reduction, a softmax over rows, a matmul, and a
/// generic kernel (a block-level scan with barriers, which no pattern covers).
fn sample(exec: &Executor) -> Result<(), CliError> {
    let a = Tensor::randn(exec, &[N], 1, DType::F32)?.realize()?;
    let b = Tensor::randn(exec, &[N], 2, DType::F32)?.realize()?;
    let chain = a.add(&b)?.relu()?.mul(&b)?;
    let _ = chain.sum(&[], false)?.item()?;
    let rows = a.reshape(&[(N / 256) as isize, 256])?;
    let _ = rows.softmax(-1)?.realize()?;
    let m = Tensor::randn(exec, &[128, 128], 3, DType::F32)?;
    let _ = m.matmul(&m)?.realize()?;
    let scan = exec.assemble(SCAN)?;
    let out = exec.zeros::<u32>(256)?;
    exec.launch(
        &scan,
        &hologram_core::LaunchConfig::linear(1, 256),
        &[out.arg()],
    )?;
    exec.synchronize()?;
    Ok(())
}

/// An inclusive scan of 1s across one block (shared memory and barriers).
const SCAN: &str = ".kernel block_scan
.param .buf.u32 out .rw
.shared .u32 t[256]
    mov.u32 %i, %tid.x;
    st.u32 t[%i], 1;
    barrier;
    mov.u32 %d, 1;
L:
    setp.ge.u32 %done, %d, 256;
@%done bra E;
    mov.u32 %v, 0;
    setp.ge.u32 %has, %i, %d;
@!%has bra S;
    sub.u32 %j, %i, %d;
    ld.u32 %v, t[%j];
S:
    barrier;
    ld.u32 %w, t[%i];
    add.u32 %w, %w, %v;
    barrier;
    st.u32 t[%i], %w;
    barrier;
    shl.u32 %d, %d, 1;
    bra L;
E:
    ld.u32 %r, t[%i];
    st.u32 out[%i], %r;
";

fn print_pass(label: &str, before: &ExecutorStats, after: &ExecutorStats) -> Result<(), CliError> {
    let (k0, k1) = (&before.kernels, &after.kernels);
    let (b0, b1) = (&before.backend, &after.backend);
    outln!(
        "  {label}: {} launches; kernel cache {} compiled, {} hits; backend {} compiles ({} memory hits, {} disk hits, {} disk writes, {} bytes of code); {} library / {} generic launches",
        after.launches - before.launches,
        k1.compiles - k0.compiles,
        k1.hits - k0.hits,
        b1.compiles - b0.compiles,
        b1.memory_hits - b0.memory_hits,
        b1.disk_hits - b0.disk_hits,
        b1.disk_writes - b0.disk_writes,
        b1.code_bytes - b0.code_bytes,
        b1.library_launches - b0.library_launches,
        b1.generic_launches - b0.generic_launches,
    )?;
    Ok(())
}

/// Runs the sample twice on every available backend and prints the counters of each pass.
pub fn run() -> Result<(), CliError> {
    outln!("\ncache statistics (a sample workload, run twice on each available backend):")?;
    for a in hologram_core::availability() {
        if a.status.is_err() {
            continue;
        }
        let exec = match Executor::new_with_backend(a.backend) {
            Ok(e) => e,
            Err(e) => {
                outln!("{}: could not open: {e}", a.backend.name())?;
                continue;
            }
        };
        outln!("{} ({}):", a.backend.name(), exec.info().name)?;
        let start = exec.stats();
        sample(&exec)?;
        let first = exec.stats();
        print_pass("first pass ", &start, &first)?;
        sample(&exec)?;
        let second = exec.stats();
        print_pass("second pass", &first, &second)?;
        outln!(
            "  totals: {}",
            second.to_string().replace('\n', "\n          ")
        )?;
        if a.backend == BackendType::Cuda {
            print_disk_cache()?;
        }
    }
    Ok(())
}

#[cfg(feature = "cuda")]
fn print_disk_cache() -> Result<(), CliError> {
    match hologram_backends::cuda::cache_dir() {
        Some(dir) => {
            let (files, bytes) = std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok()?.metadata().ok())
                        .filter(|m| m.is_file())
                        .fold((0u64, 0u64), |(n, b), m| (n + 1, b + m.len()))
                })
                .unwrap_or((0, 0));
            outln!(
                "  disk cache: {} ({files} kernels, {bytes} bytes)",
                dir.display()
            )?;
        }
        None => outln!("  disk cache: off (HOLOGRAM_CACHE_DIR=off, or no user cache folder)")?,
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn print_disk_cache() -> Result<(), CliError> {
    Ok(())
}
