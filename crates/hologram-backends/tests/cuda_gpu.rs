//! CUDA backend tests that need a GPU: out-of-bounds reporting, runaway launches (timeout and
//! barrier divergence, tests/common/runaway.rs, as on every backend), the unchecked variant,
//! asynchronous launches, cuBLAS GEMM against the CPU, staged copies, and the disk cache (a second
//! process compiles nothing). Without a GPU each test prints why and passes, unless
//! `HOLOGRAM_REQUIRE_GPU=1` (scripts/gpu-run.sh sets it). Without a driver the backend must
//! return an error, never panic.

#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]
#![cfg(feature = "cuda")]

use std::time::Instant;

use hologram_backends::cuda::CudaBackend;
use hologram_backends::{
    Backend, BackendError, BufferArg, CpuBackend, GemmDesc, GemmPrecision, KernelArg, LaunchConfig,
    Memory,
};
use hologram_isa::semantics::Value;
use hologram_isa::Type;

mod common {
    pub mod runaway;
}

// NCCL collectives and copies between GPUs (tests/multi_gpu/nccl.rs): in this binary, not one of
// their own, so the GPU bundle stays within what the device tool carries.
mod multi_gpu {
    pub mod nccl;
}

fn gpu() -> Option<CudaBackend> {
    match CudaBackend::new() {
        Ok(b) => Some(b),
        Err(BackendError::Unavailable { reason, .. }) => {
            assert!(
                std::env::var("HOLOGRAM_REQUIRE_GPU").as_deref() != Ok("1"),
                "HOLOGRAM_REQUIRE_GPU=1 but CUDA is unavailable: {reason}"
            );
            println!("skipped: {reason}");
            None
        }
        Err(e) => panic!("CudaBackend::new failed with something other than Unavailable: {e}"),
    }
}

fn buffer(b: &dyn Backend, bytes: &[u8]) -> Memory {
    let m = b.allocate(bytes.len()).expect("allocate");
    b.copy_in(&m, 0, bytes).expect("copy_in");
    m
}

fn read(b: &dyn Backend, m: &Memory) -> Vec<u8> {
    let mut out = vec![0u8; m.size()];
    b.copy_out(m, 0, &mut out).expect("copy_out");
    out
}

fn kernel(text: &str) -> hologram_compiler::Canonical {
    hologram_compiler::Canonical::assemble(text).expect("valid kernel")
}

#[test]
fn a_missing_driver_is_an_error_not_a_panic() {
    for _ in 0..2 {
        match CudaBackend::new() {
            Ok(b) => assert!(b.info().arch.starts_with("sm_"), "{}", b.info().arch),
            Err(BackendError::Unavailable { backend, reason }) => {
                assert_eq!(backend, "cuda");
                assert!(!reason.is_empty());
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

#[test]
fn out_of_bounds_is_reported_after_the_launch() {
    let Some(g) = gpu() else { return };
    let store =
        kernel(".kernel spill\n.param .buf.f32 y .rw\n.param .u32 n\n    st.f32 y[n], 1.0;\n");
    let c = g.compile(&store).expect("compile");
    let y = buffer(&g, &[0u8; 1024]);
    let args = [
        KernelArg::Buffer(BufferArg::whole(y.clone())),
        KernelArg::Scalar(Value::U32(256)),
    ];
    g.launch(&c, &LaunchConfig::linear(1, 1), &args)
        .expect("the launch is asynchronous");
    match g.synchronize() {
        Err(BackendError::OutOfBounds {
            kernel,
            array,
            index,
            len,
        }) => {
            assert_eq!(
                (kernel.as_str(), array.as_str(), index, len),
                ("spill", "y", 256, 256)
            );
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    // The error was reported once; the buffer is untouched; later launches run normally.
    g.synchronize().expect("the error is cleared");
    assert_eq!(read(&g, &y), vec![0u8; 1024]);
    let ok = [
        KernelArg::Buffer(BufferArg::whole(y.clone())),
        KernelArg::Scalar(Value::U32(3)),
    ];
    g.launch(&c, &LaunchConfig::linear(1, 1), &ok)
        .expect("launch");
    g.synchronize().expect("in bounds");
    assert_eq!(
        f32::from_le_bytes(read(&g, &y)[12..16].try_into().unwrap()),
        1.0
    );

    // Without an explicit synchronize, the read-back reports the error.
    let neg = kernel(".kernel neg\n.param .buf.u32 x\n.param .buf.u32 y .rw\n    mov.i32 %k, -1;\n    ld.u32 %v, x[%k];\n    st.u32 y[0], %v;\n");
    let c = g.compile(&neg).expect("compile");
    let x = buffer(&g, &[7u8; 64]);
    let y = buffer(&g, &[0u8; 64]);
    let args = [
        KernelArg::Buffer(BufferArg::whole(x)),
        KernelArg::Buffer(BufferArg::whole(y.clone())),
    ];
    g.launch(&c, &LaunchConfig::linear(1, 1), &args)
        .expect("launch");
    let mut out = vec![0u8; 64];
    match g.copy_out(&y, 0, &mut out) {
        Err(BackendError::OutOfBounds {
            array, index, len, ..
        }) => {
            assert_eq!((array.as_str(), index, len), ("x", -1, 16));
        }
        other => panic!("expected OutOfBounds from copy_out, got {other:?}"),
    }

    // Shared arrays are checked too.
    let shared = kernel(".kernel sh\n.param .buf.f32 out .rw\n.shared .f32 tile[64]\n    add.u32 %k, %tid.x, 64;\n    st.f32 tile[%k], 1.0;\n    st.f32 out[%tid.x], 2.0;\n");
    let c = g.compile(&shared).expect("compile");
    let out = buffer(&g, &[0u8; 128]);
    g.launch(
        &c,
        &LaunchConfig::linear(1, 32),
        &[KernelArg::Buffer(BufferArg::whole(out.clone()))],
    )
    .expect("launch");
    match g.synchronize() {
        Err(BackendError::OutOfBounds { array, len, .. }) => {
            assert_eq!((array.as_str(), len), ("tile", 64))
        }
        other => panic!("expected OutOfBounds on tile, got {other:?}"),
    }
    assert_eq!(
        read(&g, &out),
        vec![0u8; 128],
        "lanes end at their out-of-bounds access"
    );
}

const SAXPY: &str = ".kernel saxpy\n.param .f32 a\n.param .buf.f32 x\n.param .buf.f32 y .rw\n.param .u32 n\n    mov.u32 %i, %gid;\n    setp.ge.u32 %p, %i, n;\n@%p exit;\n    ld.f32 %x, x[%i];\n    ld.f32 %y, y[%i];\n    fma.f32 %y, a, %x, %y;\n    st.f32 y[%i], %y;\n";

#[test]
fn unchecked_launches_compute_the_same() {
    let Some(g) = gpu() else { return };
    let c = g.compile(&kernel(SAXPY)).expect("compile");
    let n = 100_000usize;
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let mut results = Vec::new();
    for checked in [true, false] {
        let x = buffer(&g, bytemuck::cast_slice(&xs));
        let y = buffer(&g, bytemuck::cast_slice(&vec![1.0f32; n]));
        let args = [
            KernelArg::Scalar(Value::F32(3.0)),
            KernelArg::Buffer(BufferArg::whole(x)),
            KernelArg::Buffer(BufferArg::whole(y.clone())),
            KernelArg::Scalar(Value::U32(n as u32)),
        ];
        let mut config = LaunchConfig::for_elements(n as u64, 256);
        if !checked {
            // SAFETY: saxpy's lanes past `n` exit before any access, and lanes below `n` index
            // x and y, which hold `n` elements.
            config = unsafe { config.without_bounds_checks() };
        }
        g.launch(&c, &config, &args).expect("launch");
        results.push(read(&g, &y));
    }
    assert_eq!(results[0], results[1]);
    let y: &[f32] = bytemuck::cast_slice(&results[0]);
    assert_eq!(y[8], 3.0 * 2.0 + 1.0);
}

#[test]
fn launches_are_asynchronous_and_reads_wait() {
    let Some(g) = gpu() else { return };
    // A linear-congruential chain: no compiler can fold it into a closed form.
    let spin = kernel(".kernel spin\n.param .buf.u32 y .rw\n.param .u32 iters\n    mov.u32 %c, iters;\n    mov.u32 %a, 0;\nL:\n    mad.u32 %a, %a, 1664525, %c;\n    loop %c, L;\n    st.u32 y[%gid], %a;\n");
    let chain = |iters: u32| {
        (1..=iters)
            .rev()
            .fold(0u32, |a, c| a.wrapping_mul(1664525).wrapping_add(c))
    };
    let c = g.compile(&spin).expect("compile");
    let y = buffer(&g, &[0u8; 4 * 64]);
    let iters = 1u32 << 26;
    let args = [
        KernelArg::Buffer(BufferArg::whole(y.clone())),
        KernelArg::Scalar(Value::U32(iters)),
    ];
    let t = Instant::now();
    g.launch(&c, &LaunchConfig::linear(1, 64), &args)
        .expect("launch");
    let launched = t.elapsed();
    g.synchronize().expect("sync");
    let finished = t.elapsed();
    println!("launch returned after {launched:?}, the kernel finished after {finished:?}");
    assert!(
        finished.as_millis() >= 5,
        "the spin kernel was too fast to tell ({finished:?})"
    );
    assert!(
        launched * 4 < finished,
        "launch waited for the kernel ({launched:?} of {finished:?})"
    );
    // A read right after a launch sees its result: copy_out waits for earlier work.
    let want = chain(iters - 1);
    let args2 = [
        KernelArg::Buffer(BufferArg::whole(y.clone())),
        KernelArg::Scalar(Value::U32(iters - 1)),
    ];
    g.launch(&c, &LaunchConfig::linear(1, 64), &args)
        .expect("launch");
    g.launch(&c, &LaunchConfig::linear(1, 64), &args2)
        .expect("launch");
    let got = u32::from_le_bytes(read(&g, &y)[..4].try_into().unwrap());
    assert_eq!(got, want, "the read saw the last launch's result");
}

fn gemm_case(
    g: &CudaBackend,
    cpu: &CpuBackend,
    ty: Type,
    shape: (usize, usize, usize, bool, bool, usize),
    precision: GemmPrecision,
) {
    let (m, n, k, ta, tb, batch) = shape;
    let mut d = GemmDesc::new(ty, m, n, k);
    d.trans_a = ta;
    d.trans_b = tb;
    d.lda = (if ta { m } else { k }).max(1);
    d.ldb = (if tb { k } else { n }).max(1);
    d.batch = batch;
    d.alpha = 1.5;
    d.beta = 0.5;
    d.precision = precision;
    let vals = |len: usize, mul: usize| -> Vec<f64> {
        (0..len)
            .map(|i| ((i * mul) % 9) as f64 / 4.0 - 1.0)
            .collect()
    };
    let (a, b, c) = (
        vals(batch * m * k, 7),
        vals(batch * k * n, 5),
        vals(batch * m * n, 3),
    );
    let enc = |v: &[f64]| -> Vec<u8> {
        v.iter()
            .flat_map(|&x| match ty {
                Type::F64 => x.to_le_bytes().to_vec(),
                Type::F32 => (x as f32).to_le_bytes().to_vec(),
                Type::F16 => half::f16::from_f64(x).to_le_bytes().to_vec(),
                _ => half::bf16::from_f64(x).to_le_bytes().to_vec(),
            })
            .collect()
    };
    let dec = |bytes: &[u8]| -> Vec<f64> {
        let s = ty.size_bytes();
        bytes
            .chunks(s)
            .map(|ch| match ty {
                Type::F64 => f64::from_le_bytes(ch.try_into().unwrap()),
                Type::F32 => f32::from_le_bytes(ch.try_into().unwrap()) as f64,
                Type::F16 => half::f16::from_le_bytes(ch.try_into().unwrap()).to_f64(),
                _ => half::bf16::from_le_bytes(ch.try_into().unwrap()).to_f64(),
            })
            .collect()
    };
    let run = |be: &dyn Backend| {
        let (ma, mb, mc) = (
            buffer(be, &enc(&a)),
            buffer(be, &enc(&b)),
            buffer(be, &enc(&c)),
        );
        be.gemm(
            &d,
            &BufferArg::whole(ma),
            &BufferArg::whole(mb),
            &BufferArg::whole(mc.clone()),
        )
        .expect("gemm");
        dec(&read(be, &mc))
    };
    let (want, got) = (run(cpu), run(g));
    let tol = match (ty, precision) {
        (Type::F64, _) => 1e-12,
        (Type::F32, GemmPrecision::Exact) => 1e-5,
        (Type::F32, _) => 1e-2,
        (Type::F16, _) => 1e-2,
        _ => 4e-2,
    };
    for (i, (w, x)) in want.iter().zip(&got).enumerate() {
        assert!(
            (w - x).abs() <= tol * w.abs().max(1.0),
            "{ty} {shape:?} {precision:?}: [{i}] cuda {x} vs cpu {w}"
        );
    }
}

#[test]
fn gemm_on_cublas_matches_the_cpu() {
    let Some(g) = gpu() else { return };
    println!("cuBLAS present: {}", g.has_cublas());
    let cpu = CpuBackend::new();
    let shapes = [
        (1, 1, 1, false, false, 1),
        (17, 33, 9, false, false, 2),
        (20, 5, 31, true, true, 1),
        (16, 16, 40, true, false, 3),
        (64, 48, 0, false, true, 1),
        (128, 96, 80, false, false, 1),
    ];
    for ty in [Type::F32, Type::F64, Type::F16, Type::BF16] {
        for s in shapes {
            gemm_case(&g, &cpu, ty, s, GemmPrecision::Exact);
        }
    }
    for s in shapes {
        gemm_case(&g, &cpu, Type::F32, s, GemmPrecision::Tf32);
    }
}

#[test]
fn large_and_offset_copies_round_trip() {
    let Some(g) = gpu() else { return };
    let n = (20 << 20) + 3;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
    let m = g.allocate(n + 16).expect("allocate");
    g.copy_in(&m, 5, &data).expect("staged copy in");
    let mut back = vec![0u8; n];
    g.copy_out(&m, 5, &mut back).expect("staged copy out");
    assert!(back == data, "large copy round trip");
    let mut mid = vec![0u8; 1000];
    g.copy_out(&m, 5 + 12345, &mut mid).expect("small copy out");
    assert_eq!(&mid[..], &data[12345..13345]);
    // Device copies, including overlapping ranges of one allocation (memmove semantics).
    let small = buffer(&g, &(0..=255u8).collect::<Vec<_>>());
    g.copy(&small, 0, &small, 10, 200)
        .expect("overlapping copy");
    let mut want: Vec<u8> = (0..=255u8).collect();
    want.copy_within(0..200, 10);
    assert_eq!(read(&g, &small), want);
    assert!(matches!(
        g.copy(&small, 100, &small, 0, 200),
        Err(BackendError::CopyOutOfRange { .. })
    ));
}

/// Run by `second_process_compiles_nothing` in child processes.
fn compile_a_few(g: &CudaBackend) {
    for text in [SAXPY, ".kernel iota\n.param .buf.u32 y .rw\n    st.u32 y[%gid], %gid;\n", ".kernel twice\n.param .buf.f64 y .rw\n    ld.f64 %v, y[%gid];\n    add.f64 %v, %v, %v;\n    st.f64 y[%gid], %v;\n"] {
        g.compile(&kernel(text)).expect("compile");
    }
}

#[test]
fn second_process_compiles_nothing() {
    if std::env::var_os("HOLOGRAM_CACHE_CHILD").is_some() {
        let Some(g) = gpu() else { return };
        compile_a_few(&g);
        println!("CHILD-STATS {}", g.stats());
        return;
    }
    let Some(_) = gpu() else { return };
    let dir = std::env::temp_dir().join(format!("hologram-cuda-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let child = || {
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "second_process_compiles_nothing",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("HOLOGRAM_CACHE_CHILD", "1")
            .env("HOLOGRAM_CACHE_DIR", &dir)
            .output()
            .expect("child runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "child failed: {text}");
        let line = text
            .lines()
            .find(|l| l.contains("CHILD-STATS"))
            .unwrap_or_default()
            .to_string();
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(u64::MAX)
        };
        (field("nvrtc_compiles"), field("disk_hits"), line)
    };
    let (first_compiles, _, l1) = child();
    let (second_compiles, second_hits, l2) = child();
    println!("first process: {l1}\nsecond process: {l2}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(first_compiles, 3, "{l1}");
    assert_eq!(second_compiles, 0, "{l2}");
    assert_eq!(second_hits, 3, "{l2}");
}

#[test]
fn runaway_launches_end_with_errors() {
    let Some(g) = gpu() else { return };
    common::runaway::runaway_launches_end_with_errors(&g);
}
