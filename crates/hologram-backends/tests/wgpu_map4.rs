//! Element-wise maps in their 4-lane form on wgpu (`wgpu/codegen/map.rs`): every lane of odd
//! sizes is computed, the map's bound is kept, and a lane that goes out of bounds is reported
//! as in the generic form. Runs on lavapipe in CI (`HOLOGRAM_WGPU_TESTS=skip` to skip).
#![cfg(feature = "wgpu")]

use hologram_backends::{Backend, BackendError, BufferArg, KernelArg, LaunchConfig, Memory};
use hologram_isa::semantics::Value;

const AXPY: &str = ".kernel axpy\n.param .buf.f32 x\n.param .buf.f32 y\n.param .buf.f32 out .rw\n.param .f32 a\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.f32 %x, x[%gid];\n    ld.f32 %y, y[%gid];\n    mul.f32 %t, %x, a;\n    add.f32 %z, %t, %y;\n    st.f32 out[%gid], %z;\n";

mod common {
    pub mod lavapipe;
}
use common::lavapipe::backend;

fn upload(b: &dyn Backend, v: &[f32]) -> Memory {
    let m = b.allocate(4 * v.len()).expect("allocate");
    b.copy_in(&m, 0, bytemuck::cast_slice(v)).expect("copy in");
    m
}

fn read(b: &dyn Backend, m: &Memory, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    b.copy_out(m, 0, bytemuck::cast_slice_mut(&mut out))
        .expect("copy out");
    out
}

fn launch(
    b: &dyn Backend,
    bufs: [&Memory; 3],
    a: f32,
    n: u32,
    config: &LaunchConfig,
) -> Result<(), BackendError> {
    let k = b
        .compile(&hologram_compiler::Canonical::assemble(AXPY).expect("assemble"))
        .expect("compile");
    let mut args: Vec<KernelArg> = bufs
        .iter()
        .map(|m| KernelArg::Buffer(BufferArg::whole((*m).clone())))
        .collect();
    args.push(KernelArg::Scalar(Value::F32(a)));
    args.push(KernelArg::Scalar(Value::U32(n)));
    b.launch(&k, config, &args).and_then(|()| b.synchronize())
}

#[test]
fn every_lane_of_odd_sizes_is_computed_and_the_bound_kept() {
    let Some(b) = backend() else { return };
    for (len, n, block) in [
        (1usize, 1u32, 64u32),
        (1027, 1027, 64),
        (70001, 69999, 256),
        (5000, 4099, 32),
    ] {
        let x: Vec<f32> = (0..len).map(|i| i as f32 * 0.5).collect();
        let y: Vec<f32> = (0..len).map(|i| 1.0 - i as f32).collect();
        let (xm, ym) = (upload(&b, &x), upload(&b, &y));
        let out = upload(&b, &vec![-7.0; len]);
        let config = LaunchConfig::linear((len as u32).div_ceil(block), block);
        launch(&b, [&xm, &ym, &out], 3.0, n, &config).expect("launch");
        let got = read(&b, &out, len);
        for i in 0..len {
            let want = if i < n as usize {
                x[i] * 3.0 + y[i]
            } else {
                -7.0
            };
            assert_eq!(
                got[i].to_bits(),
                want.to_bits(),
                "len {len}, n {n}: element {i}"
            );
        }
    }
}

#[test]
fn a_lane_out_of_bounds_is_reported() {
    let Some(b) = backend() else { return };
    let len = 4096;
    let x = upload(&b, &vec![1.0; len]);
    let y = upload(&b, &vec![2.0; len]);
    // The output holds fewer elements than the map writes.
    let short = 3001;
    let out = upload(&b, &vec![0.0; short]);
    match launch(
        &b,
        [&x, &y, &out],
        1.0,
        len as u32,
        &LaunchConfig::linear(16, 256),
    ) {
        Err(BackendError::OutOfBounds {
            kernel,
            array,
            index,
            len,
        }) => {
            assert_eq!(
                (kernel.as_str(), array.as_str(), len),
                ("axpy", "out", short as u64)
            );
            assert!(index >= short as i128, "index {index}");
        }
        other => panic!("expected an out-of-bounds error, got {other:?}"),
    }
    // The lanes inside the buffer ran.
    assert!(read(&b, &out, short).iter().all(|&v| v == 3.0));
}

/// A map whose output index is `%gid * 1` computed at run time: not at `%gid` literally, so it
/// is no 4-lane map and its launches always read their error slot back.
const SCALED: &str = ".kernel scaled\n.param .buf.f32 x\n.param .buf.f32 out .rw\n.param .u32 n\n.param .u32 s\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    mul.u32 %j, %gid, s;\n    ld.f32 %x, x[%j];\n    st.f32 out[%j], %x;\n";

#[test]
fn launches_proved_in_bounds_skip_the_error_read_yet_errors_are_reported_once() {
    let Some(b) = backend() else { return };
    let len = 4096;
    let x = upload(&b, &vec![1.0; len]);
    let y = upload(&b, &vec![2.0; len]);
    let out = upload(&b, &vec![0.0; len]);
    let short = upload(&b, &vec![0.0; 100]);
    let axpy = b
        .compile(&hologram_compiler::Canonical::assemble(AXPY).expect("assemble"))
        .expect("compile");
    let args = |o: &Memory, n: u32| -> Vec<KernelArg> {
        let mut a: Vec<KernelArg> = [&x, &y, o]
            .iter()
            .map(|m| KernelArg::Buffer(BufferArg::whole((*m).clone())))
            .collect();
        a.push(KernelArg::Scalar(Value::F32(1.0)));
        a.push(KernelArg::Scalar(Value::U32(n)));
        a
    };
    let config = LaunchConfig::linear(16, 256);
    // In one batch: launches that cannot fault around one that does.
    b.launch(&axpy, &config, &args(&out, len as u32))
        .expect("launch");
    b.launch(&axpy, &config, &args(&short, len as u32))
        .expect("launch");
    // The bound keeps this one inside the short buffer: it cannot fault.
    b.launch(&axpy, &config, &args(&short, 100))
        .expect("launch");
    match b.synchronize() {
        Err(BackendError::OutOfBounds { array, len, .. }) => {
            assert_eq!((array.as_str(), len), ("out", 100));
        }
        other => panic!("expected an out-of-bounds error, got {other:?}"),
    }
    assert!(read(&b, &out, len).iter().all(|&v| v == 3.0));
    // A later launch that reads its slot back finds it clean: the error is not reported again.
    let scaled = b
        .compile(&hologram_compiler::Canonical::assemble(SCALED).expect("assemble"))
        .expect("compile");
    let scaled_args = vec![
        KernelArg::Buffer(BufferArg::whole(y.clone())),
        KernelArg::Buffer(BufferArg::whole(out.clone())),
        KernelArg::Scalar(Value::U32(len as u32)),
        KernelArg::Scalar(Value::U32(1)),
    ];
    b.launch(&scaled, &config, &scaled_args).expect("launch");
    b.synchronize().expect("no stale error");
    assert!(read(&b, &out, len).iter().all(|&v| v == 2.0));
}
