//! Scaled dot-product attention and its backward op against an f64 host reference, on every
//! backend of `HOLOGRAM_TEST_BACKENDS` (the CPU native and interpreted paths always): causal
//! and not, lengths that are not multiples of 32, head dimensions 64 and odd, inputs that are
//! strided views of one `[B, L, 3, H, D]` projection (as torch hands them) or contiguous, and a
//! column-major key view. The outputs must be `[B, L, H, D]`-contiguous views.

mod common;

use hologram_backends::{BackendError, GemmPrecision};
use hologram_core::{DType, Error, Executor, Tensor};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// `[B, H, L, D]` arrays, row-major, in f64.
struct Heads {
    shape: [usize; 4],
    data: Vec<f64>,
}

impl Heads {
    fn at(&self, b: usize, h: usize, l: usize, d: usize) -> f64 {
        let [_, hs, ls, ds] = self.shape;
        self.data[((b * hs + h) * ls + l) * ds + d]
    }
}

/// The reference forward (output, probabilities) and backward (dq, dk, dv).
#[allow(clippy::type_complexity)]
fn reference(
    q: &Heads,
    k: &Heads,
    v: &Heads,
    go: &Heads,
    causal: bool,
    scale: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let [bs, hs, lq, d] = q.shape;
    let (lk, dv) = (k.shape[2], v.shape[3]);
    let mut o = vec![0.0; bs * hs * lq * dv];
    let mut p_all = vec![0.0; bs * hs * lq * lk];
    let (mut dq, mut dk, mut dvv) = (
        vec![0.0; bs * hs * lq * d],
        vec![0.0; bs * hs * lk * d],
        vec![0.0; bs * hs * lk * dv],
    );
    for b in 0..bs {
        for h in 0..hs {
            let bh = b * hs + h;
            for i in 0..lq {
                let s: Vec<f64> = (0..lk)
                    .map(|j| {
                        if causal && j > i {
                            f64::NEG_INFINITY
                        } else {
                            scale
                                * (0..d)
                                    .map(|x| q.at(b, h, i, x) * k.at(b, h, j, x))
                                    .sum::<f64>()
                        }
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                let z: f64 = e.iter().sum();
                let p: Vec<f64> = e.iter().map(|x| x / z).collect();
                for (j, &pj) in p.iter().enumerate() {
                    p_all[(bh * lq + i) * lk + j] = pj;
                    for y in 0..dv {
                        o[(bh * lq + i) * dv + y] += pj * v.at(b, h, j, y);
                        dvv[(bh * lk + j) * dv + y] += pj * go.at(b, h, i, y);
                    }
                }
                let dp: Vec<f64> = (0..lk)
                    .map(|j| (0..dv).map(|y| go.at(b, h, i, y) * v.at(b, h, j, y)).sum())
                    .collect();
                let dot: f64 = dp.iter().zip(&p).map(|(a, b)| a * b).sum();
                for j in 0..lk {
                    let ds = scale * p[j] * (dp[j] - dot);
                    for x in 0..d {
                        dq[(bh * lq + i) * d + x] += ds * k.at(b, h, j, x);
                        dk[(bh * lk + j) * d + x] += ds * q.at(b, h, i, x);
                    }
                }
            }
        }
    }
    (o, p_all, dq, dk, dvv)
}

/// How the inputs are laid out.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// Views of one `[B, L, 3, H, D]` projection output, permuted to `[B, H, L, D]`.
    Projection,
    /// Contiguous `[B, H, L, D]`, with the keys a transposed view of `[B, H, D, L]`.
    ContiguousKeysTransposed,
}

/// Uploads `a` (`[B, H, L, D]`) in `layout`.
fn inputs(exec: &Executor, layout: Layout, dtype: DType, parts: [&Heads; 3]) -> [Tensor; 3] {
    let up = |data: &[f64], shape: &[usize]| {
        let f: Vec<f32> = data.iter().map(|&x| x as f32).collect();
        Tensor::from_slice(exec, &f, shape)
            .unwrap()
            .cast(dtype)
            .unwrap()
            .contiguous()
            .unwrap()
    };
    match layout {
        Layout::Projection => {
            let [b, h, l, d] = parts[0].shape;
            let mut proj = vec![0.0; b * l * 3 * h * d];
            for (w, p) in parts.iter().enumerate() {
                for bi in 0..b {
                    for hi in 0..h {
                        for li in 0..l {
                            for di in 0..d {
                                proj[(((bi * l + li) * 3 + w) * h + hi) * d + di] =
                                    p.at(bi, hi, li, di);
                            }
                        }
                    }
                }
            }
            let t = up(&proj, &[b, l, 3, h, d]);
            let part = |w: usize| {
                t.slice(2, w, w + 1, 1)
                    .unwrap()
                    .squeeze(2)
                    .unwrap()
                    .permute(&[0, 2, 1, 3])
                    .unwrap()
            };
            let q = part(0);
            assert!(!q.is_contiguous(), "the projection views are strided");
            [q, part(1), part(2)]
        }
        Layout::ContiguousKeysTransposed => {
            let [b, h, l, d] = parts[1].shape;
            let mut kt = vec![0.0; b * h * d * l];
            for bi in 0..b {
                for hi in 0..h {
                    for li in 0..l {
                        for di in 0..d {
                            kt[((bi * h + hi) * d + di) * l + li] = parts[1].at(bi, hi, li, di);
                        }
                    }
                }
            }
            [
                up(&parts[0].data, &parts[0].shape),
                up(&kt, &[b, h, d, l]).transpose(2, 3).unwrap(),
                up(&parts[2].data, &parts[2].shape),
            ]
        }
    }
}

fn heads(shape: [usize; 4], seed: u64) -> Heads {
    let n = shape.iter().product();
    Heads {
        shape,
        data: data(n, seed).iter().map(|&x| x as f64).collect(),
    }
}

/// True when `t` (`[B, H, L, D]`) is a view of `[B, L, H, D]`-contiguous storage.
fn heads_last(t: &Tensor) -> bool {
    t.permute(&[0, 2, 1, 3]).unwrap().is_contiguous()
}

/// Whether `[B, H, L, D]` `t` merges its heads in place: transposed to `[B, L, H, D]`, its
/// last two dimensions are one run of `H·D` elements.
fn heads_merge_in_place(t: &Tensor) -> bool {
    let p = t.permute(&[0, 2, 1, 3]).unwrap();
    p.strides()[3] == 1 && p.strides()[2] == p.shape()[3]
}

/// Whether `exec` runs `dt`'s transcendentals (WGSL has none for f64); where it does not, the
/// attention op must say so with an `Unsupported` error.
fn supports(exec: &Executor, dt: DType) -> bool {
    let probe = Tensor::ones(exec, &[2], dt).and_then(|t| t.exp()?.to_f64_vec());
    match probe {
        Ok(_) => true,
        Err(Error::Backend(BackendError::Unsupported { .. })) => {
            let t = Tensor::ones(exec, &[1, 1, 3, 2], dt).unwrap();
            let r = t.attention(&t, &t, true, 1.0, GemmPrecision::Exact, false);
            assert!(
                matches!(r, Err(Error::Backend(BackendError::Unsupported { .. }))),
                "{}: {dt} attention where exp is unsupported",
                exec.backend_type()
            );
            eprintln!("{}: {dt} is not supported; skipped", exec.backend_type());
            false
        }
        Err(e) => panic!("{}: probing {dt} failed: {e}", exec.backend_type()),
    }
}

fn check_case(exec: &Executor, dtype: DType, layout: Layout, shape: [usize; 4], causal: bool) {
    if !supports(exec, dtype) {
        return;
    }
    let [b, h, l, d] = shape;
    let what = format!(
        "{:?} {dtype} {layout:?} {shape:?} causal {causal}",
        exec.backend_type()
    );
    let (q, k, v, go) = (
        heads(shape, 1),
        heads(shape, 2),
        heads(shape, 3),
        heads(shape, 4),
    );
    let scale = 1.0 / (d as f64).sqrt();
    let (o, p, dq, dk, dv) = reference(&q, &k, &v, &go, causal, scale);
    let [tq, tk, tv] = inputs(exec, layout, dtype, [&q, &k, &v]);
    let tgo = inputs(
        exec,
        Layout::ContiguousKeysTransposed,
        dtype,
        [&go, &go, &go],
    )[0]
    .clone();
    let tol = match dtype {
        DType::F64 => 1e-10,
        DType::F32 => 1e-4,
        _ => 3e-2,
    };
    let fwd = tq
        .attention(&tk, &tv, causal, scale, GemmPrecision::Exact, true)
        .unwrap();
    assert_eq!(fwd.output.shape(), [b, h, l, d], "{what}");
    assert!(heads_last(&fwd.output), "{what}: output layout");
    close(&format!("{what} output"), &f64s(&fwd.output), &o, tol);
    let probs = fwd.probs.expect("saved probabilities");
    close(&format!("{what} probs"), &f64s(&probs), &p, tol);
    let g = tq
        .attention_backward(&tk, &tv, &probs, &tgo, scale, GemmPrecision::Exact)
        .unwrap();
    for (name, t, want) in [("dq", &g.dq, &dq), ("dk", &g.dk, &dk), ("dv", &g.dv, &dv)] {
        assert!(heads_merge_in_place(t), "{what}: {name} layout");
        close(&format!("{what} {name}"), &f64s(t), want, tol);
    }
    // The three gradients lie side by side in one [B, L, 3, H, D] buffer: merged back and
    // joined as the fused projection's gradient, they are that buffer, not a copy.
    let merged: Vec<Tensor> = [&g.dq, &g.dk, &g.dv]
        .iter()
        .map(|t| {
            t.permute(&[0, 2, 1, 3])
                .and_then(|m| m.reshape(&[b as isize, l as isize, (h * d) as isize]))
                .unwrap()
        })
        .collect();
    let joined = Tensor::cat_views(&merged.iter().collect::<Vec<_>>(), 2).unwrap();
    assert!(joined.is_contiguous(), "{what}: joined gradients");
    if let (Ok(j), Ok(q0)) = (joined.data_ptr(), g.dq.data_ptr()) {
        assert_eq!(j, q0, "{what}: the joined gradients are a copy");
    }
    // Inference keeps no probabilities and gives the same output.
    let inf = tq
        .attention(&tk, &tv, causal, scale, GemmPrecision::Exact, false)
        .unwrap();
    assert!(inf.probs.is_none());
    close(&format!("{what} inference"), &f64s(&inf.output), &o, tol);
}

#[test]
fn attention_and_its_backward_match_a_reference() {
    for exec in common::executors() {
        for causal in [true, false] {
            for layout in [Layout::Projection, Layout::ContiguousKeysTransposed] {
                // L not a multiple of 32; D = 64 and odd; rows held in registers and (L = 600 > 16
                // elements per lane of 32) read per pass.
                for shape in [[2, 3, 37, 64], [1, 2, 45, 7], [2, 1, 5, 3]] {
                    check_case(&exec, DType::F32, layout, shape, causal);
                }
            }
        }
        check_case(&exec, DType::F32, Layout::Projection, [1, 2, 600, 5], true);
        check_case(&exec, DType::F64, Layout::Projection, [2, 2, 19, 9], true);
        check_case(&exec, DType::F16, Layout::Projection, [2, 2, 33, 8], true);
        check_case(&exec, DType::BF16, Layout::Projection, [1, 2, 17, 8], false);
    }
}

#[test]
fn attention_rejects_mismatched_inputs() {
    let exec = Executor::cpu();
    let t = |shape: &[usize]| Tensor::zeros(&exec, shape, DType::F32).unwrap();
    let p = GemmPrecision::Exact;
    let (q, k) = (t(&[1, 2, 4, 8]), t(&[1, 2, 5, 8]));
    assert!(q
        .attention(&k, &t(&[1, 2, 4, 8]), true, 1.0, p, false)
        .is_err());
    assert!(q
        .attention(&t(&[1, 3, 5, 8]), &t(&[1, 3, 5, 8]), true, 1.0, p, false)
        .is_err());
    assert!(q
        .attention(&t(&[2, 4, 8]), &k, false, 1.0, p, false)
        .is_err());
    let ints = Tensor::zeros(&exec, &[1, 2, 4, 8], DType::I32).unwrap();
    assert!(ints.attention(&ints, &ints, false, 1.0, p, false).is_err());
    let v = t(&[1, 2, 5, 8]);
    assert!(q
        .attention_backward(&k, &v, &t(&[1, 2, 4, 4]), &t(&[1, 2, 4, 8]), 1.0, p)
        .is_err());
}
