//! Probes of float behaviour that WGSL leaves to the device, run once per adapter and process.
//!
//! WGSL (like Vulkan) lets a device flush `f32` subnormal operands and results to zero, and
//! wgpu has no control to turn that off. The probe runs a small Atlas ISA kernel through this
//! backend's own code generator: products, sums and a comparison whose exact results are
//! subnormal or need subnormal operands. If any comes back different, the device flushes.
//! `HOLOGRAM_WGPU_ASSUME_FTZ=1` makes the backend report flushing without probing (for testing
//! how callers handle such devices on any adapter).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::backend::{Backend, BufferArg, KernelArg, LaunchConfig};
use crate::error::{BackendError, Result};

const PROBE: &str = "// f32 subnormal results and operands
.kernel hg_probe_f32_subnormals
.param .buf.f32 x
.param .buf.f32 out .rw
    ld.f32 %a, x[0];
    ld.f32 %b, x[1];
    ld.f32 %t, x[2];
    ld.f32 %c, x[3];
    mul.f32 %r, %a, %b;
    st.f32 out[0], %r;
    mul.f32 %r, %t, %c;
    st.f32 out[1], %r;
    add.f32 %r, %t, %a;
    st.f32 out[2], %r;
    setp.gt.f32 %p, %t, 0.0;
    selp.f32 %r, 1.0, 0.0, %p;
    st.f32 out[3], %r;
";

/// Inputs: the smallest normal, 1/2, the smallest subnormal, 2.
const INPUTS: [u32; 4] = [0x0080_0000, 0x3f00_0000, 0x0000_0001, 0x4000_0000];
/// Exact results: 2^-127, 2^-148, 2^-126 + 2^-149, 1.0.
const EXPECTED: [u32; 4] = [0x0040_0000, 0x0000_0002, 0x0080_0001, 0x3f80_0000];

/// Answers per adapter identity (name, backend, driver), for this process.
fn cache() -> &'static Mutex<HashMap<String, bool>> {
    static CACHE: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether the device behind `backend` (identified by `target`) flushes f32 subnormals.
pub(crate) fn flushes_f32_subnormals(backend: &dyn Backend, target: &str) -> Result<bool> {
    if std::env::var("HOLOGRAM_WGPU_ASSUME_FTZ").as_deref() == Ok("1") {
        return Ok(true);
    }
    if let Some(&known) = cache()
        .lock()
        .ok()
        .and_then(|c| c.get(target).copied())
        .as_ref()
    {
        return Ok(known);
    }
    let got = run_probe(backend)?;
    let flushes = got != EXPECTED;
    if flushes {
        tracing::info!(
            device = target,
            ?got,
            "the device flushes f32 subnormals to zero"
        );
    }
    if let Ok(mut c) = cache().lock() {
        c.insert(target.to_string(), flushes);
    }
    Ok(flushes)
}

fn run_probe(backend: &dyn Backend) -> Result<[u32; 4]> {
    let kernel =
        hologram_compiler::Canonical::assemble(PROBE).map_err(|e| BackendError::Compile {
            kernel: "hg_probe_f32_subnormals".into(),
            log: e.to_string(),
        })?;
    let compiled = backend.compile(&kernel)?;
    let input: Vec<u8> = INPUTS.iter().flat_map(|w| w.to_le_bytes()).collect();
    let x = backend.allocate(input.len())?;
    backend.copy_in(&x, 0, &input)?;
    let out = backend.allocate(input.len())?;
    backend.copy_in(&out, 0, &[0u8; 16])?;
    backend.launch(
        &compiled,
        &LaunchConfig::linear(1, 1),
        &[
            KernelArg::Buffer(BufferArg::whole(x)),
            KernelArg::Buffer(BufferArg::whole(out.clone())),
        ],
    )?;
    let mut bytes = [0u8; 16];
    backend.copy_out(&out, 0, &mut bytes)?;
    let mut words = [0u32; 4];
    for (w, c) in words.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Ok(words)
}
