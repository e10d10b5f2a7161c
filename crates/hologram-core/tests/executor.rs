//! Executor behaviour: backend choice, buffers, allocator, kernel cache, launch errors.

use hologram_backends::BackendError;
use hologram_core::{BackendType, Error, Executor, LaunchConfig};
use hologram_isa::semantics::Value;

#[test]
fn unavailable_backends_say_why() {
    for kind in [BackendType::Cuda, BackendType::Metal, BackendType::Dx12] {
        match Executor::new_with_backend(kind) {
            Err(Error::Backend(BackendError::Unavailable { backend, reason })) => {
                assert_eq!(backend, kind.name());
                assert!(!reason.is_empty());
            }
            Ok(e) => assert_eq!(e.backend_type(), kind, "available here"),
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    let err = "tpu".parse::<BackendType>().unwrap_err();
    assert!(err.to_string().contains("unknown backend 'tpu'"));
}

#[test]
fn env_override_and_auto() {
    // Runs in one test so the environment variable is not raced by another test.
    std::env::set_var("HOLOGRAM_BACKEND", "cpu");
    assert_eq!(
        Executor::new_auto().unwrap().backend_type(),
        BackendType::Cpu
    );
    std::env::set_var("HOLOGRAM_BACKEND", "nonsense");
    assert!(matches!(
        Executor::new_auto(),
        Err(Error::Backend(BackendError::UnknownBackend(_)))
    ));
    std::env::remove_var("HOLOGRAM_BACKEND");
    let exec = Executor::new_auto().unwrap();
    assert!(hologram_core::availability()
        .iter()
        .any(|a| a.backend == exec.backend_type() && a.status.is_ok()));
}

#[test]
fn buffers_round_trip_with_offsets() {
    let exec = Executor::cpu();
    let b = exec.from_slice(&[1u16, 2, 3, 4, 5]).unwrap();
    b.write_at(3, &[40, 50]).unwrap();
    let mut mid = [0u16; 3];
    b.read_range_into(1, &mut mid).unwrap();
    assert_eq!(mid, [2, 3, 40]);
    assert!(matches!(b.write(&[1, 2]), Err(Error::LengthMismatch(_))));
    assert!(b.write_at(4, &[1, 2]).is_err());
    let c = exec.zeros::<u16>(5).unwrap();
    c.copy_from(&b).unwrap();
    assert_eq!(c.to_vec().unwrap(), vec![1, 2, 3, 40, 50]);
}

#[test]
fn allocator_reuses_freed_blocks() {
    let exec = Executor::cpu();
    let before = exec.allocator_stats();
    {
        let _a = exec.allocate::<f32>(1000).unwrap();
    }
    let _b = exec.allocate::<f32>(990).unwrap(); // same 4000-byte class
    let s = exec.allocator_stats();
    assert_eq!(s.allocations - before.allocations, 2);
    assert_eq!(s.cache_hits - before.cache_hits, 1);
    assert_eq!(s.device_allocations - before.device_allocations, 1);
    assert_eq!(s.bytes_in_use, 3960);
    drop(_b);
    exec.empty_cache();
    let s = exec.allocator_stats();
    assert_eq!(
        (s.bytes_in_use, s.bytes_cached, s.bytes_reserved),
        (0, 0, 0)
    );
}

#[test]
fn kernel_cache_compiles_identical_programs_once() {
    let exec = Executor::cpu();
    let text = ".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[%gid], 7;\n";
    let _ = exec.assemble(text).unwrap();
    let _ = exec
        .assemble(&format!("// same kernel, other layout\n{text}"))
        .unwrap();
    let s = exec.kernel_cache_stats();
    assert_eq!((s.compiles, s.hits, s.entries), (1, 1, 1));
}

#[test]
fn stats_count_compiles_hits_and_launch_paths() {
    let exec = Executor::cpu();
    let map = ".kernel twice\n.param .buf.f32 y .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.f32 %v, y[%gid];\n    add.f32 %v, %v, %v;\n    st.f32 y[%gid], %v;\n";
    // Renamed registers: the same canonical form, so a cache hit.
    let renamed = map.replace("%v", "%value");
    let generic = ".kernel rev\n.param .buf.f32 y .rw\n.shared .f32 t[64]\n    ld.f32 %v, y[%gid];\n    st.f32 t[%tid.x], %v;\n    barrier;\n    sub.u32 %j, 63, %tid.x;\n    ld.f32 %w, t[%j];\n    st.f32 y[%gid], %w;\n";
    let y = exec.from_slice(&[1.0f32; 64]).unwrap();
    let n: hologram_core::KernelArg = hologram_isa::semantics::Value::U32(64).into();
    for text in [map, renamed.as_str()] {
        let k = exec.assemble(text).unwrap();
        exec.launch(&k, &LaunchConfig::linear(1, 64), &[y.arg(), n.clone()])
            .unwrap();
    }
    let k = exec.assemble(generic).unwrap();
    exec.launch(&k, &LaunchConfig::linear(1, 64), &[y.arg()])
        .unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![4.0f32; 64]);
    let s = exec.stats();
    assert_eq!((s.kernels.compiles, s.kernels.hits), (2, 1));
    assert_eq!(s.backend.compiles, 2, "{s}");
    assert!(s.backend.code_bytes > 0);
    assert_eq!(
        (
            s.backend.library_launches,
            s.backend.generic_launches,
            s.launches
        ),
        (2, 1, 3),
        "{s}"
    );
}

#[test]
fn out_of_bounds_store_leaves_every_buffer_intact() {
    let exec = Executor::cpu();
    let kernel = exec
        .assemble(
            ".kernel spill\n.param .buf.f32 a .rw\n.param .buf.f32 b .rw\n.param .buf.f32 c .rw\n.param .u32 shift\n    mov.u32 %i, %gid;\n    add.u32 %j, %i, shift;\n    st.f32 b[%j], -1.0;\n",
        )
        .unwrap();
    let init: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let (a, b, c) = (
        exec.from_slice(&init).unwrap(),
        exec.from_slice(&init).unwrap(),
        exec.from_slice(&init).unwrap(),
    );
    // Each block of 64 lanes has some lanes past the end of `b`.
    let err = exec
        .launch(
            &kernel,
            &LaunchConfig::linear(4, 64),
            &[a.arg(), b.arg(), c.arg(), Value::U32(8).into()],
        )
        .unwrap_err();
    match err {
        Error::Backend(BackendError::OutOfBounds {
            kernel,
            array,
            index,
            len,
        }) => {
            assert_eq!((kernel.as_str(), array.as_str(), len), ("spill", "b", 64));
            assert!(index >= 64, "{index}");
        }
        other => panic!("expected OutOfBounds, got {other}"),
    }
    for buf in [&a, &b, &c] {
        assert_eq!(buf.to_vec().unwrap(), init, "a buffer changed");
    }
}

#[test]
fn launch_argument_errors_are_clear() {
    let exec = Executor::cpu();
    let kernel = exec
        .assemble(".kernel k\n.param .buf.f32 y .rw\n.param .u32 n\n    exit;\n")
        .unwrap();
    let y = exec.allocate::<f32>(4).unwrap();
    let cfg = LaunchConfig::linear(1, 1);
    let msg = exec
        .launch(&kernel, &cfg, &[y.arg()])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("takes 2 arguments (y, n), got 1"), "{msg}");
    let msg = exec
        .launch(&kernel, &cfg, &[y.arg(), Value::F32(1.0).into()])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("'n' must be a u32 scalar, got f32"), "{msg}");
    let msg = exec
        .launch(
            &kernel,
            &LaunchConfig::linear(1, 2048),
            &[y.arg(), Value::U32(1).into()],
        )
        .unwrap_err()
        .to_string();
    assert!(msg.contains("exceeds the device limit of 1024"), "{msg}");
    let z = exec.allocate::<u8>(6).unwrap();
    let msg = exec
        .launch(&kernel, &cfg, &[z.arg(), Value::U32(1).into()])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("4-byte element boundaries"), "{msg}");
}

#[test]
fn a_gather_map_runs_natively_and_reports_an_index_past_a_small_input() {
    // `y[i] = x[i] + b[i / 4]`: `b` holds a quarter of the elements (a broadcast operand).
    let exec = Executor::cpu();
    let kernel = exec
        .assemble(
            ".kernel bias\n.param .buf.f32 x\n.param .buf.f32 b\n.param .buf.f32 y .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    shr.u32 %j, %gid, 2;\n    ld.f32 %v, x[%gid];\n    ld.f32 %w, b[%j];\n    add.f32 %s, %v, %w;\n    st.f32 y[%gid], %s;\n",
        )
        .unwrap();
    let xs: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let bs: Vec<f32> = (0..64).map(|i| 1000.0 * i as f32).collect();
    let (x, y) = (
        exec.from_slice(&xs).unwrap(),
        exec.from_slice(&[0.0f32; 256]).unwrap(),
    );
    let b = exec.from_slice(&bs).unwrap();
    let before = exec.stats().backend;
    let n = |v: u32| -> hologram_core::KernelArg { Value::U32(v).into() };
    exec.launch(
        &kernel,
        &LaunchConfig::linear(1, 256),
        &[x.arg(), b.arg(), y.arg(), n(256)],
    )
    .unwrap();
    let want: Vec<f32> = (0..256).map(|i| xs[i] + bs[i / 4]).collect();
    assert_eq!(y.to_vec().unwrap(), want);
    let after = exec.stats().backend;
    assert_eq!(
        after.library_launches - before.library_launches,
        1,
        "{after}"
    );
    // Only 32 elements of `b`: indexes 32.. are out of bounds, and the launch says so.
    let short = exec.from_slice(&bs[..32]).unwrap();
    let err = exec
        .launch(
            &kernel,
            &LaunchConfig::linear(1, 256),
            &[x.arg(), short.arg(), y.arg(), n(256)],
        )
        .unwrap_err();
    match err {
        Error::Backend(BackendError::OutOfBounds { array, len, .. }) => {
            assert_eq!((array.as_str(), len), ("b", 32));
        }
        other => panic!("expected OutOfBounds, got {other}"),
    }
}
