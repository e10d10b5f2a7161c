//! The whole conformance suite on the wgpu backend through Vulkan. In CI that is Mesa's
//! lavapipe (a software Vulkan driver; `scripts/test.sh` installs it), which this test allows
//! explicitly; on a machine with a GPU, the hardware adapter is preferred.
//!
//! Programs the adapter cannot run are listed below with the reason. Every other program must
//! pass, with the same results as the CPU backend.

use hologram_backends::wgpu::adapter::{AdapterOptions, Api};
use hologram_backends::{Backend, WgpuBackend};
use hologram_conformance::Outcome;

/// Rejected on every adapter: WGSL and Vulkan's GLSL.std.450 have no f64 transcendental
/// functions (exp, log, sin, pow...), so kernels using them are `Unsupported`.
const UNSUPPORTED: &[(&str, &str)] = &[("transc_f64", "f64 exp"), ("transc_special", "f64 exp")];

/// Unsupported on software adapters only: Mesa's lavapipe stops a shader's loops after 65535
/// iterations in all, and the backend reports such launches instead of returning the wrong
/// result. Hardware adapters run them.
const LOOP_CUT_ON_SOFTWARE: &[&str] = &["longloop_70000", "longloop_nested_300"];

/// Programs with `"requires": ["f32_subnormals"]` are also unsupported on devices that flush f32
/// subnormals (`Backend::flushes_f32_subnormals`; lavapipe keeps them).
///
/// Rejected only on adapters without 64-bit shader features (`SHADER_INT64`, `SHADER_F64`,
/// `SHADER_INT64_ATOMIC_ALL_OPS`); lavapipe and NVIDIA's Vulkan driver have them.
const NEEDS_64_BIT_FEATURES: &[&str] = &["64-bit", "f64 arithmetic"];

fn open() -> Option<WgpuBackend> {
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    match WgpuBackend::with_options(&opts) {
        Ok(b) => Some(b),
        Err(e) => {
            if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") {
                eprintln!("skipping the wgpu conformance test: {e}");
                return None;
            }
            panic!(
                "no Vulkan adapter for the wgpu conformance test: {e}\n\
                 install Mesa's lavapipe (apt-get install mesa-vulkan-drivers libvulkan1; \
                 scripts/test.sh does) or set HOLOGRAM_WGPU_TESTS=skip"
            );
        }
    }
}

#[test]
fn conformance_suite_on_wgpu_vulkan() {
    let Some(backend) = open() else { return };
    let suite =
        hologram_conformance::Suite::load(hologram_conformance::default_dir()).expect("load suite");
    let report = suite.run(&backend);
    println!("{}", report.summary());
    let mut problems = Vec::new();
    for r in &report.results {
        let listed = UNSUPPORTED.iter().find(|(n, _)| *n == r.name);
        match (&r.outcome, listed) {
            (Outcome::Unsupported(why), Some((_, reason))) => {
                if !why.contains(reason) {
                    problems.push(format!(
                        "{}: unsupported for '{why}', listed as '{reason}'",
                        r.name
                    ));
                }
            }
            (Outcome::Unsupported(why), None)
                if backend.is_software()
                    && LOOP_CUT_ON_SOFTWARE.contains(&r.name.as_str())
                    && why.contains("65535") => {}
            (Outcome::Unsupported(why), None) => {
                // Devices that flush f32 subnormals skip the tests that require them.
                let ftz = backend.flushes_f32_subnormals()
                    && why.contains("flushes f32 subnormals")
                    && r.name.ends_with("_subnormal");
                if !ftz && !NEEDS_64_BIT_FEATURES.iter().any(|f| why.contains(f)) {
                    problems.push(format!("{}: unexpectedly unsupported: {why}", r.name));
                }
            }
            (Outcome::Failed(why), _) => problems.push(format!("{}: FAILED: {why}", r.name)),
            (Outcome::Passed, Some(_)) => {
                problems.push(format!("{}: passed but is listed as unsupported", r.name))
            }
            (Outcome::Passed, None) => {}
        }
    }
    assert!(
        problems.is_empty(),
        "on {}:\n{}\n\n{}",
        backend.info().name,
        problems.join("\n"),
        report.summary()
    );
}

#[test]
fn lavapipe_keeps_f32_subnormals() {
    let Some(b) = open() else { return };
    // Mesa's lavapipe keeps subnormals; the probe must say so (unless told to assume otherwise).
    if b.is_software() && std::env::var("HOLOGRAM_WGPU_ASSUME_FTZ").as_deref() != Ok("1") {
        assert!(
            !b.flushes_f32_subnormals(),
            "{} reported as flushing",
            b.info().name
        );
    }
}

#[test]
fn software_adapters_need_an_explicit_request() {
    // Only meaningful where the machine has no hardware Vulkan adapter (CI: lavapipe only).
    if std::env::var(hologram_backends::wgpu::adapter::ALLOW_SOFTWARE_ENV).is_ok() {
        return;
    }
    let hardware = hologram_backends::wgpu::adapter::list_adapters()
        .iter()
        .any(|a| !a.software && a.backend == "Vulkan");
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: false,
    };
    match WgpuBackend::with_options(&opts) {
        Ok(b) => assert!(hardware, "opened {} without being allowed", b.info().name),
        Err(e) => {
            assert!(!hardware, "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("HOLOGRAM_WGPU_ALLOW_SOFTWARE") || msg.contains("no vulkan adapter"),
                "{msg}"
            );
        }
    }
}

#[test]
fn metal_and_dx12_say_where_they_exist() {
    for api in [Api::Metal, Api::Dx12] {
        let here = (api == Api::Metal && cfg!(target_os = "macos"))
            || (api == Api::Dx12 && cfg!(target_os = "windows"));
        if here {
            continue;
        }
        let err = WgpuBackend::with_options(&AdapterOptions {
            api,
            allow_software: true,
        })
        .expect_err("this OS has no such API");
        assert!(err.to_string().contains("exists only on"), "{err}");
    }
}

#[test]
fn pipelines_are_cached_and_out_of_bounds_is_an_error() {
    use hologram_backends::{BackendError, BufferArg, KernelArg, LaunchConfig};
    use hologram_isa::semantics::Value;
    let Some(b) = open() else { return };
    let k = hologram_compiler::Canonical::assemble(
            ".kernel k\n.param .buf.u32 y .rw\n.param .u32 n\n    add.u32 %i, %gid, n;\n    st.u32 y[%i], %gid;\n",
        ).expect("assemble");
    let c = b.compile(&k).expect("compile");
    let y = b.allocate(4 * 64).expect("allocate");
    let args = |n: u32| {
        [
            KernelArg::Buffer(BufferArg::whole(y.clone())),
            KernelArg::Scalar(Value::U32(n)),
        ]
    };
    b.launch(&c, &LaunchConfig::linear(2, 32), &args(0))
        .expect("in bounds");
    let before = b.pipeline_cache_stats();
    // Launches are asynchronous: the error comes with the next synchronization, as on CUDA.
    let err = b
        .launch(&c, &LaunchConfig::linear(2, 32), &args(1))
        .and_then(|()| b.synchronize())
        .expect_err("lane 63 stores y[64]");
    assert!(
        matches!(&err, BackendError::OutOfBounds { array, index: 64, len: 64, .. } if array == "y"),
        "{err}"
    );
    let after = b.pipeline_cache_stats();
    assert_eq!(
        after.misses, before.misses,
        "the second launch built a pipeline"
    );
    assert_eq!(after.hits, before.hits + 1);
    let mut out = vec![0u8; 4 * 64];
    b.copy_out(&y, 0, &mut out).expect("copy out");
    // Unaligned copies work too.
    b.copy_in(&y, 5, &[1, 2, 3]).expect("unaligned copy in");
    let mut three = [0u8; 3];
    b.copy_out(&y, 5, &mut three).expect("unaligned copy out");
    assert_eq!(three, [1, 2, 3]);
}

#[test]
fn a_launch_error_waits_for_the_next_synchronization() {
    use hologram_backends::{BackendError, BufferArg, KernelArg, LaunchConfig};
    let Some(b) = open() else { return };
    let k = hologram_compiler::Canonical::assemble(
        ".kernel spill\n.param .buf.u32 y .rw\n    add.u32 %i, %gid, 1;\n    st.u32 y[%i], %gid;\n",
    )
    .expect("assemble");
    let c = b.compile(&k).expect("compile");
    let y = b.allocate(4 * 8).expect("allocate");
    b.copy_in(&y, 0, &[0; 32]).expect("copy in");
    let args = [KernelArg::Buffer(BufferArg::whole(y.clone()))];
    b.launch(&c, &LaunchConfig::linear(1, 8), &args)
        .expect("queued");
    // A sound launch after it, and a copy into the device that reads the buffer first (an
    // unaligned edge): neither reports the earlier launch's error.
    b.launch(&c, &LaunchConfig::linear(1, 4), &args)
        .expect("queued");
    b.copy_in(&y, 1, &[9]).expect("unaligned copy in");
    match b.synchronize() {
        Err(BackendError::OutOfBounds {
            kernel,
            index: 8,
            len: 8,
            ..
        }) => assert_eq!(kernel, "spill"),
        other => panic!("expected the out-of-bounds store, got {other:?}"),
    }
    b.synchronize().expect("reported once");
    let mut out = [0u8; 4];
    b.copy_out(&y, 0, &mut out).expect("copy out");
    assert_eq!(out, [0, 9, 0, 0], "no lane stores word 0; the copy's byte");
}

#[test]
fn a_lane_that_exits_before_a_barrier_stays_ended() {
    use hologram_backends::{BufferArg, KernelArg, LaunchConfig};
    let Some(b) = open() else { return };
    // `exit` and the barrier share a basic block; odd lanes (by data) must not run past it.
    let k = hologram_compiler::Canonical::assemble(
            ".kernel k\n.param .buf.u32 flags\n.param .buf.u32 out .rw\n.shared .u32 tile[64]\n    mov.u32 %t, %tid.x;\n    ld.u32 %f, flags[%t];\n    setp.eq.u32 %p, %f, 1;\n@%p exit;\n    st.u32 tile[%t], %t;\n    barrier;\n    st.u32 out[%t], 7;\n",
        ).expect("assemble");
    let c = b.compile(&k).expect("compile");
    let flags: Vec<u8> = (0..64u32).flat_map(|i| (i % 2).to_le_bytes()).collect();
    let f = b.allocate(4 * 64).expect("allocate");
    b.copy_in(&f, 0, &flags).expect("copy");
    let out = b.allocate(4 * 64).expect("allocate");
    b.copy_in(&out, 0, &[0u8; 256]).expect("copy");
    let args = [
        KernelArg::Buffer(BufferArg::whole(f)),
        KernelArg::Buffer(BufferArg::whole(out.clone())),
    ];
    b.launch(&c, &LaunchConfig::linear(1, 64), &args)
        .expect("launch");
    let mut got = vec![0u8; 256];
    b.copy_out(&out, 0, &mut got).expect("copy out");
    for i in 0..64 {
        let v = u32::from_le_bytes([got[4 * i], got[4 * i + 1], got[4 * i + 2], got[4 * i + 3]]);
        assert_eq!(v, if i % 2 == 0 { 7 } else { 0 }, "lane {i}");
    }
}
