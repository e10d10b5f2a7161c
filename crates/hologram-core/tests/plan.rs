//! Plans: a recorded function replays with the results eager execution gives, plans and compiles
//! nothing on replay, reuses memory, keeps constants, and rejects what it cannot replay. Runs on
//! every backend of `HOLOGRAM_TEST_BACKENDS` (and the CPU).

mod common;

// Collectives, copies between GPUs and gradient buckets (tests/multi_gpu/collective.rs): in this
// binary, not one of their own, so the GPU bundle stays within what the device tool carries.
#[cfg(feature = "cuda")]
mod multi_gpu {
    pub mod collective;
}

use hologram_core::plan::{Plan, Recording};
use hologram_core::{DType, Executor, Result, Tensor};

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 250.0 - 2.0)
        .collect()
}

fn tensor(exec: &Executor, shape: &[usize], seed: u32) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_slice(exec, &data(n, seed), shape).unwrap()
}

/// An MLP-like step: matmuls, a bias, an activation, a softmax, reductions, a constant.
fn step(t: &[Tensor]) -> Result<Vec<Tensor>> {
    let (x, w1, b1, w2) = (&t[0], &t[1], &t[2], &t[3]);
    let h = x.matmul(w1)?.add(b1)?.relu()?;
    let logits = h.matmul(w2)?;
    let p = logits.softmax(-1)?;
    let scale = Tensor::from_slice(x.executor(), &[0.5f32, 2.0, -1.0, 3.0], &[4])?;
    let y = p.mul(&scale)?.sum(&[1], false)?;
    Ok(vec![y, h.mean(&[0], true)?, logits])
}

/// Shapes of [`step`]'s inputs.
const SHAPES: [&[usize]; 4] = [&[8, 16], &[16, 32], &[32], &[32, 4]];

/// Inputs for [`step`], seeded from `seed` up.
fn step_inputs(exec: &Executor, seed: u32) -> Vec<Tensor> {
    SHAPES
        .iter()
        .enumerate()
        .map(|(i, s)| tensor(exec, s, seed + i as u32))
        .collect()
}

fn bits(t: &Tensor) -> Vec<u8> {
    t.to_bytes().unwrap()
}

#[test]
fn replays_match_eager_execution_bit_for_bit() {
    for exec in common::executors() {
        let inputs = step_inputs(&exec, 0);
        let (plan, first) = Plan::record(&exec, &inputs, step).unwrap();
        let eager = step(&inputs).unwrap();
        for (a, b) in first.iter().zip(&eager) {
            assert_eq!(bits(a), bits(b), "{exec:?}: recording run");
        }
        // New inputs: the replay computes on them, not on the recorded values.
        for round in 1..4u32 {
            let inputs = step_inputs(&exec, 100 * round);
            let got = plan.run(&inputs).unwrap();
            let want = step(&inputs).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert_eq!(bits(a), bits(b), "{exec:?}: replay {round}");
            }
        }
        assert_eq!(plan.stats().replays, 3);
        // On CUDA a replay is one captured graph.
        let cuda = exec.backend_type() == hologram_core::BackendType::Cuda;
        assert_eq!(plan.stats().captured, cuda, "{exec:?}");
    }
}

#[test]
fn a_replay_plans_and_compiles_nothing() {
    for exec in common::executors() {
        let inputs: Vec<Tensor> = [[8usize, 16].as_slice(), &[16, 32], &[32], &[32, 4]]
            .iter()
            .enumerate()
            .map(|(i, s)| tensor(&exec, s, i as u32))
            .collect();
        let (plan, _) = Plan::record(&exec, &inputs, step).unwrap();
        let before = exec.stats();
        let out = plan.run(&inputs).unwrap();
        out[0].to_bytes().unwrap();
        let after = exec.stats();
        assert_eq!(after.kernels.compiles, before.kernels.compiles, "{exec:?}");
        assert_eq!(
            after.kernels.hits, before.kernels.hits,
            "{exec:?}: no kernel lookups"
        );
        assert_eq!(after.backend.compiles, before.backend.compiles, "{exec:?}");
        let s = plan.stats();
        // Two matmuls; with a vendor BLAS (cuBLAS) the mean over rows is a product with ones.
        let gemms = if exec.has_vendor_blas() { 3 } else { 2 };
        assert!(s.launches >= 4 && s.gemms == gemms, "{s:?}");
    }
}

#[test]
fn values_share_memory_once_they_are_dead() {
    let exec = Executor::cpu();
    let x = tensor(&exec, &[1 << 16], 1);
    // Twenty materialized values of 256 KiB each, only two live at a time.
    let (plan, out) = Plan::record(&exec, &[x], |t| {
        let mut v = t[0].clone();
        for i in 0..20 {
            v = v
                .mul(1.0001)?
                .add(i as f64)?
                .contiguous()?
                .sum(&[0], true)?
                .add(&v)?;
            v = v.contiguous()?;
        }
        Ok(vec![v])
    })
    .unwrap();
    assert_eq!(out[0].shape(), &[1 << 16]);
    let value_bytes = (1u64 << 16) * 4;
    let peak = plan.stats().peak_bytes;
    assert!(
        peak < 8 * value_bytes,
        "peak {peak} bytes for 20 values of {value_bytes}"
    );
}

#[test]
fn constants_made_while_recording_are_kept() {
    for exec in common::executors() {
        let x = tensor(&exec, &[4, 4], 3);
        let f = |t: &[Tensor]| -> Result<Vec<Tensor>> {
            // The constant's buffer is free again after its use: later values may take it.
            let c = Tensor::from_slice(t[0].executor(), &[1.0f32, 2.0, 3.0, 4.0], &[4])?;
            let a = t[0].mul(&c)?.contiguous()?;
            let b = a.add(1.0)?.contiguous()?;
            let d = b.mul(&b)?.contiguous()?;
            Ok(vec![d])
        };
        let (plan, _) = Plan::record(&exec, std::slice::from_ref(&x), f).unwrap();
        for _ in 0..2 {
            assert_eq!(
                bits(&plan.run(std::slice::from_ref(&x)).unwrap()[0]),
                bits(&f(std::slice::from_ref(&x)).unwrap()[0])
            );
        }
    }
}

#[test]
fn constants_only_read_cost_a_replay_nothing() {
    for exec in common::executors() {
        let x = tensor(&exec, &[4, 4], 3);
        let y = tensor(&exec, &[4, 4], 5);
        // Two constants, each read by several steps, their buffers free again afterwards.
        let read_only = |t: &[Tensor]| -> Result<Vec<Tensor>> {
            let c = Tensor::from_slice(t[0].executor(), &[1.0f32, 2.0, 3.0, 4.0], &[4])?;
            let s = Tensor::from_slice(t[0].executor(), &[0.5f32], &[])?;
            let a = t[0].mul(&c)?.contiguous()?;
            let b = a.add(&c)?.mul(&s)?.contiguous()?;
            Ok(vec![b.mul(&b)?.sub(&s)?.contiguous()?])
        };
        let (plan, _) = Plan::record(&exec, std::slice::from_ref(&x), read_only).unwrap();
        let stats = plan.stats();
        assert_eq!(
            (stats.copies, stats.constants_in_place),
            (0, 2),
            "{stats:?}"
        );
        for input in [&y, &x, &y] {
            let args = std::slice::from_ref(input);
            assert_eq!(
                bits(&plan.run(args).unwrap()[0]),
                bits(&read_only(args).unwrap()[0])
            );
        }
        // A constant written again after its upload (a padded copy: constant fill, then the
        // input copied into its middle), and a constant that is an output, are copied back
        // into their buffers on every replay.
        let written = |t: &[Tensor]| -> Result<Vec<Tensor>> {
            let e = t[0].executor();
            let padded = Tensor::from_slice(e, &[-1.0f32; 36], &[6, 6])?;
            t[0].copy_into(&padded.slice(0, 1, 5, 1)?.slice(1, 1, 5, 1)?)?;
            let out = Tensor::from_slice(e, &[7.0f32, 8.0], &[2])?;
            Ok(vec![padded.add(1.0)?.contiguous()?, out])
        };
        let (plan, _) = Plan::record(&exec, std::slice::from_ref(&x), written).unwrap();
        let stats = plan.stats();
        assert_eq!(stats.constants_in_place, 0, "{stats:?}");
        assert!(stats.copies >= 2, "{stats:?}");
        for input in [&y, &x] {
            let args = std::slice::from_ref(input);
            let (got, want) = (plan.run(args).unwrap(), written(args).unwrap());
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(bits(g), bits(w));
            }
        }
    }
}

#[test]
fn host_reads_and_wrong_inputs_are_errors() {
    let exec = Executor::cpu();
    let x = tensor(&exec, &[4], 1);
    let e = Plan::record(&exec, std::slice::from_ref(&x), |t| {
        let s = t[0].sum(&[0], false)?;
        s.to_vec::<f32>()?;
        Ok(vec![s])
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("while a plan was being recorded"),
        "{e}"
    );
    // The failed recording left the executor usable, and a new recording can start.
    assert_eq!(x.add(1.0).unwrap().to_vec::<f32>().unwrap().len(), 4);
    let (plan, _) =
        Plan::record(&exec, std::slice::from_ref(&x), |t| Ok(vec![t[0].exp()?])).unwrap();
    let wrong = tensor(&exec, &[5], 1);
    assert!(plan.run(&[wrong]).is_err());
    assert!(plan.run(&[]).is_err());
    let half = x.cast(DType::F16).unwrap();
    assert!(plan.run(&[half]).is_err());
    // Two recordings at once on one executor are refused.
    let r = Recording::begin(&exec, std::slice::from_ref(&x)).unwrap();
    assert!(Recording::begin(&exec, std::slice::from_ref(&x)).is_err());
    drop(r);
}

#[test]
fn outputs_may_be_inputs_and_views() {
    for exec in common::executors() {
        let x = tensor(&exec, &[3, 5], 9);
        let (plan, _) = Plan::record(&exec, std::slice::from_ref(&x), |t| {
            Ok(vec![
                t[0].clone(),
                t[0].transpose(0, 1)?,
                t[0].reshape(&[15])?,
            ])
        })
        .unwrap();
        let y = tensor(&exec, &[3, 5], 10);
        let out = plan.run(std::slice::from_ref(&y)).unwrap();
        assert_eq!(bits(&out[0]), bits(&y));
        assert_eq!(bits(&out[1]), bits(&y.transpose(0, 1).unwrap()));
        assert_eq!(out[2].shape(), &[15]);
        // Outputs are copies: the next replay does not change them.
        let before = bits(&out[0]);
        plan.run(std::slice::from_ref(&x)).unwrap();
        assert_eq!(bits(&out[0]), before);
    }
}

#[test]
fn inputs_read_in_place_and_outputs_as_views() {
    for exec in common::executors() {
        let w = tensor(&exec, &[4, 4], 1);
        let x = tensor(&exec, &[2, 4], 2);
        let f = |t: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![t[0].matmul(&t[1])?.relu()?]) };
        let rec = Recording::begin_bound(&exec, &[x.clone(), w.clone()], &[false, true]).unwrap();
        let out = f(rec.inputs()).unwrap();
        let (plan, first) = rec.finish_with(&out, &[true]).unwrap();
        assert_eq!(
            bits(&first[0]),
            bits(&f(&[x.clone(), w.clone()]).unwrap()[0])
        );
        // The aliased output is still held: a replay would overwrite it, so it is refused.
        assert!(!plan.outputs_free());
        assert!(plan.run_with(&[x.clone(), w.clone()], &[true]).is_err());
        drop(first);
        assert!(plan.outputs_free());
        // The in-place input is read where it is: a change to it is seen without a copy.
        w.write_bytes(&tensor(&exec, &[4, 4], 7).to_bytes().unwrap())
            .unwrap();
        let y = tensor(&exec, &[2, 4], 3);
        let got = plan.run_with(&[y.clone(), w.clone()], &[true]).unwrap();
        assert_eq!(
            bits(&got[0]),
            bits(&f(&[y.clone(), w.clone()]).unwrap()[0]),
            "{exec:?}"
        );
        drop(got);
        // Another tensor with the same shape is not the recorded one.
        let other = tensor(&exec, &[4, 4], 1);
        assert!(!plan.accepts(&[y.clone(), other.clone()]));
        assert!(plan.accepts(&[y.clone(), w.clone()]));
        assert!(plan.run(&[y, other]).is_err());
    }
}

#[test]
fn seeded_random_numbers_change_with_the_seed_input() {
    for exec in common::executors() {
        let seed = |s: u32| Tensor::from_slice(&exec, &[s], &[1]).unwrap();
        // Uniform numbers seeded by a tensor are those of the constant seed.
        let a = Tensor::rand_seeded(&seed(7), &[1000], false, DType::F32).unwrap();
        let b = Tensor::rand(&exec, &[1000], 7, DType::F32).unwrap();
        assert_eq!(bits(&a), bits(&b), "{exec:?}");
        let (plan, _) = Plan::record(&exec, &[seed(1)], |t| {
            Ok(vec![Tensor::rand_seeded(&t[0], &[4096], true, DType::F32)?])
        })
        .unwrap();
        let r1 = plan.run(&[seed(1)]).unwrap();
        let r2 = plan.run(&[seed(2)]).unwrap();
        let r1b = plan.run(&[seed(1)]).unwrap();
        assert_eq!(bits(&r1[0]), bits(&r1b[0]));
        assert_ne!(bits(&r1[0]), bits(&r2[0]));
        let v = r2[0].to_vec::<f32>().unwrap();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(
            mean.abs() < 0.1 && (var - 1.0).abs() < 0.1,
            "{exec:?}: {mean} {var}"
        );
    }
}

/// A large input read first and a large output written last (16 MiB and more): the steps at
/// those edges run outside the captured graph on the caller's input and on a fresh output, so a
/// replay copies neither. Results match eager execution; outputs of earlier replays stay
/// intact; an input the edge cannot read in place (a transposed view) is copied as before; an
/// aliased output is the plan's own buffer.
#[test]
fn large_inputs_and_outputs_move_to_the_plans_edges() {
    for exec in common::executors() {
        let f = |t: &[Tensor]| -> Result<Vec<Tensor>> {
            let h = t[0].matmul(&t[1])?.relu()?;
            Ok(vec![h.sum(&[0], false)?, h.matmul(&t[2])?])
        };
        let (x, w1, w2) = (
            tensor(&exec, &[2048, 2048], 1),
            tensor(&exec, &[2048, 16], 2),
            tensor(&exec, &[16, 2048], 3),
        );
        let (plan, first) = Plan::record(&exec, &[x.clone(), w1.clone(), w2.clone()], f).unwrap();
        let s = plan.stats();
        assert!(s.edge_steps >= 2, "{exec:?}: {s:?}");
        let eager = |x: &Tensor| f(&[x.clone(), w1.clone(), w2.clone()]).unwrap();
        assert_eq!(bits(&first[1]), bits(&eager(&x)[1]), "{exec:?}: recording");
        let x2 = tensor(&exec, &[2048, 2048], 7);
        let out1 = plan.run(&[x.clone(), w1.clone(), w2.clone()]).unwrap();
        let out2 = plan.run(&[x2.clone(), w1.clone(), w2.clone()]).unwrap();
        for (got, want) in [(&out1, eager(&x)), (&out2, eager(&x2))] {
            assert_eq!(bits(&got[0]), bits(&want[0]), "{exec:?}: small output");
            assert_eq!(bits(&got[1]), bits(&want[1]), "{exec:?}: large output");
        }
        // A transposed view is copied into the plan's input buffer, not read in place.
        let xt = x2
            .transpose(0, 1)
            .unwrap()
            .contiguous()
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let out3 = plan.run(&[xt, w1.clone(), w2.clone()]).unwrap();
        assert_eq!(bits(&out3[1]), bits(&eager(&x2)[1]), "{exec:?}: view input");
        let aliased = plan
            .run_with(&[x.clone(), w1.clone(), w2.clone()], &[false, true])
            .unwrap();
        assert_eq!(
            bits(&aliased[1]),
            bits(&eager(&x)[1]),
            "{exec:?}: aliased output"
        );
        drop(aliased);
        assert!(plan.outputs_free());
        // One kernel reading the large input and writing the large output: it runs on the
        // caller's input and writes a fresh output, nothing in a graph.
        let g = |t: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![t[0].relu()?.mul(2.0)?]) };
        let (plan, _) = Plan::record(&exec, std::slice::from_ref(&x), g).unwrap();
        assert_eq!(plan.stats().edge_steps, 1, "{exec:?}: {:?}", plan.stats());
        let (a, b) = (
            plan.run(std::slice::from_ref(&x)).unwrap(),
            plan.run(std::slice::from_ref(&x2)).unwrap(),
        );
        assert_eq!(
            bits(&a[0]),
            bits(&g(std::slice::from_ref(&x)).unwrap()[0]),
            "{exec:?}"
        );
        assert_eq!(
            bits(&b[0]),
            bits(&g(std::slice::from_ref(&x2)).unwrap()[0]),
            "{exec:?}"
        );
    }
}

#[test]
fn a_loop_on_the_same_memory_replays_a_graph_bound_to_it() {
    for exec in common::executors() {
        let inputs = step_inputs(&exec, 0);
        let (plan, first) = Plan::record(&exec, &inputs, step).unwrap();
        drop(first);
        // A training loop: the batch is rewritten where it is, the outputs of a step are dropped
        // before the next, so the allocator hands the same blocks back.
        let rewrite_batch = |round: u32| {
            inputs[0]
                .write_bytes(&bytemuck_f32(&data(8 * 16, 100 * round)))
                .unwrap()
        };
        let mut results = Vec::new();
        for round in 1..7u32 {
            rewrite_batch(round);
            let got: Vec<Vec<u8>> = plan.run(&inputs).unwrap().iter().map(bits).collect();
            results.push((round, got));
        }
        let bound_before = plan.stats().bound_replays;
        // Another caller's memory for the batch, then the loop's again.
        let mut other = inputs.clone();
        other[0] = tensor(&exec, SHAPES[0], 999);
        let elsewhere: Vec<Vec<u8>> = plan.run(&other).unwrap().iter().map(bits).collect();
        drop(plan.run(&inputs).unwrap());
        for (round, got) in &results {
            rewrite_batch(*round);
            let want: Vec<Vec<u8>> = step(&inputs).unwrap().iter().map(bits).collect();
            assert_eq!(got, &want, "{exec:?}: round {round}");
        }
        let want: Vec<Vec<u8>> = step(&other).unwrap().iter().map(bits).collect();
        assert_eq!(elsewhere, want, "{exec:?}: another batch");
        let s = plan.stats();
        if s.captured {
            // Captured when the same memory comes back (the outputs' blocks may come back in
            // turns: two sets of addresses), launched on the later replays.
            assert!((1..=2).contains(&s.bound_graphs), "{exec:?}: {s:?}");
            assert!(s.bound_replays >= 4, "{exec:?}: {s:?}");
            // The other batch took the plain path; the loop's memory found its graph again.
            assert_eq!(s.bound_replays, bound_before + 1, "{exec:?}: {s:?}");
        } else {
            assert_eq!((s.bound_graphs, s.bound_replays), (0, 0), "{exec:?}: {s:?}");
        }
    }
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
