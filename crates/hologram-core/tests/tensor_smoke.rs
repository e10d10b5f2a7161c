use hologram_core::{DType, Executor, Tensor};

#[test]
fn smoke() {
    let exec = Executor::cpu();
    let a = Tensor::from_slice(&exec, &[1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3]).unwrap();
    let b = Tensor::from_slice(&exec, &[0.5f32, 1.0, 2.0], &[3]).unwrap();
    let before = exec.launch_count();
    let c = a.add(&b).unwrap().relu().unwrap().mul(&b).unwrap();
    assert_eq!(
        c.to_vec::<f32>().unwrap(),
        vec![0.75, 0.0, 10.0, 0.0, 6.0, 0.0]
    );
    assert_eq!(exec.launch_count() - before, 1, "fused into one kernel");
    let s = a.sum(&[1], false).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![2.0, -5.0]);
    let t = a.t().unwrap();
    assert_eq!(t.shape(), &[3, 2]);
    assert_eq!(
        t.contiguous().unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, -4.0, -2.0, 5.0, 3.0, -6.0]
    );
    let m = a.matmul(&t).unwrap();
    assert_eq!(m.to_vec::<f32>().unwrap(), vec![14.0, -32.0, -32.0, 77.0]);
    let am = a.argmax(Some(1), false).unwrap();
    assert_eq!(am.to_vec::<i64>().unwrap(), vec![2, 1]);
    let sm = a
        .softmax(-1)
        .unwrap()
        .sum(&[-1], false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(sm.iter().all(|v| (v - 1.0).abs() < 1e-6), "{sm:?}");
    let big = Tensor::arange(&exec, 0.0, 100000.0, 1.0, DType::F32).unwrap();
    assert!(
        (big.sum(&[], false).unwrap().item().unwrap() - 4999950000.0).abs() < 4999950000.0 * 1e-6
    );
    let r = Tensor::rand(&exec, &[1000], 7, DType::F32)
        .unwrap()
        .mean(&[], false)
        .unwrap()
        .item()
        .unwrap();
    assert!((r - 0.5).abs() < 0.05, "{r}");
    let z = Tensor::randn(&exec, &[10000], 7, DType::F32).unwrap();
    let mean = z.mean(&[], false).unwrap().item().unwrap();
    let var = z
        .square()
        .unwrap()
        .mean(&[], false)
        .unwrap()
        .item()
        .unwrap();
    assert!(
        mean.abs() < 0.05 && (var - 1.0).abs() < 0.05,
        "{mean} {var}"
    );
    let cat = Tensor::cat(&[&a, &a], 0).unwrap();
    assert_eq!(cat.shape(), &[4, 3]);
    let l = a
        .cross_entropy(&Tensor::from_slice(&exec, &[2i64, 1], &[2]).unwrap())
        .unwrap()
        .item()
        .unwrap();
    assert!(l.is_finite());
}
