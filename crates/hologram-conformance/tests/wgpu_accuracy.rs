//! Transcendentals on the wgpu backend (lavapipe in CI) against the CPU backend, over wide input
//! ranges: the largest difference in ulps must stay within the bounds documented in
//! crates/hologram-backends/src/wgpu/README.md. Everything else is bit-exact (conformance).

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
    let k = hologram_compiler::Canonical::assemble(&text).expect("assemble");
    let c = b.compile(&k).expect("compile");
    let n = x.len();
    let buf = |data: &[f32]| {
        let m = b.allocate(4 * n).expect("allocate");
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        b.copy_in(&m, 0, &bytes).expect("copy in");
        m
    };
    let (mx, my, mr) = (buf(x), buf(y), buf(&vec![0.0; n]));
    let args = [mx, my, mr.clone()].map(|m| KernelArg::Buffer(BufferArg::whole(m)));
    b.launch(&c, &LaunchConfig::for_elements(n as u64, 256), &args)
        .expect("launch");
    b.synchronize().expect("sync");
    let mut out = vec![0u8; 4 * n];
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

fn open() -> Option<WgpuBackend> {
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    match WgpuBackend::with_options(&opts) {
        Ok(g) => Some(g),
        Err(e) if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("no Vulkan adapter ({e}); install mesa-vulkan-drivers libvulkan1"),
    }
}

#[test]
fn transcendentals_match_the_cpu_within_documented_ulps() {
    let Some(gpu) = open() else { return };
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

/// sin, cos and tan against the host's f64 functions rounded to f32 (at most half an ulp from
/// the exact result, but for rare double roundings): 131072 inputs evenly over [-1e4, 1e4], 16384
/// log-uniform magnitudes from 1e4 to f32::MAX of both signs, the f32 values nearest to 4000
/// multiples of pi/2 (where the reduction cancels most), and zeros, subnormals, infinities and
/// NaN. With f64 on the adapter the reduction is exact over the whole range; without it
/// (`HOLOGRAM_WGPU_CORE_ONLY=1`) only |x| <= 8192 is covered (README: accuracy).
#[test]
fn sin_cos_tan_match_f64_references_over_the_whole_range() {
    let Some(gpu) = open() else { return };
    let core_only = std::env::var("HOLOGRAM_WGPU_CORE_ONLY").as_deref() == Ok("1");
    let (limit, bound) = if core_only { (8192.0f64, 4) } else { (1e4, 1) };
    let mut x: Vec<f32> = (0..1usize << 17)
        .map(|i| (-limit + 2.0 * limit * (i as f64 + 0.5) / (1u64 << 17) as f64) as f32)
        .collect();
    x.extend((1..4000).map(|k| (k as f64 * std::f64::consts::FRAC_PI_2) as f32));
    x.extend([
        0.0, -0.0, 1e-45, -1e-45, 1e-38, 1e-20, -3e-8, 8192.0, -8191.5,
    ]);
    if !core_only {
        x.extend((0..1usize << 14).map(|i| {
            let t = (i as f64 + 0.5) / (1u64 << 14) as f64;
            let v = (1e4f64 * (f32::MAX as f64 / 1e4).powf(t)) as f32;
            if i % 2 == 0 {
                v
            } else {
                -v
            }
        }));
        x.extend([f32::MAX, -f32::MAX, 1e22, 1.5e38, 4.2e8, 4.3e8]);
    }
    x.retain(|v| v.abs() as f64 <= limit || !core_only);
    // The kernel has no guard: fill up to whole blocks of 256 (small values), then the specials.
    while (x.len() + 3) % 256 != 0 {
        x.push(x.len() as f32 * 1e-3);
    }
    x.extend([f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    let y = vec![0.0; x.len()];
    let mut report = Vec::new();
    let mut failed = false;
    for (op, f) in [
        ("sin", f64::sin as fn(f64) -> f64),
        ("cos", f64::cos),
        ("tan", f64::tan),
    ] {
        let g = run(&gpu, op, &x, &y);
        let want: Vec<f32> = x.iter().map(|&v| f(v as f64) as f32).collect();
        // Without f64, Cephes' f32 reduction keeps an absolute error (about 2^-22 near the
        // zeros of sin and cos, many ulps of a tiny result): ulps count only for results of
        // magnitude 1/64 to 64 there, and sin/cos must stay within 2.5e-7 absolute.
        let counted =
            |i: usize| !core_only || (want[i].abs() >= 1.0 / 64.0 && want[i].abs() <= 64.0);
        let (worst, at) = (0..x.len())
            .filter(|&i| counted(i))
            .map(|i| (ulps(g[i], want[i]), i))
            .max()
            .unwrap_or((0, 0));
        let abs = (0..x.len())
            .filter(|&i| x[i].is_finite() && want[i].abs() <= 1.0)
            .map(|i| (g[i] as f64 - f(x[i] as f64)).abs())
            .fold(0.0f64, f64::max);
        report.push(format!(
            "{op:<4} max {worst} ulp (bound {bound}{}), max abs error {abs:e} (where |result| <= 1), worst ulp at x = {:e}: wgpu {:e}, f64 {:e}",
            if core_only { ", for results of magnitude 1/64 to 64" } else { "" },
            x[at], g[at], want[at]
        ));
        failed |= worst > bound || (core_only && op != "tan" && abs > 2.5e-7);
        // Zeros give sin/tan the zero's sign and cos 1 (bit for bit); NaN and infinities NaN.
        let n = x.len();
        failed |= g[n - 3..].iter().any(|v| !v.is_nan());
        failed |= (0..n).any(|i| x[i] == 0.0 && g[i].to_bits() != want[i].to_bits());
    }
    println!(
        "on {} ({} inputs{}):\n{}",
        gpu.info().name,
        x.len(),
        if core_only { ", without f64" } else { "" },
        report.join("\n")
    );
    assert!(!failed, "{}", report.join("\n"));
}
