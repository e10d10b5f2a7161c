//! Division by a `u32` kernel parameter through a multiplier computed on the host.
//!
//! A broadcast operand of an element-wise kernel is addressed as `(gid / p) % m + o`, with `p`
//! and `m` scalar parameters: two divisions by values the whole launch shares. A `u32` division
//! by a value unknown at compile time is a dozen instructions on the GPU (reciprocal, multiply,
//! two corrections), per element and per operand. For every `u32` scalar parameter a kernel
//! divides by (`div.u32` or `rem.u32` with the parameter as divisor), the entry takes two more
//! arguments, a multiplier and a shift the host computes at launch ([`magic`]), and the quotient
//! of a dividend below 2^31 becomes `__umulhi(a, M) >> s` (the remainder `a - q·d`). Dividends
//! from 2^31 up, and divisors the multiplier does not cover (0, 1, above 2^31: `M` is 0), take
//! the ordinary helper, so every result is the ISA's exactly.
//!
//! Why it is exact: with `l = ceil(log2 d)` and `M = ceil(2^(31+l) / d)`, `M·d = 2^(31+l) + e`
//! with `0 <= e < d <= 2^l`; for `a = q·d + r < 2^31`, `a·M / 2^(31+l) = a/d + a·e/(d·2^(31+l))`
//! and the second term is below `2^-l <= 1/d`, so the floor is `q` (`(d-1)/d + 1/d` does not
//! reach `q + 1`). `M < 2^32` for `2 <= d <= 2^31`.

use hologram_isa::{BinaryOp, Kernel, Op, Operand, ParamKind, Type};

use crate::backend::KernelArg;

/// The multiplier and shift dividing by `d` (see the module documentation); `(0, 0)` when `d`
/// is 0, 1 or above 2^31, for which generated code divides the ordinary way.
pub fn magic(d: u32) -> (u32, u32) {
    if !(2..=1 << 31).contains(&d) {
        return (0, 0);
    }
    let l = 32 - (d - 1).leading_zeros();
    let m = (1u64 << (31 + l)).div_ceil(d as u64);
    debug_assert!(m < 1 << 32);
    (m as u32, l - 1)
}

/// The `u32` scalar parameters `kernel` divides by (`div.u32`/`rem.u32` with the parameter as
/// divisor), in parameter order: each adds a multiplier and a shift to the entry's arguments.
pub fn divisor_params(kernel: &Kernel) -> Vec<u32> {
    let mut out: Vec<u32> = kernel
        .insts
        .iter()
        .filter_map(|inst| match &inst.op {
            Op::Binary { op, ty, b, .. } => divisor_param(kernel, *op, *ty, b),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The parameter index when `op.ty a, b` divides by a `u32` scalar parameter `b`.
pub(crate) fn divisor_param(
    kernel: &Kernel,
    op: BinaryOp,
    ty: Type,
    b: &Operand<u32>,
) -> Option<u32> {
    let Operand::Param(p) = b else {
        return None;
    };
    let scalar_u32 = matches!(
        kernel.params.get(*p as usize).map(|p| p.kind),
        Some(ParamKind::Scalar(Type::U32))
    );
    (matches!(op, BinaryOp::Div | BinaryOp::Rem) && ty == Type::U32 && scalar_u32).then_some(*p)
}

/// The C parameters of the multipliers and shifts, in the entry's order
/// (`, hg_u32 hg_dm3, hg_u32 hg_ds3`).
pub(crate) fn c_parameters(divisors: &[u32]) -> String {
    divisors
        .iter()
        .map(|p| format!(", hg_u32 hg_dm{p}, hg_u32 hg_ds{p}"))
        .collect()
}

/// The C arguments passing them on (`, hg_dm3, hg_ds3`).
pub(crate) fn c_arguments(divisors: &[u32]) -> String {
    divisors
        .iter()
        .map(|p| format!(", hg_dm{p}, hg_ds{p}"))
        .collect()
}

/// The launch arguments for `divisors` (two words each, multiplier then shift) from the
/// launch's scalar values; a parameter that is not a `u32` scalar gets `(0, 0)` (ordinary
/// division; launch checks reject such arguments anyway).
pub fn magic_arguments(divisors: &[u32], args: &[KernelArg]) -> Vec<u64> {
    let mut out = Vec::with_capacity(2 * divisors.len());
    for &p in divisors {
        let d = match args.get(p as usize) {
            Some(KernelArg::Scalar(v)) => u32::try_from(v.to_bits()).ok(),
            _ => None,
        };
        let (m, s) = d.map_or((0, 0), magic);
        out.extend([m as u64, s as u64]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the generated `hg_divm_u32` computes.
    fn divm(a: u32, d: u32) -> u32 {
        let (m, s) = magic(d);
        if m != 0 && a < 1 << 31 {
            (((a as u64 * m as u64) >> 32) as u32) >> s
        } else {
            a.checked_div(d).unwrap_or(a)
        }
    }

    #[test]
    fn multipliers_divide_exactly_below_two_to_the_31() {
        let mut divisors: Vec<u32> = (0..=4099).collect();
        for k in 2..=31u32 {
            let p = 1u32 << k;
            divisors.extend([p - 1, p, p + 1, p / 3 * 2 + 1]);
        }
        divisors.extend([
            12544,
            50176,
            112 * 112 * 64,
            0x7fff_ffff,
            0x8000_0001,
            u32::MAX,
        ]);
        let mut dividends: Vec<u32> = (0..2000).collect();
        for k in 1..=32u64 {
            let p = (1u64 << k) as u32;
            dividends.extend([p.wrapping_sub(1), p, p.wrapping_add(1)]);
        }
        dividends.extend([0x7fff_ffff, 0x7fff_fffe, 0x8000_0000, 0x8000_0001, u32::MAX]);
        let mut x = 0x9E37_79B9u32;
        for &d in &divisors {
            let check = |a: u32| {
                let want = a.checked_div(d).unwrap_or(a);
                assert_eq!(divm(a, d), want, "{a} / {d}");
            };
            for &a in &dividends {
                check(a);
            }
            // Around multiples of d, where a wrong multiplier shows first.
            for q in [1u64, 2, 3, 1000, (1u64 << 31) / d.max(1) as u64] {
                for delta in [-1i64, 0, 1] {
                    let a = (q * d as u64) as i64 + delta;
                    if (0..1i64 << 32).contains(&a) {
                        check(a as u32);
                    }
                }
            }
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                check(x >> 1);
            }
        }
    }

    #[test]
    fn divisors_the_multiplier_does_not_cover_divide_the_ordinary_way() {
        for d in [0, 1, 0x8000_0001, u32::MAX] {
            assert_eq!(magic(d), (0, 0));
        }
        assert_ne!(magic(1 << 31).0, 0);
        // At the dividend boundary the multiplier stops and the fallback takes over.
        assert_eq!(divm(0x7fff_ffff, 3), 0x7fff_ffff / 3);
        assert_eq!(divm(0x8000_0000, 3), 0x8000_0000 / 3);
    }

    #[test]
    fn only_u32_scalar_divisors_get_multipliers() {
        let k = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n.param .u32 p\n.param .u32 m\n.param .i32 q\n    div.u32 %a, %gid, p;\n    rem.u32 %b, %a, m;\n    rem.u32 %c, %b, m;\n    div.u32 %d, p, %c;\n    cvt.i32.u32 %e, %d;\n    div.i32 %f, %e, q;\n    cvt.u32.i32 %g, %f;\n    st.u32 y[%gid], %g;\n").expect("valid");
        assert_eq!(divisor_params(&k), vec![1, 2]);
        assert_eq!(c_parameters(&[1]), ", hg_u32 hg_dm1, hg_u32 hg_ds1");
        let v = |x: u32| KernelArg::Scalar(hologram_isa::semantics::Value::U32(x));
        let (m, s) = magic(7);
        assert_eq!(
            magic_arguments(&[1, 2], &[v(0), v(7), v(1)]),
            vec![m as u64, s as u64, 0, 0]
        );
    }
}
