//! 64-bit types (`i64`, `u64`, `f64`): used only on adapters with `SHADER_INT64` / `SHADER_F64`.
//! WGSL (and Vulkan's GLSL.std.450) has no f64 transcendentals, so only the exactly rounded f64
//! operations are generated; kernels with f64 `exp`, `sin`, `pow`... are rejected as unsupported.

use hologram_isa::{BinaryOp, Type, UnaryOp};

use super::prelude::Helper;

/// True when an f64 unary operation can be generated.
pub fn f64_unary_supported(op: UnaryOp) -> bool {
    super::f64_unary_exact(op)
}

/// An f64 unary operation (one of [`f64_unary_supported`]).
pub(crate) fn f64_unary(op: UnaryOp, a: &str) -> String {
    match op {
        UnaryOp::Abs => format!("bitcast<f64>(bitcast<u64>({a}) & 0x7ffffffffffffffflu)"),
        UnaryOp::Neg => format!("bitcast<f64>(bitcast<u64>({a}) ^ 0x8000000000000000lu)"),
        UnaryOp::Sqrt => format!("sqrt({a})"),
        // The sign is copied from the operand: some drivers (lavapipe) lose the sign of a zero
        // result (round(-0.3) must be -0.0); the result always has the operand's sign.
        UnaryOp::Floor => format!("hg_sign64(floor({a}), {a})"),
        UnaryOp::Ceil => format!("hg_sign64(ceil({a}), {a})"),
        UnaryOp::Round => format!("hg_round64({a})"),
        // Lavapipe's f64 `trunc` returns operands past 2^31 unchanged (fraction kept): the
        // floor or ceil toward zero is exact on every driver.
        UnaryOp::Trunc => format!("hg_sign64(select(floor({a}), ceil({a}), {a} < f64(0.0)), {a})"),
        _ => a.to_string(),
    }
}

/// An f64 binary operation.
pub(crate) fn f64_binary(op: BinaryOp, a: &str, b: &str) -> String {
    match op {
        // Shielded from cross-instruction folds (see `math::float_binary`).
        BinaryOp::Add => super::math::opaque(Type::F64, &format!("({a} + {b})")),
        BinaryOp::Sub => super::math::opaque(Type::F64, &format!("({a} - {b})")),
        // The product is rounded on its own: drivers may otherwise fuse it with a later add
        // (NVIDIA's Vulkan driver does), which the ISA's two roundings forbid.
        BinaryOp::Mul => format!("hg_mul_rounded64({a}, {b})"),
        BinaryOp::Div => format!("({a} / {b})"),
        BinaryOp::Rem => format!("hg_fmod64({a}, {b})"),
        BinaryOp::Min => format!("hg_fmin64({a}, {b})"),
        BinaryOp::Max => format!("hg_fmax64({a}, {b})"),
        _ => format!("({a} + {b})"),
    }
}

/// 64-bit helpers.
pub const HELPERS: &[Helper] = &[
    Helper {
        name: "hg_sign64",
        deps: &["hg_isnan64"],
        text: "fn hg_sign64(r: f64, x: f64) -> f64 { if (hg_isnan64(r)) { return r; } return bitcast<f64>((bitcast<u64>(r) & 0x7ffffffffffffffflu) | (bitcast<u64>(x) & 0x8000000000000000lu)); }\n",
    },
    Helper {
        name: "hg_round64",
        deps: &["hg_sign64"],
        text: r#"// Round half to even on f64 (lavapipe's f64 round is not half-to-even).
fn hg_round64(x: f64) -> f64 {
    if (!(abs(x) < f64(4503599627370496.0))) { return x; }
    let r = floor(x);
    let d = x - r;
    var y = r;
    if (d > f64(0.5) || (d == f64(0.5) && fract(r * f64(0.5)) != f64(0.0))) { y = r + f64(1.0); }
    return hg_sign64(y, x);
}
"#,
    },
    Helper {
        name: "hg_o64",
        deps: &[],
        text: "fn hg_o64(x: f64) -> f64 { return bitcast<f64>(bitcast<u64>(x) + u64(hg_zero)); }\n",
    },
    Helper {
        name: "hg_nan64",
        deps: &[],
        text: "fn hg_nan64() -> f64 { return bitcast<f64>(0x7ff8000000000000lu ^ u64(hg_zero)); }\n",
    },
    Helper {
        name: "hg_isnan64",
        deps: &[],
        text: "fn hg_isnan64(x: f64) -> bool { return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu; }\n",
    },
    Helper {
        name: "hg_mul_rounded64",
        deps: &[],
        text: "fn hg_mul_rounded64(a: f64, b: f64) -> f64 { return bitcast<f64>(bitcast<u64>(a * b) + u64(hg_zero)); }\n",
    },
    Helper {
        name: "hg_fmin64",
        deps: &["hg_isnan64"],
        text: r#"// minimumNumber on f64 (see hg_fmin).
fn hg_fmin64(a: f64, b: f64) -> f64 {
    if (hg_isnan64(b)) { return a; }
    if (hg_isnan64(a)) { return b; }
    if (a == b) { return bitcast<f64>(bitcast<u64>(a) | bitcast<u64>(b)); }
    return select(b, a, a < b);
}
"#,
    },
    Helper {
        name: "hg_fmax64",
        deps: &["hg_isnan64"],
        text: r#"// maximumNumber on f64 (see hg_fmax).
fn hg_fmax64(a: f64, b: f64) -> f64 {
    if (hg_isnan64(b)) { return a; }
    if (hg_isnan64(a)) { return b; }
    if (a == b) { return bitcast<f64>(bitcast<u64>(a) & bitcast<u64>(b)); }
    return select(b, a, a > b);
}
"#,
    },
    Helper {
        name: "hg_d2f_odd",
        deps: &["hg_isnan64"],
        text: r#"// f64 -> f32 rounded to odd (so a later rounding to f16/bf16 is exact-once).
fn hg_d2f_odd(d: f64) -> f32 {
    let r = f32(d);
    if (hg_isnan64(d)) { return r; }
    let back = f64(r);
    if (back == d) { return r; }
    var b = bitcast<u32>(r);
    if (abs(back) > abs(d)) { b = b - 1u; }
    return bitcast<f32>(b | 1u);
}
"#,
    },
    Helper {
        name: "hg_u64f_odd",
        deps: &[],
        text: r#"// u64 -> f32 rounded to odd.
fn hg_u64f_odd(v: u64) -> f32 {
    if (v < 0x1000000lu) { return f32(v); }
    let hi = u32(v >> 32u);
    let lz = select(countLeadingZeros(u32(v & 0xfffffffflu)) + 32u, countLeadingZeros(hi), hi != 0u);
    let sh = 40u - lz;
    var m = u32(v >> sh);
    if ((v & ((1lu << sh) - 1lu)) != 0lu) { m = m | 1u; }
    return f32(m) * f32(1lu << sh);
}
fn hg_i64f_odd(v: i64) -> f32 {
    let neg = v < 0li;
    let mag = select(bitcast<u64>(v), 0lu - bitcast<u64>(v), neg);
    let r = hg_u64f_odd(mag);
    return select(r, -r, neg);
}
"#,
    },
    Helper {
        name: "hg_i64f_odd",
        deps: &["hg_u64f_odd"],
        text: "",
    },
    Helper {
        name: "hg_fmod64",
        deps: &["hg_isnan64", "hg_nan64"],
        text: r#"// fmod on f64, exact (after musl's fmod).
fn hg_fmod64(x: f64, y: f64) -> f64 {
    let xb = bitcast<u64>(x);
    var uy = bitcast<u64>(y);
    var ex = i32((xb >> 52u) & 0x7fflu);
    var ey = i32((uy >> 52u) & 0x7fflu);
    let sx = xb & 0x8000000000000000lu;
    var ux = xb;
    // NaN for y = 0, y NaN, x infinite or NaN. (Not (x*y)/(x*y): drivers fold a/a to 1.)
    if ((uy << 1u) == 0lu || hg_isnan64(y) || ex == 0x7ff) { return hg_nan64(); }
    if ((ux << 1u) <= (uy << 1u)) {
        if ((ux << 1u) == (uy << 1u)) { return bitcast<f64>(sx); }
        return x;
    }
    if (ex == 0) {
        var i = ux << 12u;
        loop { if ((i >> 63u) != 0lu) { break; } ex = ex - 1; i = i << 1u; }
        ux = ux << u32(1 - ex);
    } else {
        ux = (ux & 0xffffffffffffflu) | 0x10000000000000lu;
    }
    if (ey == 0) {
        var i = uy << 12u;
        loop { if ((i >> 63u) != 0lu) { break; } ey = ey - 1; i = i << 1u; }
        uy = uy << u32(1 - ey);
    } else {
        uy = (uy & 0xffffffffffffflu) | 0x10000000000000lu;
    }
    loop {
        if (ex <= ey) { break; }
        let i = ux - uy;
        if ((i >> 63u) == 0lu) {
            if (i == 0lu) { return bitcast<f64>(sx); }
            ux = i;
        }
        ux = ux << 1u;
        ex = ex - 1;
    }
    let i = ux - uy;
    if ((i >> 63u) == 0lu) {
        if (i == 0lu) { return bitcast<f64>(sx); }
        ux = i;
    }
    loop { if ((ux >> 52u) != 0lu) { break; } ux = ux << 1u; ex = ex - 1; }
    if (ex > 0) {
        ux = (ux - 0x10000000000000lu) | (u64(u32(ex)) << 52u);
    } else {
        ux = ux >> u32(1 - ex);
    }
    return bitcast<f64>(ux | sx);
}
"#,
    },
];
