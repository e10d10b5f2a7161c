//! `cvt`: conversions between every pair of numeric types, correctly rounded.

use half::{bf16, f16};

/// A value widened without loss: integers as i128, floats as f64.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wide {
    /// An integer source.
    Int(i128),
    /// A floating-point source.
    Float(f64),
}

/// Widening of a source type.
pub trait ToWide: Copy {
    /// The exact value as i128 or f64.
    fn to_wide(self) -> Wide;
}

/// Narrowing into a destination type, by the ISA's `cvt` rules: float to integer truncates and
/// saturates (NaN gives 0), integer to integer wraps, everything else rounds to nearest-even once.
pub trait FromWide: Copy {
    /// Converts a widened value.
    fn from_wide(w: Wide) -> Self;
}

macro_rules! int_conv {
    ($($t:ty),*) => {$(
        impl ToWide for $t {
            #[inline(always)] fn to_wide(self) -> Wide { Wide::Int(self as i128) }
        }
        impl FromWide for $t {
            #[inline(always)]
            fn from_wide(w: Wide) -> Self {
                match w {
                    Wide::Int(v) => v as $t,
                    Wide::Float(f) => f as $t,
                }
            }
        }
    )*};
}
int_conv!(i8, i16, i32, i64, u8, u16, u32, u64);

impl ToWide for f32 {
    #[inline(always)]
    fn to_wide(self) -> Wide {
        Wide::Float(self as f64)
    }
}
impl ToWide for f64 {
    #[inline(always)]
    fn to_wide(self) -> Wide {
        Wide::Float(self)
    }
}
impl ToWide for f16 {
    #[inline(always)]
    fn to_wide(self) -> Wide {
        Wide::Float(self.to_f64())
    }
}
impl ToWide for bf16 {
    #[inline(always)]
    fn to_wide(self) -> Wide {
        Wide::Float(self.to_f64())
    }
}

impl FromWide for f64 {
    #[inline(always)]
    fn from_wide(w: Wide) -> Self {
        match w {
            Wide::Int(v) => v as f64,
            Wide::Float(f) => f,
        }
    }
}
impl FromWide for f32 {
    #[inline(always)]
    fn from_wide(w: Wide) -> Self {
        match w {
            Wide::Int(v) => v as f32,
            Wide::Float(f) => f as f32,
        }
    }
}

/// Rounds to f32 with round-to-odd: truncate toward zero and set the last bit if anything was
/// lost. Rounding that result again to a format with at least two fewer bits (f16, bf16) gives the
/// correctly rounded value, which a plain double rounding would not.
pub fn f64_to_f32_round_odd(x: f64) -> f32 {
    let r = x as f32;
    if r.is_nan() || (r as f64) == x {
        return r;
    }
    let mut bits = r.to_bits();
    if (r as f64).abs() > x.abs() {
        bits -= 1; // step back toward zero (from infinity this is f32::MAX)
    }
    f32::from_bits(bits | 1)
}

fn i128_to_f32_round_odd(v: i128) -> f32 {
    let r = v as f32;
    if r as i128 == v && r.is_finite() {
        return r;
    }
    let mut bits = r.to_bits();
    if (r as f64).abs() > (v as f64).abs() || r.is_infinite() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

impl FromWide for f16 {
    #[inline(always)]
    fn from_wide(w: Wide) -> Self {
        match w {
            Wide::Int(v) => f16::from_f32(i128_to_f32_round_odd(v)),
            Wide::Float(f) => f16::from_f32(f64_to_f32_round_odd(f)),
        }
    }
}
impl FromWide for bf16 {
    #[inline(always)]
    fn from_wide(w: Wide) -> Self {
        match w {
            Wide::Int(v) => bf16::from_f32(i128_to_f32_round_odd(v)),
            Wide::Float(f) => bf16::from_f32(f64_to_f32_round_odd(f)),
        }
    }
}

/// Converts between any two numeric types by the `cvt` rules.
#[inline(always)]
pub fn convert<F: ToWide, T: FromWide>(v: F) -> T {
    T::from_wide(v.to_wide())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_truncates_and_saturates() {
        assert_eq!(convert::<f32, i32>(-2.7), -2);
        assert_eq!(convert::<f32, u8>(300.0), 255);
        assert_eq!(convert::<f32, u8>(-5.0), 0);
        assert_eq!(convert::<f32, i32>(f32::NAN), 0);
        assert_eq!(convert::<f64, i64>(1e300), i64::MAX);
    }

    #[test]
    fn int_to_int_wraps_by_source_sign() {
        assert_eq!(convert::<i8, u32>(-1), u32::MAX);
        assert_eq!(convert::<u8, i32>(255), 255);
        assert_eq!(convert::<u32, i8>(0x1ff), -1);
    }

    #[test]
    fn narrowing_rounds_once() {
        // 1 + 2^-11 + 2^-30 rounds up in f16 only if the low bits are not lost first.
        let x = 1.0f64 + 2f64.powi(-11) + 2f64.powi(-30);
        assert_eq!(convert::<f64, f16>(x), f16::from_bits(0x3c01));
        // Exactly halfway rounds to even.
        assert_eq!(
            convert::<f64, f16>(1.0 + 2f64.powi(-11)),
            f16::from_bits(0x3c00)
        );
        // A large integer just above a bf16 halfway point.
        let v: i64 = (1 << 40) + (1 << 32) + 1;
        assert_eq!(
            convert::<i64, bf16>(v).to_f64(),
            ((1u64 << 40) + (1 << 33)) as f64
        );
        assert!(convert::<f64, f16>(1e6).is_infinite());
        assert!(convert::<f64, bf16>(1e300).is_infinite());
        assert_eq!(convert::<f64, f32>(0.1), 0.1f32);
    }
}
