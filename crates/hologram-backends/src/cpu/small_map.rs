//! Small element-wise maps of two operands run at once ([`crate::Library::binary_map`]): the
//! lane function of the operation over the buffers in place, under the device lock, without
//! binding, planning or chunking a kernel launch. A one-element `x + 1` spent about 4,000 of
//! its 10,600 instructions (profiled with callgrind from Python) on the launch path.
//!
//! The lane functions are the native maps' own (`lanes`, `lanes_scalar`), so the result has
//! the bits the launched kernel gives. Larger maps, which the launch spreads over the cores,
//! and the interpreter-only backend (which holds the two paths to the same results in tests)
//! decline.

use crate::backend::BufferArg;
use crate::error::Result;
use crate::library::{BinaryMap, MapOperand};

use super::lanes::binary_fn;
use super::lanes_scalar::scalar_binary_fn;
use super::native::PARALLEL_MIN;
use super::{bump, device_lock, CpuBackend};

/// An operand resolved to memory: a buffer's first element, or a value's bytes.
enum Resolved {
    Buffer(*mut u8),
    Scalar([u8; 8]),
}

impl CpuBackend {
    /// Runs `map` when it is small and its buffers are this backend's, aligned and large enough;
    /// `Ok(false)` otherwise (the caller launches the kernel, which reports any fault).
    pub(crate) fn small_binary_map(&self, map: &BinaryMap<'_>) -> Result<bool> {
        let (n, ty) = (map.n, map.ty);
        if !self.native_patterns || n > PARALLEL_MIN || ty == hologram_isa::Type::Pred {
            return Ok(false);
        }
        let size = ty.size_bytes();
        let Some(bytes) = n.checked_mul(size) else {
            return Ok(false);
        };
        // A buffer's first element, when it holds `n` aligned elements of this backend's memory.
        let place = |b: &BufferArg| -> Option<*mut u8> {
            let m = self.memory(&b.memory).ok()?;
            crate::launch::check_buffer(b, m.len()).ok()?;
            // SAFETY: offset + len lies within the allocation (checked just above).
            let base = unsafe { m.as_ptr().add(b.offset) };
            (b.len >= bytes && base as usize % size == 0).then_some(base)
        };
        let resolve = |o: &MapOperand<'_>| -> Option<Resolved> {
            match o {
                MapOperand::Buffer(b) => place(b).map(Resolved::Buffer),
                MapOperand::Scalar(v) if v.ty() == ty => {
                    let le = v.to_bits().to_le_bytes();
                    let mut own = [0u8; 8];
                    own[..size].copy_from_slice(&le[..size]);
                    if cfg!(target_endian = "big") {
                        own[..size].reverse();
                    }
                    Some(Resolved::Scalar(own))
                }
                MapOperand::Scalar(_) => None,
            }
        };
        let (Some(a), Some(b), Some(out)) = (resolve(&map.a), resolve(&map.b), place(map.out))
        else {
            return Ok(false);
        };
        // The output may be an input exactly (in place), and overlaps none otherwise.
        let overlaps = |p: *mut u8| {
            let (p, o) = (p as usize, out as usize);
            p != o && p < o + bytes && o < p + bytes
        };
        for r in [&a, &b] {
            if let Resolved::Buffer(p) = r {
                if overlaps(*p) {
                    return Ok(false);
                }
            }
        }
        if n == 0 {
            return Ok(true);
        }
        let _device = device_lock::lock();
        match (&a, &b) {
            (Resolved::Buffer(x), Resolved::Buffer(y)) => {
                let Some(f) = binary_fn(map.op, ty) else {
                    return Ok(false);
                };
                // SAFETY: every pointer addresses `n` aligned elements of `ty` (checked above);
                // `out` is an operand exactly or overlaps neither.
                unsafe { f(n, out, *x, *y, std::ptr::null(), None) };
            }
            (Resolved::Buffer(x), Resolved::Scalar(s))
            | (Resolved::Scalar(s), Resolved::Buffer(x)) => {
                let Some(f) = scalar_binary_fn(map.op, ty) else {
                    return Ok(false);
                };
                let scalar_first = matches!(a, Resolved::Scalar(_));
                // SAFETY: as above; `s` holds one element of `ty`.
                unsafe { f(n, out, *x, s.as_ptr(), scalar_first) };
            }
            (Resolved::Scalar(_), Resolved::Scalar(_)) => return Ok(false),
        }
        bump(&self.counters.library_launches, 1);
        Ok(true)
    }
}
