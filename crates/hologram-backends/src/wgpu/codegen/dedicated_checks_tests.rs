//! The host-side proof against the device's own in-bounds test, replayed here in the device's
//! 32-bit wrapping arithmetic for every workgroup (lane) of random launches: whenever the proof
//! says a launch cannot fault, every workgroup's test passes. The proof must also hold for the
//! launches the library makes (a whole-tensor sum, softmax rows), or it saves nothing.

use super::*;
use hologram_compiler::patterns::reduce_templates::Combine;
use hologram_compiler::patterns::softmax_templates::RowOp;
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};

/// Reproducible random launches (proptest's deterministic generator).
struct Rng(TestRng);

impl Rng {
    fn new() -> Rng {
        Rng(TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    }
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Mostly small values, sometimes ones near the 32-bit limit.
    fn value(&mut self, small: u64) -> u32 {
        match self.next() % 8 {
            0 => u32::MAX - (self.next() % 3000) as u32,
            1 => 0,
            _ => (self.next() % small) as u32,
        }
    }
}

/// The checks of a reduction template with bounds checks on.
fn reduction(kind: ReduceKind, combine: Combine) -> DedicatedChecks {
    let p = ReducePattern {
        kind,
        combine,
        storage: Type::F32,
        acc: Type::F32,
        out: Type::F32,
    };
    DedicatedChecks {
        form: reduce_form(&p),
        checked: true,
    }
}

fn lookup<T: Copy>(list: &[(u32, T)], p: u32) -> Option<T> {
    list.iter().find(|(q, _)| *q == p).map(|(_, v)| *v)
}

fn proves(
    c: &DedicatedChecks,
    grid: [u32; 3],
    block_lanes: u64,
    s: &[(u32, u32)],
    l: &[(u32, u64)],
) -> bool {
    let scalar = |p: u32| lookup(s, p);
    let len = |p: u32| lookup(l, p).unwrap_or(0);
    c.cannot_fault(&Launch {
        grid,
        block_lanes,
        scalar: &scalar,
        len: &len,
    })
}

/// The rows kernel's test for workgroup `ctaid` (rows.rs, `hd_safe`), written as the WGSL is.
#[allow(clippy::int_plus_one)]
fn rows_device_safe(
    ctaid: u32,
    rows_per: u32,
    rows: u32,
    cols: u32,
    y: u32,
    inputs: &[(u32, u32)],
) -> bool {
    let first = ctaid.wrapping_mul(rows_per);
    let mut safe = ctaid <= u32::MAX / rows_per - 1 && cols <= u32::MAX - ROW_UNROLL * ROW_BLOCK;
    if safe && first < rows && cols != 0 {
        let nrows = first.wrapping_add(rows_per).min(rows);
        safe = nrows <= u32::MAX / cols;
        if safe {
            let end = nrows.wrapping_mul(cols);
            safe = end <= y
                && inputs
                    .iter()
                    .all(|&(len, off)| end <= len && off <= len - end);
        }
    }
    safe
}

#[test]
fn a_rows_launch_proved_safe_has_every_workgroup_in_bounds() {
    let mut rng = Rng::new();
    let mut proved = 0;
    for case in 0..20_000 {
        let backward = case % 2 == 1;
        let g = [32u32, 64, 128, 256][(rng.next() % 4) as usize];
        let op = if backward {
            RowOp::SoftmaxBackward
        } else {
            RowOp::Softmax
        };
        let p = RowPattern {
            op,
            storage: Type::F32,
            g,
            resident: (case % 3 == 0) as u32 * 4,
        };
        let checks = DedicatedChecks {
            form: rows_form(&p),
            checked: true,
        };
        let Form::Rows {
            inputs,
            y,
            rows,
            cols,
            rows_per,
            ..
        } = &checks.form
        else {
            unreachable!()
        };
        let (nrows, ncols) = (rng.value(200), rng.value(300));
        let gx = (rng.next() % 40) as u32 + 1;
        let mut s = vec![(*rows, nrows), (*cols, ncols)];
        let mut l = vec![(*y, u64::from(rng.value(20_000)))];
        for &(buf, off) in inputs {
            s.push((off, rng.value(50)));
            l.push((buf, u64::from(rng.value(20_000))));
        }
        if !proves(&checks, [gx, 1, 1], u64::from(ROW_BLOCK), &s, &l) {
            continue;
        }
        proved += 1;
        let ins: Vec<(u32, u32)> = inputs
            .iter()
            .map(|&(b, o)| (lookup(&l, b).unwrap() as u32, lookup(&s, o).unwrap()))
            .collect();
        for c in 0..gx {
            assert!(
                rows_device_safe(c, *rows_per, nrows, ncols, lookup(&l, *y).unwrap() as u32, &ins),
                "case {case}: workgroup {c} of {gx} fails its test (rows {nrows}, cols {ncols}, {l:?}, {s:?})"
            );
        }
    }
    assert!(proved > 1000, "only {proved} launches proved");
}

/// The block reduction's test for workgroup `c` (reduce.rs, `hd_safe`).
fn block_device_safe(
    c: u32,
    off: u32,
    rlen: u32,
    chunks: u32,
    clen: u32,
    x: u32,
    out: u32,
) -> bool {
    let safe_end = u32::MAX - BLOCK * BLOCK_UNROLL;
    let (row, chunk) = (c / chunks, c % chunks);
    let start = chunk.wrapping_mul(clen);
    let stop = start.wrapping_add(clen).min(rlen);
    let rowbase = row.wrapping_mul(rlen).wrapping_add(off);
    let mut safe = c < out && start <= safe_end && stop <= safe_end;
    if start < stop {
        let last = rowbase.wrapping_add(stop - 1);
        safe = safe && rowbase <= u32::MAX - (stop - 1) && last < x;
    }
    safe
}

#[test]
fn a_block_reduction_proved_safe_has_every_workgroup_in_bounds() {
    let mut rng = Rng::new();
    let checks = reduction(ReduceKind::Block { index_input: false }, Combine::Sum);
    let mut proved = 0;
    for case in 0..20_000 {
        let (off, rlen) = (rng.value(100), rng.value(5000));
        let (chunks, clen) = (rng.value(6).max(1), rng.value(3000));
        let gx = (rng.next() % 40) as u32 + 1;
        let (x, out) = (rng.value(40_000), rng.value(60));
        let s = [(2, off), (3, rlen), (4, chunks), (5, clen)];
        let l = [(0, u64::from(x)), (1, u64::from(out))];
        if !proves(&checks, [gx, 1, 1], u64::from(BLOCK), &s, &l) {
            continue;
        }
        proved += 1;
        for c in 0..gx {
            assert!(
                block_device_safe(c, off, rlen, chunks, clen, x, out),
                "case {case}: workgroup {c} of {gx} fails its test ({s:?}, {l:?})"
            );
        }
    }
    assert!(proved > 1000, "only {proved} launches proved");
}

/// The lane reduction's test for lane `gid` (reduce.rs, `hd_safe`); lanes at or past `n` return.
fn lane_device_safe(gid: u32, off: u32, rlen: u32, inner: u32, n: u32, x: u32, out: u32) -> bool {
    if gid >= n {
        return true;
    }
    let idx = (gid / inner)
        .wrapping_mul(rlen.wrapping_mul(inner))
        .wrapping_add(gid % inner)
        .wrapping_add(off);
    let mut safe = gid < out;
    if rlen != 0 {
        let span = rlen - 1 <= (u32::MAX - idx) / inner;
        safe = safe && span && idx.wrapping_add((rlen - 1).wrapping_mul(inner)) < x;
    }
    safe
}

#[test]
fn a_lane_reduction_proved_safe_has_every_lane_in_bounds() {
    let mut rng = Rng::new();
    let checks = reduction(ReduceKind::Lane, Combine::Max);
    let mut proved = 0;
    for case in 0..20_000 {
        let (off, rlen, inner) = (rng.value(100), rng.value(40), rng.value(30).max(1));
        let n = rng.value(400);
        let (gx, block) = (
            (rng.next() % 8) as u32 + 1,
            [32u64, 64][(case % 2) as usize],
        );
        let (x, out) = (rng.value(30_000), rng.value(500));
        let s = [(2, off), (3, rlen), (4, inner), (5, n)];
        let l = [(0, u64::from(x)), (1, u64::from(out))];
        if !proves(&checks, [gx, 1, 1], block, &s, &l) {
            continue;
        }
        proved += 1;
        for gid in 0..gx * block as u32 {
            assert!(
                lane_device_safe(gid, off, rlen, inner, n, x, out),
                "case {case}: lane {gid} fails its test ({s:?}, {l:?})"
            );
        }
    }
    assert!(proved > 1000, "only {proved} launches proved");
}

#[test]
fn the_library_launches_are_proved_and_overlong_loops_are_not() {
    // Softmax over rows of 1024 at 2^20 elements, resident (64 lanes per row, 16 each).
    let softmax = RowPattern {
        op: RowOp::Softmax,
        storage: Type::F32,
        g: 64,
        resident: 16,
    };
    let rows = DedicatedChecks {
        form: rows_form(&softmax),
        checked: true,
    };
    let rows_per = ROW_BLOCK / 64;
    let s = [(2, 0), (3, 1024), (4, 1024)];
    let l = [(0, 1u64 << 20), (1, 1 << 20)];
    assert!(proves(
        &rows,
        [1024 / rows_per, 1, 1],
        ROW_BLOCK.into(),
        &s,
        &l
    ));
    // One element short in the output: not proved.
    let short = [(0, 1u64 << 20), (1, (1 << 20) - 1)];
    assert!(!proves(
        &rows,
        [1024 / rows_per, 1, 1],
        ROW_BLOCK.into(),
        &s,
        &short
    ));
    // Rows read pass by pass: proved while their loops stay under the limiter's count.
    let streamed = RowPattern {
        resident: 0,
        ..softmax
    };
    let rows = DedicatedChecks {
        form: rows_form(&streamed),
        checked: true,
    };
    let long = [(2, 0), (3, 1), (4, 1 << 22)];
    let big = [(0, 1u64 << 22), (1, 1 << 22)];
    assert!(proves(&rows, [1, 1, 1], ROW_BLOCK.into(), &long, &big));
    let longer = [(2, 0), (3, 1), (4, 1 << 24)];
    let bigger = [(0, 1u64 << 24), (1, 1 << 24)];
    assert!(!proves(
        &rows,
        [1, 1, 1],
        ROW_BLOCK.into(),
        &longer,
        &bigger
    ));

    // A whole-tensor sum of 2^26 elements in chunks of 2^16, then the sum of the partials.
    let block = reduction(ReduceKind::Block { index_input: false }, Combine::Sum);
    let s = [(2, 0), (3, 1 << 26), (4, 1 << 10), (5, 1 << 16)];
    let l = [(0, 1u64 << 26), (1, 1 << 10)];
    assert!(proves(&block, [1 << 10, 1, 1], BLOCK.into(), &s, &l));
    let s = [(2, 0), (3, 1 << 10), (4, 1), (5, 1 << 10)];
    let l = [(0, 1u64 << 10), (1, 1)];
    assert!(proves(&block, [1, 1, 1], BLOCK.into(), &s, &l));
    // Generated without bounds checks: only the loops count.
    let unchecked = DedicatedChecks {
        checked: false,
        ..block.clone()
    };
    assert!(proves(
        &unchecked,
        [4, 1, 1],
        BLOCK.into(),
        &[(2, 0), (3, 9), (4, 1), (5, 9)],
        &[]
    ));
}
