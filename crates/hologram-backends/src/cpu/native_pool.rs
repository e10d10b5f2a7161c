//! Max-pooling kernels (the templates of [`hologram_compiler::patterns::pool_templates`]) as
//! native loops with the template's order of operations: each output scans its window row by
//! row (a NaN or a greater value taken, the first element always), each input gradient sums
//! the matching outputs in window order in the template's compute type, so both paths give
//! identical bits. A launch the loops cannot prove in bounds runs on the interpreter, which
//! reports what it finds.

use half::{bf16, f16};
use hologram_compiler::patterns::{PoolOp, PoolPattern};
use hologram_isa::semantics::{Float, FromWide, ToWide};
use hologram_isa::Type;

use super::fanout;
use super::native_reduce::{widen, Args, Ptr};

/// The geometry scalars of a launch.
#[derive(Clone, Copy)]
struct Geometry {
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: usize,
    pw: usize,
    dh: usize,
    dw: usize,
    ho: usize,
    wo: usize,
}

impl Geometry {
    fn read(args: &Args<'_>, first: usize) -> Option<Geometry> {
        let s = |i: usize| args.scalar(first + i);
        let g = Geometry {
            h: s(0)?,
            w: s(1)?,
            kh: s(2)?,
            kw: s(3)?,
            sh: s(4)?,
            sw: s(5)?,
            ph: s(6)?,
            pw: s(7)?,
            dh: s(8)?,
            dw: s(9)?,
            ho: s(10)?,
            wo: s(11)?,
        };
        // The template divides by these and computes window positions in i32: anything
        // unusual runs on the interpreter.
        let small = |v: usize| v < (1 << 20);
        let sane = [g.h, g.w, g.ho, g.wo, g.sh, g.sw, g.kh, g.kw, g.dh, g.dw]
            .iter()
            .all(|&v| v > 0)
            && [
                g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.ho, g.wo,
            ]
            .iter()
            .all(|&v| small(v))
            && g.ho * g.sh + g.kh * g.dh < (1 << 30)
            && g.wo * g.sw + g.kw * g.dw < (1 << 30);
        sane.then_some(g)
    }
}

/// True when `elems` elements from `offset` lie in buffer `i` and their indexes fit u32.
fn fits(args: &Args<'_>, i: usize, offset: usize, elems: usize) -> bool {
    let end = offset.checked_add(elems);
    matches!(end, Some(e) if e <= args.globals[i].len as usize && e <= u32::MAX as usize)
}

/// One output plane of the forward kernel.
///
/// # Safety
/// `x` addresses `h·w` elements, `y` (and `idx` when not null) `ho·wo`.
unsafe fn forward_plane<S, A>(g: &Geometry, x: *const S, y: *mut S, idx: *mut i64)
where
    S: ToWide + FromWide + Copy + 'static,
    A: Float + FromWide + ToWide + 'static,
{
    let neg_inf: A = widen::<f64, A>(f64::NEG_INFINITY);
    // SAFETY: only positions inside the plane (checked before each load) are read.
    let load = |pos: i64| -> A { widen(unsafe { *x.add(pos as usize) }) };
    for oy in 0..g.ho {
        let y0 = (oy * g.sh) as i64 - g.ph as i64;
        for ox in 0..g.wo {
            let x0 = (ox * g.sw) as i64 - g.pw as i64;
            let mut best = neg_inf;
            let mut at: i64 = -1;
            for ky in 0..g.kh {
                let iy = y0 + (ky * g.dh) as i64;
                if iy < 0 || iy >= g.h as i64 {
                    continue;
                }
                for kx in 0..g.kw {
                    let ix = x0 + (kx * g.dw) as i64;
                    if ix < 0 || ix >= g.w as i64 {
                        continue;
                    }
                    let pos = iy * g.w as i64 + ix;
                    let v = load(pos);
                    #[allow(clippy::eq_op)] // v != v: v is NaN
                    if v > best || v != v || at < 0 {
                        best = v;
                        at = pos;
                    }
                }
            }
            let o = oy * g.wo + ox;
            // SAFETY: `o` < ho·wo (the caller's promise covers it).
            unsafe {
                *y.add(o) = widen::<A, S>(best);
                if !idx.is_null() {
                    *idx.add(o) = at;
                }
            }
        }
    }
}

/// One input-gradient plane of the backward kernel.
///
/// # Safety
/// `gr` and `idx` address `ho·wo` elements, `dx` `h·w`.
unsafe fn backward_plane<S, A>(g: &Geometry, gr: *const S, idx: *const i64, dx: *mut S)
where
    S: ToWide + FromWide + Copy + 'static,
    A: Float + FromWide + ToWide + 'static,
{
    let zero: A = widen::<f64, A>(0.0);
    // The template's candidate outputs along one axis: [lo, hi).
    let range = |i: usize, pad: usize, k: usize, d: usize, s: usize, len: usize| {
        let (p, span) = (i + pad, (k - 1) * d + 1);
        let lo = if p < span { 0 } else { (p - span) / s + 1 };
        (lo, (p / s + 1).min(len))
    };
    for iy in 0..g.h {
        let (oy0, oy1) = range(iy, g.ph, g.kh, g.dh, g.sh, g.ho);
        for ix in 0..g.w {
            let (ox0, ox1) = range(ix, g.pw, g.kw, g.dw, g.sw, g.wo);
            let pos = (iy * g.w + ix) as i64;
            let mut acc = zero;
            for oy in oy0..oy1 {
                for ox in ox0..ox1 {
                    let o = oy * g.wo + ox;
                    // SAFETY: `o` < ho·wo (the caller's promise covers it).
                    let (at, v) = unsafe { (*idx.add(o), *gr.add(o)) };
                    if at == pos {
                        acc = A::add(acc, widen(v));
                    }
                }
            }
            // SAFETY: `pos` < h·w (the caller's promise covers it).
            unsafe { *dx.add(pos as usize) = widen::<A, S>(acc) };
        }
    }
}

fn run_typed<S, A>(p: &PoolPattern, args: &Args<'_>, lanes: u64) -> Option<()>
where
    S: ToWide + FromWide + Copy + Send + Sync + 'static,
    A: Float + FromWide + ToWide + 'static,
{
    let backward = p.op == PoolOp::MaxBackward;
    let indices = p.op == PoolOp::MaxWithIndices;
    let buffers = if backward || indices { 3 } else { 2 };
    let total = (args.scalar(buffers)? as u64).min(lanes) as usize;
    let xoff = args.scalar(buffers + 1)?;
    let ioff = if backward {
        args.scalar(buffers + 2)?
    } else {
        0
    };
    let g = Geometry::read(args, buffers + if backward { 3 } else { 2 })?;
    if total == 0 {
        return Some(());
    }
    let (plane_in, plane_out) = (g.h * g.w, g.ho * g.wo);
    // Whole planes only (what the core launches); a partial plane runs on the interpreter.
    let lane_plane = if backward { plane_in } else { plane_out };
    if total % lane_plane != 0 {
        return None;
    }
    let planes = total / lane_plane;
    let (ins, outs) = (planes * plane_in, planes * plane_out);
    if backward {
        args.buffer::<S>(0)?;
        args.buffer::<i64>(1)?;
        args.buffer::<S>(2)?;
        if !(fits(args, 0, xoff, outs)
            && fits(args, 1, ioff, outs)
            && fits(args, 2, 0, ins)
            && args.disjoint(&[2], &[0, 1]))
        {
            return None;
        }
    } else {
        args.buffer::<S>(0)?;
        args.buffer::<S>(1)?;
        let written: &[usize] = if indices {
            args.buffer::<i64>(2)?;
            if !fits(args, 2, 0, outs) {
                return None;
            }
            &[1, 2]
        } else {
            &[1]
        };
        if !(fits(args, 0, xoff, ins) && fits(args, 1, 0, outs) && args.disjoint(written, &[0])) {
            return None;
        }
    }
    let size = std::mem::size_of::<S>();
    let at = |i: usize, off: usize, elem: usize| Ptr(args.globals[i].base.wrapping_add(off * elem));
    // Buffer 0 is read from `xoff`; backward, the indices from `ioff`.
    let p0 = at(0, xoff, size);
    let p1 = if backward {
        at(1, ioff, 8)
    } else {
        at(1, 0, 0)
    };
    let p2 = if buffers == 3 {
        at(2, 0, 0)
    } else {
        Ptr(std::ptr::null_mut())
    };
    let work = (g.kh * g.kw).max(1) * if backward { plane_in } else { plane_out };
    let min_planes = if args.parallel {
        (super::native::PARALLEL_MIN / work).max(1)
    } else {
        planes
    };
    fanout::shared_range(..planes)
        .with_min_len(min_planes)
        .for_each(move |k| {
            let (p0, p1, p2) = (p0, p1, p2);
            // SAFETY: every plane's elements lie in their buffers (checked above); outputs
            // overlap no input (checked above) and each task writes only its own plane.
            unsafe {
                if backward {
                    backward_plane::<S, A>(
                        &g,
                        (p0.0 as *const S).add(k * plane_out),
                        (p1.0 as *const i64).add(k * plane_out),
                        (p2.0 as *mut S).add(k * plane_in),
                    );
                } else {
                    let idx = if indices {
                        (p2.0 as *mut i64).add(k * plane_out)
                    } else {
                        std::ptr::null_mut()
                    };
                    forward_plane::<S, A>(
                        &g,
                        (p0.0 as *const S).add(k * plane_in),
                        (p1.0 as *mut S).add(k * plane_out),
                        idx,
                    );
                }
            }
        });
    Some(())
}

/// Runs a max-pooling kernel natively over the launch's `lanes` lanes; `None` when the launch
/// is not one the native code handles (buffers too small, outputs overlapping inputs, partial
/// planes), in which case the interpreter runs it.
pub(crate) fn run(p: &PoolPattern, args: &Args<'_>, lanes: u64) -> Option<()> {
    match p.storage {
        Type::F32 => run_typed::<f32, f32>(p, args, lanes),
        Type::F64 => run_typed::<f64, f64>(p, args, lanes),
        Type::F16 => run_typed::<f16, f32>(p, args, lanes),
        Type::BF16 => run_typed::<bf16, f32>(p, args, lanes),
        _ => None,
    }
}
