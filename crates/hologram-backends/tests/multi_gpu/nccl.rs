//! NCCL collectives and copies between GPUs (`cuda::collective`, `cuda::peer`), built into the
//! `cuda_gpu` test binary (tests/cuda_gpu.rs).
//!
//! - Without NCCL, a driver or a GPU, everything returns an error value, never panics (runs
//!   everywhere).
//! - `single_gpu_*`: a communicator of size 1 on GPU 0 (each collective is then a copy), made
//!   both ways (`init_all` and `init_rank`), and a copy between two backends of one GPU. Without
//!   a GPU (or NCCL) they print why and pass, unless `HOLOGRAM_REQUIRE_GPU=1` (or
//!   `HOLOGRAM_REQUIRE_NCCL=1`).
//! - `all_gpus_*`: every collective across all GPUs of the host, one thread driving them all and
//!   one thread per GPU, and peer copies both ways. With fewer than two GPUs they print why and
//!   pass (even under `HOLOGRAM_REQUIRE_GPU=1`: one GPU is a machine, not a failure).
//!
//! Run with `NCCL_NVLS_ENABLE=0` (scripts/gpu-run.sh sets it): NVLink multicast stays off.

use std::sync::Arc;

use hologram_backends::cuda::collective::{group, nccl_version, Communicator, ReduceOp, UniqueId};
use hologram_backends::cuda::{copy_between, device_count, CudaBackend};
use hologram_backends::{Backend, BackendError, BufferArg, CpuBackend};
use hologram_isa::Type;

/// NCCL tests run one at a time even when the harness runs tests in parallel: communicators of
/// different tests on the same GPUs must not interleave their collectives.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

fn require_gpu() -> bool {
    std::env::var("HOLOGRAM_REQUIRE_GPU").as_deref() == Ok("1")
}

/// NCCL must load (the GPU scripts' NCCL steps set it; elsewhere a GPU without NCCL skips).
fn require_nccl() -> bool {
    std::env::var("HOLOGRAM_REQUIRE_NCCL").as_deref() == Ok("1")
}

/// GPU 0 with NCCL, or `None` (printing why) where either is missing.
fn gpu() -> Option<Arc<dyn Backend>> {
    let backend = match CudaBackend::on_device(0) {
        Ok(b) => b,
        Err(BackendError::Unavailable { reason, .. }) => {
            assert!(
                !require_gpu(),
                "HOLOGRAM_REQUIRE_GPU=1 but CUDA is unavailable: {reason}"
            );
            println!("skipped: {reason}");
            return None;
        }
        Err(e) => {
            panic!("CudaBackend::on_device(0) failed with something other than Unavailable: {e}")
        }
    };
    if let Err(e) = nccl_version() {
        assert!(!require_nccl(), "HOLOGRAM_REQUIRE_NCCL=1 but {e}");
        println!("skipped: {e}");
        return None;
    }
    Some(Arc::new(backend))
}

/// Every GPU of the host with NCCL, or `None` (printing why) with fewer than two.
fn gpus() -> Option<Vec<Arc<dyn Backend>>> {
    gpu()?;
    let n = device_count().expect("the driver loads (GPU 0 opened)");
    if n < 2 {
        println!("skipped: this host has {n} GPU; the all-GPU collectives need two or more");
        return None;
    }
    Some(
        (0..n)
            .map(|i| {
                Arc::new(CudaBackend::on_device(i).expect("open every GPU")) as Arc<dyn Backend>
            })
            .collect(),
    )
}

fn upload(b: &dyn Backend, values: &[f32]) -> BufferArg {
    let m = b.allocate(values.len() * 4).expect("allocate");
    b.copy_in(&m, 0, bytemuck::cast_slice(values))
        .expect("copy_in");
    BufferArg::whole(m)
}

fn download(b: &dyn Backend, arg: &BufferArg) -> Vec<f32> {
    let mut out = vec![0f32; arg.len / 4];
    b.copy_out(&arg.memory, arg.offset, bytemuck::cast_slice_mut(&mut out))
        .expect("copy_out");
    out
}

/// Rank `r`'s element `i`: small integers, so sums in f32 are exact.
fn value(r: usize, i: usize) -> f32 {
    ((r + 1) * (i % 13 + 1)) as f32
}

#[test]
fn missing_nccl_or_gpu_is_an_error_not_a_panic() {
    let _serial = serial();
    match nccl_version() {
        Ok(v) => {
            println!("NCCL {v}");
            // Making an id needs no GPU (it opens NCCL's bootstrap socket).
            let id = UniqueId::new().expect("ncclGetUniqueId");
            assert!(id.to_bytes().iter().any(|&b| b != 0));
        }
        Err(e) => {
            assert!(matches!(e, BackendError::Unavailable { .. }), "{e}");
            assert!(e.to_string().contains("NCCL"), "{e}");
        }
    }
    let _ = device_count();
    // A CPU backend is refused with a reason, whether or not NCCL loads.
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let e = Communicator::init_all(std::slice::from_ref(&cpu)).unwrap_err();
    assert!(
        matches!(
            e,
            BackendError::Unavailable { .. } | BackendError::ForeignBuffer(_)
        ),
        "{e}"
    );
    let m = BufferArg::whole(cpu.allocate(16).unwrap());
    let e = copy_between(cpu.as_ref(), &m, cpu.as_ref(), &m).unwrap_err();
    assert!(matches!(e, BackendError::ForeignBuffer(_)), "{e}");
}

fn check_size_one(c: &Communicator, g: &dyn Backend) {
    assert_eq!((c.rank(), c.size()), (0, 1));
    let n = 1000;
    let data: Vec<f32> = (0..n).map(|i| value(0, i)).collect();
    let x = upload(g, &data);
    c.all_reduce(&x, &x, n, Type::F32, ReduceOp::Sum).unwrap();
    c.all_reduce(&x, &x, n, Type::F32, ReduceOp::Mean).unwrap();
    assert_eq!(download(g, &x), data, "in-place all-reduce of one rank");
    let y = upload(g, &vec![-1.0; n]);
    c.all_reduce(&x, &y, n, Type::F32, ReduceOp::Max).unwrap();
    assert_eq!(download(g, &y), data, "all-reduce into another buffer");
    let z = upload(g, &vec![-1.0; n]);
    c.broadcast(&x, &z, n, Type::F32, 0).unwrap();
    assert_eq!(download(g, &z), data, "broadcast");
    let w = upload(g, &vec![-1.0; n]);
    c.all_gather(&x, &w, n, Type::F32).unwrap();
    assert_eq!(download(g, &w), data, "all-gather");
    let v = upload(g, &vec![-1.0; n]);
    c.reduce_scatter(&x, &v, n, Type::F32, ReduceOp::Sum)
        .unwrap();
    assert_eq!(download(g, &v), data, "reduce-scatter");
    c.async_error().unwrap();

    // Mistakes are error values.
    let e = c.broadcast(&x, &x, n, Type::F32, 1).unwrap_err();
    assert!(e.to_string().contains("root rank 1"), "{e}");
    let e = c
        .all_reduce(&x, &x, n + 1, Type::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(e.to_string().contains("holds 4000 bytes"), "{e}");
    let e = c
        .all_reduce(&x, &x, n, Type::U16, ReduceOp::Sum)
        .unwrap_err();
    assert!(e.to_string().contains("NCCL has no u16"), "{e}");
}

#[test]
fn single_gpu_communicator_of_size_one_from_init_all() {
    let _serial = serial();
    let Some(g) = gpu() else { return };
    let comms = Communicator::init_all(std::slice::from_ref(&g)).unwrap();
    assert_eq!(comms.len(), 1);
    check_size_one(&comms[0], g.as_ref());
    // Grouped calls work on one rank too.
    let x = upload(g.as_ref(), &[1.0, 2.0, 3.0]);
    group(|| comms[0].all_reduce(&x, &x, 3, Type::F32, ReduceOp::Sum)).unwrap();
    assert_eq!(download(g.as_ref(), &x), vec![1.0, 2.0, 3.0]);
}

#[test]
fn single_gpu_communicator_of_size_one_from_a_unique_id() {
    let _serial = serial();
    let Some(g) = gpu() else { return };
    let id = UniqueId::new().unwrap();
    let id = UniqueId::from_bytes(&id.to_bytes()).unwrap();
    let c = Communicator::init_rank(g.clone(), &id, 0, 1).unwrap();
    check_size_one(&c, g.as_ref());
    let e = Communicator::init_rank(g.clone(), &id, 1, 1).unwrap_err();
    assert!(
        e.to_string().contains("rank 1 of a communicator of 1"),
        "{e}"
    );
}

#[test]
fn single_gpu_copy_between_two_backends() {
    let _serial = serial();
    let Some(a) = gpu() else { return };
    let b: Arc<dyn Backend> = Arc::new(CudaBackend::on_device(0).unwrap());
    let data: Vec<f32> = (0..(3 << 20)).map(|i| value(1, i)).collect();
    let src = upload(a.as_ref(), &data);
    let dst = upload(b.as_ref(), &vec![0.0; data.len()]);
    copy_between(a.as_ref(), &src, b.as_ref(), &dst).unwrap();
    assert_eq!(download(b.as_ref(), &dst), data);
    let short = upload(b.as_ref(), &[0.0; 4]);
    let e = copy_between(a.as_ref(), &src, b.as_ref(), &short).unwrap_err();
    assert!(
        e.to_string().contains("cannot be copied into 16 bytes"),
        "{e}"
    );
}

/// One rank's collective calls, given the rank.
type RankCall<'a> = dyn Fn(usize) -> hologram_backends::Result<()> + Sync + 'a;

/// Checks every collective on `comms` (rank `r` on `gpus[r]`); `issue` runs one rank's calls,
/// either all inside one group (one thread) or each rank on its own thread.
fn check_all_collectives(
    gpus: &[Arc<dyn Backend>],
    comms: &[Communicator],
    issue: &dyn Fn(&RankCall<'_>),
) {
    let n = gpus.len();
    let len = 4096 * n + n; // not a multiple of anything NCCL likes
    let len = len - len % n; // reduce-scatter needs a multiple of n
    let inputs: Vec<BufferArg> = (0..n)
        .map(|r| {
            upload(
                gpus[r].as_ref(),
                &(0..len).map(|i| value(r, i)).collect::<Vec<_>>(),
            )
        })
        .collect();
    let sum: Vec<f32> = (0..len)
        .map(|i| (0..n).map(|r| value(r, i)).sum())
        .collect();

    // all-reduce sum into fresh buffers, mean in place.
    let outs: Vec<BufferArg> = gpus
        .iter()
        .map(|g| upload(g.as_ref(), &vec![0.0; len]))
        .collect();
    issue(&|r| comms[r].all_reduce(&inputs[r], &outs[r], len, Type::F32, ReduceOp::Sum));
    for r in 0..n {
        assert_eq!(
            download(gpus[r].as_ref(), &outs[r]),
            sum,
            "all-reduce sum, rank {r}"
        );
    }
    // In place, over each rank's own values (a mean of the sums, equal on every rank, would
    // be the sum again).
    let own: Vec<BufferArg> = (0..n)
        .map(|r| {
            upload(
                gpus[r].as_ref(),
                &(0..len).map(|i| value(r, i)).collect::<Vec<_>>(),
            )
        })
        .collect();
    issue(&|r| comms[r].all_reduce(&own[r], &own[r], len, Type::F32, ReduceOp::Mean));
    let mean: Vec<f32> = sum.iter().map(|s| s / n as f32).collect();
    for r in 0..n {
        let got = download(gpus[r].as_ref(), &own[r]);
        for (i, (g, m)) in got.iter().zip(&mean).enumerate() {
            assert!(
                (g - m).abs() <= 1e-6 * m.abs(),
                "mean, rank {r}, element {i}: {g} vs {m}"
            );
        }
    }

    // broadcast from the last rank.
    let root = n - 1;
    issue(&|r| comms[r].broadcast(&inputs[r], &outs[r], len, Type::F32, root));
    let want: Vec<f32> = (0..len).map(|i| value(root, i)).collect();
    for r in 0..n {
        assert_eq!(
            download(gpus[r].as_ref(), &outs[r]),
            want,
            "broadcast, rank {r}"
        );
    }

    // all-gather: rank r's block at r * len.
    let gathered: Vec<BufferArg> = gpus
        .iter()
        .map(|g| upload(g.as_ref(), &vec![0.0; len * n]))
        .collect();
    issue(&|r| comms[r].all_gather(&inputs[r], &gathered[r], len, Type::F32));
    let want: Vec<f32> = (0..n)
        .flat_map(|r| (0..len).map(move |i| value(r, i)))
        .collect();
    for r in 0..n {
        assert_eq!(
            download(gpus[r].as_ref(), &gathered[r]),
            want,
            "all-gather, rank {r}"
        );
    }

    // reduce-scatter: rank r gets block r of the sum.
    let block = len / n;
    let scattered: Vec<BufferArg> = gpus
        .iter()
        .map(|g| upload(g.as_ref(), &vec![0.0; block]))
        .collect();
    issue(&|r| comms[r].reduce_scatter(&inputs[r], &scattered[r], block, Type::F32, ReduceOp::Sum));
    for r in 0..n {
        assert_eq!(
            download(gpus[r].as_ref(), &scattered[r]),
            sum[r * block..(r + 1) * block].to_vec(),
            "reduce-scatter, rank {r}"
        );
    }
    for c in comms {
        c.async_error().unwrap();
    }
}

#[test]
fn all_gpus_collectives_from_one_thread() {
    let _serial = serial();
    let Some(gpus) = gpus() else { return };
    let comms = Communicator::init_all(&gpus).unwrap();
    assert_eq!(comms.len(), gpus.len());
    let issue = |call: &RankCall<'_>| {
        group(|| (0..gpus.len()).try_for_each(call)).unwrap();
    };
    check_all_collectives(&gpus, &comms, &issue);
}

#[test]
fn all_gpus_collectives_one_thread_per_gpu() {
    let _serial = serial();
    let Some(gpus) = gpus() else { return };
    let n = gpus.len();
    let id = UniqueId::new().unwrap();
    // ncclCommInitRank blocks until every rank joins: one thread per rank, as one process per
    // GPU would.
    let comms: Vec<Communicator> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|r| {
                let (g, id) = (gpus[r].clone(), id.clone());
                s.spawn(move || Communicator::init_rank(g, &id, r, n).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let issue = |call: &RankCall<'_>| {
        std::thread::scope(|s| {
            for r in 0..n {
                s.spawn(move || call(r).unwrap());
            }
        });
    };
    check_all_collectives(&gpus, &comms, &issue);
}

#[test]
fn all_gpus_peer_copies_both_ways() {
    let _serial = serial();
    let Some(gpus) = gpus() else { return };
    let (a, b) = (&gpus[0], &gpus[1]);
    let data: Vec<f32> = (0..(5 << 20) + 3).map(|i| value(2, i)).collect();
    let src = upload(a.as_ref(), &data);
    let mid = upload(b.as_ref(), &vec![0.0; data.len()]);
    let back = upload(a.as_ref(), &vec![0.0; data.len()]);
    copy_between(a.as_ref(), &src, b.as_ref(), &mid).unwrap();
    copy_between(b.as_ref(), &mid, a.as_ref(), &back).unwrap();
    assert_eq!(download(b.as_ref(), &mid), data, "cuda:0 -> cuda:1");
    assert_eq!(download(a.as_ref(), &back), data, "cuda:1 -> cuda:0");
    // A buffer of the wrong GPU is refused.
    let e = copy_between(b.as_ref(), &src, a.as_ref(), &back).unwrap_err();
    assert!(e.to_string().contains("lives on cuda:0"), "{e}");
}
