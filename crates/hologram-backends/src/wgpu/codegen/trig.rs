//! sin, cos and tan of `f32` (and `f16`/`bf16`, computed in `f32`).
//!
//! Drivers' built-ins are not used: Vulkan allows an absolute error of about 2^-11 for sin/cos,
//! and NVIDIA's driver also reassociates float arithmetic, which turns a Cody–Waite reduction
//! `((x - y·C1) - y·C2) - y·C3` into `x - y·(C1 + C2 + C3)` (a one-constant reduction, several ulp
//! off). Every step whose rounding matters therefore goes through an opaque integer add
//! (`hg_o`, `hg_o64`), which no compiler can see through.
//!
//! - With f64 (`hg_sin_d`, `hg_cos_d`, `hg_tan_d`): `|x| = n·π/2 + r` with `r` in f64 — below
//!   2^28·π/2 by `n = round(x·2/π)` and `r = (x - n·P1) - n·P2` (P1 is π/2 to 25 bits, so `n·P1`
//!   and the subtraction are exact, as in musl's `__rem_pio2f`); above, by a Payne–Hanek
//!   reduction with 2/π to 192 bits in integer arithmetic (after ARM's optimized-routines
//!   `sinf`). Then musl's f64 kernels `__sindf`, `__cosdf`, `__tandf` and one rounding to f32:
//!   accurate over the whole f32 range (README: measured bound).
//! - Without f64 (`hg_sin`, `hg_cos`, `hg_tan`): Cephes' f32 reduction by π/4 in three parts and
//!   its polynomials; accurate for |x| up to about 8192.

use super::prelude::Helper;

/// The trigonometric helpers.
pub const HELPERS: &[Helper] = &[
    Helper {
        name: "hg_rem_pio2",
        deps: &["hg_o64"],
        text: r#"// |x| = n pi/2 + r for finite non-negative x: returns (r, n mod 4), r in f64.
fn hg_rem_pio2(ax: f32) -> vec2<f64> {
    let xi = bitcast<u32>(ax);
    if (xi < 0x4dc90fdbu) {
        let xd = f64(ax);
        let fnv = floor(hg_o64(xd * 0.6366197723675814) + f64(0.5));
        let t = hg_o64(xd - hg_o64(fnv * 1.5707963109016418));
        let r = t - hg_o64(fnv * 1.5893254773528196e-08);
        return vec2<f64>(r, f64(u32(fnv) & 3u));
    }
    // 2/pi in 8-bit steps: word i holds bits 8i+1 .. 8i+32 of its fraction.
    var tbl = array<u32, 24>(
        0x000000a2u, 0x0000a2f9u, 0x00a2f983u, 0xa2f9836eu, 0xf9836e4eu, 0x836e4e44u,
        0x6e4e4415u, 0x4e441529u, 0x441529fcu, 0x1529fc27u, 0x29fc2757u, 0xfc2757d1u,
        0x2757d1f5u, 0x57d1f534u, 0xd1f534ddu, 0xf534ddc0u, 0x34ddc0dbu, 0xddc0db62u,
        0xc0db6295u, 0xdb629599u, 0x6295993cu, 0x95993c43u, 0x993c4390u, 0x3c439041u);
    let idx = (xi >> 26u) & 15u;
    let m = ((xi & 0xffffffu) | 0x800000u) << ((xi >> 23u) & 7u);
    // x * 2/pi modulo 4 as a 2.62 fixed-point number (exact product bits 0..127).
    let r0 = u64(m * tbl[idx]);
    let r1 = u64(m) * u64(tbl[idx + 4u]);
    let r2 = u64(m) * u64(tbl[idx + 8u]);
    var res = ((r2 >> 32u) | (r0 << 32u)) + r1;
    let n = (res + (1lu << 61u)) >> 62u;
    res = res - (n << 62u);
    return vec2<f64>(f64(bitcast<i64>(res)) * 3.4061215800865545e-19, f64(u32(n) & 3u));
}
// musl's __sindf, __cosdf, __tandf: |r| <= pi/4, errors far below an f32 ulp.
fn hg_sin_k(x: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let r = -0.00019839334836096632 + z * 2.718311493989822e-06;
    let s = z * x;
    return (x + s * (-0.16666666641626524 + z * 0.008333329385889463)) + s * w * r;
}
fn hg_cos_k(x: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let r = -0.001388676377460993 + z * 2.439044879627741e-05;
    return ((f64(1.0) + z * -0.499999997251031) + w * 0.04166662332373906) + (w * z) * r;
}
fn hg_tan_k(x: f64, odd: bool) -> f64 {
    let z = x * x;
    var r = 0.002974357433599673 + z * 0.009465647849436732;
    let t = 0.05338123784456704 + z * 0.024528318116654728;
    let w = z * z;
    let s = z * x;
    let u = 0.3333313950307914 + z * 0.13339200271297674;
    r = (x + s * u) + (s * w) * (t + w * r);
    if (odd) { return f64(-1.0) / r; }
    return r;
}
"#,
    },
    Helper {
        name: "hg_sin_d",
        deps: &["hg_rem_pio2", "hg_nan"],
        text: r#"fn hg_sin_d(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) >= 0x7f800000u) { return hg_nan(); }
    let rn = hg_rem_pio2(bitcast<f32>(b & 0x7fffffffu));
    let n = u32(rn.y);
    var v = select(hg_sin_k(rn.x), hg_cos_k(rn.x), (n & 1u) != 0u);
    if (n >= 2u) { v = -v; }
    let y = f32(v);
    return select(y, -y, (b >> 31u) != 0u);
}
"#,
    },
    Helper {
        name: "hg_cos_d",
        deps: &["hg_rem_pio2", "hg_nan"],
        text: r#"fn hg_cos_d(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) >= 0x7f800000u) { return hg_nan(); }
    let rn = hg_rem_pio2(bitcast<f32>(b & 0x7fffffffu));
    let n = u32(rn.y);
    var v = select(hg_cos_k(rn.x), hg_sin_k(rn.x), (n & 1u) != 0u);
    if (n == 1u || n == 2u) { v = -v; }
    return f32(v);
}
"#,
    },
    Helper {
        name: "hg_tan_d",
        deps: &["hg_rem_pio2", "hg_nan"],
        text: r#"fn hg_tan_d(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) >= 0x7f800000u) { return hg_nan(); }
    let rn = hg_rem_pio2(bitcast<f32>(b & 0x7fffffffu));
    let y = f32(hg_tan_k(rn.x, (u32(rn.y) & 1u) != 0u));
    return select(y, -y, (b >> 31u) != 0u);
}
"#,
    },
    Helper {
        name: "hg_reduce",
        deps: &["hg_f32dd"],
        text: r#"// Cody-Waite reduction by pi/4 (Cephes): returns (reduced x, octant j) with |x| <= pi/4.
// y * C1 and y * C2 are exact for y < 2^15; every step is shielded from reassociation.
fn hg_reduce(x: f32) -> vec2<f32> {
    let ax = abs(x);
    var j = u32(ax * 1.27323954473516);
    var y = f32(j);
    if ((j & 1u) != 0u) { j = j + 1u; y = y + 1.0; }
    let r1 = hg_o(ax - hg_o(y * 0.78515625));
    let r2 = hg_o(r1 - hg_o(y * 2.4187564849853515625e-4));
    let r = r2 - hg_o(y * 3.77489497744594108e-8);
    return vec2<f32>(r, f32(j & 7u));
}
"#,
    },
    Helper {
        name: "hg_sincos_poly",
        deps: &[],
        text: r#"fn hg_sin_poly(x: f32) -> f32 {
    let z = x * x;
    return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * x + x;
}
fn hg_cos_poly(x: f32) -> f32 {
    let z = x * x;
    return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
}
"#,
    },
    Helper {
        name: "hg_sin",
        deps: &["hg_reduce", "hg_sincos_poly", "hg_nan"],
        text: r#"fn hg_sin(x: f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) { return hg_nan(); }
    let rj = hg_reduce(x);
    var j = u32(rj.y);
    var neg = x < 0.0;
    if (j > 3u) { neg = !neg; j = j - 4u; }
    var y = select(hg_sin_poly(rj.x), hg_cos_poly(rj.x), j == 1u || j == 2u);
    if (x == 0.0) { return x; }
    return select(y, -y, neg);
}
"#,
    },
    Helper {
        name: "hg_cos",
        deps: &["hg_reduce", "hg_sincos_poly", "hg_nan"],
        text: r#"fn hg_cos(x: f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) { return hg_nan(); }
    let rj = hg_reduce(x);
    var j = u32(rj.y);
    var neg = false;
    if (j > 3u) { j = j - 4u; neg = true; }
    if (j > 1u) { neg = !neg; }
    let y = select(hg_cos_poly(rj.x), hg_sin_poly(rj.x), j == 1u || j == 2u);
    return select(y, -y, neg);
}
"#,
    },
    Helper {
        name: "hg_tan",
        deps: &["hg_reduce", "hg_nan"],
        text: r#"fn hg_tan(x: f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) { return hg_nan(); }
    if (x == 0.0) { return x; }
    let rj = hg_reduce(x);
    let r = rj.x;
    let z = r * r;
    var y = r;
    if (z > 1.0e-8) {
        y = (((((9.38540185543e-3 * z + 3.11992232697e-3) * z + 2.44301354525e-2) * z
            + 5.34112807005e-2) * z + 1.33387994085e-1) * z + 3.33331568548e-1) * z * r + r;
    }
    if ((u32(rj.y) & 2u) != 0u) { y = -1.0 / y; }
    return select(y, -y, x < 0.0);
}
"#,
    },
];
