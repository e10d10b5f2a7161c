//! A pending expression drops what it reads once it has run: a realized result (and every
//! reshape of it) holds its own memory only, so the tensors it was computed from are freed when
//! the caller drops them. Run on every backend under test.

mod common;

use hologram_core::{DType, Executor, Tensor};

const N: usize = 1 << 16;
const BYTES: u64 = (N * 4) as u64;

fn in_use(exec: &Executor) -> u64 {
    exec.allocator_stats().bytes_in_use
}

fn inputs(exec: &Executor) -> (Tensor, Tensor) {
    let a: Vec<f32> = (0..N).map(|i| i as f32 - 1000.0).collect();
    let b: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    (
        Tensor::from_slice(exec, &a, &[N]).unwrap(),
        Tensor::from_slice(exec, &b, &[N]).unwrap(),
    )
}

fn want() -> Vec<f32> {
    (0..N)
        .map(|i| (i as f32 - 1000.0 + (i % 7) as f32).max(0.0))
        .collect()
}

#[test]
fn a_realized_result_frees_its_inputs() {
    for exec in common::executors() {
        let (a, b) = inputs(&exec);
        let c = a.add(&b).unwrap().relu().unwrap();
        c.realize().unwrap();
        let held = in_use(&exec);
        drop((a, b));
        assert_eq!(
            held - in_use(&exec),
            2 * BYTES,
            "{:?}: the inputs of a realized expression are still held",
            exec.backend_type()
        );
        assert_eq!(c.to_vec::<f32>().unwrap(), want());
    }
}

#[test]
fn reshapes_share_one_result_and_free_the_inputs() {
    for exec in common::executors() {
        let (a, b) = inputs(&exec);
        let c = a.add(&b).unwrap().relu().unwrap();
        let rows = c.reshape(&[256, -1]).unwrap();
        assert!(
            rows.is_lazy(),
            "a reshape of a pending expression stays pending"
        );
        let launches = exec.launch_count();
        // Realizing the reshape runs the expression once, for both.
        rows.realize().unwrap();
        assert!(!c.is_lazy());
        assert_eq!(rows.to_vec::<f32>().unwrap(), want());
        assert_eq!(c.to_vec::<f32>().unwrap(), want());
        assert_eq!(
            exec.launch_count() - launches,
            1,
            "{:?}",
            exec.backend_type()
        );
        let held = in_use(&exec);
        drop((a, b));
        assert_eq!(held - in_use(&exec), 2 * BYTES, "{:?}", exec.backend_type());
        assert_eq!(rows.shape(), &[256, N / 256]);
    }
}

#[test]
fn values_realized_together_free_their_inputs() {
    for exec in common::executors() {
        let (a, b) = inputs(&exec);
        let pre = a.add(&b).unwrap();
        let act = pre.relu().unwrap();
        Tensor::realize_all(&[&pre, &act]).unwrap();
        let held = in_use(&exec);
        drop((a, b));
        assert_eq!(held - in_use(&exec), 2 * BYTES, "{:?}", exec.backend_type());
        assert_eq!(act.to_vec::<f32>().unwrap(), want());
        let want_pre: f64 = (0..N).map(|i| i as f64 - 1000.0 + (i % 7) as f64).sum();
        let sum = pre.sum(&[], false).unwrap().to_vec::<f32>().unwrap()[0];
        assert!(
            (sum as f64 - want_pre).abs() <= 1e-5 * want_pre.abs(),
            "{sum} against {want_pre}"
        );
        // A realized value is stored: writing into it works like into any stored tensor.
        pre.write_bytes(&vec![0u8; N * 4]).unwrap();
        assert!(pre.to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
        assert_eq!(pre.dtype(), DType::F32);
    }
}

#[test]
fn an_expression_that_has_run_copies_its_result() {
    for exec in common::executors() {
        let (a, b) = inputs(&exec);
        let c = a.add(&b).unwrap().relu().unwrap();
        let rows = c.reshape(&[256, -1]).unwrap();
        c.realize().unwrap();
        let out = Tensor::zeros(&exec, &[N], DType::F32).unwrap();
        c.copy_into(&out).unwrap();
        assert_eq!(
            out.to_vec::<f32>().unwrap(),
            want(),
            "{:?}",
            exec.backend_type()
        );
        // The reshape shares the result that has run: copied in its own shape.
        let out_rows = Tensor::zeros(&exec, &[256, N / 256], DType::F32).unwrap();
        rows.copy_into(&out_rows).unwrap();
        assert_eq!(
            out_rows.to_vec::<f32>().unwrap(),
            want(),
            "{:?}",
            exec.backend_type()
        );
    }
}
