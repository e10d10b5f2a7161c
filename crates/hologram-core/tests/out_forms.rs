//! The `out` forms of element-wise ops (`binary_into`, `unary_into`) give what the lazy op
//! copied into the same view gives, for every view and dtype, and repeated launches of one
//! expression come from the launch cache.

mod common;

use common::*;
use hologram_core::{BinaryFn, DType, Error, Executor, Tensor, UnaryFn};

fn values(exec: &Executor, n: usize, seed: f32) -> Tensor {
    let data: Vec<f32> = (0..n)
        .map(|i| (i as f32 * 0.37 + seed).sin() * 4.0)
        .collect();
    Tensor::from_slice(exec, &data, &[n]).unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

#[test]
fn out_forms_match_the_lazy_op_copied_into_the_view() {
    for exec in executors() {
        let a = values(&exec, 24, 0.0).reshape(&[4, 6]).unwrap();
        let b = values(&exec, 6, 1.0);
        let want = a.binary(BinaryFn::Mul, &b).unwrap();
        // Same shape and dtype: the expression runs straight into `out`.
        let out = Tensor::zeros(&exec, &[4, 6], DType::F32).unwrap();
        a.binary_into(BinaryFn::Mul, &b, &out).unwrap();
        assert_eq!(f64s(&out), f64s(&want), "{exec:?}");
        // A strided view, another dtype, a broadcast result: converted as copy_into does.
        let big = Tensor::zeros(&exec, &[4, 12], DType::F64).unwrap();
        let view = big.slice(1, 0, 12, 2).unwrap();
        a.binary_into(BinaryFn::Mul, &b, &view).unwrap();
        let expect = Tensor::zeros(&exec, &[4, 6], DType::F64).unwrap();
        want.copy_into(&expect).unwrap();
        assert_eq!(f64s(&view), f64s(&expect), "{exec:?}");
        let row = Tensor::zeros(&exec, &[6], DType::F32).unwrap();
        b.binary_into(BinaryFn::Add, 1.5, &row).unwrap();
        assert_eq!(f64s(&row), f64s(&b.binary(BinaryFn::Add, 1.5).unwrap()));
        let wide = Tensor::zeros(&exec, &[3, 6], DType::F32).unwrap();
        b.unary_into(UnaryFn::Neg, &wide).unwrap();
        let neg = f64s(&b.neg().unwrap());
        assert_eq!(f64s(&wide), [neg.clone(), neg.clone(), neg].concat());
        // In place: `out` may be an operand.
        let c = values(&exec, 6, 2.0).contiguous().unwrap();
        let twice = f64s(&c.binary(BinaryFn::Add, &c).unwrap());
        c.binary_into(BinaryFn::Add, &c, &c).unwrap();
        assert_eq!(f64s(&c), twice);
        // An op that needs no kernel (abs of unsigned) still writes `out`.
        let u = Tensor::from_slice(&exec, &[3u32, 1, 4], &[3]).unwrap();
        let v = Tensor::zeros(&exec, &[3], DType::U32).unwrap();
        u.unary_into(UnaryFn::Abs, &v).unwrap();
        assert_eq!(v.to_vec::<u32>().unwrap(), [3, 1, 4]);
    }
}

#[test]
fn out_forms_check_the_executor_and_the_shape() {
    let (one, two) = (Executor::cpu(), executors().remove(1));
    let a = values(&one, 8, 0.0);
    let out = Tensor::zeros(&two, &[8], DType::F32).unwrap();
    let err = a.binary_into(BinaryFn::Add, &a, &out).unwrap_err();
    assert!(matches!(err, Error::DeviceMismatch(_)), "{err}");
    let short = Tensor::zeros(&one, &[5], DType::F32).unwrap();
    assert!(a.unary_into(UnaryFn::Relu, &short).is_err());
}

#[test]
fn repeated_launches_of_one_expression_come_from_the_launch_cache() {
    let exec = executors().remove(1);
    let (a, b) = (values(&exec, 64, 0.0), values(&exec, 64, 1.0));
    let out = Tensor::zeros(&exec, &[64], DType::F32).unwrap();
    a.binary_into(BinaryFn::Sub, &b, &out).unwrap();
    let before = exec.kernel_cache_stats();
    for _ in 0..4 {
        a.binary_into(BinaryFn::Sub, &b, &out).unwrap();
        a.binary(BinaryFn::Sub, &b).unwrap().realize().unwrap();
    }
    let after = exec.kernel_cache_stats();
    assert_eq!(after.launch_hits - before.launch_hits, 8);
    assert_eq!((after.compiles, after.hits), (before.compiles, before.hits));
    // A float scalar is a kernel parameter: a new op compiles once, a new value reuses it.
    a.binary_into(BinaryFn::Mul, 3.0, &out).unwrap();
    let mul = exec.kernel_cache_stats();
    a.binary_into(BinaryFn::Mul, 4.0, &out).unwrap();
    let again = exec.kernel_cache_stats();
    assert_eq!(mul.compiles, after.compiles + 1);
    assert_eq!(
        (again.compiles, again.launch_hits),
        (mul.compiles, mul.launch_hits + 1)
    );
    let want: Vec<f64> = f64s(&a).iter().map(|x| x * 4.0).collect();
    assert_eq!(
        f64s(&out),
        want.iter().map(|&x| x as f32 as f64).collect::<Vec<_>>()
    );
}
