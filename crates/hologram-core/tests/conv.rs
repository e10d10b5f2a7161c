//! 2-D convolution and its backward against direct f64 loops, on every backend of
//! `HOLOGRAM_TEST_BACKENDS` (and the CPU): strides, padding, dilation, pointwise, depthwise and
//! grouped convolutions.

mod common;

use hologram_core::ops::Conv2d;
use hologram_core::{DType, Tensor};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s % 2001) as f32 - 1000.0) / 500.0
        })
        .collect()
}

struct Case {
    x: [usize; 4],
    w: [usize; 4],
    p: Conv2d,
}

fn out_hw(c: &Case) -> [usize; 2] {
    let o = |len: usize, k: usize, s: usize, p: usize, d: usize| {
        (len + 2 * p - d * (k - 1) - 1) / s + 1
    };
    [
        o(
            c.x[2],
            c.w[2],
            c.p.stride[0],
            c.p.padding[0],
            c.p.dilation[0],
        ),
        o(
            c.x[3],
            c.w[3],
            c.p.stride[1],
            c.p.padding[1],
            c.p.dilation[1],
        ),
    ]
}

/// (y, dx, dw) by direct loops, for output gradient `gy`.
fn reference(
    c: &Case,
    x: &[f32],
    w: &[f32],
    gy: &[f32],
) -> (Vec<f64>, Vec<f64>, Vec<f64>, [usize; 2]) {
    let [n, ci, h, wd] = c.x;
    let [co, cg, kh, kw] = c.w;
    let g = c.p.groups;
    let og = co / g;
    let (sh, sw) = (c.p.stride[0], c.p.stride[1]);
    let (ph, pw) = (c.p.padding[0] as isize, c.p.padding[1] as isize);
    let (dh, dw) = (c.p.dilation[0], c.p.dilation[1]);
    let ho = (h + 2 * ph as usize - dh * (kh - 1) - 1) / sh + 1;
    let wo = (wd + 2 * pw as usize - dw * (kw - 1) - 1) / sw + 1;
    let mut y = vec![0.0; n * co * ho * wo];
    let mut dx = vec![0.0; n * ci * h * wd];
    let mut dwt = vec![0.0; w.len()];
    for b in 0..n {
        for o in 0..co {
            let gi = o / og;
            for oy in 0..ho {
                for ox in 0..wo {
                    let yi = ((b * co + o) * ho + oy) * wo + ox;
                    for cc in 0..cg {
                        let ch = gi * cg + cc;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * sh + ky * dh) as isize - ph;
                                let ix = (ox * sw + kx * dw) as isize - pw;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xi = ((b * ci + ch) * h + iy as usize) * wd + ix as usize;
                                let wi = ((o * cg + cc) * kh + ky) * kw + kx;
                                y[yi] += x[xi] as f64 * w[wi] as f64;
                                dx[xi] += gy[yi] as f64 * w[wi] as f64;
                                dwt[wi] += gy[yi] as f64 * x[xi] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    (y, dx, dwt, [ho, wo])
}

fn close(what: &str, got: &Tensor, want: &[f64]) {
    let got = got.cast(DType::F64).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn convolutions_and_their_gradients_match_direct_loops() {
    let p = |s: usize, pad: usize, d: usize, g: usize| Conv2d {
        stride: [s, s],
        padding: [pad, pad],
        dilation: [d, d],
        groups: g,
        ..Conv2d::default()
    };
    let cases = [
        Case {
            x: [2, 3, 9, 8],
            w: [4, 3, 3, 3],
            p: p(1, 1, 1, 1),
        },
        Case {
            x: [2, 3, 11, 10],
            w: [5, 3, 3, 2],
            p: p(2, 1, 1, 1),
        },
        Case {
            x: [1, 2, 12, 12],
            w: [3, 2, 3, 3],
            p: p(1, 2, 2, 1),
        },
        Case {
            x: [2, 4, 6, 5],
            w: [6, 4, 1, 1],
            p: p(1, 0, 1, 1),
        },
        Case {
            x: [2, 4, 7, 7],
            w: [4, 1, 3, 3],
            p: p(2, 1, 1, 4),
        },
        Case {
            x: [1, 3, 5, 5],
            w: [6, 1, 3, 3],
            p: p(1, 1, 1, 3),
        },
        Case {
            x: [2, 4, 6, 6],
            w: [6, 2, 3, 3],
            p: p(1, 1, 1, 2),
        },
    ];
    for exec in common::executors() {
        for (i, c) in cases.iter().enumerate() {
            let x = data(c.x.iter().product(), 3 * i as u64 + 1);
            let w = data(c.w.iter().product(), 3 * i as u64 + 2);
            let bias = data(c.w[0], 99);
            let xt = Tensor::from_slice(&exec, &x, &c.x).unwrap();
            let wt = Tensor::from_slice(&exec, &w, &c.w).unwrap();
            let bt = Tensor::from_slice(&exec, &bias, &[c.w[0]]).unwrap();
            let probe = out_hw(c);
            let gy = data(c.x[0] * c.w[0] * probe[0] * probe[1], 7);
            let (y, dx, dw, [ho, wo]) = reference(c, &x, &w, &gy);
            let what = format!("{exec:?} case {i}");
            let yt = xt.conv2d(&wt, Some(&bt), &c.p).unwrap();
            assert_eq!(yt.shape(), &[c.x[0], c.w[0], ho, wo], "{what}");
            let with_bias: Vec<f64> = y
                .iter()
                .enumerate()
                .map(|(k, v)| v + bias[(k / (ho * wo)) % c.w[0]] as f64)
                .collect();
            close(&format!("{what} y"), &yt, &with_bias);
            if c.p.groups != 1 && c.p.groups != c.x[1] {
                continue; // the backward of other grouped convolutions is not supported
            }
            let gyt = Tensor::from_slice(&exec, &gy, &[c.x[0], c.w[0], ho, wo]).unwrap();
            let (dxt, dwt, dbt) = xt
                .conv2d_backward(&gyt, &wt, &c.p, [true, true, true])
                .unwrap();
            close(&format!("{what} dx"), &dxt.unwrap(), &dx);
            close(&format!("{what} dw"), &dwt.unwrap(), &dw);
            let db: Vec<f64> = (0..c.w[0])
                .map(|o| {
                    (0..c.x[0])
                        .flat_map(|b| (0..ho * wo).map(move |k| (b, k)))
                        .map(|(b, k)| gy[(b * c.w[0] + o) * ho * wo + k] as f64)
                        .sum()
                })
                .collect();
            close(&format!("{what} db"), &dbt.unwrap(), &db);
        }
    }
}
