//! Lane loops whose second operand is one value for every lane: a broadcast operand (a per-row
//! mean, a per-channel scale) applied to a run of elements as it is, instead of first being
//! splatted across a register of the run's length (which cost more than the operation itself:
//! `x - m[rows, 1]` spent 12,000 of 37,000 instructions per 2^14 elements on the splat).
//!
//! Same operations as the binary lane functions (`lanes.rs`), on the same values, so the same
//! bits.

use half::{bf16, f16};
use hologram_isa::semantics::Num;
use hologram_isa::{BinaryOp, Type};

use super::lanes::{read_block, simd_level, with_num, write_block, BLOCK};

/// `d[i] = f(a[i], s)`, or `f(s, a[i])` when `scalar_first`, for `i < n`.
///
/// # Safety
/// `d` is valid for writes and `a` for reads of `n` elements of the function's type, each
/// aligned to it; `d` equals `a` or overlaps it nowhere. `s` is readable for one element (any
/// alignment).
pub(crate) type ScalarLaneFn =
    unsafe fn(n: usize, d: *mut u8, a: *const u8, s: *const u8, scalar_first: bool);

/// Applies `f` with the value at `s` as one operand.
///
/// # Safety
/// As for [`ScalarLaneFn`].
#[inline(always)]
unsafe fn map_scalar<T: Copy>(
    n: usize,
    d: *mut u8,
    a: *const u8,
    s: *const u8,
    scalar_first: bool,
    f: impl Fn(T, T) -> T,
) {
    // SAFETY: the `ScalarLaneFn` contract, passed on by every caller.
    unsafe {
        let (d, a) = (d as *mut T, a as *const T);
        let s = (s as *const T).read_unaligned();
        if scalar_first {
            each(n, d, a, |x| f(s, x));
        } else {
            each(n, d, a, |x| f(x, s));
        }
    }
}

/// `d[i] = g(a[i])`: in blocks that read before they write when `d` is `a` (an element loop
/// then does not vectorize), element by element otherwise.
///
/// # Safety
/// As for [`ScalarLaneFn`].
#[inline(always)]
unsafe fn each<T: Copy>(n: usize, d: *mut T, a: *const T, g: impl Fn(T) -> T) {
    // SAFETY: lanes 0..n of both pointers are valid (the contract).
    unsafe {
        let mut i = 0;
        if std::ptr::eq(d as *const T, a) {
            while i + BLOCK <= n {
                let x = read_block(a, i);
                write_block(d, i, std::array::from_fn(|j| g(x[j])));
                i += BLOCK;
            }
        }
        for i in i..n {
            *d.add(i) = g(*a.add(i));
        }
    }
}

macro_rules! scalar_family {
    ([$($attr:tt)*]) => {
        scalar_family! { @fns [$($attr)*]
            sc_add = T::add;
            sc_sub = T::sub;
            sc_mul = T::mul;
            sc_div = T::div;
            sc_min = T::min;
            sc_max = T::max;
        }

        /// The scalar-operand function of `op` on `ty`, for the operations that have one.
        pub(crate) fn scalar_binary_fn(op: BinaryOp, ty: Type) -> Option<ScalarLaneFn> {
            match op {
                BinaryOp::Add => with_num!(ty, |T| Some(sc_add::<T> as ScalarLaneFn)),
                BinaryOp::Sub => with_num!(ty, |T| Some(sc_sub::<T> as ScalarLaneFn)),
                BinaryOp::Mul => with_num!(ty, |T| Some(sc_mul::<T> as ScalarLaneFn)),
                BinaryOp::Div => with_num!(ty, |T| Some(sc_div::<T> as ScalarLaneFn)),
                BinaryOp::Min => with_num!(ty, |T| Some(sc_min::<T> as ScalarLaneFn)),
                BinaryOp::Max => with_num!(ty, |T| Some(sc_max::<T> as ScalarLaneFn)),
                _ => None,
            }
        }
    };
    (@fns [$($attr:tt)*]) => {};
    (@fns [$($attr:tt)*] $name:ident = $f:expr; $($rest:tt)*) => {
        $($attr)* unsafe fn $name<T: Num>(n: usize, d: *mut u8, a: *const u8, s: *const u8, scalar_first: bool) {
            // SAFETY: the `ScalarLaneFn` contract, passed on.
            unsafe { map_scalar::<T>(n, d, a, s, scalar_first, $f) }
        }
        scalar_family! { @fns [$($attr)*] $($rest)* }
    };
}

mod portable {
    use super::*;
    scalar_family!([]);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    scalar_family!([#[target_feature(enable = "avx2,fma")]]);
}

/// The scalar-operand function of `op` on `ty` from the family this CPU runs (see
/// `lanes::simd_level`); None for operations without one.
pub(crate) fn scalar_binary_fn(op: BinaryOp, ty: Type) -> Option<ScalarLaneFn> {
    #[cfg(target_arch = "x86_64")]
    if simd_level() == "avx2+fma" {
        return avx2::scalar_binary_fn(op, ty);
    }
    portable::scalar_binary_fn(op, ty)
}
