//! Loads, stores and atomics across the lanes of a block, bounds-checked.
//!
//! Every access is checked before anything is written: if any active lane's index is outside
//! the array, the instruction writes nothing and reports that lane.
//!
//! Buffers that other threads may write during a launch ([`ArrayView::racy`]) are read and
//! written with relaxed atomics of the element's size, so a kernel whose blocks race (a load of
//! an element another block stores or updates atomically) gets some value, as on a GPU, instead
//! of a Rust data race. Relaxed loads and stores are plain moves on x86-64 and AArch64; what
//! they cost is that the compiler cannot merge them into vector copies.

use std::sync::atomic::{
    AtomicI32, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering,
};

use hologram_isa::{AtomOp, Type};

/// Where an array's elements are for one block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArrayView {
    /// Element 0 (of lane 0, for scratch arrays), aligned to the element size.
    pub base: *mut u8,
    /// Elements per lane-visible array.
    pub len: u64,
    /// Scratch arrays are per lane: element `k` of lane `l` is at `k * lanes + l`.
    pub per_lane: bool,
    /// Lanes per block (for per-lane arrays).
    pub lanes: usize,
    /// Other threads may write the array while this block runs (a written buffer, or one that
    /// overlaps it, in a launch whose batches run in parallel): every access is a relaxed
    /// atomic of the element's size.
    pub racy: bool,
}

impl ArrayView {
    /// The view of no array (a scalar parameter's slot): every index is out of bounds.
    pub(crate) fn empty(lanes: usize) -> ArrayView {
        ArrayView {
            base: std::ptr::null_mut(),
            len: 0,
            per_lane: false,
            lanes,
            racy: false,
        }
    }

    #[inline(always)]
    fn offset(&self, index: i64, lane: usize) -> usize {
        if self.per_lane {
            index as usize * self.lanes + lane
        } else {
            index as usize
        }
    }
}

/// An element width with a relaxed atomic load and store of that width.
pub(crate) trait Word: Copy {
    /// Reads `*p` with a relaxed atomic load.
    ///
    /// # Safety
    /// `p` is valid for reads of `Self` and aligned to its size, and every access that may
    /// race with this one is an atomic access of the same size at the same address.
    unsafe fn load_relaxed(p: *const Self) -> Self;
    /// Writes `*p` with a relaxed atomic store.
    ///
    /// # Safety
    /// As for [`Word::load_relaxed`], for writes.
    unsafe fn store_relaxed(p: *mut Self, v: Self);
}

macro_rules! word {
    ($t:ty, $atomic:ty) => {
        impl Word for $t {
            #[inline(always)]
            unsafe fn load_relaxed(p: *const Self) -> Self {
                // SAFETY: the caller's contract is `from_ptr`'s (valid, aligned, and only
                // same-sized atomic accesses may race with it).
                unsafe { <$atomic>::from_ptr(p as *mut $t) }.load(Ordering::Relaxed)
            }
            #[inline(always)]
            unsafe fn store_relaxed(p: *mut Self, v: Self) {
                // SAFETY: as for `load_relaxed`.
                unsafe { <$atomic>::from_ptr(p) }.store(v, Ordering::Relaxed)
            }
        }
    };
}

word!(u8, AtomicU8);
word!(u16, AtomicU16);
word!(u32, AtomicU32);
word!(u64, AtomicU64);

/// Copies `n` elements from a racy array into a lane register, each with a relaxed load.
///
/// # Safety
/// `src` addresses `n` elements as [`Word::load_relaxed`] requires; `dst` is valid for `n`
/// writes and does not overlap `src` (a register slot never overlaps a buffer).
#[inline]
pub(crate) unsafe fn copy_in_relaxed<T: Word>(src: *const T, dst: *mut T, n: usize) {
    for i in 0..n {
        // SAFETY: per the contract, element `i < n` of both is valid.
        unsafe { *dst.add(i) = T::load_relaxed(src.add(i)) };
    }
}

/// Copies `n` elements of a lane register into a racy array, each with a relaxed store.
///
/// # Safety
/// `dst` addresses `n` elements as [`Word::store_relaxed`] requires; `src` is valid for `n`
/// reads and does not overlap `dst`.
#[inline]
pub(crate) unsafe fn copy_out_relaxed<T: Word>(src: *const T, dst: *mut T, n: usize) {
    for i in 0..n {
        // SAFETY: per the contract, element `i < n` of both is valid.
        unsafe { T::store_relaxed(dst.add(i), *src.add(i)) };
    }
}

/// Copies `n` elements of `size` bytes between a lane register and an array: a plain copy, or
/// for a racy array one relaxed access per element. `to_array` says which way.
///
/// # Safety
/// `array` addresses `n` elements of `size` bytes (1, 2, 4 or 8), aligned, and is racy only if
/// `racy` says so; `reg` is a register slot valid for `n` such elements; they do not overlap.
pub(crate) unsafe fn copy_lanes(
    array: *mut u8,
    reg: *mut u8,
    n: usize,
    size: usize,
    racy: bool,
    to_array: bool,
) {
    macro_rules! go {
        ($t:ty) => {{
            let (a, r) = (array as *mut $t, reg as *mut $t);
            // SAFETY: per the contract, with `$t` of `size` bytes.
            unsafe {
                match (racy, to_array) {
                    (false, false) => std::ptr::copy_nonoverlapping(a, r, n),
                    (false, true) => std::ptr::copy_nonoverlapping(r, a, n),
                    (true, false) => copy_in_relaxed(a, r, n),
                    (true, true) => copy_out_relaxed(r, a, n),
                }
            }
        }};
    }
    match size {
        1 => go!(u8),
        2 => go!(u16),
        4 => go!(u32),
        _ => go!(u64),
    }
}

/// The first active lane whose index is outside `0..len`, if any.
#[inline]
pub(crate) fn first_out_of_bounds(idx: &[i64], len: u64, mask: Option<&[u8]>) -> Option<usize> {
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    match mask {
        None => {
            for &i in idx {
                lo = lo.min(i);
                hi = hi.max(i);
            }
        }
        Some(m) => {
            for (&i, &a) in idx.iter().zip(m) {
                if a != 0 {
                    lo = lo.min(i);
                    hi = hi.max(i);
                }
            }
        }
    }
    if lo > hi || (lo >= 0 && (hi as u64) < len) {
        return None;
    }
    idx.iter()
        .enumerate()
        .position(|(l, &i)| mask.is_none_or(|m| m[l] != 0) && (i < 0 || i as u64 >= len))
}

fn contiguous(idx: &[i64]) -> bool {
    let Some(&first) = idx.first() else {
        return true;
    };
    // A fold without an early exit, so it vectorizes (this runs on every gather).
    idx.iter()
        .zip(0i64..)
        .fold(0, |acc, (&i, l)| acc | (i ^ first.wrapping_add(l)))
        == 0
}

/// Loads one element per active lane. `Err(lane)` names an out-of-bounds lane.
///
/// # Safety
/// `d` is a register slot valid for `n` elements of the instruction's type; `idx` holds at
/// least `n` indexes; `view` describes a live array of `len` elements of that type's size
/// (times `lanes` for per-lane arrays), aligned, racy only if `view.racy` says so.
pub(crate) type LoadFn = unsafe fn(
    n: usize,
    d: *mut u8,
    idx: &[i64],
    view: &ArrayView,
    mask: Option<&[u8]>,
) -> Result<(), usize>;
/// Stores one element per active lane. `Err(lane)` names an out-of-bounds lane.
///
/// # Safety
/// As for [`LoadFn`], with `src` read instead of `d` written.
pub(crate) type StoreFn = unsafe fn(
    n: usize,
    src: *const u8,
    idx: &[i64],
    view: &ArrayView,
    mask: Option<&[u8]>,
) -> Result<(), usize>;

/// # Safety
/// See [`LoadFn`].
unsafe fn load<T: Word>(
    n: usize,
    d: *mut u8,
    idx: &[i64],
    view: &ArrayView,
    mask: Option<&[u8]>,
) -> Result<(), usize> {
    let idx = &idx[..n];
    if let Some(l) = first_out_of_bounds(idx, view.len, mask) {
        return Err(l);
    }
    let (d, base) = (d as *mut T, view.base as *const T);
    if mask.is_none() && !view.per_lane && contiguous(idx) {
        // SAFETY: indexes idx[0]..idx[0] + n are in bounds (checked above); `d` holds n.
        unsafe {
            copy_lanes(
                base.add(idx[0] as usize) as *mut u8,
                d as *mut u8,
                n,
                std::mem::size_of::<T>(),
                view.racy,
                false,
            )
        };
        return Ok(());
    }
    for (l, &i) in idx.iter().enumerate() {
        if mask.is_none_or(|m| m[l] != 0) {
            // SAFETY: `i` is in bounds (checked above), so its element (of lane `l` for
            // per-lane arrays) is inside the array; `l < n` is inside the register.
            unsafe {
                let p = base.add(view.offset(i, l));
                *d.add(l) = if view.racy { T::load_relaxed(p) } else { *p };
            }
        }
    }
    Ok(())
}

/// # Safety
/// See [`StoreFn`].
unsafe fn store<T: Word>(
    n: usize,
    s: *const u8,
    idx: &[i64],
    view: &ArrayView,
    mask: Option<&[u8]>,
) -> Result<(), usize> {
    let idx = &idx[..n];
    if let Some(l) = first_out_of_bounds(idx, view.len, mask) {
        return Err(l);
    }
    let (s, base) = (s as *const T, view.base as *mut T);
    if mask.is_none() && !view.per_lane && contiguous(idx) {
        // SAFETY: as in `load`.
        unsafe {
            copy_lanes(
                base.add(idx[0] as usize) as *mut u8,
                s as *mut u8,
                n,
                std::mem::size_of::<T>(),
                view.racy,
                true,
            )
        };
        return Ok(());
    }
    for (l, &i) in idx.iter().enumerate() {
        if mask.is_none_or(|m| m[l] != 0) {
            // SAFETY: as in `load`.
            unsafe {
                let p = base.add(view.offset(i, l));
                if view.racy {
                    T::store_relaxed(p, *s.add(l));
                } else {
                    *p = *s.add(l);
                }
            }
        }
    }
    Ok(())
}

/// `ld` for elements of a type's size.
pub(crate) fn load_fn(ty: Type) -> LoadFn {
    match ty.size_bytes() {
        1 => load::<u8>,
        2 => load::<u16>,
        4 => load::<u32>,
        _ => load::<u64>,
    }
}

/// `st` for elements of a type's size.
pub(crate) fn store_fn(ty: Type) -> StoreFn {
    match ty.size_bytes() {
        1 => store::<u8>,
        2 => store::<u16>,
        4 => store::<u32>,
        _ => store::<u64>,
    }
}

/// An atomic read-modify-write per active lane, in lane order; `d` receives the old values.
///
/// # Safety
/// As for [`LoadFn`]; `a` and `b` are register slots valid for `n` elements of the type, and
/// the view's base is aligned to the element size (true of every buffer the backend binds and
/// of `.shared` arrays; atomics on per-lane `.scratch` arrays do not validate).
pub(crate) type AtomFn = unsafe fn(
    n: usize,
    d: *mut u8,
    idx: &[i64],
    view: &ArrayView,
    a: *const u8,
    b: *const u8,
    mask: Option<&[u8]>,
) -> Result<(), usize>;

macro_rules! atom_int {
    ($name:ident, $t:ty, $atomic:ty) => {
        /// # Safety
        /// See [`AtomFn`].
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            n: usize,
            d: *mut u8,
            idx: &[i64],
            view: &ArrayView,
            a: *const u8,
            b: *const u8,
            mask: Option<&[u8]>,
            op: AtomOp,
        ) -> Result<(), usize> {
            let idx = &idx[..n];
            if let Some(l) = first_out_of_bounds(idx, view.len, mask) {
                return Err(l);
            }
            let (d, a, b, base) = (
                d as *mut $t,
                a as *const $t,
                b as *const $t,
                view.base as *mut $t,
            );
            for (l, &i) in idx.iter().enumerate() {
                if mask.is_none_or(|m| m[l] != 0) {
                    // SAFETY: element `i` is in bounds (checked above) and aligned (bases are
                    // aligned and offsets are whole elements); every other access to it during
                    // the launch is an atomic of the same size (racy arrays) or on this thread.
                    // `l < n` is inside the register slots.
                    unsafe {
                        let cell = <$atomic>::from_ptr(base.add(i as usize));
                        let x = *a.add(l);
                        let old = match op {
                            AtomOp::Add => cell.fetch_add(x, Ordering::Relaxed),
                            AtomOp::Min => cell.fetch_min(x, Ordering::Relaxed),
                            AtomOp::Max => cell.fetch_max(x, Ordering::Relaxed),
                            AtomOp::Exch => cell.swap(x, Ordering::Relaxed),
                            AtomOp::Cas => match cell.compare_exchange(
                                x,
                                *b.add(l),
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            ) {
                                Ok(v) | Err(v) => v,
                            },
                        };
                        *d.add(l) = old;
                    }
                }
            }
            Ok(())
        }
    };
}

atom_int!(atom_i32, i32, AtomicI32);
atom_int!(atom_u32, u32, AtomicU32);
atom_int!(atom_i64, i64, AtomicI64);
atom_int!(atom_u64, u64, AtomicU64);

macro_rules! atom_float {
    ($name:ident, $f:ty, $bits:ty, $atomic:ty) => {
        /// # Safety
        /// See [`AtomFn`].
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            n: usize,
            d: *mut u8,
            idx: &[i64],
            view: &ArrayView,
            a: *const u8,
            _b: *const u8,
            mask: Option<&[u8]>,
            op: AtomOp,
        ) -> Result<(), usize> {
            let idx = &idx[..n];
            if let Some(l) = first_out_of_bounds(idx, view.len, mask) {
                return Err(l);
            }
            let (d, a, base) = (d as *mut $bits, a as *const $bits, view.base as *mut $bits);
            for (l, &i) in idx.iter().enumerate() {
                if mask.is_none_or(|m| m[l] != 0) {
                    // SAFETY: as in `atom_int`.
                    unsafe {
                        let cell = <$atomic>::from_ptr(base.add(i as usize));
                        let x = *a.add(l);
                        let old = match op {
                            AtomOp::Exch => cell.swap(x, Ordering::Relaxed),
                            // Only add and exch are valid on floats (the validator checks).
                            _ => {
                                let mut cur = cell.load(Ordering::Relaxed);
                                loop {
                                    let sum = (<$f>::from_bits(cur) + <$f>::from_bits(x)).to_bits();
                                    match cell.compare_exchange_weak(
                                        cur,
                                        sum,
                                        Ordering::Relaxed,
                                        Ordering::Relaxed,
                                    ) {
                                        Ok(v) => break v,
                                        Err(v) => cur = v,
                                    }
                                }
                            }
                        };
                        *d.add(l) = old;
                    }
                }
            }
            Ok(())
        }
    };
}

atom_float!(atom_f32, f32, u32, AtomicU32);
atom_float!(atom_f64, f64, u64, AtomicU64);

macro_rules! atom_entry {
    ($($entry:ident => $imp:ident, $op:expr;)*) => {$(
        /// # Safety
        /// See [`AtomFn`].
        unsafe fn $entry(n: usize, d: *mut u8, idx: &[i64], view: &ArrayView, a: *const u8, b: *const u8, mask: Option<&[u8]>) -> Result<(), usize> {
            // SAFETY: the same contract.
            unsafe { $imp(n, d, idx, view, a, b, mask, $op) }
        }
    )*};
}

macro_rules! atom_entries_for {
    ($imp:ident, $add:ident, $min:ident, $max:ident, $exch:ident, $cas:ident) => {
        atom_entry! {
            $add => $imp, AtomOp::Add;
            $min => $imp, AtomOp::Min;
            $max => $imp, AtomOp::Max;
            $exch => $imp, AtomOp::Exch;
            $cas => $imp, AtomOp::Cas;
        }
    };
}

atom_entries_for!(atom_i32, i32_add, i32_min, i32_max, i32_exch, i32_cas);
atom_entries_for!(atom_u32, u32_add, u32_min, u32_max, u32_exch, u32_cas);
atom_entries_for!(atom_i64, i64_add, i64_min, i64_max, i64_exch, i64_cas);
atom_entries_for!(atom_u64, u64_add, u64_min, u64_max, u64_exch, u64_cas);
atom_entries_for!(atom_f32, f32_add, f32_min, f32_max, f32_exch, f32_cas);
atom_entries_for!(atom_f64, f64_add, f64_min, f64_max, f64_exch, f64_cas);

/// The atomic for an operation and element type (None where the ISA has none).
pub(crate) fn atom_fn(op: AtomOp, ty: Type) -> Option<AtomFn> {
    let row: [AtomFn; 5] = match ty {
        Type::I32 => [i32_add, i32_min, i32_max, i32_exch, i32_cas],
        Type::U32 => [u32_add, u32_min, u32_max, u32_exch, u32_cas],
        Type::I64 => [i64_add, i64_min, i64_max, i64_exch, i64_cas],
        Type::U64 => [u64_add, u64_min, u64_max, u64_exch, u64_cas],
        Type::F32 if matches!(op, AtomOp::Add | AtomOp::Exch) => {
            [f32_add, f32_min, f32_max, f32_exch, f32_cas]
        }
        Type::F64 if matches!(op, AtomOp::Add | AtomOp::Exch) => {
            [f64_add, f64_min, f64_max, f64_exch, f64_cas]
        }
        _ => return None,
    };
    let i = match op {
        AtomOp::Add => 0,
        AtomOp::Min => 1,
        AtomOp::Max => 2,
        AtomOp::Exch => 3,
        AtomOp::Cas => 4,
    };
    Some(row[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(first_out_of_bounds(&[0, 1, 2], 3, None), None);
        assert_eq!(first_out_of_bounds(&[0, 3, 2], 3, None), Some(1));
        assert_eq!(first_out_of_bounds(&[0, -1, 2], 3, None), Some(1));
        assert_eq!(first_out_of_bounds(&[0, 9, 2], 3, Some(&[1, 0, 1])), None);
        assert_eq!(first_out_of_bounds(&[5, 9, 2], 3, Some(&[0, 0, 0])), None);
    }
}
