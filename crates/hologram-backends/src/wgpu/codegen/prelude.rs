//! WGSL helper functions the generated kernels call: exact half-float conversions, NaN-aware
//! min/max, `fmod`, saturating float-to-integer conversions and round-to-odd narrowing.
//!
//! Every helper is written with integer and exactly rounded float operations only, so it gives
//! the same bits on every adapter. A kernel includes only the helpers it names (see
//! [`HELPERS`] and [`resolve`]).

/// A helper: its name, the helpers it calls, and its WGSL text.
pub struct Helper {
    /// Function name (`hg_...`).
    pub name: &'static str,
    /// Helpers it calls.
    pub deps: &'static [&'static str],
    /// WGSL source.
    pub text: &'static str,
}

/// Every 32-bit helper. (64-bit helpers live in [`super::wide`].)
pub const HELPERS: &[Helper] = &[
    Helper {
        name: "hg_isnan",
        deps: &[],
        text: "fn hg_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n",
    },
    Helper {
        name: "hg_nan",
        deps: &[],
        text: "fn hg_nan() -> f32 { return bitcast<f32>(0x7fc00000u ^ hg_zero); }\n",
    },
    Helper {
        name: "hg_f2h",
        deps: &[],
        text: r#"// f32 -> f16 bits, round to nearest even, overflow to inf, NaN stays NaN.
fn hg_f2h(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let s = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) { return s | 0x7e00u | ((a >> 13u) & 0x3ffu); }
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u;
        var h = r >> 13u;
        let rest = r & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) == 1u)) { h = h + 1u; }
        return s | min(h, 0x7c00u);
    }
    let e = a >> 23u;
    if (e < 102u) { return s; }
    let m = (a & 0x7fffffu) | 0x800000u;
    let sh = 126u - e;
    var h = m >> sh;
    let rest = m & ((1u << sh) - 1u);
    let half = 1u << (sh - 1u);
    if (rest > half || (rest == half && (h & 1u) == 1u)) { h = h + 1u; }
    return s | h;
}
"#,
    },
    Helper {
        name: "hg_h2f",
        deps: &[],
        text: r#"// f16 bits -> f32, exact.
fn hg_h2f(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
    if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * 5.9604644775390625e-8)); }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
"#,
    },
    Helper {
        name: "hg_rh",
        deps: &["hg_f2h", "hg_h2f"],
        text: "fn hg_rh(x: f32) -> f32 { return hg_h2f(hg_f2h(x)); }\n",
    },
    Helper {
        name: "hg_f2b",
        deps: &[],
        text: r#"// f32 -> bf16 bits, round to nearest even, NaN stays NaN.
fn hg_f2b(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
"#,
    },
    Helper {
        name: "hg_b2f",
        deps: &[],
        text: "fn hg_b2f(h: u32) -> f32 { return bitcast<f32>(h << 16u); }\n",
    },
    Helper {
        name: "hg_rb",
        deps: &["hg_f2b", "hg_b2f"],
        text: "fn hg_rb(x: f32) -> f32 { return hg_b2f(hg_f2b(x)); }\n",
    },
    Helper {
        name: "hg_fmin",
        deps: &["hg_isnan"],
        text: r#"// IEEE 754-2019 minimumNumber: a NaN operand yields the other; -0 is below +0 (equal
// operands: the OR of the bits keeps a sign bit).
fn hg_fmin(a: f32, b: f32) -> f32 {
    if (hg_isnan(b)) { return a; }
    if (hg_isnan(a)) { return b; }
    if (a == b) { return bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b)); }
    return select(b, a, a < b);
}
"#,
    },
    Helper {
        name: "hg_fmax",
        deps: &["hg_isnan"],
        text: r#"// IEEE 754-2019 maximumNumber: a NaN operand yields the other; +0 is above -0 (equal
// operands: the AND of the bits clears a sign bit).
fn hg_fmax(a: f32, b: f32) -> f32 {
    if (hg_isnan(b)) { return a; }
    if (hg_isnan(a)) { return b; }
    if (a == b) { return bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)); }
    return select(b, a, a > b);
}
"#,
    },
    Helper {
        name: "hg_fmod",
        deps: &["hg_isnan", "hg_nan"],
        text: r#"// fmod, exact (after musl's fmodf).
fn hg_fmod(x: f32, y: f32) -> f32 {
    let xb = bitcast<u32>(x);
    var uy = bitcast<u32>(y);
    var ex = i32((xb >> 23u) & 0xffu);
    var ey = i32((uy >> 23u) & 0xffu);
    let sx = xb & 0x80000000u;
    var ux = xb;
    if ((uy << 1u) == 0u || hg_isnan(y) || ex == 0xff) { return hg_nan(); }
    if ((ux << 1u) <= (uy << 1u)) {
        if ((ux << 1u) == (uy << 1u)) { return bitcast<f32>(sx); }
        return x;
    }
    if (ex == 0) {
        var i = ux << 9u;
        loop { if ((i >> 31u) != 0u) { break; } ex = ex - 1; i = i << 1u; }
        ux = ux << u32(1 - ex);
    } else {
        ux = (ux & 0x7fffffu) | 0x800000u;
    }
    if (ey == 0) {
        var i = uy << 9u;
        loop { if ((i >> 31u) != 0u) { break; } ey = ey - 1; i = i << 1u; }
        uy = uy << u32(1 - ey);
    } else {
        uy = (uy & 0x7fffffu) | 0x800000u;
    }
    loop {
        if (ex <= ey) { break; }
        let i = ux - uy;
        if ((i >> 31u) == 0u) {
            if (i == 0u) { return bitcast<f32>(sx); }
            ux = i;
        }
        ux = ux << 1u;
        ex = ex - 1;
    }
    let i = ux - uy;
    if ((i >> 31u) == 0u) {
        if (i == 0u) { return bitcast<f32>(sx); }
        ux = i;
    }
    loop { if ((ux >> 23u) != 0u) { break; } ux = ux << 1u; ex = ex - 1; }
    if (ex > 0) {
        ux = (ux - 0x800000u) | (u32(ex) << 23u);
    } else {
        ux = ux >> u32(1 - ex);
    }
    return bitcast<f32>(ux | sx);
}
"#,
    },
    Helper {
        name: "hg_u2f_odd",
        deps: &[],
        text: r#"// u32 -> f32 rounded to odd (a later rounding to a narrower format is then exact-once).
fn hg_u2f_odd(v: u32) -> f32 {
    if (v < 0x1000000u) { return f32(v); }
    let sh = 8u - countLeadingZeros(v);
    var m = v >> sh;
    if ((v & ((1u << sh) - 1u)) != 0u) { m = m | 1u; }
    return f32(m) * f32(1u << sh);
}
"#,
    },
    Helper {
        name: "hg_i2f_odd",
        deps: &["hg_u2f_odd"],
        text: r#"fn hg_i2f_odd(v: i32) -> f32 {
    let mag = select(bitcast<u32>(v), 0u - bitcast<u32>(v), v < 0i);
    let r = hg_u2f_odd(mag);
    return select(r, -r, v < 0i);
}
"#,
    },
];

/// The helpers named in `body` (and the helpers they call), in dependency order.
pub fn resolve<'a>(body: &str, all: &[&'a [Helper]]) -> Vec<&'a Helper> {
    let find = |name: &str| {
        all.iter()
            .flat_map(|list| list.iter())
            .find(|h| h.name == name)
    };
    let mut out: Vec<&Helper> = Vec::new();
    fn visit<'a>(
        h: &'a Helper,
        find: &dyn Fn(&str) -> Option<&'a Helper>,
        out: &mut Vec<&'a Helper>,
    ) {
        if out.iter().any(|o| o.name == h.name) {
            return;
        }
        for d in h.deps {
            if let Some(dep) = find(d) {
                visit(dep, find, out);
            }
        }
        out.push(h);
    }
    for list in all {
        for h in list.iter() {
            if mentions(body, h.name) {
                visit(h, &find, &mut out);
            }
        }
    }
    out
}

/// True when `text` calls the function `name` (as `name(`).
pub fn mentions(text: &str, name: &str) -> bool {
    let pat = format!("{name}(");
    text.match_indices(&pat).any(|(i, _)| {
        i == 0 || {
            let c = text.as_bytes()[i - 1];
            !(c.is_ascii_alphanumeric() || c == b'_')
        }
    })
}
