//! Reductions and row kernels in their dedicated WGSL form (`wgpu/codegen/dedicated.rs`):
//! launched in bounds they count as library launches and give the CPU's results; a launch
//! whose buffers are too short reports the same out-of-bounds error as the generic form (the
//! workgroups that cannot be proved in bounds run the generic code). Runs on lavapipe
//! (`HOLOGRAM_WGPU_TESTS=skip` to skip).
#![cfg(feature = "wgpu")]

use hologram_backends::{Backend, BackendError, BufferArg, CpuBackend, KernelArg, LaunchConfig};
use hologram_compiler::patterns::reduce_templates::{self, Combine};
use hologram_compiler::patterns::softmax_templates::{self, RowOp};
use hologram_compiler::patterns::{ReduceKind, ReducePattern, RowPattern};
use hologram_isa::semantics::Value;
use hologram_isa::Type;

mod common {
    pub mod lavapipe;
}
use common::lavapipe::backend;

fn u(v: u32) -> KernelArg {
    KernelArg::Scalar(Value::U32(v))
}

/// Runs `kernel` with f32 buffers (contents, lengths) and scalars; returns the buffers.
fn run(
    b: &dyn Backend,
    kernel: &hologram_compiler::Canonical,
    buffers: &[Vec<f32>],
    scalars: &[KernelArg],
    config: &LaunchConfig,
) -> Result<Vec<Vec<f32>>, BackendError> {
    let k = b.compile(kernel).expect("compile");
    let mems: Vec<_> = buffers
        .iter()
        .map(|v| {
            let m = b.allocate(4 * v.len()).expect("allocate");
            b.copy_in(&m, 0, bytemuck::cast_slice(v)).expect("copy in");
            m
        })
        .collect();
    let mut args: Vec<KernelArg> = mems
        .iter()
        .map(|m| KernelArg::Buffer(BufferArg::whole(m.clone())))
        .collect();
    args.extend(scalars.iter().cloned());
    b.launch(&k, config, &args)?;
    b.synchronize()?;
    Ok(mems
        .iter()
        .zip(buffers)
        .map(|(m, v)| {
            let mut out = vec![0f32; v.len()];
            b.copy_out(m, 0, bytemuck::cast_slice_mut(&mut out))
                .expect("copy out");
            out
        })
        .collect())
}

fn sum_block() -> hologram_compiler::Canonical {
    reduce_templates::kernel(&ReducePattern {
        kind: ReduceKind::Block { index_input: false },
        combine: Combine::Sum,
        storage: Type::F32,
        acc: Type::F32,
        out: Type::F32,
    })
    .expect("template")
}

#[test]
fn in_bounds_launches_are_dedicated_and_match_the_cpu() {
    let Some(b) = backend() else { return };
    let cpu = CpuBackend::interpreter_only();
    let x: Vec<f32> = (0..50_000)
        .map(|i| ((i * 37) % 101) as f32 * 0.37 - 17.0)
        .collect();
    // 2 rows of 25000 in chunks of 4096: 7 chunks each.
    let (rows, rlen, clen) = (2u32, 25_000u32, 4096u32);
    let chunks = rlen.div_ceil(clen);
    let scalars = [u(0), u(rlen), u(chunks), u(clen)];
    let config = LaunchConfig::linear(rows * chunks, 256);
    let buffers = [x.clone(), vec![0.0; (rows * chunks) as usize]];
    let before = b.stats();
    let got = run(&b, &sum_block(), &buffers, &scalars, &config).expect("launch");
    let after = b.stats();
    assert_eq!(after.library_launches - before.library_launches, 1);
    assert_eq!(after.generic_launches, before.generic_launches);
    let want = run(&cpu, &sum_block(), &buffers, &scalars, &config).expect("cpu");
    assert_eq!(
        got[1], want[1],
        "block sums differ from the CPU interpreter's"
    );

    let p = RowPattern {
        op: RowOp::Softmax,
        storage: Type::F32,
        g: 32,
        resident: 4,
    };
    let soft = softmax_templates::kernel(&p).expect("template");
    let (rows, cols) = (37u32, 100u32);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 13) % 29) as f32 * 0.2)
        .collect();
    let bufs = [xs, vec![0.0; (rows * cols) as usize]];
    let config = LaunchConfig::linear(rows.div_ceil(256 / p.g), 256);
    let got = run(&b, &soft, &bufs, &[u(0), u(rows), u(cols)], &config).expect("launch");
    let want = run(&cpu, &soft, &bufs, &[u(0), u(rows), u(cols)], &config).expect("cpu");
    for (g, w) in got[1].iter().zip(&want[1]) {
        assert!((g - w).abs() <= 2e-7 + 2e-6 * w.abs(), "softmax {g} vs {w}");
    }
}

#[test]
fn short_buffers_report_the_generic_forms_error() {
    let Some(b) = backend() else { return };
    // The block sum writes one partial per block: 3 blocks, room for 2.
    let x = vec![1.0f32; 3 * 4096];
    let err = run(
        &b,
        &sum_block(),
        &[x, vec![0.0; 2]],
        &[u(0), u(3 * 4096), u(3), u(4096)],
        &LaunchConfig::linear(3, 256),
    )
    .expect_err("out of bounds");
    match err {
        BackendError::OutOfBounds {
            array, index, len, ..
        } => {
            assert_eq!((array.as_str(), index, len), ("out", 2, 2))
        }
        other => panic!("{other}"),
    }
    // A lane reduction whose rows run past the input.
    let lane = reduce_templates::kernel(&ReducePattern {
        kind: ReduceKind::Lane,
        combine: Combine::Max,
        storage: Type::F32,
        acc: Type::F32,
        out: Type::F32,
    })
    .expect("template");
    let err = run(
        &b,
        &lane,
        &[vec![0.5; 100], vec![0.0; 10]],
        &[u(0), u(11), u(1), u(10)],
        &LaunchConfig::linear(1, 64),
    )
    .expect_err("out of bounds");
    match err {
        BackendError::OutOfBounds {
            array, index, len, ..
        } => {
            assert_eq!((array.as_str(), index, len), ("x", 100, 100))
        }
        other => panic!("{other}"),
    }
    // A softmax whose output is one row short.
    let soft = softmax_templates::kernel(&RowPattern {
        op: RowOp::LogSoftmax,
        storage: Type::F32,
        g: 32,
        resident: 0,
    })
    .expect("template");
    let err = run(
        &b,
        &soft,
        &[vec![0.5; 300], vec![0.0; 200]],
        &[u(0), u(3), u(100)],
        &LaunchConfig::linear(1, 256),
    )
    .expect_err("out of bounds");
    assert!(
        matches!(&err, BackendError::OutOfBounds { array, len: 200, .. } if array == "y"),
        "{err}"
    );
}

/// Launches the launcher proves in bounds run the module without the in-bounds tests and have
/// no error slot to read back (`codegen/dedicated_checks.rs`); one that is not proved, among
/// them, runs the checked module and is still reported once, with its own kernel's error, and
/// the proved ones after it run clean.
#[test]
fn a_short_launch_among_proved_ones_is_reported_once() {
    let Some(b) = backend() else { return };
    let k = b.compile(&sum_block()).expect("compile");
    let upload = |v: &[f32]| {
        let m = b.allocate(4 * v.len()).expect("allocate");
        b.copy_in(&m, 0, bytemuck::cast_slice(v)).expect("copy in");
        m
    };
    let x = upload(&vec![1.0f32; 3 * 4096]);
    let (fits, short) = (upload(&[0.0; 3]), upload(&[0.0; 2]));
    let launch = |out: &hologram_backends::Memory| {
        let mut args = vec![
            KernelArg::Buffer(BufferArg::whole(x.clone())),
            KernelArg::Buffer(BufferArg::whole(out.clone())),
        ];
        args.extend([u(0), u(3 * 4096), u(3), u(4096)]);
        b.launch(&k, &LaunchConfig::linear(3, 256), &args)
    };
    for round in 0..2 {
        let before = b.stats().compiles;
        launch(&fits).expect("queue");
        if round == 0 {
            // The proved launch builds the module without the in-bounds tests, the short one
            // the module with them.
            assert_eq!(b.stats().compiles, before + 1);
            launch(&short).expect("queue");
            assert_eq!(b.stats().compiles, before + 2);
        }
        launch(&fits).expect("queue");
        let got = b.synchronize();
        if round == 0 {
            match got {
                Err(BackendError::OutOfBounds {
                    array, index, len, ..
                }) => assert_eq!((array.as_str(), index, len), ("out", 2, 2)),
                other => panic!("{other:?}"),
            }
        } else {
            got.expect("the proved launches after the fault run clean");
        }
    }
    let mut sums = [0f32; 3];
    b.copy_out(&fits, 0, bytemuck::cast_slice_mut(&mut sums))
        .expect("copy out");
    assert_eq!(sums, [4096.0; 3]);
}
