//! Float arithmetic and transcendentals for `f32` (and `f16`/`bf16`, computed in `f32` and
//! rounded once).
//!
//! WGSL's built-in transcendentals have implementation-defined accuracy (Vulkan allows several
//! ulp, and absolute rather than relative error for sin/cos), so the kernels use their own
//! implementations, built from exactly rounded operations: `exp`/`log` after FreeBSD's
//! `e_expf.c`/`e_logf.c`, `erf` after `s_erff.c`, tanh after Cephes (sin/cos/tan: `trig`), and
//! a bit-by-bit correctly rounded `sqrt`. Steps whose rounding matters pass through `hg_o` (an
//! opaque integer add of a zero read from memory) so drivers that reassociate float
//! arithmetic cannot merge them. Bounds measured on lavapipe are in the backend README.

use hologram_isa::{BinaryOp, Imm, Operand, TernaryOp, Type, UnaryOp};

use super::prelude::Helper;
use super::types::normalize;

/// One-operand float operations (for `f64`, only the exact ones reach here).
pub(crate) fn float_unary(op: UnaryOp, ty: Type, a: &str, float64: bool) -> String {
    if ty == Type::F64 {
        return super::wide::f64_unary(op, a);
    }
    let e = match op {
        UnaryOp::Abs => format!("bitcast<f32>(bitcast<u32>({a}) & 0x7fffffffu)"),
        UnaryOp::Neg => format!("bitcast<f32>(bitcast<u32>({a}) ^ 0x80000000u)"),
        UnaryOp::Exp => format!("hg_exp({a})"),
        UnaryOp::Exp2 => format!("hg_exp2({a})"),
        UnaryOp::Log => format!("hg_log({a})"),
        UnaryOp::Log2 => format!("hg_log2({a})"),
        UnaryOp::Log10 => format!("hg_log10({a})"),
        UnaryOp::Sqrt => format!("hg_sqrt({a})"),
        UnaryOp::Rsqrt if float64 => format!("f32(f64(1.0) / f64(hg_sqrt({a})))"),
        UnaryOp::Rsqrt => format!("(1.0 / hg_sqrt({a}))"),
        // With f64: reduction and polynomials in f64, one rounding (see `trig`).
        UnaryOp::Sin if float64 => format!("hg_sin_d({a})"),
        UnaryOp::Cos if float64 => format!("hg_cos_d({a})"),
        UnaryOp::Tan if float64 => format!("hg_tan_d({a})"),
        UnaryOp::Sin => format!("hg_sin({a})"),
        UnaryOp::Cos => format!("hg_cos({a})"),
        UnaryOp::Tan => format!("hg_tan({a})"),
        UnaryOp::Tanh => format!("hg_tanh({a})"),
        UnaryOp::Sigmoid if float64 => format!("f32(f64(1.0) / f64(1.0 + hg_exp(-({a}))))"),
        UnaryOp::Sigmoid => format!("(1.0 / (1.0 + hg_exp(-({a}))))"),
        UnaryOp::Erf => format!("hg_erf({a})"),
        UnaryOp::Floor => format!("floor({a})"),
        UnaryOp::Ceil => format!("ceil({a})"),
        UnaryOp::Round => format!("round({a})"),
        UnaryOp::Trunc => format!("trunc({a})"),
        UnaryOp::Not => a.to_string(),
    };
    // abs and neg keep the value representable; everything else rounds back once.
    if matches!(op, UnaryOp::Abs | UnaryOp::Neg) {
        e
    } else {
        normalize(ty, &e)
    }
}

/// Two-operand float operations.
pub(crate) fn float_binary(op: BinaryOp, ty: Type, a: &str, b: &str, float64: bool) -> String {
    if ty == Type::F64 {
        return super::wide::f64_binary(op, a, b);
    }
    let e = match op {
        // Sums are shielded like products: Mesa's NIR folds `a + (b - a)` to `b` across
        // instructions (wrong for infinities and NaN); an opaque result stops such folds.
        BinaryOp::Add if ty == Type::F32 => opaque(ty, &format!("({a} + {b})")),
        BinaryOp::Sub if ty == Type::F32 => opaque(ty, &format!("({a} - {b})")),
        BinaryOp::Add => format!("({a} + {b})"),
        BinaryOp::Sub => format!("({a} - {b})"),
        // f32 products are rounded on their own (drivers may fuse a product with a later add;
        // NVIDIA's Vulkan driver does). f16/bf16 results are rounded in integer code anyway.
        BinaryOp::Mul if ty == Type::F32 => format!("hg_mul_rounded({a}, {b})"),
        BinaryOp::Mul => format!("({a} * {b})"),
        // Vulkan allows 2.5 ulp for f32 division; through f64 (exact-enough quotient, then one
        // innocuous second rounding) it is correctly rounded wherever f64 division is.
        BinaryOp::Div if float64 => format!("f32(f64({a}) / f64({b}))"),
        BinaryOp::Div => format!("({a} / {b})"),
        BinaryOp::Rem => format!("hg_fmod({a}, {b})"),
        BinaryOp::Min => format!("hg_fmin({a}, {b})"),
        BinaryOp::Max => format!("hg_fmax({a}, {b})"),
        // With f64, y * ln(x) and e^t are computed in f64: accurate to about 1 ulp of f32.
        BinaryOp::Pow if float64 => format!("hg_pow_d({a}, {b})"),
        BinaryOp::Pow => format!("hg_pow({a}, {b})"),
        _ => format!("({a} + {b})"), // bitwise ops are integer-only
    };
    normalize(ty, &e)
}

/// `mad` (two roundings) and `fma` (one, emulated exactly: see `fma`).
pub(crate) fn float_ternary(
    op: TernaryOp,
    ty: Type,
    a: &str,
    b: &str,
    c: &str,
    float64: bool,
) -> String {
    let e = match op {
        // The product goes through `hg_mul_rounded` so the driver cannot contract it into an
        // fma with the add.
        TernaryOp::Mad if ty == Type::F64 => {
            opaque(ty, &format!("(hg_mul_rounded64({a}, {b}) + {c})"))
        }
        TernaryOp::Mad if ty == Type::F32 => {
            opaque(ty, &format!("(hg_mul_rounded({a}, {b}) + {c})"))
        }
        // f16/bf16: the product is rounded to the type (in integer code, which also keeps it
        // out of any contraction), then the sum.
        TernaryOp::Mad => format!("({} + {c})", normalize(ty, &format!("({a} * {b})"))),
        TernaryOp::Fma if ty == Type::F64 => format!("hg_fma64({a}, {b}, {c})"),
        TernaryOp::Fma if float64 => format!("hg_fma32({a}, {b}, {c})"),
        TernaryOp::Fma => format!("hg_fma32s({a}, {b}, {c})"),
    };
    normalize(ty, &e)
}

/// True for a literal 0 or ±1: drivers fold `x * 0` to 0, `x + 0` to x and the like, which is
/// wrong for infinities, NaN or signed zeros.
pub(crate) fn special_literal(o: &Operand<u32>) -> bool {
    match o {
        Operand::Imm(Imm::Float(f)) => *f == 0.0 || f.abs() == 1.0,
        Operand::Imm(Imm::Int(i)) => *i == 0 || i.abs() == 1,
        _ => false,
    }
}

/// True when a float binary operation's operands could let a driver apply a fold that is wrong
/// for infinities, NaN or signed zeros: the same operand twice, or a literal 0 or 1.
pub(crate) fn needs_ieee_guard(a: &Operand<u32>, b: &Operand<u32>) -> bool {
    a == b || special_literal(a) || special_literal(b)
}

/// An expression equal to `x` that compilers cannot see through.
///
/// An integer add of the run-time zero, neither an XOR nor an OR: shields nest (a result
/// shielded where it is made, shielded again as an operand), and nested shields must stay
/// distinct from each other and from the bare value. NVIDIA's Vulkan driver cancels
/// `(v ^ z) ^ z` to `v` (then fused `x*a + 1` and folded `x - (x - y)` to `y`); `(v | z) | z`
/// collapses to `v | z`, so a shielded `x` equals `x` again and lavapipe folds `x - x` to 0.
/// `(v + z) + z` is neither.
pub(crate) fn opaque(ty: Type, x: &str) -> String {
    if ty == Type::F64 {
        format!("bitcast<f64>(bitcast<u64>({x}) + u64(hg_zero))")
    } else {
        format!("bitcast<f32>(bitcast<u32>({x}) + hg_zero)")
    }
}

/// Transcendental helpers (f32).
pub const HELPERS: &[Helper] = &[
    Helper {
        name: "hg_mul_rounded",
        deps: &[],
        text: r#"// a * b rounded on its own: the product passes through an integer bitcast and an opaque
// add of the run-time zero (nested shields never cancel or collapse: see `opaque`), which
// keeps drivers from fusing it with a following add.
fn hg_mul_rounded(a: f32, b: f32) -> f32 { return bitcast<f32>(bitcast<u32>(a * b) + hg_zero); }
"#,
    },
    Helper {
        name: "hg_sqrt",
        deps: &["hg_nan"],
        text: r#"// Correctly rounded square root, bit by bit (after fdlibm's e_sqrtf.c).
fn hg_sqrt(x: f32) -> f32 {
    var ix = bitcast<i32>(x);
    if ((ix & 0x7f800000) == 0x7f800000) {
        if (ix == 0x7f800000) { return x; }
        if ((ix & 0x7fffff) != 0) { return x; }
        return hg_nan();
    }
    if (ix <= 0) {
        if ((ix & 0x7fffffff) == 0) { return x; }
        return hg_nan();
    }
    var m = ix >> 23u;
    if (m == 0) {
        var i = 0;
        loop { if ((ix & 0x00800000) != 0) { break; } ix = ix << 1u; i = i + 1; }
        m = m - (i - 1);
    }
    m = m - 127;
    ix = (ix & 0x007fffff) | 0x00800000;
    if ((m & 1) != 0) { ix = ix + ix; }
    m = m >> 1u;
    ix = ix + ix;
    var q = 0;
    var s = 0;
    var r = 0x01000000;
    loop {
        if (r == 0) { break; }
        let t = s + r;
        if (t <= ix) {
            s = t + r;
            ix = ix - t;
            q = q + r;
        }
        ix = ix + ix;
        r = r >> 1u;
    }
    if (ix != 0) { q = q + (q & 1); }
    ix = (q >> 1u) + 0x3f000000;
    ix = ix + (m << 23u);
    return bitcast<f32>(ix);
}
"#,
    },
    Helper {
        name: "hg_scalbn",
        deps: &[],
        text: r#"// x * 2^n, exact unless the result is subnormal (then rounded once).
fn hg_scalbn(x: f32, n0: i32) -> f32 {
    var y = x;
    var n = n0;
    if (n > 127) {
        y = y * 1.7014118e38;
        n = n - 127;
        if (n > 127) { y = y * 1.7014118e38; n = min(n - 127, 127); }
    } else if (n < -126) {
        y = y * (1.1754944e-38 * 16777216.0);
        n = n + 126 - 24;
        if (n < -126) { y = y * (1.1754944e-38 * 16777216.0); n = max(n + 126 - 24, -126); }
    }
    return y * bitcast<f32>(u32(0x7f + n) << 23u);
}
"#,
    },
    Helper {
        name: "hg_exp",
        deps: &["hg_scalbn", "hg_isnan", "hg_f32dd"],
        text: r#"// e^x = 2^k e^r (after Cephes' expf: k = round(x / ln 2), r = x - k ln2 in two parts with an
// exact first product, a polynomial for e^r on |r| <= ln2 / 2), branch-free and without a
// division (FreeBSD's rational form, used before, divides once per call). On an H100 through
// NVIDIA's Vulkan driver the softmax row kernel (16 exponentials per lane) waited 0.5-1 us less.
// Within 1 ulp of the CPU's e_expf over the tested inputs (`wgpu_accuracy`).
fn hg_exp(x0: f32) -> f32 {
    let hx0 = bitcast<u32>(x0);
    let neg = (hx0 >> 31u) != 0u;
    let hx = hx0 & 0x7fffffffu;
    // Past |x| = 104 (and for NaN) the result is selected below; the steps still run, on 0.
    let x = select(0.0, x0, hx < 0x42d00000u);
    let kf = floor(hg_o(x * 1.44269504088896341) + 0.5);
    // x - k ln2: k * 0.693359375 is exact (9 significant bits), and so is the difference; the
    // shield keeps the two steps from being folded into one product with the constants' sum.
    let hi = hg_o(x - kf * 0.693359375);
    let r = hi + kf * 2.12194440e-4;
    let z = r * r;
    let p = ((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r
        + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1;
    let y = 1.0 + hg_o(p * z + r);
    var e = hg_scalbn(y, i32(kf));
    // |x| <= 2^-13: 1 + x, as e_expf.c.
    e = select(e, 1.0 + x0, hx <= 0x39000000u);
    // Overflow, underflow, NaN (e_expf.c's thresholds).
    e = select(e, 0.0, neg && hx >= 0x42cff1b5u);
    e = select(e, bitcast<f32>(0x7f800000u ^ hg_zero), !neg && hx >= 0x42b17218u);
    return select(e, x0, hx > 0x7f800000u);
}
"#,
    },
    Helper {
        name: "hg_exp2",
        deps: &["hg_exp", "hg_scalbn", "hg_isnan", "hg_f32dd"],
        text: r#"// 2^x = 2^k * e^(f ln 2) with k = round(x) and f = x - k exact.
fn hg_exp2(x: f32) -> f32 {
    if (hg_isnan(x)) { return x; }
    if (x >= 128.0) { return bitcast<f32>(0x7f800000u ^ hg_zero); }
    if (x < -151.0) { return 0.0; }
    let k = round(x);
    let f = x - k;
    // f * ln2 in two parts keeps the product's rounding error out of the result.
    let t = hg_o(f * 6.9314575195e-01) + f * 1.4286067653e-06;
    return hg_scalbn(hg_exp(t), i32(k));
}
"#,
    },
    Helper {
        name: "hg_log",
        deps: &["hg_nan"],
        text: r#"// Natural logarithm (after FreeBSD's e_logf.c).
fn hg_log(x0: f32) -> f32 {
    var x = x0;
    var ix = bitcast<u32>(x);
    var k = 0;
    if (ix < 0x00800000u || (ix >> 31u) != 0u) {
        if ((ix << 1u) == 0u) { return bitcast<f32>(0xff800000u ^ hg_zero); }
        if ((ix >> 31u) != 0u) {
            if ((ix & 0x7fffffffu) > 0x7f800000u) { return x; }
            return hg_nan();
        }
        k = k - 25;
        x = x * 33554432.0;
        ix = bitcast<u32>(x);
    } else if (ix >= 0x7f800000u) {
        return x;
    } else if (ix == 0x3f800000u) {
        return 0.0;
    }
    ix = ix + (0x3f800000u - 0x3f3504f3u);
    k = k + i32(ix >> 23u) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    x = bitcast<f32>(ix);
    let f = x - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (0.40000972152 + w * 0.24279078841);
    let t2 = z * (0.66666662693 + w * 0.28498786688);
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    let dk = f32(k);
    return s * (hfsq + r) + dk * 9.0580006145e-06 - hfsq + f + dk * 6.9313812256e-01;
}
"#,
    },
    Helper {
        name: "hg_log2",
        deps: &["hg_log", "hg_f32dd"],
        text: "fn hg_log2(x: f32) -> f32 { let l = hg_log(x); return hg_o(l * 1.4426950216) + l * 1.925963033e-8; }\n",
    },
    Helper {
        name: "hg_log10",
        deps: &["hg_log", "hg_f32dd"],
        text: "fn hg_log10(x: f32) -> f32 { let l = hg_log(x); return hg_o(l * 0.43429449201) + l * 2.3829e-9; }\n",
    },
    Helper {
        name: "hg_tanh",
        deps: &["hg_exp", "hg_isnan"],
        text: r#"fn hg_tanh(x: f32) -> f32 {
    if (hg_isnan(x)) { return x; }
    let z = abs(x);
    if (z > 9.01) { return select(1.0, -1.0, x < 0.0); }
    if (z >= 0.625) {
        let e = hg_exp(z + z);
        let y = 1.0 - 2.0 / (e + 1.0);
        return select(y, -y, x < 0.0);
    }
    if (x == 0.0) { return x; }
    let s = x * x;
    return ((((-5.70498872745e-3 * s + 2.06390887954e-2) * s - 5.37397155531e-2) * s
        + 1.33314422036e-1) * s - 3.33332819422e-1) * s * x + x;
}
"#,
    },
    Helper {
        name: "hg_f32dd",
        deps: &[],
        text: r#"// Error-free transformations on f32 (each step shielded from compiler folds by hg_o).
fn hg_o(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) + hg_zero); }
// a + b = s + e exactly (Knuth).
fn hg_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = hg_o(a + b);
    let bb = hg_o(s - a);
    return vec2<f32>(s, hg_o(a - hg_o(s - bb)) + hg_o(b - bb));
}
// a * b = p + e exactly (Dekker, Veltkamp split with 2^12 + 1), barring over/underflow.
fn hg_two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = hg_o(a * b);
    let ta = hg_o(4097.0 * a);
    let ah = hg_o(ta - hg_o(ta - a));
    let al = hg_o(a - ah);
    let tb = hg_o(4097.0 * b);
    let bh = hg_o(tb - hg_o(tb - b));
    let bl = hg_o(b - bh);
    let e = hg_o(hg_o(hg_o(hg_o(ah * bh) - p) + hg_o(ah * bl)) + hg_o(al * bh)) + hg_o(al * bl);
    return vec2<f32>(p, e);
}
"#,
    },
    Helper {
        name: "hg_pow",
        deps: &["hg_pow_special", "hg_log_dd", "hg_f32dd", "hg_scalbn"],
        text: r#"// x^y without f64: ln|x| as a double-f32 (about 2^-29 absolute error), y * ln|x| exactly
// as a double-f32, then e^t = 2^k e^r with a small r.
fn hg_pow(x: f32, y: f32) -> f32 {
    let sp = hg_pow_special(x, y);
    if (sp.y != 0.0) { return sp.x; }
    let l = hg_log_dd(abs(x));
    let p = hg_two_prod(y, l.x);
    let t = hg_two_sum(p.x, p.y + y * l.y);
    var r: f32;
    if (t.x > 89.0) {
        r = bitcast<f32>(0x7f800000u ^ hg_zero);
    } else if (t.x < -104.0) {
        r = 0.0;
    } else {
        let k = round(t.x * 1.4426950216);
        let d = (hg_o(t.x - k * 6.9314575195e-01) - k * 1.4286067653e-06) + t.y;
        r = hg_scalbn(hg_exp_small(d), i32(k));
    }
    if (x < 0.0 && sp.z != 0.0) { r = -r; }
    return r;
}
fn hg_exp_small(x: f32) -> f32 {
    let xx = x * x;
    let c = x - xx * (1.6666625440e-1 + xx * -2.7667332906e-3);
    return 1.0 + (x * c / (2.0 - c) + x);
}
"#,
    },
    Helper {
        name: "hg_log_dd",
        deps: &["hg_f32dd"],
        text: r#"// ln x as hi + lo for positive finite x (the e_logf.c reduction, with the large terms summed
// exactly).
fn hg_log_dd(x0: f32) -> vec2<f32> {
    var x = x0;
    var ix = bitcast<u32>(x);
    var k = 0;
    if (ix < 0x00800000u) {
        k = -25;
        x = x * 33554432.0;
        ix = bitcast<u32>(x);
    }
    ix = ix + (0x3f800000u - 0x3f3504f3u);
    k = k + i32(ix >> 23u) - 0x7f;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    let f = bitcast<f32>(ix) - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let r = z * (0.66666662693 + w * 0.28498786688) + w * (0.40000972152 + w * 0.24279078841);
    let ff = hg_two_prod(f, f);
    let hh = 0.5 * ff.x;
    let dk = f32(k);
    let d = s * (hh + r) + dk * 9.0580006145e-06;
    let a = hg_two_sum(dk * 6.9313812256e-01, f);
    let b = hg_two_sum(a.x, -hh);
    let lo = a.y + b.y - 0.5 * ff.y + d;
    return hg_two_sum(b.x, lo);
}
"#,
    },
    Helper {
        name: "hg_pow_d",
        deps: &["hg_pow_special", "hg_log64p", "hg_exp64s"],
        text: r#"// x^y through f64: t = y ln|x| and e^t are accurate to ~2^-50, far below an f32 ulp.
fn hg_pow_d(x: f32, y: f32) -> f32 {
    let sp = hg_pow_special(x, y);
    if (sp.y != 0.0) { return sp.x; }
    let t = f64(y) * hg_log64p(f64(abs(x)));
    var r: f32;
    if (t > f64(89.0)) {
        r = bitcast<f32>(0x7f800000u ^ hg_zero);
    } else if (t < f64(-104.0)) {
        r = 0.0;
    } else {
        r = f32(hg_exp64s(t));
    }
    if (x < 0.0 && sp.z != 0.0) { r = -r; }
    return r;
}
"#,
    },
    Helper {
        name: "hg_pow_special",
        deps: &["hg_isnan", "hg_nan"],
        text: r#"// The C99 special cases of pow: (result, 1 if special, 1 if y is an odd integer).
fn hg_pow_special(x: f32, y: f32) -> vec3<f32> {
    let ay = abs(y);
    let yint = trunc(y) == y;
    let yodd = yint && ay < 16777216.0 && fract(ay * 0.5) != 0.0;
    let odd = select(0.0, 1.0, yodd);
    if (y == 0.0 || x == 1.0) { return vec3<f32>(1.0, 1.0, odd); }
    if (hg_isnan(x) || hg_isnan(y)) { return vec3<f32>(x + y, 1.0, odd); }
    let ax = abs(x);
    let inf = bitcast<f32>(0x7f800000u ^ hg_zero);
    if (ay == inf) {
        if (ax == 1.0) { return vec3<f32>(1.0, 1.0, odd); }
        if ((ax > 1.0) == (y > 0.0)) { return vec3<f32>(inf, 1.0, odd); }
        return vec3<f32>(0.0, 1.0, odd);
    }
    if (x == 0.0) {
        if (y < 0.0) {
            return vec3<f32>(select(inf, select(inf, -inf, bitcast<u32>(x) != 0u), yodd), 1.0, odd);
        }
        return vec3<f32>(select(0.0, x, yodd), 1.0, odd);
    }
    if (ax == inf) {
        let r = select(0.0, inf, y > 0.0);
        return vec3<f32>(select(r, -r, x < 0.0 && yodd), 1.0, odd);
    }
    if (x < 0.0 && !yint) { return vec3<f32>(hg_nan(), 1.0, odd); }
    return vec3<f32>(0.0, 0.0, odd);
}
"#,
    },
    Helper {
        name: "hg_log64p",
        deps: &[],
        text: r#"// ln x for positive normal f64 x (after FreeBSD's e_log.c).
fn hg_log64p(x0: f64) -> f64 {
    var ui = bitcast<u64>(x0);
    var hx = u32(ui >> 32u);
    hx = hx + (0x3ff00000u - 0x3fe6a09eu);
    let k = i32(hx >> 20u) - 0x3ff;
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    ui = (u64(hx) << 32u) | (ui & 0xfffffffflu);
    let x = bitcast<f64>(ui);
    let f = x - f64(1.0);
    let hfsq = f64(0.5) * f * f;
    let s = f / (f64(2.0) + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
    let t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    let r = t2 + t1;
    let dk = f64(k);
    return s * (hfsq + r) + dk * 1.90821492927058770002e-10 - hfsq + f + dk * 6.93147180369123816490e-01;
}
"#,
    },
    Helper {
        name: "hg_exp64s",
        deps: &[],
        text: r#"// e^x for |x| < 700 in f64 (after FreeBSD's e_exp.c).
fn hg_exp64s(x0: f64) -> f64 {
    var x = x0;
    let hx = u32(bitcast<u64>(x) >> 32u) & 0x7fffffffu;
    let neg = x < f64(0.0);
    var k = 0;
    var hi = f64(0.0);
    var lo = f64(0.0);
    if (hx > 0x3fd62e42u) {
        if (hx >= 0x3ff0a2b2u) {
            k = i32(1.44269504088896338700e+00 * x + select(f64(0.5), f64(-0.5), neg));
        } else {
            k = select(1, -1, neg);
        }
        let kf = f64(k);
        hi = x - kf * 6.93147180369123816490e-01;
        lo = kf * 1.90821492927058770002e-10;
        x = hi - lo;
    } else if (hx > 0x3e300000u) {
        hi = x;
    } else {
        return f64(1.0) + x;
    }
    let xx = x * x;
    let c = x - xx * (1.66666666666666019037e-01 + xx * (-2.77777777770155933842e-03 + xx * (6.61375632143793436117e-05 + xx * (-1.65339022054652515390e-06 + xx * 4.13813679705723846039e-08))));
    let y = f64(1.0) + (x * c / (f64(2.0) - c) - lo + hi);
    return y * bitcast<f64>(u64(u32(0x3ff + k)) << 52u);
}
"#,
    },
    Helper {
        name: "hg_erf",
        deps: &["hg_exp", "hg_isnan"],
        text: r#"// Error function (after FreeBSD's s_erff.c).
fn hg_erfc2(ix: u32, x0: f32) -> f32 {
    if (ix < 0x3fa00000u) {
        let s = abs(x0) - 1.0;
        let p = -2.3621185683e-03 + s * (4.1485610604e-01 + s * (-3.7220788002e-01 + s * (3.1834661961e-01 + s * (-1.1089469492e-01 + s * (3.5478305072e-02 + s * -2.1663755178e-03)))));
        let q = 1.0 + s * (1.0642088205e-01 + s * (5.4039794207e-01 + s * (7.1828655899e-02 + s * (1.2617121637e-01 + s * (1.3637083583e-02 + s * 1.1984500103e-02)))));
        return 1.0 - 8.4506291151e-01 - p / q;
    }
    let x = abs(x0);
    let s = 1.0 / (x * x);
    var r: f32;
    var bs: f32;
    if (ix < 0x4036db6du) {
        r = -9.8649440333e-03 + s * (-6.9385856390e-01 + s * (-1.0558626175e+01 + s * (-6.2375331879e+01 + s * (-1.6239666748e+02 + s * (-1.8460508728e+02 + s * (-8.1287437439e+01 + s * -9.8143291473e+00))))));
        bs = 1.0 + s * (1.9651271820e+01 + s * (1.3765776062e+02 + s * (4.3456588745e+02 + s * (6.4538726807e+02 + s * (4.2900814819e+02 + s * (1.0863500214e+02 + s * (6.5702495575e+00 + s * -6.0424413532e-02)))))));
    } else {
        r = -9.8649431020e-03 + s * (-7.9928326607e-01 + s * (-1.7757955551e+01 + s * (-1.6063638306e+02 + s * (-6.3756646729e+02 + s * (-1.0250950928e+03 + s * -4.8351919556e+02)))));
        bs = 1.0 + s * (3.0338060379e+01 + s * (3.2579251099e+02 + s * (1.5367296143e+03 + s * (3.1998581543e+03 + s * (2.5530502930e+03 + s * (4.7452853394e+02 + s * -2.2440952301e+01))))));
    }
    let z = bitcast<f32>(bitcast<u32>(x) & 0xffffe000u);
    return hg_exp(-z * z - 0.5625) * hg_exp((z - x) * (z + x) + r / bs) / x;
}
fn hg_erf(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    let neg = (bitcast<u32>(x) >> 31u) != 0u;
    if (ix >= 0x7f800000u) {
        if (hg_isnan(x)) { return x; }
        return select(1.0, -1.0, neg);
    }
    if (ix < 0x3f580000u) {
        if (ix < 0x31800000u) { return 0.125 * (8.0 * x + 1.0270333290e+00 * x); }
        let z = x * x;
        let r = 1.2837916613e-01 + z * (-3.2504209876e-01 + z * (-2.8481749818e-02 + z * (-5.7702702470e-03 + z * -2.3763017452e-05)));
        let s = 1.0 + z * (3.9791721106e-01 + z * (6.5022252500e-02 + z * (5.0813062117e-03 + z * (1.3249473704e-04 + z * -3.9602282413e-06))));
        return x + x * (r / s);
    }
    var y = 1.0;
    if (ix < 0x40c00000u) { y = 1.0 - hg_erfc2(ix, x); }
    return select(y, -y, neg);
}
"#,
    },
];
