//! The two kernels of a 2-D convolution lowered to matrix products: `im2col` (every input patch
//! a matrix column, zero where the patch hangs over the padding) and `col2im` (its adjoint: every
//! input element sums the column entries that read it, in a fixed order, so it is deterministic
//! and needs no atomics). One lane per output element; the geometry is in scalar parameters.

use hologram_compiler::patterns::widen::{store_at_gid, widen};
use hologram_isa::{CmpOp, Program, ProgramBuilder, Special, Type};

/// The geometry parameters both kernels take after their buffers, in order.
pub(crate) const GEOMETRY: [&str; 14] = [
    "n", "c", "h", "w", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "ho", "wo",
];

fn params(b: &mut ProgramBuilder) {
    b.scalar("total", Type::U32).scalar("xoff", Type::U32);
    for p in GEOMETRY {
        b.scalar(p, Type::U32);
    }
}

/// `cols[n, k, l]` (`k = (c·kh + ky)·kw + kx`, `l = oy·wo + ox`) = the input at
/// `(n, c, oy·sh + ky·dh - ph, ox·sw + kx·dw - pw)`, 0 outside the input.
pub(crate) fn im2col_program(elem: Type) -> Program {
    let u = Type::U32;
    let i = Type::I32;
    let mut b = ProgramBuilder::new("im2col");
    b.buffer("x", elem).buffer_rw("cols", elem);
    params(&mut b);
    b.setp(CmpOp::Ge, u, "%done", Special::GidLinear, "total");
    b.guard("%done", false).exit();
    b.mul(u, "%kk", "kh", "kw");
    b.mul(u, "%ck", "c", "%kk");
    b.mul(u, "%l_n", "ho", "wo");
    b.rem(u, "%l", Special::GidLinear, "%l_n");
    b.div(u, "%t", Special::GidLinear, "%l_n");
    b.rem(u, "%k", "%t", "%ck");
    b.div(u, "%img", "%t", "%ck");
    b.div(u, "%ch", "%k", "%kk");
    b.rem(u, "%r", "%k", "%kk");
    b.div(u, "%ky", "%r", "kw");
    b.rem(u, "%kx", "%r", "kw");
    b.div(u, "%oy", "%l", "wo");
    b.rem(u, "%ox", "%l", "wo");
    // Input coordinates, signed: a patch may start above or left of the input.
    b.mul(u, "%yu", "%oy", "sh");
    b.mad(u, "%yu", "%ky", "dh", "%yu");
    b.mul(u, "%xu", "%ox", "sw");
    b.mad(u, "%xu", "%kx", "dw", "%xu");
    b.cvt(i, u, "%y", "%yu");
    b.cvt(i, u, "%x", "%xu");
    b.cvt(i, u, "%phs", "ph");
    b.cvt(i, u, "%pws", "pw");
    b.sub(i, "%y", "%y", "%phs");
    b.sub(i, "%x", "%x", "%pws");
    b.cvt(i, u, "%hs", "h");
    b.cvt(i, u, "%ws", "w");
    b.setp(CmpOp::Ge, i, "%in", "%y", 0i32);
    b.setp(CmpOp::Lt, i, "%p", "%y", "%hs");
    b.and(Type::Pred, "%in", "%in", "%p");
    b.setp(CmpOp::Ge, i, "%p", "%x", 0i32);
    b.and(Type::Pred, "%in", "%in", "%p");
    b.setp(CmpOp::Lt, i, "%p", "%x", "%ws");
    b.and(Type::Pred, "%in", "%in", "%p");
    // src = xoff + ((img·c + ch)·h + y)·w + x
    b.mad(u, "%src", "%img", "c", "%ch");
    b.cvt(u, i, "%yy", "%y");
    b.cvt(u, i, "%xx", "%x");
    b.mad(u, "%src", "%src", "h", "%yy");
    b.mad(u, "%src", "%src", "w", "%xx");
    b.add(u, "%src", "%src", "xoff");
    b.mov(elem, "%v", zero(elem));
    b.guard("%in", false).ld(elem, "%v", "x", "%src");
    b.st(elem, "cols", Special::GidLinear, "%v");
    b.finish()
}

fn zero(t: Type) -> hologram_isa::Imm {
    if t.is_float() {
        hologram_isa::Imm::Float(0.0)
    } else {
        hologram_isa::Imm::Int(0)
    }
}

/// `dx[n, c, y, x]` = the sum, over the kernel positions `(ky, kx)` whose output position
/// `(oy, ox)` reads it, of `cols[n, (c·kh + ky)·kw + kx, oy·wo + ox]`: the adjoint of
/// [`im2col_program`]. `xoff` is the offset of `cols`. Accumulates in `acc`.
pub(crate) fn col2im_program(elem: Type, acc: Type) -> Program {
    let u = Type::U32;
    let i = Type::I32;
    let mut b = ProgramBuilder::new("col2im");
    b.buffer("cols", elem).buffer_rw("dx", elem);
    params(&mut b);
    b.setp(CmpOp::Ge, u, "%done", Special::GidLinear, "total");
    b.guard("%done", false).exit();
    b.rem(u, "%x", Special::GidLinear, "w");
    b.div(u, "%t", Special::GidLinear, "w");
    b.rem(u, "%y", "%t", "h");
    b.div(u, "%t", "%t", "h");
    b.rem(u, "%ch", "%t", "c");
    b.div(u, "%img", "%t", "c");
    b.mul(u, "%kk", "kh", "kw");
    b.mul(u, "%l_n", "ho", "wo");
    // Column rows of this channel start at (img·c + ch)·kk (k = ch·kk + ky·kw + kx).
    b.mad(u, "%rowbase", "%img", "c", "%ch");
    b.mul(u, "%rowbase", "%rowbase", "%kk");
    b.cvt(i, u, "%hos", "ho");
    b.cvt(i, u, "%wos", "wo");
    b.cvt(i, u, "%shs", "sh");
    b.cvt(i, u, "%sws", "sw");
    // y + ph and x + pw, signed.
    b.add(u, "%ypu", "%y", "ph");
    b.add(u, "%xpu", "%x", "pw");
    b.cvt(i, u, "%yp", "%ypu");
    b.cvt(i, u, "%xp", "%xpu");
    b.mov(acc, "%acc", zero(acc));
    b.mov(u, "%ky", 0u32);
    b.label("KY");
    b.setp(CmpOp::Ge, u, "%endy", "%ky", "kh");
    b.guard("%endy", false).bra("STORE");
    b.mov(u, "%kx", 0u32);
    // yy = y + ph - ky·dh; a row position when divisible by sh and inside the output.
    b.mul(u, "%kdu", "%ky", "dh");
    b.cvt(i, u, "%kd", "%kdu");
    b.sub(i, "%yy", "%yp", "%kd");
    b.label("KX");
    b.setp(CmpOp::Ge, u, "%endx", "%kx", "kw");
    b.guard("%endx", false).bra("NEXTY");
    b.mul(u, "%kdxu", "%kx", "dw");
    b.cvt(i, u, "%kdx", "%kdxu");
    b.sub(i, "%xx", "%xp", "%kdx");
    b.setp(CmpOp::Ge, i, "%ok", "%yy", 0i32);
    b.setp(CmpOp::Ge, i, "%p", "%xx", 0i32);
    b.and(Type::Pred, "%ok", "%ok", "%p");
    b.rem(i, "%ry", "%yy", "%shs");
    b.rem(i, "%rx", "%xx", "%sws");
    b.setp(CmpOp::Eq, i, "%p", "%ry", 0i32);
    b.and(Type::Pred, "%ok", "%ok", "%p");
    b.setp(CmpOp::Eq, i, "%p", "%rx", 0i32);
    b.and(Type::Pred, "%ok", "%ok", "%p");
    b.div(i, "%oy", "%yy", "%shs");
    b.div(i, "%ox", "%xx", "%sws");
    b.setp(CmpOp::Lt, i, "%p", "%oy", "%hos");
    b.and(Type::Pred, "%ok", "%ok", "%p");
    b.setp(CmpOp::Lt, i, "%p", "%ox", "%wos");
    b.and(Type::Pred, "%ok", "%ok", "%p");
    b.guard("%ok", true).bra("NEXTX");
    // cols index: xoff + ((rowbase + ky·kw + kx)·l_n + oy·wo + ox)
    b.mad(u, "%k", "%ky", "kw", "%kx");
    b.add(u, "%k", "%k", "%rowbase");
    b.cvt(u, i, "%oyu", "%oy");
    b.cvt(u, i, "%oxu", "%ox");
    b.mad(u, "%l", "%oyu", "wo", "%oxu");
    b.mad(u, "%src", "%k", "%l_n", "%l");
    b.add(u, "%src", "%src", "xoff");
    b.ld(elem, "%v", "cols", "%src");
    let v = widen(&mut b, acc, elem, "%v", "%vw");
    b.add(acc, "%acc", "%acc", v);
    b.label("NEXTX");
    b.add(u, "%kx", "%kx", 1u32);
    b.bra("KX");
    b.label("NEXTY");
    b.add(u, "%ky", "%ky", 1u32);
    b.bra("KY");
    b.label("STORE");
    store_at_gid(&mut b, elem, acc, "dx", "%acc");
    b.finish()
}
