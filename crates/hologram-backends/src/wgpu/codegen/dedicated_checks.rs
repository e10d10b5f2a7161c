//! The launcher's host-side proof that a launch of a dedicated reduction or row kernel
//! ([`super::dedicated`]) cannot report an error, so that its error slot needs no read-back.
//!
//! A dedicated kernel reports only in two ways: a workgroup (a lane, for the lane reduction)
//! whose own in-bounds test fails runs the generic code, which may report an access; and a loop
//! found cut short by a driver's loop limiter (lavapipe's 65535 iterations per invocation)
//! reports `ERR_LOOP_CUT`. [`DedicatedChecks::cannot_fault`] evaluates the device's in-bounds
//! test for every workgroup at once, from the same argument words, in 64-bit arithmetic that
//! refuses any value the device's 32-bit arithmetic would wrap; and it bounds the iterations
//! every invocation's loops can make. It answers `true` only when both hold for the whole
//! launch; anything it cannot decide is `false` (the slot is read, as for any kernel). A launch
//! whose every workgroup passes the test ([`DedicatedChecks::in_bounds`]) runs the module
//! generated without the tests (`CodegenOptions::proven`).

use hologram_compiler::patterns::reduce_templates::{BLOCK, BLOCK_UNROLL, LANE_UNROLL};
use hologram_compiler::patterns::softmax_templates::{ROW_BLOCK, ROW_UNROLL};
use hologram_compiler::patterns::{ReduceKind, ReducePattern, RowPattern};
use hologram_isa::{Kernel, ParamKind, Type};

use super::dedicated::Dedicated;

/// Loop iterations one invocation may make in all before a driver's limiter could cut one:
/// lavapipe's 65535, with a margin.
pub const LOOP_ITERATIONS: u64 = 60_000;

const U32_MAX: u64 = u32::MAX as u64;

/// What a dedicated kernel's accesses are bounded by: parameter indexes of its buffers and of
/// the scalars its in-bounds test reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedicatedChecks {
    form: Form,
    /// The module makes the in-bounds test (generated with bounds checks).
    checked: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    Rows {
        /// (buffer, offset scalar) of each input.
        inputs: Vec<(u32, u32)>,
        y: u32,
        rows: u32,
        cols: u32,
        /// Lanes per row and rows per workgroup.
        g: u32,
        rows_per: u32,
        /// Rows kept in registers: the passes do not loop.
        resident: bool,
        passes: u64,
    },
    Block {
        x: u32,
        xix: Option<u32>,
        out: u32,
        outix: Option<u32>,
        off: u32,
        rlen: u32,
        chunks: u32,
        clen: u32,
    },
    Lane {
        x: u32,
        out: u32,
        off: u32,
        rlen: u32,
        inner: u32,
        n: u32,
    },
}

/// A launch as the proof sees it.
pub struct Launch<'a> {
    /// Workgroups per dimension (before any folding to the dispatch limits).
    pub grid: [u32; 3],
    /// Lanes per workgroup.
    pub block_lanes: u64,
    /// The low word of scalar parameter `p` (what the device reads for a `u32`).
    pub scalar: &'a dyn Fn(u32) -> Option<u32>,
    /// Elements of buffer parameter `p` (the length word the device reads).
    pub len: &'a dyn Fn(u32) -> u64,
}

impl DedicatedChecks {
    /// The checks of kernel `k` in dedicated form `d`, generated with bounds checks or not
    /// (`checked`). `None` when a scalar the test reads is not a `u32` parameter, or a helper
    /// the dedicated code calls loops (`helpers_loop`: its iterations are not counted here).
    pub fn of(k: &Kernel, d: &Dedicated, checked: bool, helpers_loop: bool) -> Option<Self> {
        if helpers_loop {
            return None;
        }
        let form = match d {
            Dedicated::Rows(p) => rows_form(p),
            Dedicated::Reduce(p) => reduce_form(p),
        };
        let scalars: Vec<u32> = match &form {
            Form::Rows {
                inputs, rows, cols, ..
            } => inputs.iter().map(|i| i.1).chain([*rows, *cols]).collect(),
            Form::Block {
                off,
                rlen,
                chunks,
                clen,
                ..
            } => vec![*off, *rlen, *chunks, *clen],
            Form::Lane {
                off,
                rlen,
                inner,
                n,
                ..
            } => vec![*off, *rlen, *inner, *n],
        };
        let is_u32 = |p: u32| {
            k.params
                .get(p as usize)
                .is_some_and(|p| p.kind == ParamKind::Scalar(Type::U32))
        };
        scalars
            .into_iter()
            .all(is_u32)
            .then_some(DedicatedChecks { form, checked })
    }

    /// True when no invocation of the launch can report: no loop can reach a limiter and,
    /// in a module that makes the in-bounds test, every workgroup's (lane's) test passes, so
    /// none runs the generic code.
    pub fn cannot_fault(&self, launch: &Launch<'_>) -> bool {
        self.loops_fit(launch) && (!self.checked || self.in_bounds(launch))
    }

    /// True when every invocation's loops together stay under [`LOOP_ITERATIONS`].
    pub fn loops_fit(&self, launch: &Launch<'_>) -> bool {
        let s = |p: u32| (launch.scalar)(p).map(u64::from);
        let loops = match &self.form {
            Form::Rows {
                cols,
                g,
                resident,
                passes,
                ..
            } => {
                let unroll = u64::from(ROW_UNROLL);
                match (resident, s(*cols)) {
                    (true, _) => Some(0),
                    (false, Some(cols)) => {
                        Some(passes * (cols / (u64::from(*g) * unroll) + unroll + 2))
                    }
                    (false, None) => None,
                }
            }
            Form::Block { clen, .. } => {
                let (block, unroll) = (u64::from(BLOCK), u64::from(BLOCK_UNROLL));
                let tree = u64::from(BLOCK.trailing_zeros()) + 2;
                s(*clen).map(|clen| clen / (block * unroll) + unroll + 2 + 2 * tree)
            }
            Form::Lane { rlen, .. } => {
                let unroll = u64::from(LANE_UNROLL);
                s(*rlen).map(|rlen| rlen / unroll + unroll + 2)
            }
        };
        loops.is_some_and(|n| n <= LOOP_ITERATIONS)
    }

    /// True when every workgroup's (lane's) in-bounds test passes: every access the dedicated
    /// code makes in this launch is inside its buffer.
    pub fn in_bounds(&self, launch: &Launch<'_>) -> bool {
        let s = |p: u32| (launch.scalar)(p).map(u64::from);
        let len = |p: u32| (launch.len)(p).min(U32_MAX);
        let gx = u64::from(launch.grid[0]);
        if gx == 0 {
            return true;
        }
        match &self.form {
            Form::Rows {
                inputs,
                y,
                rows,
                cols,
                rows_per,
                ..
            } => {
                let (Some(rows), Some(cols)) = (s(*rows), s(*cols)) else {
                    return false;
                };
                let unroll = u64::from(ROW_UNROLL);
                let rows_per = u64::from(*rows_per);
                // Every workgroup: ctaid <= MAX / rows_per - 1, cols <= MAX - UNROLL · BLOCK.
                if gx - 1 > (U32_MAX / rows_per).saturating_sub(1)
                    || cols > U32_MAX - unroll * u64::from(ROW_BLOCK)
                {
                    return false;
                }
                if rows == 0 || cols == 0 {
                    return true; // no workgroup has a live row
                }
                // The live workgroup with the most rows before its end: the last one.
                let last = (gx - 1).min((rows - 1) / rows_per);
                let nrows = (last * rows_per + rows_per).min(rows);
                if nrows > U32_MAX / cols {
                    return false;
                }
                let end = nrows * cols;
                end <= len(*y)
                    && inputs.iter().all(|&(buf, off)| {
                        let n = len(buf);
                        s(off).is_some_and(|off| end <= n && off <= n - end)
                    })
            }
            Form::Block {
                x,
                xix,
                out,
                outix,
                off,
                rlen,
                chunks,
                clen,
            } => {
                let (Some(off), Some(rlen), Some(chunks), Some(clen)) =
                    (s(*off), s(*rlen), s(*chunks), s(*clen))
                else {
                    return false;
                };
                let (block, unroll) = (u64::from(BLOCK), u64::from(BLOCK_UNROLL));
                if chunks == 0 {
                    return false; // the device divides by it
                }
                // Every workgroup c < gx writes out[c] (and outix[c]).
                if gx > len(*out) || outix.is_some_and(|o| gx > len(o)) {
                    return false;
                }
                // The largest chunk start and end, unwrapped: start <= SAFE_END, stop <= SAFE_END.
                let safe_end = U32_MAX - block * unroll;
                let start = (chunks.min(gx) - 1) * clen;
                if start + clen > safe_end {
                    return false;
                }
                // A chunk's end grows with its index: no chunk reads x when the last one's
                // end is 0.
                let stop = (start + clen).min(rlen);
                if stop == 0 {
                    return true;
                }
                // The last element any chunk reads: at most the last row's base plus the
                // largest end, minus one (an upper bound; the device tests each chunk's).
                let last = (gx - 1) / chunks * rlen + off + stop - 1;
                last < len(*x) && xix.is_none_or(|i| last < len(i))
            }
            Form::Lane {
                x,
                out,
                off,
                rlen,
                inner,
                n,
            } => {
                let (Some(off), Some(rlen), Some(inner), Some(n)) =
                    (s(*off), s(*rlen), s(*inner), s(*n))
                else {
                    return false;
                };
                let lanes =
                    launch.grid.iter().map(|&d| u64::from(d)).product::<u64>() * launch.block_lanes;
                let live = lanes.min(n);
                if live == 0 {
                    return true;
                }
                if live > len(*out) || inner == 0 {
                    return false;
                }
                if rlen == 0 {
                    return true; // no lane reads x
                }
                // A lane's last element grows with its index: the last live lane's is the
                // largest. The device computes rlen · inner and each index in 32 bits.
                if rlen * inner > U32_MAX {
                    return false;
                }
                let gid = live - 1;
                let last = gid / inner * (rlen * inner) + gid % inner + off + (rlen - 1) * inner;
                last < len(*x)
            }
        }
    }
}

fn rows_form(p: &RowPattern) -> Form {
    let backward = p.op.is_backward();
    // The template's parameters: inputs (array, offset), the output, rows, cols, ...
    let (inputs, y, s0) = if backward {
        (vec![(0, 3), (1, 4)], 2, 5)
    } else {
        (vec![(0, 2)], 1, 3)
    };
    Form::Rows {
        inputs,
        y,
        rows: s0,
        cols: s0 + 1,
        g: p.g,
        rows_per: ROW_BLOCK / p.g,
        resident: p.resident > 0,
        passes: if backward { 2 } else { 3 },
    }
}

fn reduce_form(p: &ReducePattern) -> Form {
    match p.kind {
        ReduceKind::Lane => Form::Lane {
            x: 0,
            out: 1,
            off: 2,
            rlen: 3,
            inner: 4,
            n: 5,
        },
        ReduceKind::Block { index_input } => {
            let out = 1 + u32::from(index_input);
            let arg = p.combine.is_arg();
            let s0 = out + 1 + u32::from(arg);
            Form::Block {
                x: 0,
                xix: index_input.then_some(1),
                out,
                outix: arg.then_some(out + 1),
                off: s0,
                rlen: s0 + 1,
                chunks: s0 + 2,
                clen: s0 + 3,
            }
        }
    }
}

#[cfg(test)]
#[path = "dedicated_checks_tests.rs"]
mod tests;
