//! Reductions and the fused softmax row kernels at the sizes where their kernels change shape:
//! rows shorter than, equal to and longer than a block or a chunk, multi-stage reductions,
//! reduced axes split over several lanes, NaN and infinite inputs, empty and size-1 dimensions.
//! Every backend of `HOLOGRAM_TEST_BACKENDS` (and the CPU, native and interpreted), against f64
//! references.

mod common;

use common::*;
use hologram_backends::BackendError;
use hologram_compiler::patterns::softmax_templates::RowOp;
use hologram_core::{DType, Error, Executor, Tensor};

/// True when the executor computes with `dt`, exponentials included for floats (WGSL has no
/// f64 transcendentals); the dtypes it cannot are listed and skipped.
/// Tests launch under a read guard; the one that counts launches takes it alone.
static LAUNCHES: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn launching() -> std::sync::RwLockReadGuard<'static, ()> {
    LAUNCHES.read().unwrap_or_else(|p| p.into_inner())
}

fn supports(exec: &Executor, dt: DType) -> bool {
    let probe =
        Tensor::ones(exec, &[2], dt).and_then(|t| if dt.is_float() { t.exp() } else { t.add(&t) });
    match probe.and_then(|t| t.to_f64_vec()) {
        Ok(_) => true,
        Err(Error::Backend(BackendError::Unsupported { .. })) => {
            eprintln!("{}: {dt} is not supported; skipped", exec.backend_type());
            false
        }
        Err(e) => panic!("{}: probing {dt} failed: {e}", exec.backend_type()),
    }
}

/// The fused kernel's result, or None where the backend lacks an instruction it needs (f64
/// transcendentals on WGSL), in which case `softmax` composes ops instead.
fn fused(t: &Tensor, op: RowOp, grad: Option<&Tensor>) -> Option<Arr> {
    match t.fused_last_axis(op, grad) {
        Ok(r) => Some(download(&r)),
        Err(Error::Backend(BackendError::Unsupported { .. })) => {
            eprintln!(
                "{}: {op:?} of {} skipped",
                t.executor().backend_type(),
                t.dtype()
            );
            None
        }
        Err(e) => panic!("{op:?}: {e}"),
    }
}

fn softmax_ref(a: &Arr) -> (Arr, Arr) {
    let ax = a.shape.len() - 1;
    let m = a.reduce_axis(ax, f64::NEG_INFINITY, |p, x| {
        if p.is_nan() || x.is_nan() {
            f64::NAN
        } else {
            p.max(x)
        }
    });
    let e = a.zip(&m, |x, y| (x - y).exp());
    let s = e.reduce_axis(ax, 0.0, |p, x| p + x);
    let sm = e.zip(&s, |x, y| x / y);
    let lsm = a.zip(&m, |x, y| x - y).zip(&s, |x, y| x - y.ln());
    (sm, lsm)
}

/// Every row length class of the row kernels: one element, fewer than a lane group, registers
/// partly used, exactly a group's registers, the most registers, and the looping form; on CUDA
/// rows of whole vectors in groups of one, two, four and eight warps (the dedicated form).
const COLS: [usize; 10] = [1, 5, 33, 128, 1024, 1500, 2048, 4096, 4097, 9000];

#[test]
fn softmax_rows_of_every_kernel_shape() {
    let _shared = launching();
    for exec in executors() {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            if !supports(&exec, dt) {
                continue;
            }
            let mut rng = Rng(11 ^ dt as u64);
            for &cols in &COLS {
                let rows = 1 + rng.below(5);
                let mut a = random_arr(&mut rng, &[rows, cols], dt, -6.0, 6.0);
                // A NaN poisons its row; -inf elements get probability 0.
                if rows > 1 {
                    a.data[cols + cols / 2] = f64::NAN;
                }
                a.data[cols - 1] = f64::NEG_INFINITY;
                if cols > 1 {
                    a.data[0] = 30.0;
                }
                let (sm, lsm) = softmax_ref(&a);
                let t = upload(&exec, &a, dt);
                let what = |op: &str| format!("{} {op} {dt} [{rows}, {cols}]", exec.backend_type());
                let rel = tol(dt) * 8.0;
                let want = sm.map(|x| round_to(x, dt));
                let lwant = lsm.map(|x| round_to(x, dt));
                assert_close(
                    &what("softmax"),
                    &download(&t.softmax(-1).unwrap()),
                    &want,
                    rel,
                );
                assert_close(
                    &what("log_softmax"),
                    &download(&t.log_softmax(-1).unwrap()),
                    &lwant,
                    rel * 4.0,
                );
                // The fused kernel itself, also where softmax composes ops (the CPU).
                if let Some(f) = fused(&t, RowOp::Softmax, None) {
                    assert_close(&what("fused softmax"), &f, &want, rel);
                }
                if let Some(f) = fused(&t, RowOp::LogSoftmax, None) {
                    assert_close(&what("fused log_softmax"), &f, &lwant, rel * 4.0);
                }
            }
        }
    }
}

#[test]
fn softmax_of_views_lazy_inputs_and_other_axes() {
    let _shared = launching();
    for exec in executors() {
        let mut rng = Rng(5);
        let a = random_arr(&mut rng, &[6, 700], DType::F32, -3.0, 3.0);
        let t = upload(&exec, &a, DType::F32);
        // A lazy expression: softmax(2a) over rows.
        let (sm2, _) = softmax_ref(&a.map(|x| 2.0 * x));
        let got = download(&t.mul(2.0).unwrap().softmax(1).unwrap());
        assert_close("softmax of a lazy input", &got, &sm2, 2e-5);
        // A transposed view: rows of the [700, 6] transpose are columns of `a`.
        let tt = t.transpose(0, 1).unwrap();
        let at = Arr {
            shape: vec![700, 6],
            data: (0..700 * 6)
                .map(|i| a.data[(i % 6) * 700 + i / 6])
                .collect(),
        };
        let (smt, lsmt) = softmax_ref(&at);
        assert_close(
            "softmax of a view",
            &download(&tt.softmax(-1).unwrap()),
            &smt,
            2e-5,
        );
        let fused = tt.fused_last_axis(RowOp::LogSoftmax, None).unwrap();
        assert_close(
            "fused log_softmax of a view",
            &download(&fused),
            &lsmt,
            1e-4,
        );
        // Not the last axis: the composed form, same values.
        let (sm0, _) = softmax_ref(&at);
        let got = download(
            &t.softmax(0)
                .unwrap()
                .transpose(0, 1)
                .unwrap()
                .contiguous()
                .unwrap(),
        );
        assert_close("softmax over axis 0", &got, &sm0, 2e-5);
        // Empty and size-1 dimensions.
        for shape in [vec![0, 5], vec![3, 0], vec![4, 1], vec![1, 1]] {
            let e = Tensor::zeros(&exec, &shape, DType::F32).unwrap();
            let s = e.softmax(-1).unwrap();
            assert_eq!(s.shape(), &shape[..]);
            let want = if shape[1] == 1 { 1.0 } else { 0.0 };
            assert!(download(&s).data.iter().all(|&x| x == want), "{shape:?}");
            let f = e.fused_last_axis(RowOp::Softmax, None).unwrap();
            assert!(download(&f).data.iter().all(|&x| x == want), "{shape:?}");
        }
        // Misuse is an error, not a panic.
        let i = Tensor::zeros(&exec, &[2, 3], DType::I32).unwrap();
        assert!(i.fused_last_axis(RowOp::Softmax, None).is_err());
        assert!(t.fused_last_axis(RowOp::SoftmaxBackward, None).is_err());
        let short = Tensor::zeros(&exec, &[6, 699], DType::F32).unwrap();
        assert!(t
            .fused_last_axis(RowOp::SoftmaxBackward, Some(&short))
            .is_err());
    }
}

#[test]
fn softmax_backward_fused_matches_the_formula() {
    let _shared = launching();
    for exec in executors() {
        for dt in [DType::F32, DType::F64, DType::F16] {
            if !supports(&exec, dt) {
                continue;
            }
            let mut rng = Rng(3);
            for &cols in &COLS {
                let y = random_arr(&mut rng, &[3, cols], dt, 0.0, 1.0);
                let g = random_arr(&mut rng, &[3, cols], dt, -1.0, 1.0);
                let (ty, tg) = (upload(&exec, &y, dt), upload(&exec, &g, dt));
                let dot = g.zip(&y, |a, b| a * b).reduce_axis(1, 0.0, |p, x| p + x);
                let want = y.zip(&g.zip(&dot, |a, b| a - b), |a, b| a * b);
                let sg = g.reduce_axis(1, 0.0, |p, x| p + x);
                let lwant = g.zip(&y.map(f64::exp).zip(&sg, |a, b| a * b), |a, b| a - b);
                // Errors scale with the row sums, not the (cancelling) results.
                let abs = |s: &Arr| s.data.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                let rel = tol(dt) * 16.0 * abs(&dot).max(abs(&sg));
                let what = |op: &str| format!("{} {op} {dt} cols {cols}", exec.backend_type());
                let composed = download(&Tensor::softmax_backward(&ty, &tg, -1).unwrap());
                assert_close(&what("softmax'"), &composed, &want, rel);
                if let Some(f) = fused(&ty, RowOp::SoftmaxBackward, Some(&tg)) {
                    assert_close(&what("fused softmax'"), &f, &want, rel);
                }
                let composed = download(&Tensor::log_softmax_backward(&ty, &tg, -1).unwrap());
                assert_close(&what("log_softmax'"), &composed, &lwant, rel);
                if let Some(f) = fused(&ty, RowOp::LogSoftmaxBackward, Some(&tg)) {
                    assert_close(&what("fused log_softmax'"), &f, &lwant, rel);
                }
            }
        }
    }
}

#[test]
fn long_reductions_nan_ties_and_split_axes() {
    let _shared = launching();
    for exec in executors() {
        for dt in [DType::F32, DType::F16, DType::I32] {
            if !supports(&exec, dt) {
                continue;
            }
            let mut rng = Rng(17 ^ dt as u64);
            // Longer than the largest chunk (several chunks, then a second stage), a chunk and a
            // bit, one block's worth, and shorter than a block.
            for n in [300_001usize, 70_000, 4097, 256, 255, 1] {
                let mut a = random_arr(&mut rng, &[n], dt, -3.0, 3.0);
                let what = |op: &str| format!("{} {op} {dt} [{n}]", exec.backend_type());
                // Ties: the maximum twice, far apart; argmax takes the first.
                if n > 10 {
                    a.data[n / 3] = 7.0;
                    a.data[n - 2] = 7.0;
                }
                let t = upload(&exec, &a, dt);
                let sum: f64 = a.data.iter().sum();
                let got = t.sum(&[], false).unwrap().item().unwrap();
                let rel = if dt.is_float() {
                    tol(dt) * 8.0 + (n as f64).sqrt() * 1e-7
                } else {
                    0.0
                };
                let want = round_to(sum, dt);
                assert!(
                    (got - want).abs()
                        <= rel * a.data.iter().map(|x| x.abs()).sum::<f64>().max(1.0),
                    "{}: got {got}, want {want}",
                    what("sum")
                );
                let max = a.data.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(
                    t.max(&[], false).unwrap().item().unwrap(),
                    max,
                    "{}",
                    what("max")
                );
                let first = a.data.iter().position(|&x| x == max).unwrap() as f64;
                let arg = t.argmax(None, false).unwrap().item().unwrap();
                assert_eq!(arg, first, "{}", what("argmax"));
                if dt.is_float() && n > 10 {
                    // A NaN wins max and argmax (its first index), and poisons the sum.
                    a.data[n / 2] = f64::NAN;
                    a.data[n - 1] = f64::NAN;
                    let t = upload(&exec, &a, dt);
                    assert!(t.max(&[], false).unwrap().item().unwrap().is_nan());
                    assert!(t.min(&[], false).unwrap().item().unwrap().is_nan());
                    assert!(t.sum(&[], false).unwrap().item().unwrap().is_nan());
                    let arg = t.argmin(None, false).unwrap().item().unwrap();
                    assert_eq!(arg, (n / 2) as f64, "{}", what("argmin with NaN"));
                }
            }
            // Few outputs over a long axis: the axis is split over several lanes.
            for shape in [vec![4096, 3], vec![3, 2000, 2], vec![1031, 2]] {
                let a = random_arr(&mut rng, &shape, dt, -3.0, 3.0);
                let t = upload(&exec, &a, dt);
                let what = |op: &str| format!("{} {op} {dt} {shape:?}", exec.backend_type());
                let ax = shape.len() - 2;
                let sum = a.reduce_axis(ax, 0.0, |p, x| p + x);
                let rel = if dt.is_float() {
                    tol(dt) * 8.0 + 1e-5
                } else {
                    0.0
                };
                assert_close(
                    &what("sum"),
                    &download(&t.sum(&[ax as isize], true).unwrap()),
                    &sum.map(|x| round_to(x, dt)),
                    rel,
                );
                let max = a.reduce_axis(ax, f64::NEG_INFINITY, f64::max);
                assert_close(
                    &what("max"),
                    &download(&t.max(&[ax as isize], true).unwrap()),
                    &max,
                    0.0,
                );
                let min = a.reduce_axis(ax, f64::INFINITY, f64::min);
                assert_close(
                    &what("min"),
                    &download(&t.min(&[ax as isize], true).unwrap()),
                    &min,
                    0.0,
                );
                let arg = download(&t.argmax(Some(ax as isize), true).unwrap());
                for (i, &m) in max.data.iter().enumerate() {
                    let mut idx = unravel(i, &max.shape);
                    let r = (0..shape[ax])
                        .find(|&r| {
                            idx[ax] = r;
                            a.data[ravel(&idx, &shape)] == m
                        })
                        .unwrap();
                    assert_eq!(arg.data[i], r as f64, "{}", what("argmax"));
                }
            }
        }
    }
}

/// The CPU's native row loops and its interpreter give the same bits (the native loops take
/// every exponential of a row in one vectorized lane loop; the interpreter takes them lane by
/// lane), for the forward and backward kernels of every float type.
#[test]
fn native_rows_match_the_interpreter_bit_for_bit() {
    let _shared = launching();
    let native = Executor::cpu();
    let interp = Executor::with_backend(
        hologram_core::BackendType::Cpu,
        std::sync::Arc::new(hologram_backends::CpuBackend::interpreter_only()),
    );
    let ops = [
        RowOp::Softmax,
        RowOp::LogSoftmax,
        RowOp::SoftmaxBackward,
        RowOp::LogSoftmaxBackward,
    ];
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let mut rng = Rng(11);
        for &cols in &COLS {
            let mut x = random_arr(&mut rng, &[5, cols], dt, -30.0, 30.0);
            // Specials, which the max pass must fold in the template's way: a NaN in row 1,
            // +inf in row 2, a row of -inf (row 3), and signed zeros tying for the maximum.
            x.data[cols + cols / 2] = f64::NAN;
            x.data[2 * cols + cols / 3] = f64::INFINITY;
            x.data[3 * cols..4 * cols].fill(f64::NEG_INFINITY);
            x.data[4 * cols..5 * cols]
                .iter_mut()
                .for_each(|v| *v = -v.abs() - 1.0);
            x.data[4 * cols + cols / 2] = -0.0;
            x.data[5 * cols - 1] = 0.0;
            let g = random_arr(&mut rng, &[5, cols], dt, -1.0, 1.0);
            for op in ops {
                let run = |exec: &Executor| {
                    let (tx, tg) = (upload(exec, &x, dt), upload(exec, &g, dt));
                    let grad = op.is_backward().then_some(&tg);
                    let r = tx.fused_last_axis(op, grad).unwrap();
                    r.to_bytes().unwrap()
                };
                assert_eq!(
                    run(&native),
                    run(&interp),
                    "{op:?} of {dt}, {cols} columns: native and interpreted bits differ"
                );
            }
        }
    }
}

/// Reductions over a leading axis (the lane template, one output per lane, lanes next to each
/// other in memory): the CPU's native loop reduces lanes in tiles, each lane in its own order,
/// and gives the interpreter's bits, for whole and partial tiles, NaNs and ties included; and
/// so do reductions along the last axis and over everything (the block template).
#[test]
fn native_lane_reductions_match_the_interpreter_bit_for_bit() {
    let _shared = launching();
    let native = Executor::cpu();
    let interp = Executor::with_backend(
        hologram_core::BackendType::Cpu,
        std::sync::Arc::new(hologram_backends::CpuBackend::interpreter_only()),
    );
    let shapes: [(&[usize], isize); 6] = [
        (&[300, 7], 0),
        (&[64, 256], 0),
        (&[33, 37], 0),
        (&[3, 50, 40], 1),
        (&[20, 1000], 0),
        (&[5, 3000], 0),
    ];
    for dt in [DType::F32, DType::F16, DType::I32] {
        let mut rng = Rng(5);
        for (shape, axis) in shapes {
            let mut a = random_arr(&mut rng, shape, dt, -4.0, 4.0);
            if dt.is_float() {
                // A NaN and a tie in some columns.
                a.data[3] = f64::NAN;
                let last = a.data.len() - 1;
                a.data[last] = a.data[0];
            }
            let run = |exec: &Executor| {
                let t = upload(exec, &a, dt);
                [
                    t.sum(&[axis], false).unwrap().to_bytes().unwrap(),
                    t.max(&[axis], false).unwrap().to_bytes().unwrap(),
                    t.min(&[axis], false).unwrap().to_bytes().unwrap(),
                    t.argmax(Some(axis), false).unwrap().to_bytes().unwrap(),
                    t.argmin(Some(axis), false).unwrap().to_bytes().unwrap(),
                    // Along the last axis and over everything: the block template (runs of
                    // its 256 lanes, the last one shorter).
                    t.sum(&[-1], false).unwrap().to_bytes().unwrap(),
                    t.max(&[-1], false).unwrap().to_bytes().unwrap(),
                    t.sum(&[], false).unwrap().to_bytes().unwrap(),
                ]
            };
            assert_eq!(
                run(&native),
                run(&interp),
                "{dt} {shape:?} axis {axis}: native and interpreted bits differ"
            );
        }
    }
}

/// On CUDA a row kernel launched on rows of whole vectors, in bounds and aligned, runs its
/// dedicated form (a library launch); other rows the generic form. (The results of both are
/// checked by the tests above.)
#[test]
fn cuda_row_kernels_take_their_dedicated_form_where_it_fits() {
    // The launch counters are the process's: no other test of this file launches meanwhile.
    let _alone = LAUNCHES.write().unwrap_or_else(|p| p.into_inner());
    for exec in executors() {
        if exec.backend_type() != hologram_core::BackendType::Cuda {
            continue;
        }
        let mut rng = Rng(5);
        for (cols, dedicated) in [(1024, true), (256, true), (4096, true), (1022, false)] {
            for dt in [DType::F32, DType::F16] {
                let y = upload(&exec, &random_arr(&mut rng, &[6, cols], dt, 0.0, 1.0), dt);
                let g = upload(&exec, &random_arr(&mut rng, &[6, cols], dt, -1.0, 1.0), dt);
                for (op, grad) in [
                    (RowOp::Softmax, None),
                    (RowOp::LogSoftmax, None),
                    (RowOp::SoftmaxBackward, Some(&g)),
                ] {
                    let before = exec.stats().backend;
                    let out = y.fused_last_axis(op, grad).expect("fused row kernel");
                    out.to_bytes().expect("result");
                    let after = exec.stats().backend;
                    let library = after.library_launches - before.library_launches;
                    let generic = after.generic_launches - before.generic_launches;
                    assert_eq!(
                        (library, generic),
                        if dedicated { (1, 0) } else { (0, 1) },
                        "{op:?} {dt} cols {cols}: (library, generic) launches"
                    );
                }
            }
        }
    }
}
