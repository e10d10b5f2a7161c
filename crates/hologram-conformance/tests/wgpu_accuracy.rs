//! Transcendentals on the wgpu backend (lavapipe in CI) against the CPU backend, over wide input
//! ranges: the largest difference in ulps must stay within the bounds documented in
//! crates/hologram-backends/src/wgpu/README.md. Everything else is bit-exact (conformance); the
//! fma emulation is also checked bit for bit here over many operands near the exponent limits.

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

/// exp where the range tests do not reach: results down to the subnormals and to 0 (x from -110
/// to -87), the overflow and underflow thresholds and their neighbours, tiny arguments (the
/// `1 + x` path), and inf, -inf, NaN and both zeros; within 1 ulp of the CPU (on devices that
/// flush f32 subnormals, only where the CPU's result is normal or 0).
#[test]
fn exp_edges_match_the_cpu() {
    let Some(gpu) = open() else { return };
    let cpu = CpuBackend::new();
    let mut x = inputs(-110.0, -87.0, false);
    for edge in [
        88.72283f32,
        88.72284,
        88.7229,
        89.0,
        -103.97207,
        -103.97208,
        -104.0,
        104.0,
    ] {
        x.extend([
            edge,
            f32::from_bits(edge.to_bits() - 1),
            f32::from_bits(edge.to_bits() + 1),
        ]);
    }
    x.extend([
        0.0,
        -0.0,
        1e-5,
        -1e-5,
        2f32.powi(-13),
        -(2f32.powi(-13)),
        1e-30,
        -1e-30,
    ]);
    x.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        0.34657,
        -0.34658,
    ]);
    // `run` launches whole blocks of 256 lanes and its kernel has no bounds test.
    x.resize(x.len().next_multiple_of(256), 1.0);
    let y = vec![0.0; x.len()];
    let (g, c) = (run(&gpu, "exp", &x, &y), run(&cpu, "exp", &x, &y));
    let ftz = gpu.flushes_f32_subnormals();
    let bad: Vec<String> = (0..x.len())
        .filter(|&i| !(ftz && c[i] != 0.0 && c[i].abs() < f32::MIN_POSITIVE))
        .filter(|&i| ulps(g[i], c[i]) > 1)
        .map(|i| format!("exp({:e}): wgpu {:e}, cpu {:e}", x[i], g[i], c[i]))
        .take(10)
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
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

/// A float format for [`fma_inputs`]: ISA type, significand bits (without the hidden one),
/// exponent bias.
#[derive(Clone, Copy)]
struct Format {
    ty: &'static str,
    frac: u32,
    bias: i32,
}

const F32_FORMAT: Format = Format {
    ty: "f32",
    frac: 23,
    bias: 127,
};
const F64_FORMAT: Format = Format {
    ty: "f64",
    frac: 52,
    bias: 1023,
};

impl Format {
    fn size(self) -> usize {
        if self.frac == 52 {
            8
        } else {
            4
        }
    }

    /// a * b rounded to the format (bit patterns).
    fn mul(self, a: u64, b: u64) -> u64 {
        if self.frac == 52 {
            (f64::from_bits(a) * f64::from_bits(b)).to_bits()
        } else {
            (f32::from_bits(a as u32) * f32::from_bits(b as u32)).to_bits() as u64
        }
    }

    fn is_nan(self, v: u64) -> bool {
        v & !sign_bit(self) > inf_bits(self)
    }
}

fn inf_bits(f: Format) -> u64 {
    ((2 * f.bias + 1) as u64) << f.frac
}

fn sign_bit(f: Format) -> u64 {
    1u64 << (if f.frac == 52 { 63 } else { 31 })
}

/// splitmix64: deterministic inputs without a dependency.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The bits of a random finite value of `f` with a random sign and significand and unbiased
/// exponent `e` (clamped to the format; below the normal range the value is subnormal).
fn value_bits(f: Format, r: &mut u64, e: i32) -> u64 {
    let emin = 1 - f.bias;
    let e = e.clamp(emin - f.frac as i32, f.bias);
    let frac = next(r) & ((1u64 << f.frac) - 1);
    let sign = if next(r) & 1 == 1 { sign_bit(f) } else { 0 };
    if e >= emin {
        sign | (((e + f.bias) as u64) << f.frac) | frac
    } else {
        // Subnormal: the hidden bit lands below the exponent field.
        let m = ((1u64 << f.frac) | frac) >> (emin - e);
        sign | m.max(1)
    }
}

/// fma operands (as bit patterns) that reach every path of the emulation: exponents anywhere,
/// products near overflow and underflow with a c of their size, huge times tiny operands, c
/// cancelling the rounded product to a few ulps, c far above or below the product.
fn fma_inputs(f: Format, n: usize) -> Vec<[u64; 3]> {
    let mut r = 0x5eed_u64 + f.frac as u64;
    let emax = f.bias;
    let emin = 1 - f.bias;
    let p = f.frac as i32 + 1;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut uni = |lo: i32, hi: i32| lo + (next(&mut r) % (hi - lo + 1) as u64) as i32;
        let (ea, eb, ec);
        match i % 6 {
            0 => {
                ea = uni(emin - p, emax);
                eb = uni(emin - p, emax);
                ec = uni(emin - p, emax);
            }
            1 => {
                ea = uni(emax / 2, emax);
                eb = emax - ea + uni(-3, 2);
                ec = uni(emax - 3, emax);
            }
            2 => {
                let ep = uni(emin - p - 2, emin + 4);
                ea = uni(emin - p + 1, emax);
                eb = ep - ea;
                ec = uni(emin - p, emin + 4);
            }
            3 => {
                ea = uni(emax - 40, emax);
                eb = -ea + uni(-5, 5);
                ec = uni(-60, 5);
            }
            4 => {
                ea = uni(emin, emax);
                eb = uni(emin - ea, emax - ea).clamp(emin - p, emax);
                ec = ea
                    + eb
                    + if i % 12 == 4 {
                        uni(p, 3 * p)
                    } else {
                        -uni(p, 3 * p)
                    };
            }
            _ => {
                ea = uni(emin - p, emax);
                eb = uni(emin - ea - 2, emax - ea).clamp(emin - p, emax);
                ec = 0;
            }
        }
        let a = value_bits(f, &mut r, ea);
        let b = value_bits(f, &mut r, eb);
        let mut c = value_bits(f, &mut r, ec);
        if i % 6 == 5 {
            // c = -RN(a b), moved by up to 3 ulps: the exact result is the product's rounding
            // error, plus or minus a few ulps.
            let sign = sign_bit(f);
            let pr = f.mul(a, b) ^ sign;
            let k = next(&mut r) % 7;
            c = if pr & !sign == 0 || pr & !sign >= inf_bits(f) {
                c
            } else {
                (pr + k).wrapping_sub(3)
            };
        }
        out.push([a, b, c]);
    }
    // Some cases with zeros, infinities and NaN.
    let inf = inf_bits(f);
    let nan = inf | 1 << (f.frac - 1);
    let big = inf - 1;
    let neg = sign_bit(f);
    let two = if f.frac == 52 {
        2f64.to_bits()
    } else {
        2f32.to_bits() as u64
    };
    let specials = [
        [big, big, inf | neg],
        [big, big | neg, inf],
        [big, two, big | neg],
        [big | neg, two, big],
        [inf, 0, 0],
        [0, nan, 0],
        [neg, 0, 0],
        [neg, 0, neg],
        [1, 1, neg],
        [1, neg | 1, 0],
    ];
    let len = out.len();
    for (k, s) in specials.iter().enumerate() {
        out[len - 1 - k] = *s;
    }
    out
}

fn run_fma(b: &dyn Backend, f: Format, inputs: &[[u64; 3]]) -> Option<Vec<u64>> {
    let (ty, size) = (f.ty, f.size());
    let text = format!(
        ".kernel k\n.param .buf.{ty} a\n.param .buf.{ty} b\n.param .buf.{ty} c\n.param .buf.{ty} r .rw\n    mov.u32 %i, %gid;\n    ld.{ty} %a, a[%i];\n    ld.{ty} %b, b[%i];\n    ld.{ty} %c, c[%i];\n    fma.{ty} %r, %a, %b, %c;\n    st.{ty} r[%i], %r;\n"
    );
    let k = hologram_compiler::Canonical::assemble(&text).expect("assemble");
    let c = match b.compile(&k) {
        Ok(c) => c,
        Err(hologram_backends::BackendError::Unsupported { .. }) => return None,
        Err(e) => panic!("compile: {e}"),
    };
    let n = inputs.len();
    let buf = |col: Option<usize>| {
        let m = b.allocate(size * n).expect("allocate");
        let bytes: Vec<u8> = match col {
            Some(col) => inputs
                .iter()
                .flat_map(|v| v[col].to_le_bytes()[..size].to_vec())
                .collect(),
            None => vec![0; size * n],
        };
        b.copy_in(&m, 0, &bytes).expect("copy in");
        m
    };
    let (ma, mb, mc, mr) = (buf(Some(0)), buf(Some(1)), buf(Some(2)), buf(None));
    let args = [ma, mb, mc, mr.clone()].map(|m| KernelArg::Buffer(BufferArg::whole(m)));
    b.launch(&c, &LaunchConfig::for_elements(n as u64, 256), &args)
        .expect("launch");
    b.synchronize().expect("sync");
    let mut out = vec![0u8; size * n];
    b.copy_out(&mr, 0, &mut out).expect("copy out");
    Some(
        out.chunks_exact(size)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..size].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect(),
    )
}

/// fma is one rounding on every adapter: the emulation (Boldo–Melquiond, and the integer path
/// for operands near the exponent limits and subnormals) against the CPU's `mul_add`, bit for
/// bit, over 2^16 operand triples per type. Without f64 (`HOLOGRAM_WGPU_CORE_ONLY=1`) f32 takes
/// the f32-only paths and the f64 kernel is unsupported.
#[test]
fn fma_is_bit_exact_near_the_exponent_limits() {
    let Some(gpu) = open() else { return };
    let cpu = CpuBackend::new();
    let n = 1 << 16;
    let mut report = Vec::new();
    for f in [F32_FORMAT, F64_FORMAT] {
        let inputs = fma_inputs(f, n);
        let Some(g) = run_fma(&gpu, f, &inputs) else {
            report.push(format!("{}: unsupported on this adapter", f.ty));
            continue;
        };
        let c = run_fma(&cpu, f, &inputs).expect("the CPU runs every kernel");
        let bad: Vec<usize> = (0..n)
            .filter(|&i| g[i] != c[i] && !(f.is_nan(g[i]) && f.is_nan(c[i])))
            .collect();
        report.push(format!("{}: {} of {n} differ", f.ty, bad.len()));
        for &i in bad.iter().take(8) {
            report.push(format!(
                "  fma({:#x}, {:#x}, {:#x}): wgpu {:#x}, cpu {:#x}",
                inputs[i][0], inputs[i][1], inputs[i][2], g[i], c[i]
            ));
        }
    }
    println!("on {}:\n{}", gpu.info().name, report.join("\n"));
    assert!(
        report.iter().all(|l| !l.starts_with("  ")),
        "{}",
        report.join("\n")
    );
}
