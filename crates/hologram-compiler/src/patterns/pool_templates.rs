//! Library templates for 2-D max pooling over `[planes, h, w]` inputs (a plane is one channel
//! of one image): the forward kernel reads each output's window straight from the input
//! (padding, dilation and `ceil_mode` windows handled by bounds, no padded copy) and writes the
//! maximum and, when asked, its flat index `y·w + x` in the plane as i64; the backward kernel
//! gives each input element the sum of the output gradients whose index names it (a gather
//! over the windows that contain the element: deterministic, no atomics).
//!
//! PyTorch's rules: a NaN wins over any number (and a later NaN over an earlier one), otherwise
//! the first maximum in window order (row by row) wins; the index starts at the window's first
//! in-bounds element. 16-bit floats compare and accumulate in f32.
//!
//! The kernels are built as IR with [`ProgramBuilder`]; [`kernel`] returns them as
//! [`Canonical`] kernels carrying their intent ([`PoolPattern`]), so backends with a native
//! pooling loop run them there without recognizing anything.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use hologram_isa::{
    ArrayRef, CmpOp, Imm, Kernel, Op, ParamKind, Program, ProgramBuilder, Special, Type,
    ValidationError,
};

use super::widen::{store_at_gid, widen};
use super::{structural_text, template_structure, Pattern, TemplateCache};
use crate::Canonical;

/// Which pooling kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolOp {
    /// The window maxima.
    Max,
    /// The window maxima and their indices.
    MaxWithIndices,
    /// The input gradient from the output gradient and the indices.
    MaxBackward,
}

/// A pooling kernel: what it computes and its element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PoolPattern {
    /// What it computes.
    pub op: PoolOp,
    /// Element type of the input, output and gradients (a float type).
    pub storage: Type,
}

impl PoolPattern {
    /// The compute type (f32 for the 16-bit types).
    pub fn acc(&self) -> Type {
        pool_acc(self.storage)
    }
}

/// The geometry parameters every pooling kernel takes after its buffers and `total`, `xoff`
/// (forward: the input's offset; backward: the output gradient's) and, backward only, `ioff`
/// (the indices' offset).
pub const POOL_GEOMETRY: [&str; 12] = [
    "h", "w", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "ho", "wo",
];

/// The compute type of `storage`.
pub fn pool_acc(storage: Type) -> Type {
    match storage {
        Type::F16 | Type::BF16 => Type::F32,
        t => t,
    }
}

fn geometry(b: &mut ProgramBuilder, backward: bool) {
    b.scalar("total", Type::U32).scalar("xoff", Type::U32);
    if backward {
        b.scalar("ioff", Type::U32);
    }
    for p in POOL_GEOMETRY {
        b.scalar(p, Type::U32);
    }
}

/// `%dst = %base + %k·d - pad` in i32 (a window position: negative above or left of the input)
/// and `%ok` whether it lies in `0..len`.
fn window_pos(b: &mut ProgramBuilder, dst: &str, base: &str, k: &str, d: &str, len: &str) {
    let (u, i) = (Type::U32, Type::I32);
    b.mul(u, "%kd", k, d);
    b.cvt(i, u, "%kds", "%kd");
    b.add(i, dst, base, "%kds");
    b.cvt(i, u, "%len", len);
    b.setp(CmpOp::Ge, i, "%ok", dst, 0i32);
    b.setp(CmpOp::Lt, i, "%p", dst, "%len");
    b.and(Type::Pred, "%ok", "%ok", "%p");
}

/// The forward kernel. Parameters: `(x, y[, idx], total, xoff, h, w, kh, kw, sh, sw, ph, pw,
/// dh, dw, ho, wo)`; one lane per output element `y[(plane·ho + oy)·wo + ox]` (`total` of
/// them), reading `x[xoff + (plane·h + iy)·w + ix]`.
pub fn max_pool_program(storage: Type, indices: bool) -> Program {
    let (u, i, acc) = (Type::U32, Type::I32, pool_acc(storage));
    let mut b = ProgramBuilder::new(if indices {
        "max_pool_indices"
    } else {
        "max_pool"
    });
    b.buffer("x", storage).buffer_rw("y", storage);
    if indices {
        b.buffer_rw("idx", Type::I64);
    }
    geometry(&mut b, false);
    b.setp(CmpOp::Ge, u, "%done", Special::GidLinear, "total");
    b.guard("%done", false).exit();
    b.rem(u, "%ox", Special::GidLinear, "wo");
    b.div(u, "%t", Special::GidLinear, "wo");
    b.rem(u, "%oy", "%t", "ho");
    b.div(u, "%plane", "%t", "ho");
    // The plane's first element: xoff + plane·h·w.
    b.mul(u, "%base", "%plane", "h");
    b.mul(u, "%base", "%base", "w");
    b.add(u, "%base", "%base", "xoff");
    // The window's top-left corner, signed.
    b.mul(u, "%y0u", "%oy", "sh");
    b.mul(u, "%x0u", "%ox", "sw");
    b.cvt(i, u, "%y0", "%y0u");
    b.cvt(i, u, "%x0", "%x0u");
    b.cvt(i, u, "%phs", "ph");
    b.cvt(i, u, "%pws", "pw");
    b.sub(i, "%y0", "%y0", "%phs");
    b.sub(i, "%x0", "%x0", "%pws");
    b.cvt(i, u, "%ws", "w");
    b.mov(acc, "%best", Imm::Float(f64::NEG_INFINITY));
    b.mov(i, "%at", -1i32);
    b.mov(u, "%ky", 0u32);
    b.label("KY");
    b.setp(CmpOp::Ge, u, "%endy", "%ky", "kh");
    b.guard("%endy", false).bra("STORE");
    window_pos(&mut b, "%iy", "%y0", "%ky", "dh", "h");
    b.guard("%ok", true).bra("NEXTY");
    b.mov(u, "%kx", 0u32);
    b.label("KX");
    b.setp(CmpOp::Ge, u, "%endx", "%kx", "kw");
    b.guard("%endx", false).bra("NEXTY");
    window_pos(&mut b, "%ix", "%x0", "%kx", "dw", "w");
    b.guard("%ok", true).bra("NEXTX");
    b.mad(i, "%pos", "%iy", "%ws", "%ix");
    b.cvt(u, i, "%posu", "%pos");
    b.add(u, "%src", "%base", "%posu");
    b.ld(storage, "%v", "x", "%src");
    let v = widen(&mut b, acc, storage, "%v", "%vw");
    // Taken: the window's first element, a greater value, or a NaN.
    b.setp(CmpOp::Gt, acc, "%take", v, "%best");
    b.setp(CmpOp::Ne, acc, "%p", v, v);
    b.or(Type::Pred, "%take", "%take", "%p");
    b.setp(CmpOp::Lt, i, "%p", "%at", 0i32);
    b.or(Type::Pred, "%take", "%take", "%p");
    b.selp(acc, "%best", v, "%best", "%take");
    b.selp(i, "%at", "%pos", "%at", "%take");
    b.label("NEXTX");
    b.add(u, "%kx", "%kx", 1u32);
    b.bra("KX");
    b.label("NEXTY");
    b.add(u, "%ky", "%ky", 1u32);
    b.bra("KY");
    b.label("STORE");
    store_at_gid(&mut b, storage, acc, "y", "%best");
    if indices {
        b.cvt(Type::I64, i, "%at64", "%at");
        b.st(Type::I64, "idx", Special::GidLinear, "%at64");
    }
    b.finish()
}

/// The backward kernel. Parameters: `(g, idx, dx, total, xoff, ioff, h, w, kh, kw, sh, sw, ph,
/// pw, dh, dw, ho, wo)`; one lane per input element `dx[(plane·h + iy)·w + ix]` (`total` of
/// them), the sum of `g[xoff + o]` over the outputs `o = (plane·ho + oy)·wo + ox` whose window
/// spans the element and whose `idx[ioff + o]` is `iy·w + ix`, in output order (as PyTorch's
/// CUDA kernel: the span bounds the candidates, the index decides, so dilation needs no test).
pub fn max_pool_backward_program(storage: Type) -> Program {
    let (u, acc) = (Type::U32, pool_acc(storage));
    let mut b = ProgramBuilder::new("max_pool_backward");
    b.buffer("g", storage)
        .buffer("idx", Type::I64)
        .buffer_rw("dx", storage);
    geometry(&mut b, true);
    b.setp(CmpOp::Ge, u, "%done", Special::GidLinear, "total");
    b.guard("%done", false).exit();
    b.rem(u, "%ix", Special::GidLinear, "w");
    b.div(u, "%t", Special::GidLinear, "w");
    b.rem(u, "%iy", "%t", "h");
    b.div(u, "%plane", "%t", "h");
    b.mad(u, "%posu", "%iy", "w", "%ix");
    b.cvt(Type::I64, u, "%pos", "%posu");
    b.mul(u, "%obase", "%plane", "ho");
    b.mul(u, "%obase", "%obase", "wo");
    // The outputs whose window spans row iy: oy in [oy0, oy1), and likewise for columns.
    candidates(
        &mut b,
        "%iy",
        "ph",
        "kh",
        "dh",
        "sh",
        "ho",
        ("%oy0", "%oy1"),
    );
    candidates(
        &mut b,
        "%ix",
        "pw",
        "kw",
        "dw",
        "sw",
        "wo",
        ("%ox0", "%ox1"),
    );
    b.mov(acc, "%acc", Imm::Float(0.0));
    b.mov(u, "%oy", "%oy0");
    b.label("OY");
    b.setp(CmpOp::Ge, u, "%endy", "%oy", "%oy1");
    b.guard("%endy", false).bra("STORE");
    b.mov(u, "%ox", "%ox0");
    b.label("OX");
    b.setp(CmpOp::Ge, u, "%endx", "%ox", "%ox1");
    b.guard("%endx", false).bra("NEXTY");
    b.mad(u, "%o", "%oy", "wo", "%ox");
    b.add(u, "%o", "%o", "%obase");
    b.add(u, "%io", "%o", "ioff");
    b.ld(Type::I64, "%at", "idx", "%io");
    b.setp(CmpOp::Ne, Type::I64, "%miss", "%at", "%pos");
    b.guard("%miss", false).bra("NEXTX");
    b.add(u, "%go", "%o", "xoff");
    b.ld(storage, "%v", "g", "%go");
    let v = widen(&mut b, acc, storage, "%v", "%vw");
    b.add(acc, "%acc", "%acc", v);
    b.label("NEXTX");
    b.add(u, "%ox", "%ox", 1u32);
    b.bra("OX");
    b.label("NEXTY");
    b.add(u, "%oy", "%oy", 1u32);
    b.bra("OY");
    b.label("STORE");
    store_at_gid(&mut b, storage, acc, "dx", "%acc");
    b.finish()
}

/// `[lo, hi)`: the output positions along one axis whose window (`k` taps `d` apart, windows
/// `s` apart, `pad` before the input) spans input position `i`: with `p = i + pad` and the
/// span `(k - 1)·d + 1`, `lo = p < span ? 0 : (p - span) / s + 1`, `hi = min(p / s + 1, len)`.
#[allow(clippy::too_many_arguments)]
fn candidates(
    b: &mut ProgramBuilder,
    i: &str,
    pad: &str,
    k: &str,
    d: &str,
    s: &str,
    len: &str,
    (lo, hi): (&str, &str),
) {
    let u = Type::U32;
    b.add(u, "%cp", i, pad);
    b.sub(u, "%span", k, 1u32);
    b.mad(u, "%span", "%span", d, 1u32);
    b.setp(CmpOp::Lt, u, "%near", "%cp", "%span");
    b.sub(u, "%far", "%cp", "%span");
    b.div(u, "%far", "%far", s);
    b.add(u, "%far", "%far", 1u32);
    b.selp(u, lo, 0u32, "%far", "%near");
    b.div(u, hi, "%cp", s);
    b.add(u, hi, hi, 1u32);
    b.min(u, hi, hi, len);
}

/// The template of `p`.
pub fn pool_program(p: &PoolPattern) -> Program {
    match p.op {
        PoolOp::Max => max_pool_program(p.storage, false),
        PoolOp::MaxWithIndices => max_pool_program(p.storage, true),
        PoolOp::MaxBackward => max_pool_backward_program(p.storage),
    }
}

/// The pooling kernel `p` as a [`Canonical`] kernel carrying its intent (built and
/// canonicalized once per process).
pub fn kernel(p: &PoolPattern) -> Result<Canonical, ValidationError> {
    static MEMO: OnceLock<Mutex<HashMap<PoolPattern, Canonical>>> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    if let Some(k) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(p) {
        return Ok(k.clone());
    }
    let k = Canonical::with_pattern(&pool_program(p), Pattern::Pool(*p))?;
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(*p, k.clone());
    Ok(k)
}

/// Recognizes a pooling kernel written out as text (or loaded from elsewhere): one whose
/// canonical form equals a template's up to names.
pub fn recognize_pool(k: &Kernel) -> Option<PoolPattern> {
    let buffers: Vec<Type> = k
        .params
        .iter()
        .filter_map(|p| match p.kind {
            ParamKind::Buffer { elem, .. } => Some(elem),
            ParamKind::Scalar(_) => None,
        })
        .collect();
    let scalars = k.params.len() - buffers.len();
    let geometry = POOL_GEOMETRY.len();
    let op = match (buffers.as_slice(), scalars) {
        ([a, b], s) if a == b && s == geometry + 2 => PoolOp::Max,
        ([a, b, Type::I64], s) if a == b && s == geometry + 2 => PoolOp::MaxWithIndices,
        ([a, Type::I64, b], s) if a == b && s == geometry + 3 => PoolOp::MaxBackward,
        _ => return None,
    };
    let storage = buffers[0];
    let stores_params = k.insts.iter().any(
        |i| matches!(&i.op, Op::St { mem, .. } if matches!(k.array(mem.array), ArrayRef::Param(_))),
    );
    if !storage.is_float() || !k.shared.is_empty() || !stores_params {
        return None;
    }
    let p = PoolPattern { op, storage };
    static CACHE: TemplateCache<PoolPattern> = TemplateCache::new();
    let template = template_structure(&CACHE, &p, || pool_program(&p))?;
    (template == structural_text(k)).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: [PoolOp; 3] = [PoolOp::Max, PoolOp::MaxWithIndices, PoolOp::MaxBackward];

    #[test]
    fn every_template_validates_and_is_recognized_as_itself() {
        for op in OPS {
            for storage in [Type::F32, Type::F64, Type::F16, Type::BF16] {
                let p = PoolPattern { op, storage };
                let c = kernel(&p).unwrap();
                assert_eq!(c.pattern(), Some(&Pattern::Pool(p)));
                let text = hologram_isa::print(&pool_program(&p));
                let k = hologram_isa::assemble(&text).unwrap();
                assert_eq!(recognize_pool(&k), Some(p), "{op:?} {storage:?}");
                assert_eq!(super::super::recognize(&k), Some(Pattern::Pool(p)));
            }
        }
    }

    #[test]
    fn a_changed_template_is_not_recognized() {
        let text = hologram_isa::print(&max_pool_program(Type::F32, false))
            .replace("setp.gt.f32", "setp.ge.f32");
        let k = hologram_isa::assemble(&text).unwrap();
        assert_eq!(recognize_pool(&k), None);
    }
}
