//! Canonical form: the passes that bring a kernel to the form its digest is taken of.

mod blocks;
mod body;
mod dce;
mod fold;
mod order;
mod rename;

use hologram_isa::Kernel;

use body::Body;

/// Most rounds of folding and dead-code elimination (each linear in the kernel's size) before a
/// kernel that has not settled is left unsimplified (see [`canonicalize`]).
pub const MAX_ROUNDS: usize = 32;

/// How far canonicalization shrank a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reduction {
    /// Instructions before.
    pub before: usize,
    /// Instructions after.
    pub after: usize,
}

/// Brings a validated kernel to canonical form: value numbering with constant folding and
/// propagation, copy propagation, IEEE-safe algebraic simplification, common-subexpression and
/// dead-code elimination, commutative operand ordering, and register and label renumbering in
/// first-use order. The result computes the same values (bit for bit) and is never longer, and
/// canonicalizing it again changes nothing. A kernel whose simplifications have not settled after
/// [`MAX_ROUNDS`] rounds (each enabling the next, which only purpose-built chains do) is only
/// renamed and reordered, so that the time stays linear in its size.
///
/// ```
/// let a = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    mov.u32 %t, 3;\n    add.u32 %v, %t, %gid;\n    st.u32 y[%gid], %v;\n")?;
/// let b = hologram_isa::assemble(".kernel k\n.param .buf.u32 y .rw\n    add.u32 %q, %gid, 3;\n    st.u32 y[%gid], %q;\n")?;
/// let (ca, _) = hologram_compiler::canonicalize(&a);
/// let (cb, _) = hologram_compiler::canonicalize(&b);
/// assert_eq!(hologram_isa::print(&ca.to_program()), hologram_isa::print(&cb.to_program()));
/// # Ok::<(), hologram_isa::AsmError>(())
/// ```
pub fn canonicalize(kernel: &Kernel) -> (Kernel, Reduction) {
    let before = kernel.insts.len();
    let mut body = Body::new(kernel);
    let mut settled = false;
    for _ in 0..MAX_ROUNDS {
        let a = fold::run(kernel, &mut body);
        let b = dce::run(kernel, &mut body);
        if !a && !b {
            settled = true;
            break;
        }
    }
    if !settled {
        // Rounds that keep finding work are a chain of simplifications each enabling the next
        // (built on purpose: real kernels settle in two or three). Stopping half way would give
        // a form that canonicalizes further, so such a kernel is only renamed and reordered.
        body = Body::new(kernel);
    }
    order::run(kernel.regs.len(), &mut body);
    let (insts, _) = body.compact();
    let renamed = rename::run(kernel, insts);
    // Re-validate to recompute the facts backends need; the passes preserve validity, and if that
    // ever failed, the original kernel is still correct to run.
    match hologram_isa::validate(&renamed.to_program()) {
        Ok(k) => {
            let after = k.insts.len();
            (k, Reduction { before, after })
        }
        Err(e) => {
            tracing::warn!(kernel = %kernel.name, error = %e, "canonicalization produced an invalid kernel; using the original");
            (
                kernel.clone(),
                Reduction {
                    before,
                    after: before,
                },
            )
        }
    }
}
