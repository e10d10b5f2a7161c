//! Arithmetic, logic and transcendental semantics per scalar type.

use half::{bf16, f16};

use super::branchless;
use crate::types::Type;

/// Operations every numeric type has. Integer arithmetic wraps; integer division by zero yields
/// the dividend and remainder by zero yields zero (no trap on any backend).
pub trait Num: Copy + PartialOrd + Default + Send + Sync + 'static {
    /// The ISA type.
    const TYPE: Type;
    /// `a + b`
    fn add(a: Self, b: Self) -> Self;
    /// `a - b`
    fn sub(a: Self, b: Self) -> Self;
    /// `a * b`
    fn mul(a: Self, b: Self) -> Self;
    /// `a / b`
    fn div(a: Self, b: Self) -> Self;
    /// Remainder (sign of the dividend); `fmod` for floats.
    fn rem(a: Self, b: Self) -> Self;
    /// Minimum (floats: a NaN operand yields the other).
    fn min(a: Self, b: Self) -> Self;
    /// Maximum (floats: a NaN operand yields the other).
    fn max(a: Self, b: Self) -> Self;
    /// `a * b + c`, rounded after the multiply and after the add.
    fn mad(a: Self, b: Self, c: Self) -> Self {
        Self::add(Self::mul(a, b), c)
    }
    /// Absolute value (wrapping for integers).
    fn abs(a: Self) -> Self;
    /// Negation (wrapping for integers).
    fn neg(a: Self) -> Self;
    /// `a == b` (false if either is NaN).
    fn cmp_eq(a: Self, b: Self) -> bool {
        a == b
    }
    /// `a < b`
    fn cmp_lt(a: Self, b: Self) -> bool {
        a < b
    }
    /// `a <= b`
    fn cmp_le(a: Self, b: Self) -> bool {
        a <= b
    }
}

/// Bitwise operations of the integer types.
pub trait Int: Num {
    /// `a & b`
    fn and(a: Self, b: Self) -> Self;
    /// `a | b`
    fn or(a: Self, b: Self) -> Self;
    /// `a ^ b`
    fn xor(a: Self, b: Self) -> Self;
    /// `!a`
    fn not(a: Self) -> Self;
    /// `a << (b mod bits)`
    fn shl(a: Self, b: Self) -> Self;
    /// `a >> (b mod bits)`, arithmetic for signed types.
    fn shr(a: Self, b: Self) -> Self;
    /// As i128, for indexing.
    fn to_i128(self) -> i128;
}

macro_rules! int_impl {
    ($($t:ty => $ty:ident, |$x:ident| $abs:expr);*) => {$(
        impl Num for $t {
            const TYPE: Type = Type::$ty;
            #[inline(always)] fn add(a: Self, b: Self) -> Self { a.wrapping_add(b) }
            #[inline(always)] fn sub(a: Self, b: Self) -> Self { a.wrapping_sub(b) }
            #[inline(always)] fn mul(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
            #[inline(always)] fn div(a: Self, b: Self) -> Self { if b == 0 { a } else { a.wrapping_div(b) } }
            #[inline(always)] fn rem(a: Self, b: Self) -> Self { if b == 0 { 0 } else { a.wrapping_rem(b) } }
            #[inline(always)] fn min(a: Self, b: Self) -> Self { Ord::min(a, b) }
            #[inline(always)] fn max(a: Self, b: Self) -> Self { Ord::max(a, b) }
            #[inline(always)] fn abs($x: Self) -> Self { $abs }
            #[inline(always)] fn neg(a: Self) -> Self { a.wrapping_neg() }
        }
        impl Int for $t {
            #[inline(always)] fn and(a: Self, b: Self) -> Self { a & b }
            #[inline(always)] fn or(a: Self, b: Self) -> Self { a | b }
            #[inline(always)] fn xor(a: Self, b: Self) -> Self { a ^ b }
            #[inline(always)] fn not(a: Self) -> Self { !a }
            #[inline(always)] fn shl(a: Self, b: Self) -> Self { a.wrapping_shl(b as u32) }
            #[inline(always)] fn shr(a: Self, b: Self) -> Self { a.wrapping_shr(b as u32) }
            #[inline(always)] fn to_i128(self) -> i128 { self as i128 }
        }
    )*};
}

int_impl!(
    i8 => I8, |a| a.wrapping_abs();
    i16 => I16, |a| a.wrapping_abs();
    i32 => I32, |a| a.wrapping_abs();
    i64 => I64, |a| a.wrapping_abs();
    u8 => U8, |a| a;
    u16 => U16, |a| a;
    u32 => U32, |a| a;
    u64 => U64, |a| a
);

/// Floating-point operations. `f16` and `bf16` compute in `f32` and round back after every
/// operation.
pub trait Float: Num {
    /// `a * b + c` rounded once.
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// e^x
    fn exp(a: Self) -> Self;
    /// 2^x
    fn exp2(a: Self) -> Self;
    /// Natural logarithm.
    fn log(a: Self) -> Self;
    /// Base-2 logarithm.
    fn log2(a: Self) -> Self;
    /// Base-10 logarithm.
    fn log10(a: Self) -> Self;
    /// Square root (correctly rounded).
    fn sqrt(a: Self) -> Self;
    /// `1 / sqrt(x)`
    fn rsqrt(a: Self) -> Self;
    /// Sine.
    fn sin(a: Self) -> Self;
    /// Cosine.
    fn cos(a: Self) -> Self;
    /// Tangent.
    fn tan(a: Self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(a: Self) -> Self;
    /// `1 / (1 + e^-x)`
    fn sigmoid(a: Self) -> Self;
    /// Error function.
    fn erf(a: Self) -> Self;
    /// `a^b`
    fn pow(a: Self, b: Self) -> Self;
    /// Round toward -inf.
    fn floor(a: Self) -> Self;
    /// Round toward +inf.
    fn ceil(a: Self) -> Self;
    /// Round half to even.
    fn round(a: Self) -> Self;
    /// Round toward zero.
    fn trunc(a: Self) -> Self;
}

macro_rules! float_impl {
    ($t:ty, $ty:ident, $erf:path, $exp:path, $exp2:path, $tanh:path, $sigmoid:path) => {
        impl Num for $t {
            const TYPE: Type = Type::$ty;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                a - b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            #[inline(always)]
            fn div(a: Self, b: Self) -> Self {
                a / b
            }
            #[inline(always)]
            fn rem(a: Self, b: Self) -> Self {
                a % b
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                // A NaN operand yields the other; -0 is below +0 (IEEE 754-2019 minimumNumber).
                if a.is_nan() {
                    b
                } else if b.is_nan() {
                    a
                } else if a < b {
                    a
                } else if b < a {
                    b
                } else {
                    <$t>::from_bits(a.to_bits() | b.to_bits())
                }
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                if a.is_nan() {
                    b
                } else if b.is_nan() {
                    a
                } else if a > b {
                    a
                } else if b > a {
                    b
                } else {
                    <$t>::from_bits(a.to_bits() & b.to_bits())
                }
            }
            #[inline(always)]
            fn abs(a: Self) -> Self {
                <$t>::abs(a)
            }
            #[inline(always)]
            fn neg(a: Self) -> Self {
                -a
            }
        }
        impl Float for $t {
            #[inline(always)]
            fn fma(a: Self, b: Self, c: Self) -> Self {
                a.mul_add(b, c)
            }
            #[inline(always)]
            fn exp(a: Self) -> Self {
                $exp(a)
            }
            #[inline(always)]
            fn exp2(a: Self) -> Self {
                $exp2(a)
            }
            #[inline(always)]
            fn log(a: Self) -> Self {
                a.ln()
            }
            #[inline(always)]
            fn log2(a: Self) -> Self {
                a.log2()
            }
            #[inline(always)]
            fn log10(a: Self) -> Self {
                a.log10()
            }
            #[inline(always)]
            fn sqrt(a: Self) -> Self {
                a.sqrt()
            }
            #[inline(always)]
            fn rsqrt(a: Self) -> Self {
                1.0 / a.sqrt()
            }
            #[inline(always)]
            fn sin(a: Self) -> Self {
                a.sin()
            }
            #[inline(always)]
            fn cos(a: Self) -> Self {
                a.cos()
            }
            #[inline(always)]
            fn tan(a: Self) -> Self {
                a.tan()
            }
            #[inline(always)]
            fn tanh(a: Self) -> Self {
                $tanh(a)
            }
            #[inline(always)]
            fn sigmoid(a: Self) -> Self {
                $sigmoid(a)
            }
            #[inline(always)]
            fn erf(a: Self) -> Self {
                $erf(a)
            }
            #[inline(always)]
            fn pow(a: Self, b: Self) -> Self {
                a.powf(b)
            }
            #[inline(always)]
            fn floor(a: Self) -> Self {
                a.floor()
            }
            #[inline(always)]
            fn ceil(a: Self) -> Self {
                a.ceil()
            }
            #[inline(always)]
            fn round(a: Self) -> Self {
                a.round_ties_even()
            }
            #[inline(always)]
            fn trunc(a: Self) -> Self {
                a.trunc()
            }
        }
    };
}

/// `1 / (1 + e^-x)`
#[inline(always)]
fn sigmoid_f64(a: f64) -> f64 {
    1.0 / (1.0 + (-a).exp())
}

// f32's exp, exp2, tanh and sigmoid are branch-free so the CPU backend's lane loops vectorize
// them (with the same bits as this definition everywhere); f64's are the host's.
float_impl!(
    f32,
    F32,
    libm::erff,
    branchless::exp_f32,
    branchless::exp2_f32,
    branchless::tanh_f32,
    branchless::sigmoid_f32
);
float_impl!(
    f64,
    F64,
    libm::erf,
    f64::exp,
    f64::exp2,
    f64::tanh,
    sigmoid_f64
);

macro_rules! half_impl {
    ($t:ty, $ty:ident) => {
        impl Num for $t {
            const TYPE: Type = Type::$ty;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() + b.to_f32())
            }
            #[inline(always)]
            fn sub(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() - b.to_f32())
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() * b.to_f32())
            }
            #[inline(always)]
            fn div(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() / b.to_f32())
            }
            #[inline(always)]
            fn rem(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() % b.to_f32())
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                <$t>::from_f32(<f32 as Num>::min(a.to_f32(), b.to_f32()))
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                <$t>::from_f32(<f32 as Num>::max(a.to_f32(), b.to_f32()))
            }
            #[inline(always)]
            fn abs(a: Self) -> Self {
                <$t>::from_f32(a.to_f32().abs())
            }
            #[inline(always)]
            fn neg(a: Self) -> Self {
                -a
            }
        }
        impl Float for $t {
            #[inline(always)]
            fn fma(a: Self, b: Self, c: Self) -> Self {
                <$t>::from_f32(a.to_f32().mul_add(b.to_f32(), c.to_f32()))
            }
            #[inline(always)]
            fn exp(a: Self) -> Self {
                Self::from_f32(<f32 as Float>::exp(a.to_f32()))
            }
            #[inline(always)]
            fn exp2(a: Self) -> Self {
                Self::from_f32(<f32 as Float>::exp2(a.to_f32()))
            }
            #[inline(always)]
            fn log(a: Self) -> Self {
                Self::from_f32(f32::ln(a.to_f32()))
            }
            #[inline(always)]
            fn log2(a: Self) -> Self {
                Self::from_f32(f32::log2(a.to_f32()))
            }
            #[inline(always)]
            fn log10(a: Self) -> Self {
                Self::from_f32(f32::log10(a.to_f32()))
            }
            #[inline(always)]
            fn sqrt(a: Self) -> Self {
                Self::from_f32(f32::sqrt(a.to_f32()))
            }
            #[inline(always)]
            fn rsqrt(a: Self) -> Self {
                Self::from_f32(<f32 as Float>::rsqrt(a.to_f32()))
            }
            #[inline(always)]
            fn sin(a: Self) -> Self {
                Self::from_f32(f32::sin(a.to_f32()))
            }
            #[inline(always)]
            fn cos(a: Self) -> Self {
                Self::from_f32(f32::cos(a.to_f32()))
            }
            #[inline(always)]
            fn tan(a: Self) -> Self {
                Self::from_f32(f32::tan(a.to_f32()))
            }
            #[inline(always)]
            fn tanh(a: Self) -> Self {
                Self::from_f32(<f32 as Float>::tanh(a.to_f32()))
            }
            #[inline(always)]
            fn sigmoid(a: Self) -> Self {
                Self::from_f32(<f32 as Float>::sigmoid(a.to_f32()))
            }
            #[inline(always)]
            fn erf(a: Self) -> Self {
                Self::from_f32(libm::erff(a.to_f32()))
            }
            #[inline(always)]
            fn pow(a: Self, b: Self) -> Self {
                Self::from_f32(a.to_f32().powf(b.to_f32()))
            }
            #[inline(always)]
            fn floor(a: Self) -> Self {
                Self::from_f32(a.to_f32().floor())
            }
            #[inline(always)]
            fn ceil(a: Self) -> Self {
                Self::from_f32(a.to_f32().ceil())
            }
            #[inline(always)]
            fn round(a: Self) -> Self {
                Self::from_f32(a.to_f32().round_ties_even())
            }
            #[inline(always)]
            fn trunc(a: Self) -> Self {
                Self::from_f32(a.to_f32().trunc())
            }
        }
    };
}

half_impl!(f16, F16);
half_impl!(bf16, BF16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_edge_cases() {
        assert_eq!(<i32 as Num>::div(7, 0), 7);
        assert_eq!(<i32 as Num>::div(i32::MIN, -1), i32::MIN);
        assert_eq!(<i32 as Num>::rem(7, 0), 0);
        assert_eq!(<i32 as Num>::rem(i32::MIN, -1), 0);
        assert_eq!(<i32 as Num>::rem(-7, 2), -1);
        assert_eq!(<i8 as Num>::abs(i8::MIN), i8::MIN);
        assert_eq!(<u32 as Int>::shl(1, 33), 2);
        assert_eq!(<i32 as Int>::shr(-8, 1), -4);
        assert_eq!(<u32 as Int>::shr(0x8000_0000, 31), 1);
        assert_eq!(<u8 as Num>::add(250, 10), 4);
    }

    #[test]
    fn float_edge_cases() {
        assert_eq!(<f32 as Num>::min(f32::NAN, 1.0), 1.0);
        assert_eq!(<f32 as Num>::max(-0.0, 0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(<f32 as Num>::max(0.0, -0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(<f64 as Num>::min(0.0, -0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(<f32 as Float>::round(2.5), 2.0);
        assert_eq!(<f32 as Float>::round(-3.5), -4.0);
        assert!(!<f32 as Num>::cmp_eq(f32::NAN, f32::NAN));
        // mad rounds twice, fma once.
        let (a, b, c) = (1.0f32 + f32::EPSILON, 1.0f32 - f32::EPSILON, -1.0f32);
        assert_eq!(<f32 as Num>::mad(a, b, c), 0.0);
        assert_ne!(<f32 as Float>::fma(a, b, c), 0.0);
    }

    #[test]
    fn half_types_round_after_each_op() {
        let a = f16::from_f32(1.0);
        let b = f16::from_f32(0.0004);
        assert_eq!(<f16 as Num>::add(a, b), f16::from_f32(1.0004)); // rounds to 1.0
        assert_eq!(
            <bf16 as Num>::mul(bf16::from_f32(3.0), bf16::from_f32(1.0 / 3.0)).to_f32(),
            1.0
        );
        assert!(<f16 as Num>::mul(f16::MAX, f16::from_f32(2.0)).is_infinite());
    }
}
