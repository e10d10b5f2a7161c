//! [`Canonical`]: the one kernel type backends compile. It is made only by validation followed
//! by canonicalization, so a backend can trust every index in it, and it carries the kernel's
//! digest (the cache key) and its intent (the library path that runs it, if any).

use std::sync::Arc;

use hologram_isa::{AsmError, Kernel, Location, Program, ValidationError, ValidationErrorKind};

use crate::patterns::{self, MapPattern, Pattern};
use crate::{canonicalize, key_of, text_digest, Digest};

/// A validated kernel in canonical form, with its digest and intent.
///
/// Fields are private: the only ways to make one validate the program and canonicalize it, so
/// every register, parameter, array and label index inside is in range and the digest is the
/// digest of exactly this kernel.
///
/// The intent ([`Canonical::pattern`]) says which library path may run the kernel: kernels the
/// library generates declare it when they are built (element-wise maps, the reduction and row
/// templates), and backends choose their native or library path from it. Hand-written kernels
/// get theirs from pattern recognition on the canonical form.
///
/// ```
/// let c = hologram_compiler::Canonical::assemble(
///     ".kernel add\n.param .buf.f32 a\n.param .buf.f32 b .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.f32 %x, a[%gid];\n    add.f32 %y, %x, 1.0;\n    st.f32 b[%gid], %y;\n",
/// )?;
/// assert!(matches!(c.pattern(), Some(hologram_compiler::patterns::Pattern::Map(_))));
/// assert_eq!(c.digest(), hologram_compiler::digest(c.kernel()));
/// # Ok::<(), hologram_isa::AsmError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Canonical {
    kernel: Arc<Kernel>,
    digest: Digest,
    pattern: Option<Pattern>,
}

impl PartialEq for Canonical {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Canonical {}

fn malformed(reason: String) -> ValidationError {
    ValidationError {
        location: Location::Kernel,
        kind: ValidationErrorKind::Invalid(format!("malformed kernel: {reason}")),
    }
}

impl Canonical {
    /// Validates and canonicalizes a kernel (which may have been assembled by hand: it is
    /// checked again), and recognizes its pattern.
    pub fn new(kernel: &Kernel) -> Result<Canonical, ValidationError> {
        kernel.check_references().map_err(malformed)?;
        Self::from_program(&kernel.to_program())
    }

    /// Validates and canonicalizes a program, and recognizes its pattern.
    pub fn from_program(program: &Program) -> Result<Canonical, ValidationError> {
        let (kernel, digest) = Self::canonical(program)?;
        let pattern = patterns::recognize(&kernel);
        Ok(Canonical {
            kernel: Arc::new(kernel),
            digest,
            pattern,
        })
    }

    /// A kernel validated (and its references checked) but taken as written, without the
    /// canonical-form passes; its digest is that of its own text. For testing the passes (the
    /// same kernel run before and after them) and for looking at what a backend makes of a
    /// kernel exactly as written. Everything else should use [`Canonical::new`].
    pub fn as_written(kernel: &Kernel) -> Result<Canonical, ValidationError> {
        kernel.check_references().map_err(malformed)?;
        let kernel = hologram_isa::validate(&kernel.to_program())?;
        let digest = text_digest(&kernel);
        let pattern = patterns::recognize(&kernel);
        Ok(Canonical {
            kernel: Arc::new(kernel),
            digest,
            pattern,
        })
    }

    /// Parses, validates and canonicalizes `.hasm` text; errors point at line and column.
    pub fn assemble(text: &str) -> Result<Canonical, AsmError> {
        let kernel = hologram_isa::assemble(text)?;
        let (kernel, digest) = Self::canonical_kernel(&kernel);
        let pattern = patterns::recognize(&kernel);
        Ok(Canonical {
            kernel: Arc::new(kernel),
            digest,
            pattern,
        })
    }

    /// A kernel the library declares to be an element-wise map (loads at `%gid`, pure ops,
    /// stores at `%gid`, optionally guarded by `%gid < n`). The declaration is checked on the
    /// canonical form, so a generator that stops producing a map fails here instead of
    /// silently leaving the fast path.
    pub fn elementwise(program: &Program) -> Result<Canonical, ValidationError> {
        let (kernel, digest) = Self::canonical(program)?;
        let map: MapPattern = patterns::recognize_map(&kernel).ok_or_else(|| {
            malformed(format!(
                "'{}' was built as an element-wise map but its canonical form is not one:\n{}",
                kernel.name,
                hologram_isa::print(&kernel.to_program())
            ))
        })?;
        Ok(Canonical {
            kernel: Arc::new(kernel),
            digest,
            pattern: Some(Pattern::Map(map)),
        })
    }

    /// A kernel built by one of this crate's templates, with the intent the template declares.
    pub(crate) fn with_pattern(
        program: &Program,
        pattern: Pattern,
    ) -> Result<Canonical, ValidationError> {
        let (kernel, digest) = Self::canonical(program)?;
        Ok(Canonical {
            kernel: Arc::new(kernel),
            digest,
            pattern: Some(pattern),
        })
    }

    fn canonical(program: &Program) -> Result<(Kernel, Digest), ValidationError> {
        Ok(Self::canonical_kernel(&hologram_isa::validate(program)?))
    }

    fn canonical_kernel(kernel: &Kernel) -> (Kernel, Digest) {
        let (canonical, _) = canonicalize(kernel);
        let digest = text_digest(&canonical);
        (canonical, digest)
    }

    /// The kernel in canonical form.
    pub fn kernel(&self) -> &Arc<Kernel> {
        &self.kernel
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.kernel.name
    }

    /// The digest of the canonical form.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The kernel's intent: the library path that may run it, if any.
    pub fn pattern(&self) -> Option<&Pattern> {
        self.pattern.as_ref()
    }

    /// The cache key for compiling this kernel for `target` (backend, architecture, options).
    pub fn cache_key(&self, target: &str) -> Digest {
        key_of(&self.digest, target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hologram_isa::{Inst, Op, Operand};

    #[test]
    fn a_hand_made_kernel_with_dangling_indices_is_rejected() {
        let mut k = hologram_isa::assemble(
            ".kernel k\n.param .buf.u32 y .rw\n    mov.u32 %a, %gid;\n    st.u32 y[%a], %a;\n",
        )
        .unwrap();
        // A register index past the register file (once a memory-safety hole in the CPU
        // backend's lowering), then an array and a jump target that do not exist.
        k.insts.push(Inst::from(Op::Mov {
            ty: hologram_isa::Type::U32,
            dst: 7,
            src: Operand::Reg(0),
        }));
        let e = Canonical::new(&k).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        k.insts.pop();
        k.insts.push(Inst::from(Op::Bra { target: 99 }));
        assert!(Canonical::new(&k).is_err());
        assert!(Canonical::as_written(&k).is_err());
    }

    #[test]
    fn a_declared_map_that_is_not_one_is_an_error() {
        let p = hologram_isa::parse(
            ".kernel k\n.param .buf.u32 y .rw\n.shared .u32 s[4]\n    st.u32 y[%gid], 1;\n    st.u32 s[0], 1;\n",
        )
        .unwrap();
        assert!(Canonical::elementwise(&p).is_err());
        assert!(Canonical::from_program(&p).is_ok());
    }
}
