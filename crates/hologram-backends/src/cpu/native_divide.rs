//! `div.u32` and `rem.u32` by a launch-invariant divisor (a scalar parameter or a literal) in
//! native maps, without a hardware divide per element.
//!
//! Broadcast and strided operands of generated element-wise kernels turn `%gid` into
//! coordinates with one `rem` and one `div` per dimension; a hardware 32-bit divide costs more
//! than everything else an element does. With `m = ceil(2^64 / d)`, the quotient of a 32-bit
//! `x` is the high word of the 128-bit product `m * x`, and the remainder the high word of
//! `(m * x mod 2^64) * d` (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
//! 2019: exact for every 32-bit `x` and every divisor >= 2). The ISA's rules for a zero divisor
//! (`x / 0 = x`, `x rem 0 = 0`) and a divisor of one are kept by their own loops.

/// Division by a divisor fixed for a whole launch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InvariantDivisor {
    divisor: u32,
    /// `ceil(2^64 / divisor)`; unused for divisors 0 and 1.
    magic: u64,
    remainder: bool,
}

impl InvariantDivisor {
    /// `rem.u32` (remainder) or `div.u32` (quotient) by `divisor`.
    pub(crate) fn new(divisor: u32, remainder: bool) -> InvariantDivisor {
        let magic = if divisor >= 2 {
            (u64::MAX / divisor as u64).wrapping_add(1)
        } else {
            0
        };
        InvariantDivisor {
            divisor,
            magic,
            remainder,
        }
    }

    fn quotient(&self, x: u32) -> u32 {
        ((self.magic as u128 * x as u128) >> 64) as u32
    }

    fn rest(&self, x: u32) -> u32 {
        let low = self.magic.wrapping_mul(x as u64);
        ((low as u128 * self.divisor as u128) >> 64) as u32
    }

    /// Applies the operation to `len` elements at raw slot pointers, element by element in
    /// order (like the other lane functions: the slots may be the same, or a zero-copy input and
    /// a direct output that overlap).
    ///
    /// # Safety
    /// `dst` and `src` must each address `len` valid, aligned `u32` values.
    pub(crate) unsafe fn apply_raw(&self, len: usize, dst: *mut u8, src: *const u8) {
        let (dst, src) = (dst as *mut u32, src as *const u32);
        match (self.divisor, self.remainder) {
            // SAFETY: forwarded from the caller.
            (0 | 1, false) => unsafe { each(len, dst, src, |x| x) },
            // SAFETY: forwarded from the caller.
            (0 | 1, true) => unsafe { each(len, dst, src, |_| 0) },
            // SAFETY: forwarded from the caller.
            (_, false) => unsafe { each(len, dst, src, |x| self.quotient(x)) },
            // SAFETY: forwarded from the caller.
            (_, true) => unsafe { each(len, dst, src, |x| self.rest(x)) },
        }
    }
}

/// `dst[i] = f(src[i])` for `i` in `0..len`, each element read before it is written.
///
/// # Safety
/// `dst` and `src` must each address `len` valid, aligned `u32` values.
#[inline(always)]
unsafe fn each(len: usize, dst: *mut u32, src: *const u32, f: impl Fn(u32) -> u32) {
    for i in 0..len {
        // SAFETY: in bounds by the caller's promise.
        unsafe { dst.add(i).write(f(src.add(i).read())) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(d: u32, remainder: bool, xs: &[u32]) -> Vec<u32> {
        let mut out = vec![0; xs.len()];
        // SAFETY: both vectors hold xs.len() aligned u32.
        unsafe {
            InvariantDivisor::new(d, remainder).apply_raw(
                xs.len(),
                out.as_mut_ptr() as *mut u8,
                xs.as_ptr() as *const u8,
            )
        };
        out
    }

    fn check(d: u32, xs: &[u32]) {
        let (q, r) = (run(d, false, xs), run(d, true, xs));
        for (i, &x) in xs.iter().enumerate() {
            // The ISA's rule for a zero divisor: x / 0 = x, x rem 0 = 0.
            let (eq, er) = x.checked_div(d).map_or((x, 0), |q| (q, x % d));
            assert_eq!((q[i], r[i]), (eq, er), "{x} / {d}");
        }
    }

    #[test]
    fn matches_hardware_division_on_edges_and_random_values() {
        let mut xs: Vec<u32> = vec![0, 1, 2, 3, 1023, 1024, 1025, u32::MAX - 1, u32::MAX];
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..4096 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            xs.push(s as u32);
        }
        let mut divisors = vec![
            0, 1, 2, 3, 5, 7, 10, 641, 1000, 1024, 65_535, 65_536, 65_537,
        ];
        divisors.extend([
            (1 << 31) - 1,
            1 << 31,
            (1 << 31) + 1,
            u32::MAX - 1,
            u32::MAX,
        ]);
        for _ in 0..200 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            divisors.push((s >> 32) as u32 >> (s % 32));
        }
        for &d in &divisors {
            check(d, &xs);
            // Every multiple of d and its neighbours (where a rounding error would show).
            let near: Vec<u32> = (0..64u64)
                .flat_map(|k| {
                    let m = (k * d as u64).min(u32::MAX as u64) as u32;
                    [m.saturating_sub(1), m, m.saturating_add(1)]
                })
                .collect();
            check(d, &near);
        }
    }

    #[test]
    fn in_place_application_matches() {
        let mut x: Vec<u32> = (0..1000).map(|i| i * 7919).collect();
        let want: Vec<u32> = x.iter().map(|v| v % 97).collect();
        // SAFETY: `x` holds 1000 aligned u32; source and destination are the same slot.
        unsafe {
            InvariantDivisor::new(97, true).apply_raw(
                x.len(),
                x.as_mut_ptr() as *mut u8,
                x.as_ptr() as *const u8,
            )
        };
        assert_eq!(x, want);
    }
}
