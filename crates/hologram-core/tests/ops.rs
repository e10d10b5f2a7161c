//! The op test suite: every op on every backend present, against an f64 reference, over random
//! shapes with broadcasting, non-contiguous views, empty and size-1 dimensions.
//!
//! Backends: the CPU always; others named in `HOLOGRAM_TEST_BACKENDS` (e.g. `vulkan` in CI on
//! lavapipe, `cuda` on a GPU). Dtypes a device rejects as unsupported (f64 on most wgpu
//! adapters) are skipped and listed.

mod common;

use common::*;
use hologram_core::{BackendType, BinaryFn, DType, Error, Executor, Tensor, UnaryFn};
use hologram_isa::CmpOp;

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];
const INTS: [DType; 4] = [DType::I32, DType::I64, DType::U8, DType::I16];

/// True when the executor can compute with `dt` (probed once per call site).
fn supports(exec: &Executor, dt: DType) -> bool {
    let probe =
        Tensor::ones(exec, &[2], dt)
            .and_then(|t| if dt == DType::Bool { Ok(t) } else { t.add(&t) });
    match probe.and_then(|t| t.to_f64_vec()) {
        Ok(_) => true,
        Err(Error::Backend(hologram_backends::BackendError::Unsupported { .. })) => {
            eprintln!(
                "{}: {dt} is not supported on this device; skipped",
                exec.backend_type()
            );
            false
        }
        Err(e) => panic!("{}: probing {dt} failed: {e}", exec.backend_type()),
    }
}

/// True when the executor also has `dt` transcendentals (WGSL has none for f64, so wgpu devices
/// reject them; the CPU and CUDA must support them).
fn supports_transcendentals(exec: &Executor, dt: DType) -> bool {
    supports(exec, dt)
        && unless_unsupported(
            exec,
            dt,
            "exp",
            Tensor::ones(exec, &[2], dt).and_then(|t| t.exp()),
        )
        .is_some()
}

/// The op's result, or None when the device rejects it as unsupported (reported on stderr).
/// Only f64 ops on a wgpu device may be unsupported; anywhere else it fails the test.
fn unless_unsupported(
    exec: &Executor,
    dt: DType,
    what: &str,
    result: hologram_core::Result<Tensor>,
) -> Option<Tensor> {
    match result.and_then(|t| t.realize()) {
        Ok(t) => Some(t),
        Err(Error::Backend(hologram_backends::BackendError::Unsupported { feature, .. }))
            if dt == DType::F64
                && !matches!(exec.backend_type(), BackendType::Cpu | BackendType::Cuda) =>
        {
            eprintln!(
                "{}: {what} on {dt} is not supported on this device ({feature}); skipped",
                exec.backend_type()
            );
            None
        }
        Err(e) => panic!("{} {what} {dt}: {e}", exec.backend_type()),
    }
}

fn each(dtypes: &[DType], f: impl FnMut(&Executor, DType, &mut Rng)) {
    each_where(dtypes, supports, f)
}

/// Like `each`, for tests whose every op needs transcendentals (softmax, losses, gradients).
fn each_transcendental(dtypes: &[DType], f: impl FnMut(&Executor, DType, &mut Rng)) {
    each_where(dtypes, supports_transcendentals, f)
}

fn each_where(
    dtypes: &[DType],
    supported: fn(&Executor, DType) -> bool,
    mut f: impl FnMut(&Executor, DType, &mut Rng),
) {
    for exec in executors() {
        for &dt in dtypes {
            if supported(&exec, dt) {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ dt as u64);
                f(&exec, dt, &mut rng);
            }
        }
    }
}

fn unary_ref(f: UnaryFn, x: f64) -> f64 {
    use UnaryFn::*;
    match f {
        Abs => x.abs(),
        Neg => -x,
        Sqrt => x.sqrt(),
        Rsqrt => 1.0 / x.sqrt(),
        Exp => x.exp(),
        Log => x.ln(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Tanh => x.tanh(),
        Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Relu => x.max(0.0),
        Gelu => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        Silu => x / (1.0 + (-x).exp()),
        Erf => libm::erf(x),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round_ties_even(),
        Trunc => x.trunc(),
        Not => f64::NAN,
        Recip => 1.0 / x,
        Square => x * x,
    }
}

#[test]
fn unary_float_ops() {
    use UnaryFn::*;
    let ops = [
        Abs, Neg, Sqrt, Rsqrt, Exp, Log, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, Silu, Erf, Floor,
        Ceil, Round, Trunc, Recip, Square,
    ];
    each(&FLOATS, |exec, dt, rng| {
        for &f in &ops {
            let rank = rng.below(4);
            let shape = rng.shape(rank, 9);
            let (lo, hi) = if matches!(f, Sqrt | Rsqrt | Log) {
                (0.1, 8.0)
            } else {
                (-4.0, 4.0)
            };
            let a = random_arr(rng, &shape, dt, lo, hi);
            for strided in [false, true] {
                let t = if strided {
                    upload_strided(exec, &a, dt)
                } else {
                    upload(exec, &a, dt)
                };
                let Some(r) = unless_unsupported(exec, dt, &format!("{f:?}"), t.unary(f)) else {
                    continue;
                };
                let got = download(&r);
                // The result is rounded once to the dtype, so compare with the rounded reference;
                // transcendentals allow a few ulps of the compute type.
                let want = a.map(|x| round_to(unary_ref(f, x), dt));
                let rel = tol(dt)
                    * if matches!(f, Floor | Ceil | Round | Trunc | Abs | Neg | Relu) {
                        0.0
                    } else {
                        4.0
                    };
                assert_close(
                    &format!(
                        "{} {f:?} {dt} {shape:?} strided={strided}",
                        exec.backend_type()
                    ),
                    &got,
                    &want,
                    rel.max(tol(dt)),
                );
            }
        }
    });
}

#[test]
fn unary_int_ops() {
    each(&INTS, |exec, dt, rng| {
        let shape = rng.shape(2, 7);
        let a = random_arr(rng, &shape, dt, -30.0, 30.0);
        let t = upload(exec, &a, dt);
        for (f, r) in [
            (UnaryFn::Abs, f64::abs as fn(f64) -> f64),
            (UnaryFn::Relu, |x: f64| x.max(0.0)),
            (UnaryFn::Square, |x: f64| x * x),
        ] {
            let got = download(&t.unary(f).unwrap());
            assert_close(
                &format!("{f:?} {dt}"),
                &got,
                &a.map(|x| wrap(r(x), dt)),
                0.0,
            );
        }
        if dt.is_signed() {
            let got = download(&t.neg().unwrap());
            assert_close(&format!("neg {dt}"), &got, &a.map(|x| wrap(-x, dt)), 0.0);
        }
    });
}

fn binary_ref(f: BinaryFn, a: f64, b: f64, dt: DType) -> f64 {
    use BinaryFn::*;
    match f {
        Add => a + b,
        Sub => a - b,
        Mul => a * b,
        Div if dt.is_float() => a / b,
        Div => {
            if b == 0.0 {
                a
            } else {
                (a / b).trunc()
            }
        }
        Rem if dt.is_float() => a % b,
        Rem => {
            if b == 0.0 {
                0.0
            } else {
                a % b
            }
        }
        Pow => a.powf(b),
        Min => a.min(b),
        Max => a.max(b),
        And => ((a as i64) & (b as i64)) as f64,
        Or => ((a as i64) | (b as i64)) as f64,
        Xor => ((a as i64) ^ (b as i64)) as f64,
    }
}

#[test]
fn binary_ops_broadcast() {
    use BinaryFn::*;
    each(
        &[
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I64,
            DType::U8,
        ],
        |exec, dt, rng| {
            let ops: Vec<BinaryFn> = if dt.is_float() {
                vec![Add, Sub, Mul, Div, Pow, Min, Max, Rem]
            } else {
                vec![Add, Sub, Mul, Div, Rem, Min, Max, And, Or, Xor]
            };
            for &f in &ops {
                for case in 0..4 {
                    let rank = 1 + rng.below(3);
                    let shape = rng.shape(rank, 6);
                    // Broadcast partner: drop leading dims and set some dims to 1.
                    let mut bshape: Vec<usize> = shape[rng.below(rank)..].to_vec();
                    for d in bshape.iter_mut() {
                        if rng.below(3) == 0 {
                            *d = 1;
                        }
                    }
                    let (lo, hi) = if f == Pow {
                        (0.5, 2.0)
                    } else if dt.is_float() {
                        (-5.0, 5.0)
                    } else if dt == DType::U8 {
                        (0.0, 15.0)
                    } else {
                        (-20.0, 20.0)
                    };
                    let a = random_arr(rng, &shape, dt, lo, hi);
                    let mut b = random_arr(rng, &bshape, dt, lo, hi);
                    if matches!(f, Div | Rem) && dt.is_float() {
                        b = b.map(|x| if x.abs() < 0.5 { round_to(1.5, dt) } else { x });
                    }
                    let ta = if case % 2 == 1 {
                        upload_strided(exec, &a, dt)
                    } else {
                        upload(exec, &a, dt)
                    };
                    let tb = if case >= 2 {
                        upload_strided(exec, &b, dt)
                    } else {
                        upload(exec, &b, dt)
                    };
                    let Some(r) =
                        unless_unsupported(exec, dt, &format!("{f:?}"), ta.binary(f, &tb))
                    else {
                        continue;
                    };
                    let got = download(&r);
                    let want = a.zip(&b, |x, y| {
                        let r = binary_ref(f, x, y, dt);
                        if dt.is_float() {
                            round_to(r, dt)
                        } else {
                            round_to(wrap(r, dt), dt)
                        }
                    });
                    let rel = if dt.is_float() {
                        tol(dt) * if f == Pow { 4.0 } else { 1.0 }
                    } else {
                        0.0
                    };
                    assert_close(
                        &format!(
                            "{} {f:?} {dt} {shape:?} with {bshape:?}",
                            exec.backend_type()
                        ),
                        &got,
                        &want,
                        rel,
                    );
                }
            }
        },
    );
}

/// Wraps an exact integer result to the dtype's width.
fn wrap(x: f64, dt: DType) -> f64 {
    let bits = dt.size() * 8;
    let v = x as i128;
    let m = 1i128 << bits;
    let mut r = ((v % m) + m) % m;
    if dt.is_signed() && r >= m / 2 {
        r -= m;
    }
    r as f64
}

#[test]
fn scalar_ops_comparisons_where_cast_clip() {
    each(
        &[DType::F32, DType::F16, DType::I32, DType::F64],
        |exec, dt, rng| {
            let shape = rng.shape(2, 8);
            let a = random_arr(rng, &shape, dt, -6.0, 6.0);
            let t = upload(exec, &a, dt);
            let s = round_to(2.0, dt);
            assert_close(
                "add scalar",
                &download(&t.add(2.0).unwrap()),
                &a.map(|x| round_to(x + s, dt)),
                tol(dt),
            );
            assert_close(
                "rsub scalar",
                &download(&t.rbinary(BinaryFn::Sub, 2.0).unwrap()),
                &a.map(|x| round_to(s - x, dt)),
                tol(dt),
            );
            for (c, r) in [
                (CmpOp::Lt, 1),
                (CmpOp::Ge, 2),
                (CmpOp::Eq, 3),
                (CmpOp::Ne, 4),
            ] {
                let got = t.compare(c, 1.0).unwrap();
                assert_eq!(got.dtype(), DType::Bool);
                let want = a.map(|x| match r {
                    1 => (x < 1.0) as u8 as f64,
                    2 => (x >= 1.0) as u8 as f64,
                    3 => (x == 1.0) as u8 as f64,
                    _ => (x != 1.0) as u8 as f64,
                });
                assert_close(&format!("compare {c:?} {dt}"), &download(&got), &want, 0.0);
            }
            let cond = t.gt(0.0).unwrap();
            let zero = Tensor::zeros(exec, &[1], dt).unwrap();
            assert_close(
                "where",
                &download(&Tensor::where_(&cond, &t, &zero).unwrap()),
                &a.map(|x| if x > 0.0 { x } else { 0.0 }),
                0.0,
            );
            let hi = if dt.is_float() { 1.5 } else { 2.0 };
            let clipped = t.clip(Some(-1.0), Some(hi)).unwrap();
            assert_eq!(clipped.dtype(), dt, "integer bounds keep the dtype");
            assert_close(
                "clip",
                &download(&clipped),
                &a.map(|x| round_to(x.clamp(-1.0, hi), dt)),
                0.0,
            );
            for to in [DType::F32, DType::I32, DType::U8, DType::F16, DType::Bool] {
                if !supports(exec, to) {
                    continue;
                }
                let got = download(&t.cast(to).unwrap());
                let want = a.map(|x| {
                    if to == DType::Bool {
                        (x != 0.0) as u8 as f64
                    } else if to.is_float() {
                        round_to(x, to)
                    } else {
                        round_to(x.trunc(), to)
                    }
                });
                // Float to integer saturates; integer to integer wraps.
                let want = if to == DType::U8 && dt.is_float() {
                    a.map(|x| x.trunc().clamp(0.0, 255.0))
                } else if !to.is_float() && to != DType::Bool && !dt.is_float() {
                    a.map(|x| wrap(x, to))
                } else {
                    want
                };
                assert_close(&format!("cast {dt}->{to}"), &got, &want, 0.0);
            }
        },
    );
}

#[test]
fn reductions_along_axes() {
    each(
        &[DType::F32, DType::F64, DType::F16, DType::I32],
        |exec, dt, rng| {
            for _ in 0..6 {
                let rank = 1 + rng.below(3);
                let mut shape = rng.shape(rank, 7);
                if rng.below(3) == 0 {
                    // A long axis exercises the block (shared-memory tree) kernels.
                    let d = rng.below(rank);
                    shape[d] = 5000 + rng.below(20000);
                    for (i, s) in shape.iter_mut().enumerate() {
                        if i != d {
                            *s = (*s).clamp(1, 3);
                        }
                    }
                }
                let a = random_arr(rng, &shape, dt, -3.0, 3.0);
                let strided = rng.below(2) == 0;
                let t = if strided {
                    upload_strided(exec, &a, dt)
                } else {
                    upload(exec, &a, dt)
                };
                let axis = rng.below(rank);
                let name = |op: &str| {
                    format!(
                        "{} {op} {dt} {shape:?} axis {axis} strided={strided}",
                        exec.backend_type()
                    )
                };
                let count = shape[axis].max(1) as f64;
                let sum = a.reduce_axis(axis, 0.0, |p, x| p + x);
                let got = download(&t.sum(&[axis as isize], true).unwrap());
                let rel = if dt.is_float() {
                    tol(dt).max(1e-6) * 8.0 + count.sqrt() * 1e-7
                } else {
                    0.0
                };
                let sum_want = if dt.is_float() {
                    sum.map(|x| round_to(x, dt))
                } else {
                    sum.clone()
                };
                assert_close(
                    &name("sum"),
                    &got,
                    &sum_want,
                    rel.max(if dt.is_float() { tol(dt) * 4.0 } else { 0.0 }),
                );
                if shape[axis] > 0 {
                    let max = a.reduce_axis(axis, f64::NEG_INFINITY, f64::max);
                    assert_close(
                        &name("max"),
                        &download(&t.max(&[axis as isize], true).unwrap()),
                        &max,
                        0.0,
                    );
                    let min = a.reduce_axis(axis, f64::INFINITY, f64::min);
                    assert_close(
                        &name("min"),
                        &download(
                            &t.min(&[axis as isize], false)
                                .unwrap()
                                .reshape(&min.shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
                                .unwrap(),
                        ),
                        &min,
                        0.0,
                    );
                    let arg = download(&t.argmax(Some(axis as isize), true).unwrap());
                    let argw = Arr {
                        shape: max.shape.clone(),
                        data: (0..max.numel())
                            .map(|i| {
                                let mut idx = unravel(i, &max.shape);
                                (0..shape[axis])
                                    .find(|&r| {
                                        idx[axis] = r;
                                        a.data[ravel(&idx, &a.shape)] == max.data[i]
                                    })
                                    .unwrap() as f64
                            })
                            .collect(),
                    };
                    assert_close(&name("argmax"), &arg, &argw, 0.0);
                    if dt.is_float() {
                        let mean = sum.map(|x| x / count);
                        assert_close(
                            &name("mean"),
                            &download(&t.mean(&[axis as isize], true).unwrap()),
                            &mean.map(|x| round_to(x, dt)),
                            rel.max(tol(dt) * 4.0),
                        );
                    }
                }
            }
            // Everything at once, and products of small values.
            let shape = vec![3, 4, 5];
            let a = random_arr(rng, &shape, dt, 0.5, 1.5);
            let t = upload(exec, &a, dt);
            let total: f64 = a.data.iter().sum();
            let got = t.sum(&[], false).unwrap();
            assert_eq!(got.shape(), &[] as &[usize]);
            assert!(
                (got.item().unwrap() - total).abs() <= total.abs() * tol(dt).max(1e-7) * 16.0,
                "full sum {dt}"
            );
            let prod = a.reduce_axis(2, 1.0, |p, x| p * x);
            assert_close(
                "prod",
                &download(&t.prod(&[2], true).unwrap()),
                &prod.map(|x| round_to(x, dt)),
                tol(dt) * 8.0,
            );
        },
    );
}

fn matmul_ref(a: &Arr, b: &Arr) -> Arr {
    let (m, k) = (a.shape[a.shape.len() - 2], a.shape[a.shape.len() - 1]);
    let n = b.shape[b.shape.len() - 1];
    let batch = bshape(&a.shape[..a.shape.len() - 2], &b.shape[..b.shape.len() - 2]);
    let nb: usize = batch.iter().product();
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let mut data = vec![0.0; nb * m * n];
    for bi in 0..nb {
        let bidx = unravel(bi, &batch);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let mut ia = bidx.clone();
                    ia.extend([i, p]);
                    let mut ib = bidx.clone();
                    ib.extend([p, j]);
                    s += a.at_broadcast(&ia) * b.at_broadcast(&ib);
                }
                data[bi * m * n + i * n + j] = s;
            }
        }
    }
    Arr { shape, data }
}

#[test]
fn matmul_gemm_matvec() {
    each(&FLOATS, |exec, dt, rng| {
        for (sa, sb) in [
            (vec![5, 7], vec![7, 3]),
            (vec![2, 4, 6], vec![6, 5]),
            (vec![3, 1, 4, 2], vec![5, 2, 3]),
            (vec![1, 1], vec![1, 1]),
            (vec![33, 17], vec![17, 20]),
        ] {
            let a = random_arr(rng, &sa, dt, -1.0, 1.0);
            let b = random_arr(rng, &sb, dt, -1.0, 1.0);
            for (stra, strb) in [(false, false), (true, false), (false, true), (true, true)] {
                let ta = if stra {
                    upload_strided(exec, &a, dt)
                } else {
                    upload(exec, &a, dt)
                };
                let tb = if strb {
                    upload_strided(exec, &b, dt)
                } else {
                    upload(exec, &b, dt)
                };
                let got = download(&ta.matmul(&tb).unwrap());
                let want = matmul_ref(&a, &b);
                let k = sa[sa.len() - 1] as f64;
                assert_close(
                    &format!(
                        "{} matmul {dt} {sa:?}x{sb:?} strided {stra}/{strb}",
                        exec.backend_type()
                    ),
                    &got,
                    &want.map(|x| round_to(x, dt)),
                    tol(dt) * 4.0 * k.sqrt().max(1.0) + if dt == DType::F32 { 1e-6 } else { 0.0 },
                );
            }
        }
        // Vector cases.
        let m = random_arr(rng, &[4, 3], dt, -1.0, 1.0);
        let v = random_arr(rng, &[3], dt, -1.0, 1.0);
        let got = download(&upload(exec, &m, dt).matmul(&upload(exec, &v, dt)).unwrap());
        assert_eq!(got.shape, vec![4]);
        let got = download(&upload(exec, &v, dt).matmul(&upload(exec, &v, dt)).unwrap());
        assert_eq!(got.shape, Vec::<usize>::new());
    });
}

#[test]
fn softmax_log_softmax_layer_norm() {
    each_transcendental(&FLOATS, |exec, dt, rng| {
        let shape = vec![4, 1 + rng.below(40)];
        let a = random_arr(rng, &shape, dt, -4.0, 4.0);
        let t = upload(exec, &a, dt);
        let m = a.reduce_axis(1, f64::NEG_INFINITY, f64::max);
        let e = a.zip(&m, |x, y| (x - y).exp());
        let s = e.reduce_axis(1, 0.0, |p, x| p + x);
        let sm = e.zip(&s, |x, y| x / y);
        let rel = tol(dt) * 8.0;
        assert_close(
            &format!("softmax {dt}"),
            &download(&t.softmax(-1).unwrap()),
            &sm.map(|x| round_to(x, dt)),
            rel,
        );
        let lsm = a.zip(&m, |x, y| x - y).zip(&s, |x, y| x - y.ln());
        assert_close(
            &format!("log_softmax {dt}"),
            &download(&t.log_softmax(1).unwrap()),
            &lsm.map(|x| round_to(x, dt)),
            rel * 4.0,
        );
        // Layer norm over the last dimension with weight and bias.
        let n = shape[1] as f64;
        let w = random_arr(rng, &[shape[1]], dt, 0.5, 1.5);
        let b = random_arr(rng, &[shape[1]], dt, -0.5, 0.5);
        let mean = a.reduce_axis(1, 0.0, |p, x| p + x).map(|x| x / n);
        let cen = a.zip(&mean, |x, y| x - y);
        let var = cen
            .map(|x| x * x)
            .reduce_axis(1, 0.0, |p, x| p + x)
            .map(|x| x / n);
        let want = cen
            .zip(&var, |x, v| x / (v + 1e-5).sqrt())
            .zip(&w, |x, y| x * y)
            .zip(&b, |x, y| x + y);
        let got = download(
            &t.layer_norm(
                1,
                Some(&upload(exec, &w, dt)),
                Some(&upload(exec, &b, dt)),
                1e-5,
            )
            .unwrap(),
        );
        assert_close(
            &format!("layer_norm {dt}"),
            &got,
            &want.map(|x| round_to(x, dt)),
            rel * 8.0,
        );
    });
}

#[test]
fn losses() {
    each_transcendental(&[DType::F32, DType::F64], |exec, dt, rng| {
        let p = random_arr(rng, &[6, 5], dt, -2.0, 2.0);
        let q = random_arr(rng, &[6, 5], dt, -2.0, 2.0);
        let mse: f64 = p
            .data
            .iter()
            .zip(&q.data)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            / 30.0;
        let got = upload(exec, &p, dt)
            .mse_loss(&upload(exec, &q, dt))
            .unwrap()
            .item()
            .unwrap();
        assert!((got - mse).abs() <= mse * tol(dt) * 8.0, "mse {got} {mse}");
        let targets: Vec<i64> = (0..6).map(|i| (i * 7 % 5) as i64).collect();
        let tt = Tensor::from_slice(exec, &targets, &[6]).unwrap();
        let mut ce = 0.0;
        for (r, &t) in targets.iter().enumerate() {
            let row = &p.data[r * 5..r * 5 + 5];
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = row.iter().map(|x| (x - m).exp()).sum::<f64>().ln() + m;
            ce += lse - row[t as usize];
        }
        ce /= 6.0;
        let got = upload(exec, &p, dt)
            .cross_entropy(&tt)
            .unwrap()
            .item()
            .unwrap();
        assert!(
            (got - ce).abs() <= ce.abs() * tol(dt) * 16.0,
            "ce {got} {ce}"
        );
        let probs = random_arr(rng, &[10], dt, 0.05, 0.95);
        let tg = random_arr(rng, &[10], DType::Bool, 0.0, 1.0);
        let bce: f64 = probs
            .data
            .iter()
            .zip(&tg.data)
            .map(|(p, t)| -(t * p.ln() + (1.0 - t) * (1.0 - p).ln()))
            .sum::<f64>()
            / 10.0;
        let got = upload(exec, &probs, dt)
            .binary_cross_entropy(&upload(exec, &tg, DType::Bool))
            .unwrap()
            .item()
            .unwrap();
        assert!((got - bce).abs() <= bce * tol(dt) * 16.0, "bce {got} {bce}");
    });
}

/// Numerical gradient of a scalar function of one tensor (central differences in f64).
fn numeric_grad(x: &Arr, f: impl Fn(&Arr) -> f64) -> Arr {
    let h = 1e-6;
    let mut g = x.clone();
    for i in 0..x.numel() {
        let (mut p, mut m) = (x.clone(), x.clone());
        p.data[i] += h;
        m.data[i] -= h;
        g.data[i] = (f(&p) - f(&m)) / (2.0 * h);
    }
    g
}

#[test]
fn backward_ops_match_numerical_gradients() {
    each_transcendental(&[DType::F64], |exec, dt, rng| {
        let x = random_arr(rng, &[3, 5], dt, -2.0, 2.0);
        let gout = random_arr(rng, &[3, 5], dt, -1.0, 1.0);
        let tx = upload(exec, &x, dt);
        let tg = upload(exec, &gout, dt);
        let dot = |y: &Arr| {
            y.data
                .iter()
                .zip(&gout.data)
                .map(|(a, b)| a * b)
                .sum::<f64>()
        };
        let check = |name: &str, got: &Tensor, f: &dyn Fn(&Arr) -> Arr| {
            let want = numeric_grad(&x, |xx| dot(&f(xx)));
            assert_close(name, &download(got), &want, 1e-5);
        };
        check("relu'", &tx.relu_backward(&tg).unwrap(), &|a| {
            a.map(|v| v.max(0.0))
        });
        check("gelu'", &tx.gelu_backward(&tg).unwrap(), &|a| {
            a.map(|v| unary_ref(UnaryFn::Gelu, v))
        });
        check("silu'", &tx.silu_backward(&tg).unwrap(), &|a| {
            a.map(|v| unary_ref(UnaryFn::Silu, v))
        });
        check(
            "sigmoid'",
            &Tensor::sigmoid_backward(&tx.sigmoid().unwrap(), &tg).unwrap(),
            &|a| a.map(|v| unary_ref(UnaryFn::Sigmoid, v)),
        );
        check(
            "tanh'",
            &Tensor::tanh_backward(&tx.tanh().unwrap(), &tg).unwrap(),
            &|a| a.map(f64::tanh),
        );
        let softmax = |a: &Arr| {
            let m = a.reduce_axis(1, f64::NEG_INFINITY, f64::max);
            let e = a.zip(&m, |x, y| (x - y).exp());
            let s = e.reduce_axis(1, 0.0, |p, x| p + x);
            e.zip(&s, |x, y| x / y)
        };
        check(
            "softmax'",
            &Tensor::softmax_backward(&tx.softmax(1).unwrap(), &tg, 1).unwrap(),
            &softmax,
        );
        check(
            "log_softmax'",
            &Tensor::log_softmax_backward(&tx.log_softmax(1).unwrap(), &tg, 1).unwrap(),
            &|a| softmax(a).map(f64::ln),
        );
        let ln = |a: &Arr| {
            let n = 5.0;
            let mean = a.reduce_axis(1, 0.0, |p, x| p + x).map(|x| x / n);
            let c = a.zip(&mean, |x, y| x - y);
            let var = c
                .map(|x| x * x)
                .reduce_axis(1, 0.0, |p, x| p + x)
                .map(|x| x / n);
            c.zip(&var, |x, v| x / (v + 1e-5).sqrt())
        };
        let (dx, _, _) = tx.layer_norm_backward(&tg, 1, None, 1e-5).unwrap();
        check("layer_norm'", &dx, &ln);
        let g = Tensor::reduce_backward(
            &upload(
                exec,
                &Arr {
                    shape: vec![3],
                    data: vec![1.0, 2.0, 3.0],
                },
                dt,
            ),
            &[3, 5],
            &[1],
            false,
            true,
        )
        .unwrap();
        let want = Arr {
            shape: vec![3, 5],
            data: (0..15).map(|i| ((i / 5) + 1) as f64 / 5.0).collect(),
        };
        assert_close("mean'", &download(&g), &want, 1e-12);
        // Cross-entropy's gradient w.r.t. logits.
        let targets = Tensor::from_slice(exec, &[1i64, 4, 0], &[3]).unwrap();
        let tv = [1usize, 4, 0];
        let ce = |a: &Arr| {
            let ls = softmax(a).map(f64::ln);
            -(0..3).map(|r| ls.data[r * 5 + tv[r]]).sum::<f64>() / 3.0
        };
        let want = numeric_grad(&x, ce);
        assert_close(
            "cross_entropy'",
            &download(&tx.cross_entropy_backward(&targets, 1.0).unwrap()),
            &want,
            1e-5,
        );
    });
}

#[test]
fn views_cat_arange_fill_random() {
    each(&[DType::F32, DType::I32], |exec, dt, rng| {
        let a = random_arr(rng, &[3, 4, 5], dt, -9.0, 9.0);
        let t = upload(exec, &a, dt);
        let p = t.permute(&[2, 0, 1]).unwrap();
        assert!(!p.is_contiguous());
        assert_eq!(p.shape(), &[5, 3, 4]);
        let got = download(&p.contiguous().unwrap());
        for i in 0..60 {
            let idx = unravel(i, &[5, 3, 4]);
            assert_eq!(
                got.data[i],
                a.data[ravel(&[idx[1], idx[2], idx[0]], &[3, 4, 5])]
            );
        }
        let s = t.slice(1, 1, 4, 2).unwrap();
        assert_eq!(s.shape(), &[3, 2, 5]);
        assert_eq!(download(&s).data[5], a.data[ravel(&[0, 3, 0], &[3, 4, 5])]);
        let c = Tensor::cat(&[&t, &t.mul(2.0).unwrap()], 1).unwrap();
        assert_eq!(c.shape(), &[3, 8, 5]);
        assert_eq!(
            download(&c).data[ravel(&[2, 6, 4], &[3, 8, 5])],
            round_to(2.0 * a.data[ravel(&[2, 2, 4], &[3, 4, 5])], dt)
        );
        let r = Tensor::arange(exec, 2.0, 11.0, 3.0, dt).unwrap();
        assert_eq!(download(&r).data, vec![2.0, 5.0, 8.0]);
        let f = Tensor::full(exec, &[2, 2], 7.0, dt).unwrap();
        assert_eq!(download(&f).data, vec![7.0; 4]);
        let e = Tensor::zeros(exec, &[0, 3], dt).unwrap();
        assert_eq!(download(&e.add(1.0).unwrap()).data.len(), 0);
        assert_eq!(download(&e.sum(&[0], false).unwrap()).data, vec![0.0; 3]);
        assert_eq!(download(&t.reshape(&[-1, 10]).unwrap()).shape, vec![6, 10]);
        assert_eq!(t.unsqueeze(0).unwrap().shape(), &[1, 3, 4, 5]);
        assert_eq!(t.expand(&[2, 3, 4, 5]).unwrap().shape(), &[2, 3, 4, 5]);
    });
    for exec in executors() {
        let a = download(&Tensor::rand(&exec, &[64], 42, DType::F32).unwrap());
        let cpu = download(&Tensor::rand(&Executor::cpu(), &[64], 42, DType::F32).unwrap());
        assert_eq!(
            a.data, cpu.data,
            "random numbers are identical on every backend"
        );
        assert!(a.data.iter().all(|&v| (0.0..1.0).contains(&v)));
    }
}

#[test]
fn bad_input_gives_errors_not_panics() {
    for exec in executors() {
        let a = Tensor::zeros(&exec, &[2, 3], DType::F32).unwrap();
        let b = Tensor::zeros(&exec, &[4], DType::F32).unwrap();
        assert!(matches!(a.add(&b), Err(Error::ShapeMismatch(_))));
        assert!(matches!(a.matmul(&b), Err(Error::ShapeMismatch(_))));
        assert!(matches!(a.sum(&[5], false), Err(Error::ShapeMismatch(_))));
        assert!(matches!(a.softmax(-3), Err(Error::ShapeMismatch(_))));
        assert!(matches!(
            a.reshape(&[4, -1, 7]),
            Err(Error::ShapeMismatch(_))
        ));
        assert!(matches!(a.slice(0, 1, 9, 1), Err(Error::ShapeMismatch(_))));
        assert!(matches!(a.bitand(&a), Err(Error::TypeMismatch(_))));
        assert!(matches!(a.to_vec::<i32>(), Err(Error::TypeMismatch(_))));
        let i = Tensor::zeros(&exec, &[2, 3], DType::I32).unwrap();
        assert!(matches!(i.exp(), Err(Error::TypeMismatch(_))));
        assert!(matches!(
            i.matmul(&i.t().unwrap()),
            Err(Error::TypeMismatch(_))
        ));
        let other = Executor::cpu();
        let c = Tensor::zeros(&other, &[2, 3], DType::F32).unwrap();
        assert!(matches!(a.add(&c), Err(Error::DeviceMismatch(_))));
    }
}

#[test]
fn element_wise_chains_fuse_into_one_launch() {
    for exec in executors() {
        let a = Tensor::rand(&exec, &[1000], 1, DType::F32)
            .unwrap()
            .realize()
            .unwrap();
        let b = Tensor::rand(&exec, &[1000], 2, DType::F32)
            .unwrap()
            .realize()
            .unwrap();
        let before = exec.launch_count();
        let c = a.add(&b).unwrap().relu().unwrap().mul(&b).unwrap();
        assert_eq!(
            exec.launch_count(),
            before,
            "nothing runs until the result is needed"
        );
        let v = c.to_vec::<f32>().unwrap();
        assert_eq!(exec.launch_count() - before, 1, "relu(a+b)*b is one kernel");
        let (av, bv) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        for i in 0..1000 {
            assert_eq!(v[i], (av[i] + bv[i]).max(0.0) * bv[i]);
        }
    }
}

#[test]
fn a_reshaped_pending_expression_fuses_and_runs_once() {
    // A linear layer's bias add viewed back to [batch, tokens, features], then an activation:
    // one kernel. The expression and its reshape share one result.
    for exec in executors() {
        let x = Tensor::rand(&exec, &[6, 8], 1, DType::F32)
            .unwrap()
            .realize()
            .unwrap();
        let bias = Tensor::rand(&exec, &[8], 2, DType::F32)
            .unwrap()
            .realize()
            .unwrap();
        let before = exec.launch_count();
        let sum = x.add(&bias).unwrap();
        let viewed = sum.reshape(&[2, 3, 8]).unwrap();
        assert!(viewed.is_lazy(), "{}", exec.backend_type());
        let out = viewed.relu().unwrap();
        let v = out.to_vec::<f32>().unwrap();
        assert_eq!(
            exec.launch_count() - before,
            1,
            "relu(view(x + b)) is one kernel"
        );
        let (xv, bv) = (x.to_vec::<f32>().unwrap(), bias.to_vec::<f32>().unwrap());
        for i in 0..48 {
            assert_eq!(v[i], (xv[i] + bv[i % 8]).max(0.0));
        }
        // Realizing the view realizes the expression too: one more kernel, not two.
        let before = exec.launch_count();
        let stored = viewed.realize().unwrap();
        assert!(!sum.is_lazy());
        assert_eq!(stored.shape(), &[2, 3, 8]);
        assert_eq!(
            sum.to_vec::<f32>().unwrap(),
            stored.to_vec::<f32>().unwrap()
        );
        assert_eq!(exec.launch_count() - before, 1);
        // A view whose inputs cannot take the new shape (a transposed input) still works.
        let t = x.t().unwrap().add(&x.t().unwrap()).unwrap();
        let flat = t.reshape(&[48]).unwrap().to_vec::<f32>().unwrap();
        for (i, f) in flat.iter().enumerate() {
            assert_eq!(*f, 2.0 * xv[(i % 6) * 8 + i / 6]);
        }
    }
}

#[test]
fn library_paths_and_the_interpreter_agree_bit_for_bit() {
    // Recognized maps and reductions run natively on the CPU; the interpreter runs the same
    // kernels instruction by instruction. Both must give identical bits.
    let native = Executor::cpu();
    let interp = Executor::with_backend(
        hologram_core::BackendType::Cpu,
        std::sync::Arc::new(hologram_backends::CpuBackend::interpreter_only()),
    );
    let mut rng = Rng(7);
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32] {
        // Row kernels: 1000 and 1500 columns are held in registers (8 and 12 per lane), 4096
        // at the most (16), 9 with one per lane; 5000 and 40000 are read once per pass.
        for shape in [
            vec![3, 1000],
            vec![5000],
            vec![7, 3, 9],
            vec![2, 40000],
            vec![3, 1500],
            vec![2, 4096],
        ] {
            let mut a = random_arr(&mut rng, &shape, dt, -3.0, 3.0);
            if dt.is_float() {
                // A row with an infinity, one with a NaN, one all -inf.
                let cols = *shape.last().unwrap();
                a.data[1] = f64::INFINITY;
                if a.data.len() >= 2 * cols {
                    a.data[cols + 2] = f64::NAN;
                }
                if shape.len() == 3 {
                    a.data[2 * cols..3 * cols].fill(f64::NEG_INFINITY);
                }
            }
            let results = |exec: &Executor| -> Vec<Vec<u8>> {
                let t = upload(exec, &a, dt);
                let mut v = vec![
                    t.sum(&[-1], false).unwrap().to_bytes().unwrap(),
                    t.max(&[0], true).unwrap().to_bytes().unwrap(),
                    t.argmin(Some(-1), false).unwrap().to_bytes().unwrap(),
                    t.add(&t).unwrap().mul(3.0).unwrap().to_bytes().unwrap(),
                ];
                if dt.is_float() {
                    let y = t.softmax(-1).unwrap();
                    let ly = t.log_softmax(-1).unwrap();
                    v.push(y.to_bytes().unwrap());
                    v.push(ly.to_bytes().unwrap());
                    v.push(
                        Tensor::softmax_backward(&y, &t, -1)
                            .unwrap()
                            .to_bytes()
                            .unwrap(),
                    );
                    v.push(
                        Tensor::log_softmax_backward(&ly, &t, -1)
                            .unwrap()
                            .to_bytes()
                            .unwrap(),
                    );
                    v.push(t.mean(&[], false).unwrap().to_bytes().unwrap());
                }
                v
            };
            assert_eq!(results(&native), results(&interp), "{dt} {shape:?}");
        }
    }
}

#[test]
fn softmax_and_its_backward_run_as_native_row_loops_on_the_cpu() {
    let exec = Executor::cpu();
    let mut rng = Rng(11);
    for shape in [vec![4, 1000], vec![2, 40000]] {
        let a = random_arr(&mut rng, &shape, DType::F32, -3.0, 3.0);
        let t = upload(&exec, &a, DType::F32);
        let before = exec.stats().backend;
        let y = t.softmax(-1).unwrap();
        let ly = t.log_softmax(-1).unwrap();
        let g = Tensor::softmax_backward(&y, &t, -1).unwrap();
        let lg = Tensor::log_softmax_backward(&ly, &t, -1).unwrap();
        for r in [&y, &ly, &g, &lg] {
            r.to_bytes().unwrap();
        }
        let after = exec.stats().backend;
        assert_eq!(
            (
                after.library_launches - before.library_launches,
                after.generic_launches - before.generic_launches
            ),
            (4, 0),
            "{shape:?}: {after:?}"
        );
    }
}

#[test]
fn broadcast_and_strided_operands_run_as_native_loops_on_the_cpu() {
    let exec = Executor::cpu();
    let mut rng = Rng(12);
    let x = random_arr(&mut rng, &[64, 300], DType::F32, -3.0, 3.0);
    let m = random_arr(&mut rng, &[64, 1], DType::F32, -3.0, 3.0);
    let b = random_arr(&mut rng, &[300], DType::F32, -3.0, 3.0);
    let (tx, tm, tb) = (
        upload(&exec, &x, DType::F32),
        upload(&exec, &m, DType::F32),
        upload(&exec, &b, DType::F32),
    );
    let before = exec.stats().backend;
    let row = tx.sub(&tm).unwrap().to_vec::<f32>().unwrap();
    let col = tx.add(&tb).unwrap().to_vec::<f32>().unwrap();
    let tr = tx.transpose(0, 1).unwrap().add(1.0).unwrap();
    assert_eq!(tr.shape(), &[300, 64]);
    let tr = tr.to_vec::<f32>().unwrap();
    let after = exec.stats().backend;
    assert_eq!(
        (
            after.library_launches - before.library_launches,
            after.generic_launches - before.generic_launches
        ),
        (3, 0),
        "{after:?}"
    );
    for r in 0..64 {
        for c in 0..300 {
            let v = x.data[r * 300 + c] as f32;
            assert_eq!(row[r * 300 + c], v - m.data[r] as f32);
            assert_eq!(col[r * 300 + c], v + b.data[c] as f32);
            assert_eq!(tr[c * 64 + r], v + 1.0);
        }
    }
}

/// Operands that walk one dimension and broadcast the rest index as `(i / p) % m` (no
/// coordinates): a column times a row (both broadcast), a per-channel bias over [B, C, H, W],
/// a bias over the rows of an offset view; every backend.
#[test]
fn broadcast_walks_of_one_dimension() {
    for exec in common::executors() {
        let mut rng = Rng(31);
        let col = random_arr(&mut rng, &[5, 1], DType::F32, -3.0, 3.0);
        let row = random_arr(&mut rng, &[7], DType::F32, -3.0, 3.0);
        let x = random_arr(&mut rng, &[2, 3, 4, 5], DType::F32, -3.0, 3.0);
        let bias = random_arr(&mut rng, &[3, 1, 1], DType::F32, -3.0, 3.0);
        let wide = random_arr(&mut rng, &[4, 9], DType::F32, -3.0, 3.0);
        let (tc, tr, tx, tbias, tw) = (
            upload(&exec, &col, DType::F32),
            upload(&exec, &row, DType::F32),
            upload(&exec, &x, DType::F32),
            upload(&exec, &bias, DType::F32),
            upload(&exec, &wide, DType::F32),
        );
        let outer = tc.mul(&tr).unwrap().to_vec::<f32>().unwrap();
        let biased = tx.add(&tbias).unwrap().to_vec::<f32>().unwrap();
        // Columns 2..9 of `wide` (an offset view) as the bias of a [3, 4, 7] tensor.
        let part = tw
            .slice(1, 2, 9, 1)
            .unwrap()
            .slice(0, 1, 2, 1)
            .unwrap()
            .squeeze(0)
            .unwrap();
        let rows = tr
            .reshape(&[1, 7])
            .unwrap()
            .add(&tc.reshape(&[5, 1]).unwrap())
            .unwrap();
        let shifted = rows.add(&part).unwrap().to_vec::<f32>().unwrap();
        let what = exec.backend_type();
        for i in 0..5 {
            for j in 0..7 {
                let (c, r) = (col.data[i] as f32, row.data[j] as f32);
                assert_eq!(outer[i * 7 + j], c * r, "{what} outer [{i}, {j}]");
                let w = wide.data[9 + 2 + j] as f32;
                assert_eq!(shifted[i * 7 + j], (r + c) + w, "{what} shifted [{i}, {j}]");
            }
        }
        for (i, &v) in biased.iter().enumerate() {
            let ch = (i / 20) % 3;
            assert_eq!(
                v,
                x.data[i] as f32 + bias.data[ch] as f32,
                "{what} bias [{i}]"
            );
        }
    }
}

/// An eval batch norm, `relu((x - mean) * inv * gamma + beta)`, with four per-channel operands
/// that walk alike (one shared walk in the kernel, see `elementwise::Access::BroadcastAs`), one
/// of them an offset view, next to a per-column operand that walks differently.
#[test]
fn broadcast_walks_shared_by_operands() {
    for exec in common::executors() {
        let mut rng = Rng(37);
        let (n, c, h, w) = (2, 3, 4, 5);
        let x = random_arr(&mut rng, &[n, c, h, w], DType::F32, -3.0, 3.0);
        let chans: Vec<Arr> = (0..3)
            .map(|_| random_arr(&mut rng, &[c, 1, 1], DType::F32, -2.0, 2.0))
            .collect();
        let wide = random_arr(&mut rng, &[2, c], DType::F32, -2.0, 2.0);
        let col = random_arr(&mut rng, &[w], DType::F32, -2.0, 2.0);
        let tx = upload(&exec, &x, DType::F32);
        let t: Vec<Tensor> = chans.iter().map(|a| upload(&exec, a, DType::F32)).collect();
        // Row 1 of `wide` as a [c, 1, 1] operand: an offset view.
        let beta = upload(&exec, &wide, DType::F32)
            .slice(0, 1, 2, 1)
            .unwrap()
            .reshape(&[c as isize, 1, 1])
            .unwrap();
        let tcol = upload(&exec, &col, DType::F32);
        let y = tx
            .sub(&t[0])
            .unwrap()
            .mul(&t[1])
            .unwrap()
            .mul(&t[2])
            .unwrap()
            .add(&beta)
            .unwrap()
            .relu()
            .unwrap()
            .add(&tcol)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let what = exec.backend_type();
        for (i, &v) in y.iter().enumerate() {
            let ch = (i / (h * w)) % c;
            let [m, s, g] = [0, 1, 2].map(|k| chans[k].data[ch] as f32);
            let b = wide.data[c + ch] as f32;
            let want = (((x.data[i] as f32 - m) * s * g) + b).max(0.0) + col.data[i % w] as f32;
            assert_eq!(v, want, "{what} [{i}]");
        }
    }
}

/// Scalars of float and 32/64-bit integer ops are kernel parameters: another value runs the
/// kernel already compiled (no compile, no new cache entry), and computes with the new value.
#[test]
fn new_scalar_values_reuse_the_compiled_kernel() {
    each(&[DType::F32, DType::I32, DType::F16], |exec, dt, rng| {
        let a = random_arr(rng, &[5, 7], dt, -6.0, 6.0);
        let t = upload(exec, &a, dt);
        let run = |s: f64| {
            let got = download(&t.mul(s).unwrap().add(s).unwrap());
            let s = round_to(s, dt);
            assert_close(
                &format!("x * {s} + {s}"),
                &got,
                &a.map(|x| round_to(round_to(x * s, dt) + s, dt)),
                tol(dt),
            );
        };
        run(3.0);
        let before = exec.kernel_cache_stats();
        for s in [-2.0, 5.0, 0.0, 7.0] {
            run(s);
        }
        let after = exec.kernel_cache_stats();
        assert_eq!(
            (after.compiles, after.entries),
            (before.compiles, before.entries),
            "{}: a new scalar value compiled a kernel",
            exec.backend_type()
        );
    });
}

/// A split's parts reshape in place (strided views, as torch's `view`), and `cat_views` joins
/// adjacent parts as a view of their buffer; parts out of order or from two buffers are copied,
/// and plain `cat` always copies.
#[test]
fn split_views_reshape_and_join_in_place() {
    each(&[DType::F32], |exec, dt, _| {
        let x = Tensor::from_slice(
            exec,
            &(0..48).map(|i| i as f32).collect::<Vec<_>>(),
            &[2, 4, 6],
        )
        .unwrap();
        let parts: Vec<Tensor> = (0..3)
            .map(|i| x.slice(2, 2 * i, 2 * i + 2, 1).unwrap())
            .collect();
        let heads = parts[1].reshape(&[2, 4, 2, 1]).unwrap();
        assert_eq!(
            heads.strides(),
            [24, 6, 1, 1],
            "{dt}: a split part reshapes in place"
        );
        assert_eq!(
            heads.to_vec::<f32>().unwrap(),
            x.slice(2, 2, 4, 1)
                .unwrap()
                .contiguous()
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        );
        let refs: Vec<&Tensor> = parts.iter().collect();
        let joined = Tensor::cat_views(&refs, 2).unwrap();
        assert_eq!(joined.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
        if let (Ok(j), Ok(x0)) = (joined.data_ptr(), x.data_ptr()) {
            assert_eq!(j, x0, "{dt}: adjacent parts joined without a copy");
            let copied = Tensor::cat(&refs, 2).unwrap();
            assert_ne!(copied.data_ptr().unwrap(), x0, "{dt}: cat copies");
        }
        let reversed = Tensor::cat_views(&[&parts[1], &parts[0]], 2).unwrap();
        let want: Vec<f32> = (0..8)
            .flat_map(|r| [2, 3, 0, 1].map(|c| (r * 6 + c) as f32))
            .collect();
        assert_eq!(
            reversed.to_vec::<f32>().unwrap(),
            want,
            "{dt}: out of order"
        );
    });
}
