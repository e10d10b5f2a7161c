//! Transcendentals on the wgpu backend (lavapipe in CI) against the CPU backend, over wide input
//! ranges: the largest difference in ulps must stay within the bounds documented in
//! crates/hologram-backends/src/wgpu/README.md. Everything else is bit-exact (conformance).

use std::sync::Arc;

use hologram_backends::wgpu::adapter::{AdapterOptions, Api};
use hologram_backends::{Backend, BufferArg, CpuBackend, KernelArg, LaunchConfig, WgpuBackend};

/// (operation, input range, bound in f32 ulps, log-uniform sampling).
const CASES: &[(&str, f32, f32, u32, bool)] = &[
    ("exp", -87.0, 88.0, 2, false),
    ("exp2", -126.0, 127.0, 2, false),
    ("log", 1e-30, 1e30, 2, true),
    ("log2", 1e-30, 1e30, 3, true),
    ("log10", 1e-30, 1e30, 3, true),
    ("sqrt", 1e-30, 1e30, 0, true),
    ("rsqrt", 1e-30, 1e30, 1, true),
    ("sin", -100.0, 100.0, 3, false),
    ("cos", -100.0, 100.0, 3, false),
    ("tan", -100.0, 100.0, 4, false),
    ("tanh", -10.0, 10.0, 3, false),
    ("sigmoid", -20.0, 20.0, 4, false),
    ("erf", -5.0, 5.0, 2, false),
    ("pow", 1e-3, 1e3, 2, true),
];

const N: usize = 1 << 16;

fn inputs(lo: f32, hi: f32, log: bool) -> Vec<f32> {
    (0..N)
        .map(|i| {
            let t = (i as f64 + 0.5) / N as f64;
            if log {
                (lo as f64 * (hi as f64 / lo as f64).powf(t)) as f32
            } else {
                (lo as f64 + (hi as f64 - lo as f64) * t) as f32
            }
        })
        .collect()
}

fn run(b: &dyn Backend, op: &str, x: &[f32], y: &[f32]) -> Vec<f32> {
    let body = if op == "pow" {
        "    pow.f32 %r, %x, %y;\n"
    } else {
        &format!("    {op}.f32 %r, %x;\n")
    };
    let text = format!(
        ".kernel k\n.param .buf.f32 x\n.param .buf.f32 y\n.param .buf.f32 r .rw\n    mov.u32 %i, %gid;\n    ld.f32 %x, x[%i];\n    ld.f32 %y, y[%i];\n{body}    st.f32 r[%i], %r;\n"
    );
    let k = Arc::new(hologram_isa::assemble(&text).expect("assemble"));
    let c = b.compile(&k).expect("compile");
    let buf = |data: &[f32]| {
        let m = b.allocate(4 * N).expect("allocate");
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        b.copy_in(&m, 0, &bytes).expect("copy in");
        m
    };
    let (mx, my, mr) = (buf(x), buf(y), buf(&vec![0.0; N]));
    let args = [mx, my, mr.clone()].map(|m| KernelArg::Buffer(BufferArg::whole(m)));
    b.launch(&c, &LaunchConfig::for_elements(N as u64, 256), &args)
        .expect("launch");
    b.synchronize().expect("sync");
    let mut out = vec![0u8; 4 * N];
    b.copy_out(&mr, 0, &mut out).expect("copy out");
    out.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn ulps(a: f32, b: f32) -> u32 {
    if a.is_nan() && b.is_nan() || a == b {
        return 0;
    }
    if a.is_nan() || b.is_nan() {
        return u32::MAX;
    }
    let o = |v: f32| {
        let bits = v.to_bits() as i64;
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    (o(a) - o(b)).unsigned_abs().min(u32::MAX as u64) as u32
}

#[test]
fn transcendentals_match_the_cpu_within_documented_ulps() {
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    let gpu = match WgpuBackend::with_options(&opts) {
        Ok(g) => g,
        Err(e) if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("no Vulkan adapter ({e}); install mesa-vulkan-drivers libvulkan1"),
    };
    let cpu = CpuBackend::new();
    let mut report = Vec::new();
    let mut failed = false;
    for &(op, lo, hi, bound, log) in CASES {
        let x = inputs(lo, hi, log);
        let y: Vec<f32> = (0..N)
            .map(|i| -5.0 + 10.0 * (i * 7919 % N) as f32 / N as f32)
            .collect();
        let (g, c) = (run(&gpu, op, &x, &y), run(&cpu, op, &x, &y));
        let (worst, at) = (0..N)
            .map(|i| (ulps(g[i], c[i]), i))
            .max()
            .unwrap_or((0, 0));
        report.push(format!(
            "{op:<8} max {worst} ulp (bound {bound}) at x = {:e}{}: wgpu {:e}, cpu {:e}",
            x[at],
            if op == "pow" {
                format!(", y = {}", y[at])
            } else {
                String::new()
            },
            g[at],
            c[at]
        ));
        failed |= worst > bound;
    }
    println!("on {}:\n{}", gpu.info().name, report.join("\n"));
    assert!(!failed, "{}", report.join("\n"));
}
