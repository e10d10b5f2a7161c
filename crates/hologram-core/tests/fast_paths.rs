//! Every kernel the tensor library generates carries its intent, and on the CPU the intent takes
//! it to a native loop: no generated kernel may fall to the interpreter (a performance cliff
//! that results alone would not show). Each case runs one op and counts the backend's launch
//! paths.

use hologram_core::{DType, Executor, Tensor};

/// The counters belong to the executor, which the tests share (`Executor::cpu()` is one per
/// process): each measurement runs alone.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `op` and returns (library launches, generic launches) it caused.
fn paths(exec: &Executor, op: impl FnOnce() -> Tensor) -> (u64, u64) {
    let _alone = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let before = exec.stats().backend;
    let out = op();
    out.to_bytes().expect("result");
    let after = exec.stats().backend;
    (
        after.library_launches - before.library_launches,
        after.generic_launches - before.generic_launches,
    )
}

fn input(exec: &Executor, shape: &[usize], dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 255) as f32 / 17.0 - 7.0)
        .collect();
    let t = Tensor::from_slice(exec, &data, shape).expect("upload");
    t.cast(dtype).expect("cast").contiguous().expect("realize")
}

fn assert_native(what: &str, (library, generic): (u64, u64)) {
    assert!(
        library >= 1 && generic == 0,
        "{what}: {library} library and {generic} generic launches; every generated kernel must take its native path"
    );
}

#[test]
fn element_wise_kernels_run_natively() {
    let exec = Executor::cpu();
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::U8,
    ] {
        let a = input(&exec, &[64, 300], dtype);
        let b = input(&exec, &[64, 300], dtype);
        let row = input(&exec, &[300], dtype);
        let col = input(&exec, &[64, 1], dtype);
        let w = format!("{dtype:?}");
        assert_native(&format!("add {w}"), paths(&exec, || a.add(&b).unwrap()));
        assert_native(
            &format!("chain {w}"),
            paths(&exec, || {
                a.add(&b)
                    .unwrap()
                    .mul(&a)
                    .unwrap()
                    .clip(Some(-3.0), Some(3.0))
                    .unwrap()
            }),
        );
        assert_native(
            &format!("broadcast row {w}"),
            paths(&exec, || a.add(&row).unwrap()),
        );
        assert_native(
            &format!("broadcast column {w}"),
            paths(&exec, || a.sub(&col).unwrap()),
        );
        assert_native(
            &format!("transposed {w}"),
            paths(&exec, || a.transpose(0, 1).unwrap().add(1.0).unwrap()),
        );
        assert_native(
            &format!("compare and where {w}"),
            paths(&exec, || {
                Tensor::where_(&a.lt(&b).unwrap(), &a, &b).unwrap()
            }),
        );
        let to = if dtype == DType::F64 {
            DType::F32
        } else {
            DType::F64
        };
        assert_native(&format!("cast {w}"), paths(&exec, || a.cast(to).unwrap()));
    }
    let x = input(&exec, &[4096], DType::F32);
    for (name, f) in [
        (
            "relu",
            Tensor::relu as fn(&Tensor) -> hologram_core::Result<Tensor>,
        ),
        ("sigmoid", Tensor::sigmoid),
        ("tanh", Tensor::tanh),
        ("gelu", Tensor::gelu),
        ("silu", Tensor::silu),
        ("exp", Tensor::exp),
    ] {
        assert_native(name, paths(&exec, || f(&x).unwrap()));
    }
    assert_native(
        "rand",
        paths(&exec, || {
            Tensor::rand(&exec, &[1000], 7, DType::F32).unwrap()
        }),
    );
    assert_native(
        "randn",
        paths(&exec, || {
            Tensor::randn(&exec, &[1000], 7, DType::F32).unwrap()
        }),
    );
}

#[test]
fn reduction_kernels_run_natively() {
    let exec = Executor::cpu();
    // Shapes that take each template: one lane per output (inner > 1), a split long axis with
    // few outputs, one block per row, several chunks per row (two stages).
    let shapes: [(&[usize], isize); 5] = [
        (&[8, 50, 6], 1),
        (&[2, 100000], 1),
        (&[4, 5000], 1),
        (&[1, 1 << 20], 1),
        (&[300, 7], 0),
    ];
    for dtype in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::U8,
    ] {
        for (shape, axis) in shapes {
            let t = input(&exec, shape, dtype);
            let w = format!("{dtype:?} {shape:?} axis {axis}");
            assert_native(
                &format!("sum {w}"),
                paths(&exec, || t.sum(&[axis], false).unwrap()),
            );
            assert_native(
                &format!("max {w}"),
                paths(&exec, || t.max(&[axis], false).unwrap()),
            );
            assert_native(
                &format!("min {w}"),
                paths(&exec, || t.min(&[axis], false).unwrap()),
            );
            assert_native(
                &format!("prod {w}"),
                paths(&exec, || t.prod(&[axis], false).unwrap()),
            );
            assert_native(
                &format!("argmax {w}"),
                paths(&exec, || t.argmax(Some(axis), false).unwrap()),
            );
            assert_native(
                &format!("argmin {w}"),
                paths(&exec, || t.argmin(Some(axis), false).unwrap()),
            );
        }
    }
}

#[test]
fn row_kernels_run_natively() {
    let exec = Executor::cpu();
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        // Rows held in registers, and rows long enough to be read once per pass.
        for shape in [[16, 10], [8, 1000], [2, 40000]] {
            let t = input(&exec, &shape, dtype);
            let w = format!("{dtype:?} {shape:?}");
            let y = t.softmax(-1).unwrap();
            let ly = t.log_softmax(-1).unwrap();
            assert_native(
                &format!("softmax {w}"),
                paths(&exec, || t.softmax(-1).unwrap()),
            );
            assert_native(
                &format!("log_softmax {w}"),
                paths(&exec, || t.log_softmax(-1).unwrap()),
            );
            assert_native(
                &format!("softmax backward {w}"),
                paths(&exec, || Tensor::softmax_backward(&y, &t, -1).unwrap()),
            );
            assert_native(
                &format!("log_softmax backward {w}"),
                paths(&exec, || Tensor::log_softmax_backward(&ly, &t, -1).unwrap()),
            );
        }
    }
}

#[test]
fn attention_kernels_run_natively() {
    let exec = Executor::cpu();
    let p = hologram_backends::GemmPrecision::Exact;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        // Rows held in registers, and rows long enough to be read once per pass.
        for l in [37, 700] {
            // q, k, v: strided views of one [B, L, 3, H, D] projection.
            let proj = input(&exec, &[2, l, 3, 2, 8], dtype);
            let part = |w: usize| {
                proj.slice(2, w, w + 1, 1)
                    .unwrap()
                    .squeeze(2)
                    .unwrap()
                    .permute(&[0, 2, 1, 3])
                    .unwrap()
            };
            let (q, k, v) = (part(0), part(1), part(2));
            let go = input(&exec, &[2, 2, l, 8], dtype);
            let w = format!("{dtype:?} L={l}");
            for causal in [false, true] {
                assert_native(
                    &format!("attention causal={causal} {w}"),
                    paths(&exec, || {
                        q.attention(&k, &v, causal, 0.3, p, false).unwrap().output
                    }),
                );
            }
            let probs = q
                .attention(&k, &v, true, 0.3, p, true)
                .unwrap()
                .probs
                .unwrap();
            assert_native(
                &format!("attention backward {w}"),
                paths(&exec, || {
                    let g = q.attention_backward(&k, &v, &probs, &go, 0.3, p).unwrap();
                    g.dq.add(&g.dk).unwrap().add(&g.dv).unwrap()
                }),
            );
        }
    }
}

#[test]
fn pooling_kernels_run_natively() {
    use hologram_core::ops::MaxPool2d;
    let exec = Executor::cpu();
    let p = MaxPool2d {
        kernel: [3, 3],
        stride: [2, 2],
        padding: [1, 1],
        dilation: [1, 1],
        ceil_mode: false,
    };
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let x = input(&exec, &[2, 3, 17, 16], dtype);
        let w = format!("{dtype:?}");
        assert_native(
            &format!("max_pool2d {w}"),
            paths(&exec, || x.max_pool2d(&p, false).unwrap().0),
        );
        assert_native(
            &format!("max_pool2d with indices {w}"),
            paths(&exec, || x.max_pool2d(&p, true).unwrap().1.unwrap()),
        );
        let (y, i) = x.max_pool2d(&p, true).unwrap();
        let i = i.unwrap();
        assert_native(
            &format!("max_pool2d backward {w}"),
            paths(&exec, || {
                Tensor::max_pool2d_backward(&y, &i, x.shape(), &p).unwrap()
            }),
        );
    }
}

#[test]
fn a_fused_multi_output_update_runs_natively() {
    let exec = Executor::cpu();
    for dtype in [DType::F32, DType::F16, DType::F64] {
        let (p, g) = (
            input(&exec, &[64, 300], dtype),
            input(&exec, &[64, 300], dtype),
        );
        let (m, v) = (
            input(&exec, &[64, 300], dtype),
            input(&exec, &[64, 300], dtype),
        );
        let w = format!("{dtype:?}");
        assert_native(
            &format!("adam-like update {w}"),
            paths(&exec, || {
                let m_new = m.mul(0.9).unwrap().add(&g.mul(0.1).unwrap()).unwrap();
                let v_new = v.mul(0.99).unwrap().add(&g.mul(&g).unwrap()).unwrap();
                let p_new = p
                    .sub(
                        &m_new
                            .div(&v_new.abs().unwrap().sqrt().unwrap().add(1e-3).unwrap())
                            .unwrap(),
                    )
                    .unwrap();
                Tensor::assign_all(&[(m_new, m.clone()), (v_new, v.clone()), (p_new, p.clone())])
                    .unwrap();
                p.clone()
            }),
        );
    }
}
