//! Pattern recognition: kernels whose canonical form is a shape a library runs faster.
//!
//! Backends ask [`recognize`] when they compile a kernel and keep the generic path for
//! everything else; a recognized kernel must give the same results on the library path.

mod map;
mod reduce;
pub mod reduce_templates;
pub mod softmax_templates;

use hologram_isa::Kernel;

pub use map::{recognize_map, MapPattern};
pub use reduce::{recognize_reduce, ReduceKind, ReducePattern};

/// A recognized kernel shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// An element-wise map: every lane loads inputs at `%gid`, computes a DAG of pure ops and
    /// stores at `%gid`, optionally guarded by `%gid < n`.
    Map(MapPattern),
    /// A reduction along one axis (one of the library reduction templates).
    Reduce(ReducePattern),
}

/// Recognizes a canonical kernel.
pub fn recognize(kernel: &Kernel) -> Option<Pattern> {
    recognize_map(kernel)
        .map(Pattern::Map)
        .or_else(|| recognize_reduce(kernel).map(Pattern::Reduce))
}
