//! 2-D max pooling and its backward against direct f64 loops with PyTorch's rules (a NaN wins,
//! a later NaN over an earlier one, the first maximum wins ties, the index starts at the
//! window's first in-bounds element), on every backend of `HOLOGRAM_TEST_BACKENDS` (and the
//! CPU, native and interpreted): kernels, strides, padding, dilation, `ceil_mode`, NaN and ties.

mod common;

use common::{assert_close, download, executors, tol, upload, upload_strided, Arr, Rng};
use hologram_core::ops::MaxPool2d;
use hologram_core::{DType, Tensor};

fn pool(
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> MaxPool2d {
    MaxPool2d {
        kernel,
        stride,
        padding,
        dilation,
        ceil_mode,
    }
}

/// (values, indices, dx) by direct loops for input `x` of `[planes, h, w]` and output gradient
/// `gy`.
fn reference(
    p: &MaxPool2d,
    x: &Arr,
    gy: &[f64],
    ho: usize,
    wo: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let r = x.shape.len();
    let (h, w) = (x.shape[r - 2], x.shape[r - 1]);
    let planes = x.numel() / (h * w);
    let (mut y, mut idx, mut dx) = (vec![], vec![], vec![0.0; x.numel()]);
    for plane in 0..planes {
        for oy in 0..ho {
            for ox in 0..wo {
                let (mut best, mut at) = (f64::NEG_INFINITY, -1i64);
                for ky in 0..p.kernel[0] {
                    let iy = (oy * p.stride[0] + ky * p.dilation[0]) as i64 - p.padding[0] as i64;
                    for kx in 0..p.kernel[1] {
                        let ix =
                            (ox * p.stride[1] + kx * p.dilation[1]) as i64 - p.padding[1] as i64;
                        if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                            continue;
                        }
                        let pos = iy * w as i64 + ix;
                        let v = x.data[plane * h * w + pos as usize];
                        if at < 0 || v > best || v.is_nan() {
                            best = v;
                            at = pos;
                        }
                    }
                }
                let o = y.len();
                y.push(best);
                idx.push(at as f64);
                dx[plane * h * w + at as usize] += gy[o];
            }
        }
    }
    (y, idx, dx)
}

/// Values from a few levels (many ties), with NaN and -inf sprinkled in when `special`.
fn input(rng: &mut Rng, shape: &[usize], special: bool) -> Arr {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| match rng.below(40) {
            0 if special => f64::NAN,
            1 if special => f64::NEG_INFINITY,
            _ => rng.below(7) as f64 - 3.0,
        })
        .collect();
    Arr {
        shape: shape.to_vec(),
        data,
    }
}

#[test]
fn max_pool_matches_pytorch_rules_on_every_backend() {
    let cases = [
        (
            vec![2, 3, 8, 8],
            pool([2, 2], [2, 2], [0, 0], [1, 1], false),
        ),
        (
            vec![2, 3, 9, 7],
            pool([3, 3], [2, 2], [1, 1], [1, 1], false),
        ),
        (vec![1, 2, 9, 7], pool([3, 3], [2, 2], [1, 1], [1, 1], true)),
        (vec![2, 5, 6], pool([3, 2], [1, 2], [1, 0], [1, 1], false)),
        (
            vec![1, 2, 11, 10],
            pool([3, 3], [2, 3], [1, 1], [2, 2], true),
        ),
        (vec![1, 1, 5, 5], pool([2, 2], [2, 2], [0, 0], [1, 1], true)),
        (
            vec![1, 1, 4, 6],
            pool([4, 1], [1, 1], [2, 0], [1, 1], false),
        ),
    ];
    let mut rng = Rng(41);
    for exec in executors() {
        for (shape, p) in &cases {
            for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
                for special in [false, true] {
                    let what = format!(
                        "{:?} {shape:?} {p:?} {dt:?} special={special}",
                        exec.backend_type()
                    );
                    let x = input(&mut rng, shape, special);
                    let r = shape.len();
                    let [ho, wo] = p.output_size(shape[r - 2], shape[r - 1]).unwrap();
                    let mut oshape = shape[..r - 2].to_vec();
                    oshape.extend([ho, wo]);
                    let gy = input(&mut rng, &oshape, false);
                    let (y, idx, dx) = reference(p, &x, &gy.data, ho, wo);
                    // A strided input takes the copy to contiguous first.
                    let tx = if special {
                        upload_strided(&exec, &x, dt)
                    } else {
                        upload(&exec, &x, dt)
                    };
                    let (ty, ti) = tx.max_pool2d(p, true).unwrap();
                    let ti = ti.unwrap();
                    assert_eq!(ti.dtype(), DType::I64);
                    let arr = |data: Vec<f64>, shape: &[usize]| Arr {
                        shape: shape.to_vec(),
                        data,
                    };
                    assert_close(
                        &format!("{what} values"),
                        &download(&ty),
                        &arr(y.clone(), &oshape),
                        0.0,
                    );
                    assert_close(
                        &format!("{what} indices"),
                        &download(&ti),
                        &arr(idx, &oshape),
                        0.0,
                    );
                    let (only, none) = tx.max_pool2d(p, false).unwrap();
                    assert!(none.is_none());
                    assert_close(
                        &format!("{what} values alone"),
                        &download(&only),
                        &arr(y, &oshape),
                        0.0,
                    );
                    let tg = upload(&exec, &gy, dt);
                    let tdx = Tensor::max_pool2d_backward(&tg, &ti, shape, p).unwrap();
                    assert_close(
                        &format!("{what} dx"),
                        &download(&tdx),
                        &arr(dx, shape),
                        tol(dt) * 4.0,
                    );
                }
            }
        }
    }
}

#[test]
fn max_pool_rejects_what_pytorch_rejects() {
    let exec = hologram_core::Executor::cpu();
    let x = Tensor::zeros(&exec, &[1, 1, 4, 4], DType::F32).unwrap();
    // Padding over half the window, a window larger than the input, integers, a 2-D input.
    assert!(x
        .max_pool2d(&pool([2, 2], [2, 2], [2, 2], [1, 1], false), false)
        .is_err());
    assert!(x
        .max_pool2d(&pool([6, 6], [1, 1], [0, 0], [1, 1], false), false)
        .is_err());
    assert!(x
        .max_pool2d(&pool([2, 2], [0, 2], [0, 0], [1, 1], false), false)
        .is_err());
    let xi = Tensor::zeros(&exec, &[1, 1, 4, 4], DType::I32).unwrap();
    assert!(xi.max_pool2d(&MaxPool2d::new([2, 2]), false).is_err());
    let x2 = Tensor::zeros(&exec, &[4, 4], DType::F32).unwrap();
    assert!(x2.max_pool2d(&MaxPool2d::new([2, 2]), false).is_err());
    // The backward checks the gradient's shape.
    let (y, i) = x.max_pool2d(&MaxPool2d::new([2, 2]), true).unwrap();
    let i = i.unwrap();
    assert!(Tensor::max_pool2d_backward(&y, &i, &[1, 1, 4, 4], &MaxPool2d::new([2, 2])).is_ok());
    assert!(Tensor::max_pool2d_backward(&y, &i, &[1, 1, 6, 6], &MaxPool2d::new([2, 2])).is_err());
}

#[test]
fn output_sizes_follow_pytorch() {
    // (len, kernel, stride, pad, dilation, ceil) -> out, from torch.nn.functional.max_pool2d.
    for (len, k, s, p, d, ceil, want) in [
        (112, 3, 2, 1, 1, false, 56),
        (5, 2, 2, 0, 1, true, 3),
        (5, 2, 2, 0, 1, false, 2),
        (9, 3, 2, 1, 1, true, 5),
        (10, 3, 3, 1, 2, true, 4),
        (6, 3, 2, 1, 1, true, 4),
    ] {
        let mp = pool([k, k], [s, s], [p, p], [d, d], ceil);
        assert_eq!(
            mp.output_size(len, len).unwrap(),
            [want, want],
            "{len} {k} {s} {p} {d} {ceil}"
        );
    }
}
