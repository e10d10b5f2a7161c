//! The f32 `exp`, `exp2`, `sigmoid` and `tanh` the ISA defines, written without branches, libm
//! calls or fused multiply-adds (selects, bit arithmetic, and separately rounded IEEE
//! operations only). A loop over them vectorizes at any x86_64 level (SSE2 lanes in the CPU
//! backend's portable family, AVX2 in its other), and since Rust never contracts or reassociates
//! float arithmetic, every context computes the same bits: one lane or eight, the CPU backend's
//! native loops or its interpreter, and the compiler folding a constant.
//!
//! Measured error against the correctly rounded result (the host's f64 function rounded once),
//! by `crates/hologram-backends/src/cpu/branchless_ulp_tests.rs` over every one of the 2^32
//! f32 inputs (`HOLOGRAM_ULP_STRIDE=1`): [`exp_f32`] 1 ulp, [`exp2_f32`] 1 ulp, [`sigmoid_f32`]
//! 2 ulp, [`tanh_f32`] 1 ulp. The coefficients are weighted least-squares (near-minimax) fits,
//! rounded to f32.

/// 1.5·2^23: adding it to a float of magnitude below 2^22 rounds that float to an integer (ties
/// to even), which then sits in the low bits of the sum.
const ROUNDER: f32 = 12_582_912.0;
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 in two parts: `LN2_HI` has 9 significant bits, so `k·LN2_HI` is exact for the |k| ≤ 150
/// that occur and `x - k·LN2_HI` is exact too (Sterbenz); `LN2_HI + LN2_LO` is ln 2 to 2^-33.
const LN2_HI: f32 = 355.0 / 512.0;
const LN2_LO: f32 = -2.121_944_4e-4;
/// exp(r) ≈ 1 + r + r²·q(r) on |r| ≤ ln2/2: q's coefficients, constant first (relative error
/// of the approximation 4.7e-10).
const EXP_Q: [f32; 6] = [
    0.5,
    0.166_666_64,
    0.041_666_4,
    0.008_333_815,
    0.001_393_848,
    0.000_196_132_5,
];
/// 2^f ≈ 1 + f·p(f) on |f| ≤ 1/2: p's coefficients, constant first (the fit's constant
/// term rounds to ln 2's f32).
const EXP2_P: [f32; 6] = [
    std::f32::consts::LN_2,
    0.240_226_48,
    0.055_503_324,
    0.009_618_437,
    0.001_339_887_5,
    0.000_153_533_6,
];
/// tanh(x) ≈ x + x³·t(x²) on |x| < `TANH_POLY_BELOW`: t's coefficients, constant first.
const TANH_T: [f32; 5] = [
    -0.333_332_8,
    0.133_314_42,
    -0.053_739_715,
    0.020_639_084,
    -0.005_704_982_7,
];
/// Below this magnitude tanh is the odd polynomial; above, `1 - 2/(e^2|x| + 1)` (whose
/// cancellation is harmless once the result is above 1/2).
const TANH_POLY_BELOW: f32 = 0.625;

/// Horner's rule, separately rounded steps.
#[inline(always)]
fn horner<const N: usize>(x: f32, c: &[f32; N]) -> f32 {
    let mut acc = c[N - 1];
    for &k in c[..N - 1].iter().rev() {
        acc = acc * x + k;
    }
    acc
}

/// `p · 2^k` for an integer `k` in [-151, 129]: two exact power-of-two factors (each a normal
/// float), so the only rounding is the last product's, into the subnormals or to infinity.
#[inline(always)]
fn scale(p: f32, k: i32) -> f32 {
    let half = k >> 1;
    let s1 = f32::from_bits((half.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((k.wrapping_sub(half).wrapping_add(127) as u32) << 23);
    p * s1 * s2
}

/// `x` limited to `[lo, hi]`; a NaN stays NaN (the comparisons are false for it).
#[inline(always)]
fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x > hi { hi } else { x };
    if x < lo {
        lo
    } else {
        x
    }
}

/// `(round(y), round(y) as i32)` for |y| < 2^22, ties to even.
#[inline(always)]
fn round_to_int(y: f32) -> (f32, i32) {
    let z = y + ROUNDER;
    let k = (z.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    (z - ROUNDER, k)
}

/// e^x within 1 ulp of the correctly rounded result over the whole f32 range (measured
/// maximum 1 ulp); overflows to +inf above ln(f32::MAX), gives subnormals and then +0 below
/// ln(f32::MIN_POSITIVE), e^±0 = 1, e^-inf = 0, e^inf = inf, NaN gives NaN.
///
/// Cody-Waite reduction `x = k·ln2 + r` (|r| ≤ ln2/2, k = round(x/ln2)), then
/// `e^r = 1 + (r + r²·q(r))` and a scale by 2^k.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // e^89 overflows and e^-104 is below half the smallest subnormal: clamping there keeps
    // k in [-150, 129] without changing any result.
    let x = clamp(x, -104.0, 89.0);
    let (k, ki) = round_to_int(x * LOG2_E);
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let p = 1.0 + (r + (r * r) * horner(r, &EXP_Q));
    scale(p, ki)
}

/// 2^x within 1 ulp of the correctly rounded result (measured maximum 1 ulp), with the limits
/// and special values of [`exp_f32`].
///
/// `x = k + f` exactly (|f| ≤ 1/2), `2^f = 1 + f·p(f)`, then a scale by 2^k.
#[inline(always)]
pub fn exp2_f32(x: f32) -> f32 {
    let x = clamp(x, -151.0, 129.0);
    let (k, ki) = round_to_int(x);
    let f = x - k;
    scale(1.0 + f * horner(f, &EXP2_P), ki)
}

/// `1 / (1 + e^-x)` within 2 ulp of the correctly rounded result (measured maximum 2 ulp);
/// computed as `1/(1 + e^-|x|)` for x ≥ 0 and `e^x/(1 + e^x)` below, so results for x below
/// -87 are the (subnormal) values rather than 0. NaN gives NaN.
#[inline(always)]
pub fn sigmoid_f32(x: f32) -> f32 {
    let e = exp_f32(-x.abs());
    let numerator = if x >= 0.0 { 1.0 } else { e };
    numerator / (1.0 + e)
}

/// Hyperbolic tangent within 1 ulp of the correctly rounded result (measured maximum 1 ulp);
/// odd (tanh(-0) = -0), ±1 at ±inf, NaN gives NaN.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = a * a;
    let near_zero = a + a * z * horner(z, &TANH_T);
    // e^2|x| overflows above |x| = 44.4 and 2/inf = 0: the result is then ±1 as it should be.
    let away = 1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0);
    let magnitude = if a < TANH_POLY_BELOW { near_zero } else { away };
    f32::from_bits(magnitude.to_bits() | (x.to_bits() & 0x8000_0000))
}
