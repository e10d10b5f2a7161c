//! The f32 `exp`, `exp2`, `sigmoid` and `tanh` lane functions (the branch-free definitions in
//! `hologram_isa::semantics`, vectorized by the lane loops) against the host's f64 functions
//! rounded once: every f32 bit pattern at a stride (`HOLOGRAM_ULP_STRIDE`, default 1021, so
//! every exponent gets thousands of inputs; `HOLOGRAM_ULP_STRIDE=1` in a release build checks
//! all 2^32) plus the special values and the edges of each range. Each family of lane functions
//! this CPU has (portable, AVX2+FMA), both unaliased and in place (the loops vectorize
//! differently), must give exactly the scalar definition's bits, which the compiler also uses
//! to fold constants.
//!
//! Measured with stride 1 (release): exp 1 ulp, exp2 1 ulp, sigmoid 2 ulp, tanh 1 ulp.

use hologram_isa::semantics::Float;
use hologram_isa::{Type, UnaryOp};

use super::lanes::{unary_fn_each_family, LaneFn};

struct Func {
    op: UnaryOp,
    scalar: fn(f32) -> f32,
    reference: fn(f64) -> f64,
    /// The largest distance in ulps allowed from the correctly rounded result (the measured
    /// maximum; the ISA README documents at least this much).
    bound: u64,
}

const FUNCS: [Func; 4] = [
    Func {
        op: UnaryOp::Exp,
        scalar: <f32 as Float>::exp,
        reference: f64::exp,
        bound: 1,
    },
    Func {
        op: UnaryOp::Exp2,
        scalar: <f32 as Float>::exp2,
        reference: f64::exp2,
        bound: 1,
    },
    Func {
        op: UnaryOp::Sigmoid,
        scalar: <f32 as Float>::sigmoid,
        reference: |x| 1.0 / (1.0 + (-x).exp()),
        bound: 2,
    },
    Func {
        op: UnaryOp::Tanh,
        scalar: <f32 as Float>::tanh,
        reference: f64::tanh,
        bound: 1,
    },
];

/// Special values and the edges where each function changes regime.
const SPECIALS: [f32; 30] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    1e-45,
    -1e-45,
    f32::MAX,
    f32::MIN,
    1.0,
    -1.0,
    0.5,
    -0.5,
    // ln(f32::MAX) lies between these two.
    88.722_83,
    88.722_84,
    // e^x reaches the subnormals and then half the smallest one.
    -87.336_55,
    -103.972_08,
    -103.972_09,
    -104.0,
    89.0,
    128.0,
    127.999_99,
    -126.0,
    -149.0,
    -150.0,
    // tanh switches formula here.
    0.625,
    0.624_999_94,
    -0.625,
];

/// The value's position among the f32 values, so that differences count ulps (-0 and +0 are
/// one position).
fn ordered(v: f32) -> i64 {
    let bits = v.to_bits();
    if bits & 0x8000_0000 == 0 {
        bits as i64
    } else {
        -((bits & 0x7fff_ffff) as i64)
    }
}

fn ulps(got: f32, want: f32) -> u64 {
    match (got.is_nan(), want.is_nan()) {
        (true, true) => 0,
        (false, false) => (ordered(got) - ordered(want)).unsigned_abs(),
        _ => u64::MAX,
    }
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `f` over `xs` through a lane function, unaliased and then in place.
fn through_lanes(f: LaneFn, xs: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut out = vec![0.0f32; xs.len()];
    let mut in_place = xs.to_vec();
    let p = xs.as_ptr() as *const u8;
    // SAFETY: `out` and `xs` hold xs.len() f32 lanes each and do not overlap; `in_place` is
    // both destination and operand (allowed: exactly equal).
    unsafe {
        f(xs.len(), out.as_mut_ptr() as *mut u8, p, p, p, None);
        let q = in_place.as_mut_ptr() as *mut u8;
        f(xs.len(), q, q, q, q, None);
    }
    (out, in_place)
}

fn stride() -> usize {
    std::env::var("HOLOGRAM_ULP_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s > 0)
        .unwrap_or(1021)
}

#[test]
fn branchless_transcendentals_are_within_bounds_and_agree_everywhere() {
    let stride = stride();
    let chunk = 1 << 16;
    let mut problems = Vec::new();
    for func in &FUNCS {
        let families = unary_fn_each_family(func.op, Type::F32);
        assert!(
            !families.is_empty(),
            "{} has a lane function",
            func.op.name()
        );
        let mut worst = (0u64, 0.0f32);
        let mut check = |xs: &[f32]| {
            let mut scalar = Vec::with_capacity(xs.len());
            for &x in xs {
                let s = (func.scalar)(x);
                let want = (func.reference)(x as f64) as f32;
                let e = ulps(s, want);
                if e > worst.0 {
                    worst = (e, x);
                }
                scalar.push(s);
            }
            for &(family, f) in &families {
                let (out, in_place) = through_lanes(f, xs);
                for (i, &x) in xs.iter().enumerate() {
                    if !same(out[i], scalar[i]) || !same(in_place[i], scalar[i]) {
                        problems.push(format!(
                            "{}({x:e}) on {family}: {:e} / in place {:e}, scalar {:e}",
                            func.op.name(),
                            out[i],
                            in_place[i],
                            scalar[i]
                        ));
                        return;
                    }
                }
            }
        };
        check(&SPECIALS);
        let mut xs = Vec::with_capacity(chunk);
        for bits in (0..=u32::MAX).step_by(stride) {
            xs.push(f32::from_bits(bits));
            if xs.len() == chunk {
                check(&xs);
                xs.clear();
            }
        }
        check(&xs);
        println!(
            "{}: max {} ulp (bound {}) at x = {:e}, stride {stride}",
            func.op.name(),
            worst.0,
            func.bound,
            worst.1
        );
        if worst.0 > func.bound {
            problems.push(format!(
                "{}: {} ulp at x = {:e}, bound {}",
                func.op.name(),
                worst.0,
                worst.1,
                func.bound
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn branchless_transcendentals_special_values() {
    let exp = <f32 as Float>::exp;
    assert_eq!(exp(0.0), 1.0);
    assert_eq!(exp(-0.0), 1.0);
    assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0);
    assert!(exp(f32::NAN).is_nan());
    assert_eq!(exp(88.722_84), f32::INFINITY);
    assert!(exp(88.722_83).is_finite() && exp(88.722_83) > 3.4e38);
    // e^-104 is below half the smallest subnormal, e^-103.5 above it.
    assert_eq!(exp(-104.0).to_bits(), 0);
    assert_eq!(exp(-103.5), f32::from_bits(1));
    let exp2 = <f32 as Float>::exp2;
    assert_eq!(exp2(-149.0), f32::from_bits(1));
    assert_eq!(exp2(-126.0), f32::MIN_POSITIVE);
    assert_eq!(exp2(127.0), 2f32.powi(127));
    assert_eq!(exp2(128.0), f32::INFINITY);
    assert_eq!(exp2(-151.0).to_bits(), 0);
    let tanh = <f32 as Float>::tanh;
    assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(tanh(0.0).to_bits(), 0);
    assert_eq!(tanh(f32::INFINITY), 1.0);
    assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
    assert!(tanh(f32::NAN).is_nan());
    let sigmoid = <f32 as Float>::sigmoid;
    assert_eq!(sigmoid(0.0), 0.5);
    assert_eq!(sigmoid(-0.0), 0.5);
    assert_eq!(sigmoid(f32::INFINITY), 1.0);
    assert_eq!(sigmoid(f32::NEG_INFINITY).to_bits(), 0);
    assert!(sigmoid(f32::NAN).is_nan());
    // Below x = -87.3 the result is subnormal, not 0.
    assert!(sigmoid(-100.0) > 0.0 && sigmoid(-100.0) < f32::MIN_POSITIVE);
}
