//! Tensor-level collectives (`collective::Communicator`), copies between GPUs
//! (`Tensor::to_device`) and data-parallel gradient buckets (`data_parallel::GradientBuckets`).
//!
//! Built into the `plan` test binary (tests/plan.rs). `single_gpu_*` need a GPU and NCCL (size-1 communicators), `all_gpus_*` two GPUs or more;
//! each prints why and passes where that is missing (the single-GPU ones fail instead under
//! `HOLOGRAM_REQUIRE_GPU=1`, as scripts/gpu-run.sh sets). Run with `NCCL_NVLS_ENABLE=0`.

use std::sync::Arc;

use hologram_core::collective::{group, nccl_version, Communicator, ReduceOp, UniqueId};
use hologram_core::data_parallel::GradientBuckets;
use hologram_core::{cuda_device_count, DType, Error, Executor, Tensor};

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

fn gpu() -> Option<Executor> {
    let exec = match Executor::cuda(0) {
        Ok(e) => e,
        Err(Error::Backend(hologram_backends::BackendError::Unavailable { reason, .. })) => {
            assert!(!require_gpu(), "HOLOGRAM_REQUIRE_GPU=1 but {reason}");
            println!("skipped: {reason}");
            return None;
        }
        Err(e) => panic!("Executor::cuda(0): {e}"),
    };
    if let Err(e) = nccl_version() {
        assert!(!require_nccl(), "HOLOGRAM_REQUIRE_NCCL=1 but {e}");
        println!("skipped: {e}");
        return None;
    }
    Some(exec)
}

fn gpus() -> Option<Vec<Executor>> {
    gpu()?;
    let n = cuda_device_count();
    if n < 2 {
        println!("skipped: this host has {n} GPU; the all-GPU tests need two or more");
        return None;
    }
    Some((0..n).map(|i| Executor::cuda(i).unwrap()).collect())
}

fn values(rank: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| ((rank + 1) * (i % 11 + 1)) as f32).collect()
}

#[test]
fn single_gpu_tensor_collectives_of_one_rank() {
    let _serial = serial();
    let Some(exec) = gpu() else { return };
    assert_eq!(exec.device().to_string(), "cuda:0");
    let comm = Communicator::init_rank(&exec, &UniqueId::new().unwrap(), 0, 1).unwrap();
    let x = values(0, 6000);
    let t = Tensor::from_slice(&exec, &x, &[2, 3000]).unwrap();
    assert_eq!(t.device().to_string(), "cuda:0");
    comm.all_reduce(&t, ReduceOp::Sum).unwrap();
    comm.all_reduce(&t, ReduceOp::Mean).unwrap();
    comm.broadcast(&t, 0).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), x);
    let g = comm.all_gather(&t).unwrap();
    assert_eq!(g.shape(), &[2, 3000]);
    assert_eq!(g.to_vec::<f32>().unwrap(), x);
    let r = comm.reduce_scatter(&t, ReduceOp::Sum).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), x);
    // A pending expression, a view and a CPU tensor are refused with the reason.
    let lazy = t.add(&t).unwrap();
    let e = comm.all_reduce(&lazy, ReduceOp::Sum).unwrap_err();
    assert!(e.to_string().contains("realize"), "{e}");
    let e = comm
        .all_reduce(&t.transpose(0, 1).unwrap(), ReduceOp::Sum)
        .unwrap_err();
    assert!(e.to_string().contains("contiguous"), "{e}");
    let cpu = Tensor::from_slice(&Executor::cpu(), &x, &[6000]).unwrap();
    let e = comm.all_reduce(&cpu, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch(_)), "{e}");
}

#[test]
fn single_gpu_collectives_are_not_recorded_into_plans() {
    let _serial = serial();
    let Some(exec) = gpu() else { return };
    let comm = Communicator::init_rank(&exec, &UniqueId::new().unwrap(), 0, 1).unwrap();
    let x = Tensor::from_slice(&exec, &values(0, 64), &[64]).unwrap();
    let e = hologram_core::plan::Plan::record(&exec, std::slice::from_ref(&x), |t| {
        let y = t[0].add(&t[0])?.realize()?;
        comm.all_reduce(&y, ReduceOp::Sum)?;
        Ok(vec![y])
    })
    .unwrap_err();
    assert!(e.to_string().contains("cannot be recorded"), "{e}");
}

#[test]
fn single_gpu_gradient_buckets_of_one_rank_keep_the_gradients() {
    let _serial = serial();
    let Some(exec) = gpu() else { return };
    let comm = Arc::new(Communicator::init_rank(&exec, &UniqueId::new().unwrap(), 0, 1).unwrap());
    let shapes = vec![
        (vec![64, 32], DType::F32),
        (vec![32], DType::F32),
        (vec![10, 64], DType::F32),
    ];
    // 3 KiB buckets: the weights have buckets of their own.
    let mut buckets = GradientBuckets::new(comm, &shapes, 3 << 10).unwrap();
    assert!(buckets.bucket_count() >= 2);
    for round in 0..2 {
        let grads: Vec<Vec<f32>> = shapes
            .iter()
            .enumerate()
            .map(|(i, (s, _))| values(i + round, s.iter().product()))
            .collect();
        for i in (0..shapes.len()).rev() {
            let g = Tensor::from_slice(&exec, &grads[i], &shapes[i].0).unwrap();
            buckets.add(i, &g).unwrap();
        }
        let out = buckets.finish().unwrap();
        for (i, o) in out.iter().enumerate() {
            assert_eq!(o.shape(), shapes[i].0.as_slice());
            assert_eq!(
                o.to_vec::<f32>().unwrap(),
                grads[i],
                "round {round}, parameter {i}"
            );
        }
    }
    // A gradient that never came counts as zeros.
    let g = Tensor::from_slice(&exec, &values(0, 32), &[32]).unwrap();
    buckets.add(1, &g).unwrap();
    let out = buckets.finish().unwrap();
    assert!(out[0].to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    let e = buckets
        .add(1, &Tensor::zeros(&exec, &[31], DType::F32).unwrap())
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch(_)), "{e}");
}

#[test]
fn single_gpu_to_device_between_two_executors() {
    let _serial = serial();
    let Some(a) = gpu() else { return };
    let b = Executor::cuda(0).unwrap();
    let x = values(3, 100_000);
    let t = Tensor::from_slice(&a, &x, &[100_000]).unwrap();
    let moved = t.mul(&t).unwrap().to_device(&b).unwrap();
    assert!(moved.executor().same_as(&b));
    let want: Vec<f32> = x.iter().map(|v| v * v).collect();
    assert_eq!(moved.to_vec::<f32>().unwrap(), want);
}

#[test]
fn all_gpus_tensor_collectives_and_copies() {
    let _serial = serial();
    let Some(execs) = gpus() else { return };
    let n = execs.len();
    let comms = Communicator::init_all(&execs).unwrap();
    let len = 1000 * n;
    let ts: Vec<Tensor> = execs
        .iter()
        .enumerate()
        .map(|(r, e)| Tensor::from_slice(e, &values(r, len), &[len]).unwrap())
        .collect();
    let sum: Vec<f32> = (0..len)
        .map(|i| (0..n).map(|r| values(r, len)[i]).sum())
        .collect();
    let scattered = group(|| {
        comms
            .iter()
            .zip(&ts)
            .map(|(c, t)| c.reduce_scatter(t, ReduceOp::Sum))
            .collect::<hologram_core::Result<Vec<_>>>()
    })
    .unwrap();
    for (r, s) in scattered.iter().enumerate() {
        assert_eq!(
            s.to_vec::<f32>().unwrap(),
            sum[r * 1000..(r + 1) * 1000].to_vec()
        );
    }
    let gathered = group(|| {
        comms
            .iter()
            .zip(&scattered)
            .map(|(c, s)| c.all_gather(s))
            .collect::<hologram_core::Result<Vec<_>>>()
    })
    .unwrap();
    for g in &gathered {
        assert_eq!(g.to_vec::<f32>().unwrap(), sum);
    }
    group(|| {
        comms
            .iter()
            .zip(&ts)
            .try_for_each(|(c, t)| c.all_reduce(t, ReduceOp::Sum))
    })
    .unwrap();
    for t in &ts {
        assert_eq!(t.to_vec::<f32>().unwrap(), sum);
    }
    // Tensors move between GPUs and know where they are.
    let last = ts[0].to_device(&execs[n - 1]).unwrap();
    assert_eq!(last.device().to_string(), format!("cuda:{}", n - 1));
    assert_eq!(last.to_vec::<f32>().unwrap(), sum);
}

#[test]
fn all_gpus_gradient_buckets_average_across_ranks() {
    let _serial = serial();
    let Some(execs) = gpus() else { return };
    let n = execs.len();
    let id = UniqueId::new().unwrap();
    let shapes = vec![(vec![300, 40], DType::F32), (vec![40], DType::F32)];
    // One thread per rank, as one process per GPU would run.
    let results: Vec<Vec<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = execs
            .iter()
            .enumerate()
            .map(|(r, exec)| {
                let (id, shapes) = (id.clone(), shapes.clone());
                s.spawn(move || {
                    let comm = Arc::new(Communicator::init_rank(exec, &id, r, n).unwrap());
                    let mut buckets = GradientBuckets::new(comm, &shapes, 4 << 10).unwrap();
                    for i in (0..shapes.len()).rev() {
                        let numel = shapes[i].0.iter().product();
                        let g =
                            Tensor::from_slice(exec, &values(r + i, numel), &shapes[i].0).unwrap();
                        buckets.add(i, &g).unwrap();
                    }
                    buckets
                        .finish()
                        .unwrap()
                        .iter()
                        .map(|t| t.to_vec::<f32>().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, (shape, _)) in shapes.iter().enumerate() {
        let numel: usize = shape.iter().product();
        let want: Vec<f32> = (0..numel)
            .map(|k| (0..n).map(|r| values(r + i, numel)[k]).sum::<f32>() / n as f32)
            .collect();
        for (r, got) in results.iter().enumerate() {
            for (k, (g, w)) in got[i].iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs(),
                    "rank {r}, parameter {i}, element {k}: {g} vs {w}"
                );
            }
        }
    }
}
