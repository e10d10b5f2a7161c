//! On wgpu backends, reductions and row kernels run in their dedicated WGSL form (counted as
//! library launches, none generic), and reductions give the CPU interpreter's bits (same folds
//! in the same order). Runs for the wgpu backends named in `HOLOGRAM_TEST_BACKENDS`.

mod common;

use common::*;
use hologram_core::{BackendType, DType, Executor, Tensor};

fn is_wgpu(e: &Executor) -> bool {
    matches!(
        e.backend_type(),
        BackendType::Vulkan | BackendType::Metal | BackendType::Dx12
    )
}

/// (library, generic) launches of `f` on `exec`, after its results are read.
fn launches(exec: &Executor, f: impl FnOnce() -> Vec<Tensor>) -> (u64, u64) {
    let before = exec.stats().backend;
    for t in f() {
        t.to_bytes().expect("read back");
    }
    let after = exec.stats().backend;
    (
        after.library_launches - before.library_launches,
        after.generic_launches - before.generic_launches,
    )
}

#[test]
fn reductions_and_row_kernels_take_the_dedicated_path() {
    let interp = Executor::with_backend(
        BackendType::Cpu,
        std::sync::Arc::new(hologram_backends::CpuBackend::interpreter_only()),
    );
    let mut rng = Rng(5);
    for exec in executors().into_iter().filter(is_wgpu) {
        // A long row (two block stages), short rows (the lane kernel), a strided axis.
        let long = random_arr(&mut rng, &[3, 300_000], DType::F32, -2.0, 2.0);
        let x = upload(&exec, &long, DType::F32);
        let (lib, generic) = launches(&exec, || {
            vec![
                x.sum(&[-1], false).unwrap(),
                x.max(&[-1], false).unwrap(),
                x.sum(&[0], false).unwrap(),
            ]
        });
        assert_eq!(
            generic,
            0,
            "{:?}: reductions ran generic kernels",
            exec.backend_type()
        );
        assert!(
            lib >= 4,
            "{:?}: {lib} library launches",
            exec.backend_type()
        );
        let xi = upload(&interp, &long, DType::F32);
        for (got, want) in [
            (x.sum(&[-1], false), xi.sum(&[-1], false)),
            (x.max(&[-1], false), xi.max(&[-1], false)),
            (x.sum(&[0], false), xi.sum(&[0], false)),
            (x.min(&[-1], true), xi.min(&[-1], true)),
        ] {
            assert_eq!(
                download(&got.unwrap()).data,
                download(&want.unwrap()).data,
                "{:?}: not the interpreter's bits",
                exec.backend_type()
            );
        }
        // Softmax and its relatives, resident rows and rows read per pass.
        for cols in [1000, 5000] {
            let a = random_arr(&mut rng, &[6, cols], DType::F32, -3.0, 3.0);
            let t = upload(&exec, &a, DType::F32);
            let (lib, generic) = launches(&exec, || {
                let y = t.softmax(-1).unwrap();
                let ly = t.log_softmax(-1).unwrap();
                let g = Tensor::softmax_backward(&y, &t, -1).unwrap();
                let lg = Tensor::log_softmax_backward(&ly, &t, -1).unwrap();
                vec![y, ly, g, lg]
            });
            assert_eq!(
                (lib, generic),
                (4, 0),
                "{:?} cols {cols}: row kernels not dedicated",
                exec.backend_type()
            );
        }
    }
}
