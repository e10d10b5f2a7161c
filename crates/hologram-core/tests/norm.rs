//! Layer norm with statistics and its backward (fused row kernels on GPU backends, composed on
//! the CPU) against an f64 host reference, on every backend of `HOLOGRAM_TEST_BACKENDS`, for
//! rows held in registers, rows read per pass, and rows shorter than a lane group.

mod common;

use hologram_core::{DType, Tensor};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64 * 4.0 - 2.0) as f32
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

/// Tests launch under a read guard; the one that counts launches takes it alone (the counters
/// are the process's).
static LAUNCHES: std::sync::RwLock<()> = std::sync::RwLock::new(());

#[test]
fn layer_norm_and_its_backward_match_a_reference() {
    let _shared = LAUNCHES.read().unwrap_or_else(|p| p.into_inner());
    for exec in common::executors() {
        for (rows, cols) in [(3usize, 7usize), (5, 1024), (2, 5000), (4, 512), (6, 256)] {
            let x = data(rows * cols, 1);
            let w = data(cols, 2);
            let b = data(cols, 3);
            let dy = data(rows * cols, 4);
            let eps = 1e-5;
            // Reference in f64.
            let (mut y, mut mean, mut rstd) =
                (vec![0.0; rows * cols], vec![0.0; rows], vec![0.0; rows]);
            let (mut dx, mut dw, mut db) =
                (vec![0.0; rows * cols], vec![0.0; cols], vec![0.0; cols]);
            // The input's gradient without an affine weight.
            let mut dx_plain = vec![0.0; rows * cols];
            for r in 0..rows {
                let row: Vec<f64> = x[r * cols..(r + 1) * cols]
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let m = row.iter().sum::<f64>() / cols as f64;
                let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / cols as f64;
                let rs = 1.0 / (var + eps).sqrt();
                mean[r] = m;
                rstd[r] = rs;
                let xh: Vec<f64> = row.iter().map(|v| (v - m) * rs).collect();
                let g: Vec<f64> = (0..cols)
                    .map(|c| dy[r * cols + c] as f64 * w[c] as f64)
                    .collect();
                let mg = g.iter().sum::<f64>() / cols as f64;
                let mgx = g.iter().zip(&xh).map(|(a, b)| a * b).sum::<f64>() / cols as f64;
                let dyr: Vec<f64> = (0..cols).map(|c| dy[r * cols + c] as f64).collect();
                let mdy = dyr.iter().sum::<f64>() / cols as f64;
                let mdyx = dyr.iter().zip(&xh).map(|(a, b)| a * b).sum::<f64>() / cols as f64;
                for c in 0..cols {
                    dx_plain[r * cols + c] = rs * (dyr[c] - mdy - xh[c] * mdyx);
                    y[r * cols + c] = xh[c] * w[c] as f64 + b[c] as f64;
                    dx[r * cols + c] = rs * (g[c] - mg - xh[c] * mgx);
                    dw[c] += dy[r * cols + c] as f64 * xh[c];
                    db[c] += dy[r * cols + c] as f64;
                }
            }
            let t = |v: &[f32], s: &[usize]| Tensor::from_slice(&exec, v, s).unwrap();
            let (xt, wt, bt, dyt) = (
                t(&x, &[rows, cols]),
                t(&w, &[cols]),
                t(&b, &[cols]),
                t(&dy, &[rows, cols]),
            );
            let (yt, mt, rt) = xt
                .layer_norm_with_stats(1, Some(&wt), Some(&bt), eps)
                .unwrap();
            assert_eq!(mt.shape(), &[rows, 1]);
            let what = format!("{exec:?} {rows}x{cols}");
            close(&format!("{what} y"), &f64s(&yt), &y, 2e-5);
            close(&format!("{what} mean"), &f64s(&mt), &mean, 2e-5);
            close(&format!("{what} rstd"), &f64s(&rt), &rstd, 2e-5);
            let (dxt, dwt, dbt) = xt
                .layer_norm_backward_with_stats(&dyt, 1, Some(&wt), &mt, &rt)
                .unwrap();
            close(&format!("{what} dx"), &f64s(&dxt), &dx, 5e-5);
            close(&format!("{what} dw"), &f64s(&dwt.unwrap()), &dw, 5e-5);
            close(&format!("{what} db"), &f64s(&dbt.unwrap()), &db, 5e-5);
            // Without an affine weight.
            let (yn, _, _) = xt.layer_norm_with_stats(1, None, None, eps).unwrap();
            let plain: Vec<f64> = (0..rows * cols)
                .map(|i| (x[i] as f64 - mean[i / cols]) * rstd[i / cols])
                .collect();
            close(&format!("{what} y (no affine)"), &f64s(&yn), &plain, 2e-5);
            let (dxn, _, _) = xt
                .layer_norm_backward_with_stats(&dyt, 1, None, &mt, &rt)
                .unwrap();
            close(
                &format!("{what} dx (no affine)"),
                &f64s(&dxn),
                &dx_plain,
                5e-5,
            );
        }
    }
}

/// On CUDA, layer norm over rows of whole vectors (in bounds, aligned) runs the dedicated form
/// of its kernels (library launches); other rows the generic form.
#[test]
fn cuda_layer_norm_takes_its_dedicated_form_where_it_fits() {
    let _alone = LAUNCHES.write().unwrap_or_else(|p| p.into_inner());
    for exec in common::executors() {
        if exec.backend_type() != hologram_core::BackendType::Cuda {
            continue;
        }
        for (cols, dedicated) in [(512usize, true), (1024, true), (510, false)] {
            let rows = 8;
            let t = |v: &[f32], s: &[usize]| Tensor::from_slice(&exec, v, s).unwrap();
            let (x, w, b) = (
                t(&data(rows * cols, 1), &[rows, cols]),
                t(&data(cols, 2), &[cols]),
                t(&data(cols, 3), &[cols]),
            );
            let dy = t(&data(rows * cols, 4), &[rows, cols]);
            let count = |what: &str, run: &dyn Fn() -> Vec<Tensor>| {
                let before = exec.stats().backend;
                for out in run() {
                    out.to_bytes().expect("result");
                }
                let after = exec.stats().backend;
                let generic = after.generic_launches - before.generic_launches;
                let library = after.library_launches - before.library_launches;
                if dedicated {
                    assert!(
                        library >= 1 && generic == 0,
                        "{what} cols {cols}: {library} library, {generic} generic launches"
                    );
                } else {
                    assert!(
                        generic >= 1,
                        "{what} cols {cols}: {library} library, {generic} generic launches"
                    );
                }
            };
            let (_, mean, rstd) = x
                .layer_norm_with_stats(1, Some(&w), Some(&b), 1e-5)
                .unwrap();
            count("forward", &|| {
                let (y, _, _) = x
                    .layer_norm_with_stats(1, Some(&w), Some(&b), 1e-5)
                    .unwrap();
                vec![y]
            });
            count("backward", &|| {
                let (dx, _, _) = x
                    .layer_norm_backward_with_stats(&dy, 1, None, &mean, &rstd)
                    .unwrap();
                vec![dx]
            });
        }
    }
}
