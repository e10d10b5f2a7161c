//! Pattern recognition: kernels whose canonical form is a shape a library runs faster.
//!
//! Backends ask [`recognize`] when they compile a kernel and keep the generic path for
//! everything else; a recognized kernel must give the same results on the library path.

mod map;
pub mod norm_templates;
pub mod pool_templates;
mod reduce;
pub mod reduce_templates;
mod row_gen;
mod rows;
pub mod softmax_templates;
pub mod widen;

use hologram_isa::Kernel;

pub use map::{recognize_map, MapPattern};
pub use pool_templates::{recognize_pool, PoolOp, PoolPattern};
pub use reduce::{recognize_reduce, ReduceKind, ReducePattern};
pub use rows::{recognize_rows, RowPattern};

/// A recognized kernel shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// An element-wise map: every lane loads inputs at `%gid`, computes a DAG of pure ops and
    /// stores at `%gid`, optionally guarded by `%gid < n`.
    Map(MapPattern),
    /// A reduction along one axis (one of the library reduction templates).
    Reduce(ReducePattern),
    /// A fused row kernel: softmax, log-softmax or their backward ops over rows (one of the
    /// templates of [`softmax_templates`]).
    Rows(RowPattern),
    /// A 2-D max-pooling kernel (one of the templates of [`pool_templates`]).
    Pool(PoolPattern),
    /// A fused layer-norm row kernel (one of the templates of [`norm_templates`]). Only the
    /// library's builder attaches it; text is never recognized as one.
    Norm(norm_templates::NormKernel),
}

/// Recognizes a canonical kernel.
pub fn recognize(kernel: &Kernel) -> Option<Pattern> {
    recognize_map(kernel)
        .map(Pattern::Map)
        .or_else(|| recognize_reduce(kernel).map(Pattern::Reduce))
        .or_else(|| recognize_rows(kernel).map(Pattern::Rows))
        .or_else(|| recognize_pool(kernel).map(Pattern::Pool))
}

/// The canonical text with the kernel, parameters and arrays renamed by position.
pub(crate) fn structural_text(k: &Kernel) -> String {
    let (mut c, _) = crate::canonicalize(k);
    c.name = "k".into();
    for (i, p) in c.params.iter_mut().enumerate() {
        p.name = format!("p{i}");
    }
    for (i, a) in c.shared.iter_mut().enumerate() {
        a.name = format!("s{i}");
    }
    for (i, a) in c.scratch.iter_mut().enumerate() {
        a.name = format!("l{i}");
    }
    hologram_isa::print(&c.to_program())
}

/// Memo of template structural texts, one per template key.
pub(crate) type TemplateCache<P> =
    std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<P, Option<String>>>>;

/// The structural text of the template `p` (built by `program` on first use, then remembered in
/// `cache`); `None` when the template does not validate.
pub(crate) fn template_structure<P: std::hash::Hash + Eq + Copy>(
    cache: &TemplateCache<P>,
    p: &P,
    program: impl FnOnce() -> hologram_isa::Program,
) -> Option<String> {
    let cache = cache.get_or_init(Default::default);
    if let Some(t) = cache.lock().ok()?.get(p) {
        return t.clone();
    }
    let t = hologram_isa::validate(&program())
        .ok()
        .map(|k| structural_text(&k));
    cache.lock().ok()?.insert(*p, t.clone());
    t
}
