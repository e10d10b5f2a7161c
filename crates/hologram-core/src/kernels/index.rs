//! Kernels that address one operand through another's values: gather (`out[c] = x[c with
//! c[axis] = index[c]]`) and scatter (`out[c with c[axis] = index[c]] = src[c]`, stored or added
//! atomically). One lane per index element; shapes, strides and offsets are parameters, so one
//! kernel serves every size of a rank.
//!
//! An index outside `0..x.shape[axis]` makes the lane address element `u32::MAX` of the indexed
//! array, so the launch stops with the usual out-of-bounds error instead of reading or writing
//! the wrong element.

use hologram_isa::{AtomOp, CmpOp, Program, ProgramBuilder, Special, Type};

/// What a scatter does with each source value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ScatterMode {
    /// Store it (duplicate indexes: one of the values wins).
    Set,
    /// Add it atomically.
    Add,
}

/// The parameters both kernels share, after their buffers: `n` (index elements), `axis_len`,
/// `ioff`, `toff` (the indexed array's offset) and per dimension `dim_d`, `istride_d`,
/// `tstride_d` (the indexed array's stride; at `axis`, the stride the index value scales).
fn shape_params(b: &mut ProgramBuilder, rank: usize) {
    for name in ["n", "axis_len", "ioff", "toff"] {
        b.scalar(name, Type::U32);
    }
    for d in 0..rank {
        b.scalar(&format!("dim{d}"), Type::U32)
            .scalar(&format!("istride{d}"), Type::U32)
            .scalar(&format!("tstride{d}"), Type::U32);
    }
}

/// Emits the lane's coordinates loop: `%io` (index offset), `%to` (target offset without the
/// axis term) and `%srco` (offset with `sstride_d`, when the source is strided), then the
/// checked index value scaled into `%to`.
fn address(b: &mut ProgramBuilder, rank: usize, axis: usize, index: Type, source_strides: bool) {
    let u = Type::U32;
    b.setp(CmpOp::Ge, u, "%done", Special::GidLinear, "n");
    b.guard("%done", false).exit();
    b.mov(u, "%rest", Special::GidLinear);
    b.mov(u, "%io", "ioff");
    b.mov(u, "%to", "toff");
    if source_strides {
        b.mov(u, "%so", "soff");
    }
    for d in (0..rank).rev() {
        let dim = format!("dim{d}");
        if d > 0 {
            b.rem(u, "%c", "%rest", dim.as_str());
            b.div(u, "%rest", "%rest", dim.as_str());
        } else {
            b.mov(u, "%c", "%rest");
        }
        b.mad(u, "%io", "%c", format!("istride{d}").as_str(), "%io");
        if d != axis {
            b.mad(u, "%to", "%c", format!("tstride{d}").as_str(), "%to");
        }
        if source_strides {
            b.mad(u, "%so", "%c", format!("sstride{d}").as_str(), "%so");
        }
    }
    // The index value, checked against the axis length in i64.
    b.ld(index, "%ix", "index", "%io");
    let wide = if index == Type::I64 {
        "%ix"
    } else {
        b.cvt(Type::I64, index, "%ixw", "%ix");
        "%ixw"
    };
    b.cvt(Type::I64, u, "%len", "axis_len");
    b.setp(CmpOp::Lt, Type::I64, "%neg", wide, 0i64);
    b.setp(CmpOp::Ge, Type::I64, "%big", wide, "%len");
    b.or(Type::Pred, "%bad", "%neg", "%big");
    b.cvt(u, Type::I64, "%iu", wide);
    b.mad(u, "%to", "%iu", format!("tstride{axis}").as_str(), "%to");
    b.selp(u, "%to", u32::MAX, "%to", "%bad");
}

/// `out[i] = x[...]` for the index element `i` (row-major over the index's shape).
pub(crate) fn gather_program(rank: usize, axis: usize, value: Type, index: Type) -> Program {
    let mut b = ProgramBuilder::new("gather");
    b.buffer("x", value)
        .buffer("index", index)
        .buffer_rw("out", value);
    shape_params(&mut b, rank);
    address(&mut b, rank, axis, index, false);
    b.ld(value, "%v", "x", "%to");
    b.st(value, "out", Special::GidLinear, "%v");
    b.finish()
}

/// `out[...] = src[i]` (or `+=`) for the index element `i`; the source is addressed with its
/// own strides `sstride_d` from `soff` (after the shared parameters).
pub(crate) fn scatter_program(
    rank: usize,
    axis: usize,
    value: Type,
    index: Type,
    mode: ScatterMode,
) -> Program {
    let mut b = ProgramBuilder::new(match mode {
        ScatterMode::Set => "scatter",
        ScatterMode::Add => "scatter_add",
    });
    b.buffer_rw("out", value)
        .buffer("index", index)
        .buffer("src", value);
    shape_params(&mut b, rank);
    b.scalar("soff", Type::U32);
    for d in 0..rank {
        b.scalar(&format!("sstride{d}"), Type::U32);
    }
    address(&mut b, rank, axis, index, true);
    b.ld(value, "%v", "src", "%so");
    match mode {
        ScatterMode::Set => {
            b.st(value, "out", "%to", "%v");
        }
        ScatterMode::Add => {
            b.atom(AtomOp::Add, value, "%old", "out", "%to", "%v", None);
        }
    }
    b.finish()
}
