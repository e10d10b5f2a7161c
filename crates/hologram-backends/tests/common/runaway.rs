//! Runaway launches, written once for every backend: an endless loop ends with
//! `LaunchTimeout`, lanes of a block at different barriers end with `BarrierDivergence`, and in
//! both cases the backend stays usable: the next launch computes the right result.

use std::time::Duration;

use hologram_backends::{Backend, BackendError, BufferArg, KernelArg, LaunchConfig, Memory};

/// Short enough that a wgpu lane's budget (2^26 blocks per second) runs out before lavapipe's
/// loop limiter (65535 iterations) cuts the loop.
const SHORT: Duration = Duration::from_micros(200);

const ENDLESS: &str = ".kernel endless\n.param .buf.u32 stop\n.param .buf.u32 y .rw\n    ld.u32 %s, stop[0];\n    mov.u32 %x, 0;\nSPIN:\n    add.u32 %x, %x, 1;\n    setp.eq.u32 %p, %x, %s;\n@%p bra DONE;\n    bra SPIN;\nDONE:\n    st.u32 y[%gid], %x;\n";

const DIVERGENT: &str = ".kernel divergent\n.param .buf.u32 y .rw\n.scratch .u32 pick[1]\n    and.u32 %odd, %tid.x, 1;\n    st.u32 pick[0], %odd;\n    ld.u32 %q, pick[0];\n    setp.eq.u32 %p, %q, 0;\n@%p bra EVEN;\n    barrier;\n    st.u32 y[%gid], 1;\n    exit;\nEVEN:\n    barrier;\n    st.u32 y[%gid], 2;\n";

const COUNT: &str = ".kernel count\n.param .buf.u32 y .rw\n.shared .u32 t[64]\n    mov.u32 %c, 100;\n    mov.u32 %k, 0;\nL:\n    add.u32 %k, %k, 1;\n    loop %c, L;\n    st.u32 t[%tid.x], %k;\n    barrier;\n    xor.u32 %r, %tid.x, 1;\n    ld.u32 %v, t[%r];\n    add.u32 %v, %v, %gid;\n    st.u32 y[%gid], %v;\n";

fn buffer(b: &dyn Backend, words: &[u32]) -> Memory {
    let m = b.allocate(4 * words.len()).expect("allocate");
    b.copy_in(&m, 0, bytemuck::cast_slice(words))
        .expect("copy in");
    m
}

fn read(b: &dyn Backend, m: &Memory, n: usize) -> Vec<u32> {
    let mut out = vec![0u32; n];
    b.copy_out(m, 0, bytemuck::cast_slice_mut(&mut out))
        .expect("copy out");
    out
}

fn run(
    b: &dyn Backend,
    text: &str,
    config: &LaunchConfig,
    bufs: &[&Memory],
) -> Result<(), BackendError> {
    let k = hologram_compiler::Canonical::assemble(text).expect("assemble");
    let c = b.compile(&k).expect("compile");
    let args: Vec<KernelArg> = bufs
        .iter()
        .map(|m| KernelArg::Buffer(BufferArg::whole((*m).clone())))
        .collect();
    b.launch(&c, config, &args).and_then(|()| b.synchronize())
}

/// The backend computes `COUNT` right (after whatever failed before).
fn still_usable(b: &dyn Backend) {
    let y = buffer(b, &[0; 128]);
    run(b, COUNT, &LaunchConfig::linear(2, 64), &[&y]).expect("a sound launch after a failed one");
    let want: Vec<u32> = (0..128u32).map(|g| 100 + g).collect();
    assert_eq!(read(b, &y, 128), want);
}

/// Runs every check on `b`.
pub fn runaway_launches_end_with_errors(b: &dyn Backend) {
    still_usable(b);

    let stop = buffer(b, &[0]);
    let y = buffer(b, &[7; 64]);
    let config = LaunchConfig::linear(2, 32).with_timeout(SHORT);
    match run(b, ENDLESS, &config, &[&stop, &y]) {
        Err(BackendError::LaunchTimeout {
            kernel,
            seconds,
            stuck: false,
        }) => {
            assert_eq!(kernel, "endless");
            assert!((seconds - SHORT.as_secs_f64()).abs() < 1e-9, "{seconds}");
        }
        other => panic!("expected a launch timeout, got {other:?}"),
    }
    assert_eq!(
        read(b, &y, 64),
        vec![7; 64],
        "the stopped lanes stored nothing"
    );
    still_usable(b);

    let y = buffer(b, &[0; 128]);
    match run(b, DIVERGENT, &LaunchConfig::linear(2, 64), &[&y]) {
        Err(BackendError::BarrierDivergence { kernel, pcs, .. }) => {
            assert_eq!(kernel, "divergent");
            assert_eq!(pcs.len(), 2, "{pcs:?}");
            assert_ne!(pcs[0], pcs[1]);
        }
        other => panic!("expected barrier divergence, got {other:?}"),
    }
    still_usable(b);
}
