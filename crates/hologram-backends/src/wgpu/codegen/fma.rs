//! Exact `fma` (one rounding) on every adapter.
//!
//! Vulkan lets drivers implement WGSL's `fma` as a multiply and an add (lavapipe does), so the
//! kernels carry their own:
//! - `f32` with f64: the product is exact in f64; the f64 sum is rounded to odd, so the final
//!   rounding to f32 is the only one that matters (`hg_fma32`);
//! - `f64`, and `f32` without f64: Boldo and Melquiond's error-free algorithm (a Dekker product,
//!   a two-sum, round-to-odd; `hg_fma64`, `hg_fma32s`) where no step can overflow or lose bits
//!   to underflow, and an integer implementation elsewhere (`hg_fma64_soft`, `hg_fma32_soft`:
//!   products beyond the largest finite value that c cancels, huge times tiny operands,
//!   subnormal operands and results).
//!
//! Zeros, infinities and NaN take plain operations, exact there (an infinite or NaN `c` with
//! finite `a` and `b` is the result: the exact product is finite even when `a * b` overflows).

use super::prelude::Helper;

/// The fma helpers.
pub const HELPERS: &[Helper] = &[
    Helper {
        name: "hg_fma32",
        deps: &["hg_o64"],
        text: r#"// fma on f32, exact: the product is exact in f64; the f64 sum is rounded to odd (using its
// exact error), so the final rounding to f32 is the only one that matters.
fn hg_fma32(a: f32, b: f32, c: f32) -> f32 {
    let p = hg_o64(f64(a) * f64(b));
    let cc = f64(c);
    let s = hg_o64(p + cc);
    let sb = bitcast<u64>(s);
    if ((sb & 0x7ff0000000000000lu) == 0x7ff0000000000000lu) { return f32(s); }
    let bb = hg_o64(s - p);
    let e = hg_o64(p - hg_o64(s - bb)) + hg_o64(cc - bb);
    if (e != f64(0.0) && (sb & 1lu) == 0lu) {
        let up = (e > f64(0.0)) == (s > f64(0.0));
        return f32(bitcast<f64>(select(sb - 1lu, sb + 1lu, up)));
    }
    return f32(s);
}
"#,
    },
    Helper {
        name: "hg_fma32s",
        deps: &["hg_f32dd", "hg_fma32_soft"],
        text: r#"// fma on f32 without f64, exact (Boldo and Melquiond): RN(th + RO(tl + ul)) with
// a*b = uh + ul and c + uh = th + tl exactly. Valid while every operand is normal, the split
// (4097 a) and the product cannot overflow (|a|, |b| < 2^111, |a b|, |c| < 2^121) and the
// product's error term is normal (|a b| >= 2^-67); other finite operands take the integer path.
fn hg_fma32s(a: f32, b: f32, c: f32) -> f32 {
    let ea = i32((bitcast<u32>(a) >> 23u) & 0xffu);
    let eb = i32((bitcast<u32>(b) >> 23u) & 0xffu);
    let ec = i32((bitcast<u32>(c) >> 23u) & 0xffu);
    if (ea == 0 || eb == 0 || ec == 0 || ea > 237 || eb > 237 || ec > 247 || ea + eb < 187 || ea + eb > 374) {
        if (ea == 0xff || eb == 0xff || ec == 0xff) {
            if (ea != 0xff && eb != 0xff) { return c; }
            return hg_o(a * b) + c;
        }
        if (a == 0.0 || b == 0.0) { return hg_o(a * b) + c; }
        if (c == 0.0) { return hg_o(a * b); }
        return hg_fma32_soft(a, b, c);
    }
    let u = hg_two_prod(a, b);
    let t = hg_two_sum(c, u.x);
    let v = hg_two_sum(t.y, u.y);
    var vo = v.x;
    let vb = bitcast<u32>(v.x);
    if (v.y != 0.0 && (vb & 1u) == 0u && v.x != 0.0) {
        vo = bitcast<f32>(select(vb - 1u, vb + 1u, (v.y > 0.0) == (v.x > 0.0)));
    }
    return t.x + vo;
}
"#,
    },
    Helper {
        name: "hg_fma32_soft",
        deps: &[],
        text: r#"// 64-bit unsigned integers as vec2<u32>(high word, low word).
fn hg_w_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.y + b.y;
    return vec2<u32>(a.x + b.x + select(0u, 1u, lo < a.y), lo);
}
fn hg_w_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x - select(0u, 1u, a.y < b.y), a.y - b.y);
}
fn hg_w_ge(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x > b.x || (a.x == b.x && a.y >= b.y); }
// Position of the highest set bit (-1 for 0).
fn hg_w_msb(a: vec2<u32>) -> i32 {
    if (a.x != 0u) { return 63 - i32(countLeadingZeros(a.x)); }
    return 31 - i32(countLeadingZeros(a.y));
}
// a << s, s in [0, 63].
fn hg_w_shl(a: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) { return a; }
    if (s < 32u) { return vec2<u32>((a.x << s) | (a.y >> (32u - s)), a.y << s); }
    return vec2<u32>(a.y << (s - 32u), 0u);
}
// a >> s, s in [0, 63].
fn hg_w_shr(a: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) { return a; }
    if (s < 32u) { return vec2<u32>(a.x >> s, (a.y >> s) | (a.x << (32u - s))); }
    return vec2<u32>(0u, a.x >> (s - 32u));
}
// a >> s for any s, with the bits shifted out OR-ed into bit 0 (sticky).
fn hg_w_shr_jam(a: vec2<u32>, s: u32) -> vec2<u32> {
    if (s == 0u) { return a; }
    if (s >= 64u) { return vec2<u32>(0u, select(0u, 1u, a.x != 0u || a.y != 0u)); }
    let r = hg_w_shr(a, s);
    let lost = hg_w_shl(a, 64u - s);
    return vec2<u32>(r.x, r.y | select(0u, 1u, lost.x != 0u || lost.y != 0u));
}
// a*b + c rounded once to f32, in integer arithmetic: finite a, b, c, none zero. Significands
// are placed with their leading bit at bit 61 (38 bits below f32's last), the smaller addend
// is shifted right with a sticky bit, and the sum is rounded to nearest-even at f32's last
// place, or at 2^-149 for subnormal results.
fn hg_fma32_soft(a: f32, b: f32, c: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let uc = bitcast<u32>(c);
    // x = m * 2^(e - 150), e the biased exponent (1 for subnormals).
    var ea = i32((ua >> 23u) & 0xffu);
    var ma = ua & 0x7fffffu;
    if (ea == 0) { ea = 1; } else { ma = ma | 0x800000u; }
    var eb = i32((ub >> 23u) & 0xffu);
    var mb = ub & 0x7fffffu;
    if (eb == 0) { eb = 1; } else { mb = mb | 0x800000u; }
    var ec = i32((uc >> 23u) & 0xffu);
    var mc = uc & 0x7fffffu;
    if (ec == 0) { ec = 1; } else { mc = mc | 0x800000u; }
    // The 48-bit product of the significands, from 16-bit halves.
    let a0 = ma & 0xffffu;
    let a1 = ma >> 16u;
    let b0 = mb & 0xffffu;
    let b1 = mb >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    var pm = vec2<u32>(a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u), (p00 & 0xffffu) | (mid << 16u));
    let shp = 61 - hg_w_msb(pm);
    pm = hg_w_shl(pm, u32(shp));
    let ep = ea + eb - 300 - shp;
    let shc = 61 - (31 - i32(countLeadingZeros(mc)));
    let cm = hg_w_shl(vec2<u32>(0u, mc), u32(shc));
    let ecm = ec - 150 - shc;
    let sp = (ua ^ ub) >> 31u;
    let sc = uc >> 31u;
    // x (the addend with the larger exponent e) + y (aligned to e).
    var x = pm;
    var y = hg_w_shr_jam(cm, u32(max(ep - ecm, 0)));
    var e = ep;
    var sx = sp;
    var sy = sc;
    if (ecm > ep) {
        x = cm;
        y = hg_w_shr_jam(pm, u32(ecm - ep));
        e = ecm;
        sx = sc;
        sy = sp;
    }
    var s: vec2<u32>;
    var sign = sx;
    if (sx == sy) {
        s = hg_w_add(x, y);
    } else if (hg_w_ge(x, y)) {
        s = hg_w_sub(x, y);
    } else {
        s = hg_w_sub(y, x);
        sign = sy;
    }
    if (s.x == 0u && s.y == 0u) { return 0.0; }
    // The sum is s * 2^e; its leading bit has weight 2^(k + e).
    let k = hg_w_msb(s);
    if (k + e > 127) { return bitcast<f32>((sign << 31u) | 0x7f800000u); }
    // Drop the bits below f32's last place (or below 2^-149), rounding to nearest-even.
    let drop = max(k - 23, -149 - e);
    var q = 0u;
    if (drop <= 0) {
        q = hg_w_shl(s, u32(-drop)).y;
    } else if (drop < 64) {
        q = hg_w_shr(s, u32(drop)).y;
        let rest = hg_w_shl(s, u32(64 - drop));
        if (rest.x > 0x80000000u || (rest.x == 0x80000000u && (rest.y != 0u || (q & 1u) == 1u))) {
            q = q + 1u;
        }
    }
    // q * 2^(e + drop): biased exponent and significand in one sum (a carry out of the
    // significand raises the exponent, up to infinity).
    return bitcast<f32>((sign << 31u) | ((u32(e + drop + 149) << 23u) + q));
}
"#,
    },
    Helper {
        name: "hg_fma64",
        deps: &["hg_o64", "hg_fma64_soft"],
        text: r#"// fma on f64, exact (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums",
// 2008): a*b = uh + ul exactly (Dekker), c + uh = th + tl exactly (Knuth), then
// RN(th + RO(tl + ul)). Valid while every operand is normal, the split (2^27+1) a and the
// product cannot overflow (|a|, |b| < 2^991, |a b|, |c| < 2^1001) and the product's error term
// is normal (|a b| >= 2^-873); other finite operands take the integer path.
fn hg_fma64(a: f64, b: f64, c: f64) -> f64 {
    let ea = i32((bitcast<u64>(a) >> 52u) & 0x7fflu);
    let eb = i32((bitcast<u64>(b) >> 52u) & 0x7fflu);
    let ec = i32((bitcast<u64>(c) >> 52u) & 0x7fflu);
    if (ea == 0 || eb == 0 || ec == 0 || ea > 2013 || eb > 2013 || ec > 2023 || ea + eb < 1173 || ea + eb > 3046) {
        if (ea == 0x7ff || eb == 0x7ff || ec == 0x7ff) {
            if (ea != 0x7ff && eb != 0x7ff) { return c; }
            return hg_o64(a * b) + c;
        }
        if (a == f64(0.0) || b == f64(0.0)) { return hg_o64(a * b) + c; }
        if (c == f64(0.0)) { return hg_o64(a * b); }
        return hg_fma64_soft(a, b, c);
    }
    // Dekker's exact product with Veltkamp's split (C = 2^27 + 1).
    let p = hg_o64(a * b);
    let ta = hg_o64(134217729.0 * a);
    let ah = hg_o64(ta - hg_o64(ta - a));
    let al = a - ah;
    let tb = hg_o64(134217729.0 * b);
    let bh = hg_o64(tb - hg_o64(tb - b));
    let bl = b - bh;
    let ul = hg_o64(hg_o64(hg_o64(hg_o64(ah * bh) - p) + hg_o64(ah * bl)) + hg_o64(al * bh)) + hg_o64(al * bl);
    // Knuth's two-sum of c and the product's head.
    let th = hg_o64(c + p);
    let bv = hg_o64(th - c);
    let tl = hg_o64(c - hg_o64(th - bv)) + hg_o64(p - bv);
    // Round-to-odd of tl + ul.
    let v = hg_o64(tl + ul);
    let bw = hg_o64(v - tl);
    let ve = hg_o64(tl - hg_o64(v - bw)) + hg_o64(ul - bw);
    var vo = v;
    let vb = bitcast<u64>(v);
    if (ve != f64(0.0) && (vb & 1lu) == 0lu && v != f64(0.0)) {
        let up = (ve > f64(0.0)) == (v > f64(0.0));
        vo = bitcast<f64>(select(vb - 1lu, vb + 1lu, up));
    }
    return th + vo;
}
"#,
    },
    Helper {
        name: "hg_fma64_soft",
        deps: &[],
        text: r#"// 128-bit unsigned integers.
struct HgU128 { hi: u64, lo: u64 }
fn hg_q_add(a: HgU128, b: HgU128) -> HgU128 {
    let lo = a.lo + b.lo;
    return HgU128(a.hi + b.hi + select(0lu, 1lu, lo < a.lo), lo);
}
fn hg_q_sub(a: HgU128, b: HgU128) -> HgU128 {
    return HgU128(a.hi - b.hi - select(0lu, 1lu, a.lo < b.lo), a.lo - b.lo);
}
fn hg_q_ge(a: HgU128, b: HgU128) -> bool { return a.hi > b.hi || (a.hi == b.hi && a.lo >= b.lo); }
// Position of the highest set bit of a u64 (-1 for 0).
fn hg_msb64(v: u64) -> i32 {
    let hi = u32(v >> 32u);
    if (hi != 0u) { return 63 - i32(countLeadingZeros(hi)); }
    return 31 - i32(countLeadingZeros(u32(v & 0xfffffffflu)));
}
fn hg_q_msb(a: HgU128) -> i32 {
    if (a.hi != 0lu) { return 64 + hg_msb64(a.hi); }
    return hg_msb64(a.lo);
}
// a << s, s in [0, 127].
fn hg_q_shl(a: HgU128, s: u32) -> HgU128 {
    if (s == 0u) { return a; }
    if (s < 64u) { return HgU128((a.hi << s) | (a.lo >> (64u - s)), a.lo << s); }
    return HgU128(a.lo << (s - 64u), 0lu);
}
// a >> s, s in [0, 127].
fn hg_q_shr(a: HgU128, s: u32) -> HgU128 {
    if (s == 0u) { return a; }
    if (s < 64u) { return HgU128(a.hi >> s, (a.lo >> s) | (a.hi << (64u - s))); }
    return HgU128(0lu, a.hi >> (s - 64u));
}
// a >> s for any s, with the bits shifted out OR-ed into bit 0 (sticky).
fn hg_q_shr_jam(a: HgU128, s: u32) -> HgU128 {
    if (s == 0u) { return a; }
    if (s >= 128u) { return HgU128(0lu, select(0lu, 1lu, a.hi != 0lu || a.lo != 0lu)); }
    let r = hg_q_shr(a, s);
    let lost = hg_q_shl(a, 128u - s);
    return HgU128(r.hi, r.lo | select(0lu, 1lu, lost.hi != 0lu || lost.lo != 0lu));
}
// a*b + c rounded once to f64, in integer arithmetic: finite a, b, c, none zero. Significands
// are placed with their leading bit at bit 125 (72 bits below f64's last), the smaller addend
// is shifted right with a sticky bit, and the sum is rounded to nearest-even at f64's last
// place, or at 2^-1074 for subnormal results.
fn hg_fma64_soft(a: f64, b: f64, c: f64) -> f64 {
    let ua = bitcast<u64>(a);
    let ub = bitcast<u64>(b);
    let uc = bitcast<u64>(c);
    // x = m * 2^(e - 1075), e the biased exponent (1 for subnormals).
    var ea = i32((ua >> 52u) & 0x7fflu);
    var ma = ua & 0xffffffffffffflu;
    if (ea == 0) { ea = 1; } else { ma = ma | 0x10000000000000lu; }
    var eb = i32((ub >> 52u) & 0x7fflu);
    var mb = ub & 0xffffffffffffflu;
    if (eb == 0) { eb = 1; } else { mb = mb | 0x10000000000000lu; }
    var ec = i32((uc >> 52u) & 0x7fflu);
    var mc = uc & 0xffffffffffffflu;
    if (ec == 0) { ec = 1; } else { mc = mc | 0x10000000000000lu; }
    // The 106-bit product of the significands, from 32-bit halves.
    let a0 = ma & 0xfffffffflu;
    let a1 = ma >> 32u;
    let b0 = mb & 0xfffffffflu;
    let b1 = mb >> 32u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 32u) + (p01 & 0xfffffffflu) + (p10 & 0xfffffffflu);
    var pm = HgU128(a1 * b1 + (p01 >> 32u) + (p10 >> 32u) + (mid >> 32u), (p00 & 0xfffffffflu) | (mid << 32u));
    let shp = 125 - hg_q_msb(pm);
    pm = hg_q_shl(pm, u32(shp));
    let ep = ea + eb - 2150 - shp;
    let shc = 125 - hg_msb64(mc);
    let cm = hg_q_shl(HgU128(0lu, mc), u32(shc));
    let ecm = ec - 1075 - shc;
    let sp = (ua ^ ub) >> 63u;
    let sc = uc >> 63u;
    // x (the addend with the larger exponent e) + y (aligned to e).
    var x = pm;
    var y = hg_q_shr_jam(cm, u32(max(ep - ecm, 0)));
    var e = ep;
    var sx = sp;
    var sy = sc;
    if (ecm > ep) {
        x = cm;
        y = hg_q_shr_jam(pm, u32(ecm - ep));
        e = ecm;
        sx = sc;
        sy = sp;
    }
    var s: HgU128;
    var sign = sx;
    if (sx == sy) {
        s = hg_q_add(x, y);
    } else if (hg_q_ge(x, y)) {
        s = hg_q_sub(x, y);
    } else {
        s = hg_q_sub(y, x);
        sign = sy;
    }
    if (s.hi == 0lu && s.lo == 0lu) { return f64(0.0); }
    // The sum is s * 2^e; its leading bit has weight 2^(k + e).
    let k = hg_q_msb(s);
    if (k + e > 1023) { return bitcast<f64>((sign << 63u) | 0x7ff0000000000000lu); }
    // Drop the bits below f64's last place (or below 2^-1074), rounding to nearest-even.
    let drop = max(k - 52, -1074 - e);
    var q = 0lu;
    if (drop <= 0) {
        q = hg_q_shl(s, u32(-drop)).lo;
    } else if (drop < 128) {
        q = hg_q_shr(s, u32(drop)).lo;
        let rest = hg_q_shl(s, u32(128 - drop));
        let half = 0x8000000000000000lu;
        if (rest.hi > half || (rest.hi == half && (rest.lo != 0lu || (q & 1lu) == 1lu))) {
            q = q + 1lu;
        }
    }
    // q * 2^(e + drop): biased exponent and significand in one sum (a carry out of the
    // significand raises the exponent, up to infinity).
    return bitcast<f64>((sign << 63u) | ((u64(u32(e + drop + 1074)) << 52u) + q));
}
"#,
    },
];
