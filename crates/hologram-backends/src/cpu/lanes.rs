//! Lane loops: one instruction applied across the lanes of a block.
//!
//! Registers are structure-of-arrays: a register of a block is a contiguous array with one
//! element per lane, so each instruction is one tight (often vectorized) loop. Lanes outside the
//! active mask keep their old value; the result is computed for them too and discarded, which is
//! harmless because every ISA operation is total (no traps).

use half::{bf16, f16};
use hologram_isa::semantics::{convert, Float, FromWide, Int, Num, ToWide};
use hologram_isa::{BinaryOp, CmpOp, TernaryOp, Type, UnaryOp};

/// A compute instruction over `n` lanes: `d[i] = f(a[i], b[i], c[i])` where `mask` (1 = active)
/// allows. Unused operand pointers are ignored.
///
/// # Safety
/// `d` is valid for reads and writes, and `a`, `b`, `c` (those the function uses) for reads, of
/// `n` elements of the types the function was chosen for, each aligned to its element type (a
/// register slot holds 8 aligned bytes per lane, enough for any ISA type). `d` may be one of the
/// operands exactly, but overlaps none otherwise. `mask`, when given, has at least `n` entries.
pub(crate) type LaneFn =
    unsafe fn(n: usize, d: *mut u8, a: *const u8, b: *const u8, c: *const u8, mask: Option<&[u8]>);

/// Writes lane `i` of `d` where the mask allows.
///
/// # Safety
/// Element `i` of `d` is valid for reads and writes, and `i` is inside the mask.
#[inline(always)]
unsafe fn store_lane<D: Copy>(d: *mut D, i: usize, v: D, mask: Option<&[u8]>) {
    // SAFETY: the contract.
    unsafe {
        match mask {
            None => *d.add(i) = v,
            Some(m) => {
                let p = d.add(i);
                *p = if *m.get_unchecked(i) != 0 { v } else { *p };
            }
        }
    }
}

/// Lanes per block of the unmasked lane loops.
pub(crate) const BLOCK: usize = 16;

/// Lanes `i..i + BLOCK` of a slot.
///
/// # Safety
/// Those lanes are valid for reads.
#[inline(always)]
pub(crate) unsafe fn read_block<T: Copy>(p: *const T, i: usize) -> [T; BLOCK] {
    // SAFETY: the contract.
    unsafe { std::ptr::read_unaligned(p.add(i) as *const [T; BLOCK]) }
}

/// Writes lanes `i..i + BLOCK` of a slot.
///
/// # Safety
/// Those lanes are valid for writes.
#[inline(always)]
pub(crate) unsafe fn write_block<T: Copy>(p: *mut T, i: usize, v: [T; BLOCK]) {
    // SAFETY: the contract.
    unsafe { std::ptr::write_unaligned(p.add(i) as *mut [T; BLOCK], v) }
}

/// Applies `f` lane by lane.
///
/// # Safety
/// As for [`LaneFn`].
#[inline(always)]
unsafe fn map1<A: Copy, D: Copy>(
    n: usize,
    d: *mut u8,
    a: *const u8,
    mask: Option<&[u8]>,
    f: impl Fn(A) -> D,
) {
    // SAFETY: the `LaneFn` contract, which every caller passes on: lanes `0..n` of each
    // pointer are valid and aligned, and `d` equals an operand or overlaps none.
    unsafe {
        let (d, a) = (d as *mut D, a as *const A);
        match mask {
            None => {
                // As in map2.
                let mut i = 0;
                let aliased = std::ptr::addr_eq(d, a);
                while aliased && i + BLOCK <= n {
                    let x = read_block::<A>(a, i);
                    write_block(d, i, std::array::from_fn(|j| f(x[j])));
                    i += BLOCK;
                }
                for i in i..n {
                    *d.add(i) = f(*a.add(i));
                }
            }
            Some(_) => {
                for i in 0..n {
                    store_lane(d, i, f(*a.add(i)), mask);
                }
            }
        }
    }
}

/// Applies `f` lane by lane.
///
/// # Safety
/// As for [`LaneFn`].
#[inline(always)]
unsafe fn map2<A: Copy, B: Copy, D: Copy>(
    n: usize,
    d: *mut u8,
    a: *const u8,
    b: *const u8,
    mask: Option<&[u8]>,
    f: impl Fn(A, B) -> D,
) {
    // SAFETY: the `LaneFn` contract, which every caller passes on: lanes `0..n` of each
    // pointer are valid and aligned, and `d` equals an operand or overlaps none.
    unsafe {
        let (d, a, b) = (d as *mut D, a as *const A, b as *const B);
        match mask {
            None => {
                // When the destination is an operand (`add %r, %r, %s`) an element loop does not
                // vectorize; blocks that read before they write do. (Elsewhere the element loop is
                // faster: branchy ops such as NaN-aware max vectorize only there.)
                let mut i = 0;
                let aliased = std::ptr::addr_eq(d, a) || std::ptr::addr_eq(d, b);
                while aliased && i + BLOCK <= n {
                    let (x, y) = (read_block::<A>(a, i), read_block::<B>(b, i));
                    write_block(d, i, std::array::from_fn(|j| f(x[j], y[j])));
                    i += BLOCK;
                }
                for i in i..n {
                    *d.add(i) = f(*a.add(i), *b.add(i));
                }
            }
            Some(_) => {
                for i in 0..n {
                    store_lane(d, i, f(*a.add(i), *b.add(i)), mask);
                }
            }
        }
    }
}

/// Applies `f` lane by lane.
///
/// # Safety
/// As for [`LaneFn`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn map3<A: Copy, B: Copy, C: Copy, D: Copy>(
    n: usize,
    d: *mut u8,
    a: *const u8,
    b: *const u8,
    c: *const u8,
    mask: Option<&[u8]>,
    f: impl Fn(A, B, C) -> D,
) {
    // SAFETY: the `LaneFn` contract, which every caller passes on: lanes `0..n` of each
    // pointer are valid and aligned, and `d` equals an operand or overlaps none.
    unsafe {
        let (d, a, b, c) = (d as *mut D, a as *const A, b as *const B, c as *const C);
        match mask {
            None => {
                // As in map2.
                let mut i = 0;
                let aliased =
                    std::ptr::addr_eq(d, a) || std::ptr::addr_eq(d, b) || std::ptr::addr_eq(d, c);
                while aliased && i + BLOCK <= n {
                    let (x, y, z) = (
                        read_block::<A>(a, i),
                        read_block::<B>(b, i),
                        read_block::<C>(c, i),
                    );
                    write_block(d, i, std::array::from_fn(|j| f(x[j], y[j], z[j])));
                    i += BLOCK;
                }
                for i in i..n {
                    *d.add(i) = f(*a.add(i), *b.add(i), *c.add(i));
                }
            }
            Some(_) => {
                for i in 0..n {
                    store_lane(d, i, f(*a.add(i), *b.add(i), *c.add(i)), mask);
                }
            }
        }
    }
}

macro_rules! lane_fns_1 {
    ([$($attr:tt)*]) => {};
    ([$($attr:tt)*] $name:ident<$T:ident: $bound:ident> = $f:expr; $($rest:tt)*) => {
        $($attr)* unsafe fn $name<$T: $bound>(n: usize, d: *mut u8, a: *const u8, _b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map1::<$T, $T>(n, d, a, m, $f) }
        }
        lane_fns_1! { [$($attr)*] $($rest)* }
    };
}

macro_rules! lane_fns_2 {
    ([$($attr:tt)*]) => {};
    ([$($attr:tt)*] $name:ident<$T:ident: $bound:ident> = $f:expr; $($rest:tt)*) => {
        $($attr)* unsafe fn $name<$T: $bound>(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<$T, $T, $T>(n, d, a, b, m, $f) }
        }
        lane_fns_2! { [$($attr)*] $($rest)* }
    };
}

macro_rules! cmp_fns {
    ([$($attr:tt)*]) => {};
    ([$($attr:tt)*] $name:ident = $f:expr; $($rest:tt)*) => {
        $($attr)* unsafe fn $name<T: Num>(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<T, T, u8>(n, d, a, b, m, |x, y| $f(x, y) as u8) }
        }
        cmp_fns! { [$($attr)*] $($rest)* }
    };
}

/// Runs `$body` with `$T` bound to the Rust type of a numeric ISA type (None for pred).
macro_rules! with_num {
    ($ty:expr, |$T:ident| $body:expr) => {
        match $ty {
            Type::I8 => {
                type $T = i8;
                $body
            }
            Type::I16 => {
                type $T = i16;
                $body
            }
            Type::I32 => {
                type $T = i32;
                $body
            }
            Type::I64 => {
                type $T = i64;
                $body
            }
            Type::U8 => {
                type $T = u8;
                $body
            }
            Type::U16 => {
                type $T = u16;
                $body
            }
            Type::U32 => {
                type $T = u32;
                $body
            }
            Type::U64 => {
                type $T = u64;
                $body
            }
            Type::F16 => {
                type $T = f16;
                $body
            }
            Type::BF16 => {
                type $T = bf16;
                $body
            }
            Type::F32 => {
                type $T = f32;
                $body
            }
            Type::F64 => {
                type $T = f64;
                $body
            }
            Type::Pred => None,
        }
    };
}

pub(crate) use with_num;

/// Like `with_num!` for integer types only.
macro_rules! with_int {
    ($ty:expr, |$T:ident| $body:expr) => {
        match $ty {
            Type::I8 => {
                type $T = i8;
                $body
            }
            Type::I16 => {
                type $T = i16;
                $body
            }
            Type::I32 => {
                type $T = i32;
                $body
            }
            Type::I64 => {
                type $T = i64;
                $body
            }
            Type::U8 => {
                type $T = u8;
                $body
            }
            Type::U16 => {
                type $T = u16;
                $body
            }
            Type::U32 => {
                type $T = u32;
                $body
            }
            Type::U64 => {
                type $T = u64;
                $body
            }
            _ => None,
        }
    };
}

/// Like `with_num!` for float types only.
macro_rules! with_float {
    ($ty:expr, |$T:ident| $body:expr) => {
        match $ty {
            Type::F16 => {
                type $T = f16;
                $body
            }
            Type::BF16 => {
                type $T = bf16;
                $body
            }
            Type::F32 => {
                type $T = f32;
                $body
            }
            Type::F64 => {
                type $T = f64;
                $body
            }
            _ => None,
        }
    };
}

/// Runs `$body` with `$T` an unsigned integer of the type's size (for bit copies).
macro_rules! with_bits {
    ($ty:expr, |$T:ident| $body:expr) => {
        match $ty.size_bytes() {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            _ => {
                type $T = u64;
                $body
            }
        }
    };
}

/// Defines every lane function and its dispatcher, each with the given attributes (used to
/// compile the whole set twice: portable, and with AVX2+FMA for CPUs that have them).
macro_rules! lane_family {
    ([$($attr:tt)*]) => {
        lane_fns_1! { [$($attr)*]
            un_abs<T: Num> = T::abs;
            un_neg<T: Num> = T::neg;
            un_not<T: Int> = T::not;
            un_exp<T: Float> = T::exp;
            un_exp2<T: Float> = T::exp2;
            un_log<T: Float> = T::log;
            un_log2<T: Float> = T::log2;
            un_log10<T: Float> = T::log10;
            un_sqrt<T: Float> = T::sqrt;
            un_rsqrt<T: Float> = T::rsqrt;
            un_sin<T: Float> = T::sin;
            un_cos<T: Float> = T::cos;
            un_tan<T: Float> = T::tan;
            un_tanh<T: Float> = T::tanh;
            un_sigmoid<T: Float> = T::sigmoid;
            un_erf<T: Float> = T::erf;
            un_floor<T: Float> = T::floor;
            un_ceil<T: Float> = T::ceil;
            un_round<T: Float> = T::round;
            un_trunc<T: Float> = T::trunc;
        }

        lane_fns_2! { [$($attr)*]
            bin_add<T: Num> = T::add;
            bin_sub<T: Num> = T::sub;
            bin_mul<T: Num> = T::mul;
            bin_div<T: Num> = T::div;
            bin_rem<T: Num> = T::rem;
            bin_min<T: Num> = T::min;
            bin_max<T: Num> = T::max;
            bin_and<T: Int> = T::and;
            bin_or<T: Int> = T::or;
            bin_xor<T: Int> = T::xor;
            bin_shl<T: Int> = T::shl;
            bin_shr<T: Int> = T::shr;
            bin_pow<T: Float> = T::pow;
        }

        cmp_fns! { [$($attr)*]
            cmp_eq = T::cmp_eq;
            cmp_ne = |x, y| !T::cmp_eq(x, y);
            cmp_lt = T::cmp_lt;
            cmp_le = T::cmp_le;
            cmp_gt = |x, y| T::cmp_lt(y, x);
            cmp_ge = |x, y| T::cmp_le(y, x);
        }

        $($attr)* unsafe fn pred_not(n: usize, d: *mut u8, a: *const u8, _b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map1::<u8, u8>(n, d, a, m, |x| x ^ 1) }
        }
        $($attr)* unsafe fn pred_and(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<u8, u8, u8>(n, d, a, b, m, |x, y| x & y) }
        }
        $($attr)* unsafe fn pred_or(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<u8, u8, u8>(n, d, a, b, m, |x, y| x | y) }
        }
        $($attr)* unsafe fn pred_xor(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<u8, u8, u8>(n, d, a, b, m, |x, y| x ^ y) }
        }
        $($attr)* unsafe fn pred_eq(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<u8, u8, u8>(n, d, a, b, m, |x, y| (x == y) as u8) }
        }
        $($attr)* unsafe fn pred_ne(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map2::<u8, u8, u8>(n, d, a, b, m, |x, y| (x != y) as u8) }
        }

        $($attr)* unsafe fn tern_mad<T: Num>(n: usize, d: *mut u8, a: *const u8, b: *const u8, c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map3::<T, T, T, T>(n, d, a, b, c, m, T::mad) }
        }
        $($attr)* unsafe fn tern_fma<T: Float>(n: usize, d: *mut u8, a: *const u8, b: *const u8, c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map3::<T, T, T, T>(n, d, a, b, c, m, T::fma) }
        }
        $($attr)* unsafe fn sel<T: Copy>(n: usize, d: *mut u8, a: *const u8, b: *const u8, c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map3::<T, T, u8, T>(n, d, a, b, c, m, |x, y, p| if p != 0 { x } else { y }) }
        }
        $($attr)* unsafe fn mov<T: Copy>(n: usize, d: *mut u8, a: *const u8, _b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map1::<T, T>(n, d, a, m, |x| x) }
        }
        /// `div.u32`/`rem.u32`: when every lane divides consecutive values by the same non-zero
        /// divisor (index arithmetic on `%gid`), quotient and remainder are stepped along without
        /// dividing; otherwise each lane divides.
        ///
        /// # Safety
        /// As for [`LaneFn`].
        $($attr)* unsafe fn divrem_u32(n: usize, d: *mut u8, a: *const u8, b: *const u8, m: Option<&[u8]>, rem: bool) {
            // SAFETY: the `LaneFn` contract, passed on: `a`, `b` and `d` hold `n` u32 lanes.
            // The slices over `a` and `b` are last used before anything is written to `d`
            // (which may be one of them), and the slices over `d` cover lanes `i..i + run`
            // with `i + run <= n`.
            unsafe {
                let bs = std::slice::from_raw_parts(b as *const u32, n);
                let first = bs.first().copied().unwrap_or(0);
                // The checks below fold over every lane without stopping early, so they vectorize
                // (they are on the path of every broadcast or strided element-wise op).
                if first == 0 || bs.iter().fold(0, |acc, &x| acc | (x ^ first)) != 0 {
                    if rem {
                        map2::<u32, u32, u32>(n, d, a, b, m, <u32 as Num>::rem);
                    } else {
                        map2::<u32, u32, u32>(n, d, a, b, m, <u32 as Num>::div);
                    }
                    return;
                }
                // Consecutive dividends (index arithmetic on %gid): step quotient and remainder along
                // instead of dividing every lane.
                let xs = std::slice::from_raw_parts(a as *const u32, n);
                let start = xs.first().copied().unwrap_or(0);
                let consecutive = xs
                    .iter()
                    .zip(0u32..)
                    .fold(0, |acc, (&x, i)| acc | (x ^ start.wrapping_add(i)))
                    == 0;
                if !consecutive || start.checked_add(n as u32).is_none() {
                    if rem {
                        map2::<u32, u32, u32>(n, d, a, b, m, <u32 as Num>::rem);
                    } else {
                        map2::<u32, u32, u32>(n, d, a, b, m, <u32 as Num>::div);
                    }
                    return;
                }
                // Runs of equal quotients: the remainder counts up within a run.
                let (mut q, mut r) = (start / first, start % first);
                let out = d as *mut u32;
                let mut i = 0;
                while i < n {
                    let run = ((first - r) as usize).min(n - i);
                    if m.is_none() {
                        let lanes = std::slice::from_raw_parts_mut(out.add(i), run);
                        if rem {
                            for (v, j) in lanes.iter_mut().zip(0u32..) {
                                *v = r + j;
                            }
                        } else {
                            lanes.fill(q);
                        }
                    } else {
                        for j in 0..run {
                            store_lane(out, i + j, if rem { r + j as u32 } else { q }, m);
                        }
                    }
                    i += run;
                    r = 0;
                    q += 1;
                }
            }
        }
        $($attr)* unsafe fn div_u32(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { divrem_u32(n, d, a, b, m, false) }
        }
        $($attr)* unsafe fn rem_u32(n: usize, d: *mut u8, a: *const u8, b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { divrem_u32(n, d, a, b, m, true) }
        }

        $($attr)* unsafe fn cvt<F: ToWide, T: FromWide>(n: usize, d: *mut u8, a: *const u8, _b: *const u8, _c: *const u8, m: Option<&[u8]>) {
            // SAFETY: the `LaneFn` contract, passed on.
            unsafe { map1::<F, T>(n, d, a, m, convert::<F, T>) }
        }

        /// `mov.T`
        pub(crate) fn mov_fn(ty: Type) -> Option<LaneFn> {
            with_bits!(ty, |T| Some(mov::<T> as LaneFn))
        }

        /// `selp.T`
        pub(crate) fn selp_fn(ty: Type) -> Option<LaneFn> {
            with_bits!(ty, |T| Some(sel::<T> as LaneFn))
        }

        /// `cvt.TO.FROM`
        pub(crate) fn cvt_fn(to: Type, from: Type) -> Option<LaneFn> {
            with_num!(from, |F| with_num!(to, |T| Some(cvt::<F, T> as LaneFn)))
        }

        /// One-operand operations.
        pub(crate) fn unary_fn(op: UnaryOp, ty: Type) -> Option<LaneFn> {
            use UnaryOp::*;
            if ty == Type::Pred {
                return (op == Not).then_some(pred_not as LaneFn);
            }
            match op {
                Abs => with_num!(ty, |T| Some(un_abs::<T> as LaneFn)),
                Neg => with_num!(ty, |T| Some(un_neg::<T> as LaneFn)),
                Not => with_int!(ty, |T| Some(un_not::<T> as LaneFn)),
                Exp => with_float!(ty, |T| Some(un_exp::<T> as LaneFn)),
                Exp2 => with_float!(ty, |T| Some(un_exp2::<T> as LaneFn)),
                Log => with_float!(ty, |T| Some(un_log::<T> as LaneFn)),
                Log2 => with_float!(ty, |T| Some(un_log2::<T> as LaneFn)),
                Log10 => with_float!(ty, |T| Some(un_log10::<T> as LaneFn)),
                Sqrt => with_float!(ty, |T| Some(un_sqrt::<T> as LaneFn)),
                Rsqrt => with_float!(ty, |T| Some(un_rsqrt::<T> as LaneFn)),
                Sin => with_float!(ty, |T| Some(un_sin::<T> as LaneFn)),
                Cos => with_float!(ty, |T| Some(un_cos::<T> as LaneFn)),
                Tan => with_float!(ty, |T| Some(un_tan::<T> as LaneFn)),
                Tanh => with_float!(ty, |T| Some(un_tanh::<T> as LaneFn)),
                Sigmoid => with_float!(ty, |T| Some(un_sigmoid::<T> as LaneFn)),
                Erf => with_float!(ty, |T| Some(un_erf::<T> as LaneFn)),
                Floor => with_float!(ty, |T| Some(un_floor::<T> as LaneFn)),
                Ceil => with_float!(ty, |T| Some(un_ceil::<T> as LaneFn)),
                Round => with_float!(ty, |T| Some(un_round::<T> as LaneFn)),
                Trunc => with_float!(ty, |T| Some(un_trunc::<T> as LaneFn)),
            }
        }

        /// Two-operand operations.
        pub(crate) fn binary_fn(op: BinaryOp, ty: Type) -> Option<LaneFn> {
            use BinaryOp::*;
            if ty == Type::Pred {
                return match op {
                    And => Some(pred_and as LaneFn),
                    Or => Some(pred_or as LaneFn),
                    Xor => Some(pred_xor as LaneFn),
                    _ => None,
                };
            }
            match op {
                Add => with_num!(ty, |T| Some(bin_add::<T> as LaneFn)),
                Sub => with_num!(ty, |T| Some(bin_sub::<T> as LaneFn)),
                Mul => with_num!(ty, |T| Some(bin_mul::<T> as LaneFn)),
                Div if ty == Type::U32 => Some(div_u32 as LaneFn),
                Rem if ty == Type::U32 => Some(rem_u32 as LaneFn),
                Div => with_num!(ty, |T| Some(bin_div::<T> as LaneFn)),
                Rem => with_num!(ty, |T| Some(bin_rem::<T> as LaneFn)),
                Min => with_num!(ty, |T| Some(bin_min::<T> as LaneFn)),
                Max => with_num!(ty, |T| Some(bin_max::<T> as LaneFn)),
                And => with_int!(ty, |T| Some(bin_and::<T> as LaneFn)),
                Or => with_int!(ty, |T| Some(bin_or::<T> as LaneFn)),
                Xor => with_int!(ty, |T| Some(bin_xor::<T> as LaneFn)),
                Shl => with_int!(ty, |T| Some(bin_shl::<T> as LaneFn)),
                Shr => with_int!(ty, |T| Some(bin_shr::<T> as LaneFn)),
                Pow => with_float!(ty, |T| Some(bin_pow::<T> as LaneFn)),
            }
        }

        /// Three-operand operations.
        pub(crate) fn ternary_fn(op: TernaryOp, ty: Type) -> Option<LaneFn> {
            match op {
                TernaryOp::Mad => with_num!(ty, |T| Some(tern_mad::<T> as LaneFn)),
                TernaryOp::Fma => with_float!(ty, |T| Some(tern_fma::<T> as LaneFn)),
            }
        }

        /// `setp.CMP.T`, writing 0/1 predicate bytes.
        pub(crate) fn setp_fn(cmp: CmpOp, ty: Type) -> Option<LaneFn> {
            use CmpOp::*;
            if ty == Type::Pred {
                return match cmp {
                    Eq => Some(pred_eq as LaneFn),
                    Ne => Some(pred_ne as LaneFn),
                    _ => None,
                };
            }
            match cmp {
                Eq => with_num!(ty, |T| Some(cmp_eq::<T> as LaneFn)),
                Ne => with_num!(ty, |T| Some(cmp_ne::<T> as LaneFn)),
                Lt => with_num!(ty, |T| Some(cmp_lt::<T> as LaneFn)),
                Le => with_num!(ty, |T| Some(cmp_le::<T> as LaneFn)),
                Gt => with_num!(ty, |T| Some(cmp_gt::<T> as LaneFn)),
                Ge => with_num!(ty, |T| Some(cmp_ge::<T> as LaneFn)),
            }
        }


    };
}

mod portable {
    use super::*;
    lane_family!([]);
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    lane_family!([#[target_feature(enable = "avx2,fma")]]);
}

/// True when the AVX2+FMA lane functions run (detected once; `HOLOGRAM_CPU_SIMD=portable`
/// forces the portable ones).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // only x86_64 has a second family
pub(crate) fn simd_level() -> &'static str {
    static LEVEL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    LEVEL.get_or_init(|| {
        if std::env::var("HOLOGRAM_CPU_SIMD").is_ok_and(|v| v == "portable") {
            return "portable";
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "avx2+fma";
        }
        "portable"
    })
}

macro_rules! dispatch {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        pub(crate) fn $name($($arg: $t),*) -> Option<LaneFn> {
            #[cfg(target_arch = "x86_64")]
            if simd_level() == "avx2+fma" {
                return avx2::$name($($arg),*);
            }
            portable::$name($($arg),*)
        }
    )*};
}

/// A one-operand lane function from every family this CPU can run (portable, and AVX2+FMA
/// where present), named, whatever `HOLOGRAM_CPU_SIMD` says: for tests that hold the families
/// to the same bits.
#[cfg(test)]
pub(crate) fn unary_fn_each_family(op: UnaryOp, ty: Type) -> Vec<(&'static str, LaneFn)> {
    let mut v: Vec<(&'static str, LaneFn)> = portable::unary_fn(op, ty)
        .map(|f| ("portable", f))
        .into_iter()
        .collect();
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        v.extend(avx2::unary_fn(op, ty).map(|f| ("avx2+fma", f)));
    }
    v
}

dispatch! {
    mov_fn(ty: Type);
    selp_fn(ty: Type);
    cvt_fn(to: Type, from: Type);
    unary_fn(op: UnaryOp, ty: Type);
    binary_fn(op: BinaryOp, ty: Type);
    ternary_fn(op: TernaryOp, ty: Type);
    setp_fn(cmp: CmpOp, ty: Type);
}

/// `loop`: decrements the counter in active lanes and marks in `taken` the active lanes whose
/// counter is not zero; returns how many.
///
/// # Safety
/// `counter` is valid for reads and writes of `n` aligned integers of the function's type.
pub(crate) type LoopFn =
    unsafe fn(n: usize, counter: *mut u8, mask: Option<&[u8]>, taken: &mut [u8]) -> usize;

/// # Safety
/// See [`LoopFn`].
unsafe fn loop_dec<T: Int + FromWide>(
    n: usize,
    counter: *mut u8,
    mask: Option<&[u8]>,
    taken: &mut [u8],
) -> usize {
    let c = counter as *mut T;
    let one: T = convert::<u8, T>(1);
    let zero = T::default();
    let mut count = 0;
    for i in 0..n {
        let active = mask.is_none_or(|m| m[i] != 0);
        if active {
            // SAFETY: lane `i < n` of the counter (the contract).
            let v = T::sub(unsafe { *c.add(i) }, one);
            // SAFETY: as above.
            unsafe { *c.add(i) = v };
            let t = v != zero;
            taken[i] = t as u8;
            count += t as usize;
        } else {
            taken[i] = 0;
        }
    }
    count
}

/// The `loop` decrement for an integer counter type.
pub(crate) fn loop_fn(ty: Type) -> Option<LoopFn> {
    with_int!(ty, |T| Some(loop_dec::<T> as LoopFn))
}

/// Widens index lanes of any integer type to i64 (u64 values past i64::MAX saturate, which is
/// out of bounds for every array).
///
/// # Safety
/// `src` is valid for reads of `n` aligned integers of the function's type.
pub(crate) type IndexFn = unsafe fn(n: usize, src: *const u8, out: &mut [i64]);

/// # Safety
/// See [`IndexFn`].
unsafe fn widen_index<T: Int>(n: usize, src: *const u8, out: &mut [i64]) {
    let s = src as *const T;
    for (i, o) in out.iter_mut().enumerate().take(n) {
        // SAFETY: lane `i < n` of `src` (the contract).
        *o = unsafe { *s.add(i) }
            .to_i128()
            .clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    }
}

/// Index widening for an integer type.
pub(crate) fn index_fn(ty: Type) -> Option<IndexFn> {
    with_int!(ty, |T| Some(widen_index::<T> as IndexFn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_u32_division_is_exact() {
        let div = binary_fn(BinaryOp::Div, Type::U32).unwrap();
        let rem = binary_fn(BinaryOp::Rem, Type::U32).unwrap();
        for (start, d) in [
            (0u32, 1u32),
            (5, 3),
            (1023, 1024),
            (4096 * 7 + 13, 1000),
            (u32::MAX - 5000, 77),
        ] {
            let a: Vec<u32> = (0..4096u32).map(|i| start.wrapping_add(i)).collect();
            let b = vec![d; a.len()];
            let (mut q, mut r) = (vec![0u32; a.len()], vec![0u32; a.len()]);
            // SAFETY: every slice holds a.len() u32 lanes.
            unsafe {
                div(
                    a.len(),
                    q.as_mut_ptr() as _,
                    a.as_ptr() as _,
                    b.as_ptr() as _,
                    a.as_ptr() as _,
                    None,
                );
                rem(
                    a.len(),
                    r.as_mut_ptr() as _,
                    a.as_ptr() as _,
                    b.as_ptr() as _,
                    a.as_ptr() as _,
                    None,
                );
            }
            for i in 0..a.len() {
                assert_eq!((q[i], r[i]), (a[i] / d, a[i] % d), "{} / {d}", a[i]);
            }
        }
    }

    #[test]
    fn uniform_u32_division_is_exact() {
        let div = binary_fn(BinaryOp::Div, Type::U32).unwrap();
        let rem = binary_fn(BinaryOp::Rem, Type::U32).unwrap();
        for d in [
            1u32,
            3,
            7,
            1000,
            65535,
            1 << 20,
            0x7fff_ffff,
            0xffff_fffe,
            u32::MAX,
        ] {
            let a: Vec<u32> = (0..4096u32)
                .map(|i| i.wrapping_mul(2654435761) ^ (i << 7))
                .chain([u32::MAX, u32::MAX - 1, d, d.wrapping_mul(7)])
                .collect();
            let b = vec![d; a.len()];
            let (mut q, mut r) = (vec![0u32; a.len()], vec![0u32; a.len()]);
            // SAFETY: every slice holds a.len() u32 lanes.
            unsafe {
                div(
                    a.len(),
                    q.as_mut_ptr() as _,
                    a.as_ptr() as _,
                    b.as_ptr() as _,
                    a.as_ptr() as _,
                    None,
                );
                rem(
                    a.len(),
                    r.as_mut_ptr() as _,
                    a.as_ptr() as _,
                    b.as_ptr() as _,
                    a.as_ptr() as _,
                    None,
                );
            }
            for i in 0..a.len() {
                assert_eq!((q[i], r[i]), (a[i] / d, a[i] % d), "{} / {d}", a[i]);
            }
        }
    }
}
