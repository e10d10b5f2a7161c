//! # hologram-compiler
//!
//! Canonical form compilation: [`canonicalize`] brings a kernel to a form that does not depend
//! on register names, label names or the operand order of commutative operations, and removes
//! redundant work; [`digest`] is the Blake3 hash of that form, which keys every backend's kernel
//! cache, so two programs that compute the same thing the same way compile once.
//!
//! ```
//! let a = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    add.u32 %sum, %gid, 1;\n    st.u32 y[%gid], %sum;\n")?;
//! let b = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    add.u32 %x, 1, %gid;\n    st.u32 y[%gid], %x;\n")?;
//! assert_eq!(hologram_compiler::digest(&a), hologram_compiler::digest(&b));
//! # Ok::<(), hologram_isa::AsmError>(())
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod canon;
mod canonical;
pub mod patterns;

use std::fmt;

use hologram_isa::Kernel;

pub use canon::{canonicalize, Reduction, MAX_ROUNDS};
pub use canonical::Canonical;

/// A 256-bit program digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

/// The Blake3 digest of a kernel's text exactly as it is (no canonicalization).
pub fn text_digest(kernel: &Kernel) -> Digest {
    let text = hologram_isa::print(&kernel.to_program());
    Digest(*blake3::hash(text.as_bytes()).as_bytes())
}

/// The digest of a kernel's canonical form.
pub fn digest(kernel: &Kernel) -> Digest {
    text_digest(&canonicalize(kernel).0)
}

/// A cache key: the canonical digest plus what the compiled form depends on (backend, device
/// architecture, options).
pub fn cache_key(kernel: &Kernel, target: &str) -> Digest {
    key_of(&digest(kernel), target)
}

/// A cache key from a digest already computed.
pub fn key_of(digest: &Digest, target: &str) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&digest.0);
    h.update(b"\0");
    h.update(target.as_bytes());
    Digest(*h.finalize().as_bytes())
}
