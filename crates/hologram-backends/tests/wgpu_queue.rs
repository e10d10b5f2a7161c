//! The wgpu work queue under load: each launch reads its own argument words from the argument
//! ring (launches of one batch differ only in their scalars), the ring and the error slots wrap
//! at their waits, and an error in the middle of a batch names its kernel while the launches
//! around it keep their results. Runs on lavapipe in CI (`HOLOGRAM_WGPU_TESTS=skip` to skip).
#![cfg(feature = "wgpu")]

use hologram_backends::{Backend, BackendError, BufferArg, KernelArg, LaunchConfig, Memory};
use hologram_isa::semantics::Value;

const ADD_AT: &str = ".kernel add_at\n.param .buf.u32 y .rw\n.param .u32 i\n.param .u32 v\n    setp.ne.u32 %p, %gid, 0;\n@%p exit;\n    ld.u32 %x, y[i];\n    add.u32 %x, %x, v;\n    st.u32 y[i], %x;\n";

mod common {
    pub mod lavapipe;
}
use common::lavapipe::backend;

fn zeros(b: &dyn Backend, n: usize) -> Memory {
    let m = b.allocate(4 * n).expect("allocate");
    b.copy_in(&m, 0, bytemuck::cast_slice(&vec![0u32; n]))
        .expect("copy in");
    m
}

fn read(b: &dyn Backend, m: &Memory, n: usize) -> Vec<u32> {
    let mut out = vec![0u32; n];
    b.copy_out(m, 0, bytemuck::cast_slice_mut(&mut out))
        .expect("copy out");
    out
}

fn args(y: &Memory, i: u32, v: u32) -> Vec<KernelArg> {
    vec![
        KernelArg::Buffer(BufferArg::whole(y.clone())),
        KernelArg::Scalar(Value::U32(i)),
        KernelArg::Scalar(Value::U32(v)),
    ]
}

#[test]
fn every_launch_reads_its_own_arguments_across_waits() {
    let Some(b) = backend() else { return };
    let k = b
        .compile(&hologram_compiler::Canonical::assemble(ADD_AT).expect("assemble"))
        .expect("compile");
    let n = 64usize;
    let y = zeros(&b, n);
    // More launches than error slots (1024) with no wait in between: the queue waits on its own.
    let launches = 2500u32;
    let mut want = vec![0u32; n];
    for l in 0..launches {
        let (i, v) = (l * 7 % n as u32, l + 1);
        want[i as usize] += v;
        b.launch(&k, &LaunchConfig::linear(1, 32), &args(&y, i, v))
            .expect("launch");
    }
    b.synchronize().expect("synchronize");
    assert_eq!(read(&b, &y, n), want);
}

#[test]
fn an_error_inside_a_batch_names_its_kernel_and_spares_the_others() {
    let Some(b) = backend() else { return };
    let k = b
        .compile(&hologram_compiler::Canonical::assemble(ADD_AT).expect("assemble"))
        .expect("compile");
    let n = 16usize;
    let y = zeros(&b, n);
    for l in 0..5u32 {
        // The third launch indexes past the end.
        let i = if l == 2 { 1000 } else { l };
        b.launch(&k, &LaunchConfig::linear(1, 32), &args(&y, i, 10 + l))
            .expect("launch");
    }
    match b.synchronize() {
        Err(BackendError::OutOfBounds {
            kernel, index, len, ..
        }) => assert_eq!((kernel.as_str(), index, len), ("add_at", 1000, n as u64)),
        other => panic!("expected the out-of-bounds launch's error, got {other:?}"),
    }
    let got = read(&b, &y, n);
    assert_eq!(&got[..5], &[10, 11, 0, 13, 14]);
    // The next wait reports nothing more.
    b.synchronize().expect("the error was reported once");
}
