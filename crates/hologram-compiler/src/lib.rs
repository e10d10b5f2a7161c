//! # hologram-compiler
//!
//! Keys for kernel caches. A kernel's digest is the Blake3 hash of its printed `.hasm` form, so
//! two kernels with the same text compile once per backend and device.
//!
//! ```
//! let a = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[%gid], 1;\n")?;
//! let b = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n// a comment\n    st.u32 y[%gid],   1;\n")?;
//! assert_eq!(hologram_compiler::digest(&a), hologram_compiler::digest(&b));
//! # Ok::<(), hologram_isa::AsmError>(())
//! ```

#![warn(missing_docs)]

use std::fmt;

use hologram_isa::Kernel;

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

/// The digest of a kernel: Blake3 over its printed text.
pub fn digest(kernel: &Kernel) -> Digest {
    let text = hologram_isa::print(&kernel.to_program());
    Digest(*blake3::hash(text.as_bytes()).as_bytes())
}

/// A cache key: the kernel digest plus what the compiled form depends on (backend, device
/// architecture, options).
pub fn cache_key(kernel: &Kernel, target: &str) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&digest(kernel).0);
    h.update(b"\0");
    h.update(target.as_bytes());
    Digest(*h.finalize().as_bytes())
}
