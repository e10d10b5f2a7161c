//! What the interpreter's unchecked code needs of a kernel, checked once at compile.
//!
//! The lane loops address registers by slot number and arrays by element size without further
//! checks. A [`Canonical`](hologram_compiler::Canonical) kernel is validated when it is made, but
//! the soundness of this backend should not rest on another crate's passes: every register,
//! array and access width the interpreter will trust is checked here, and a kernel that fails
//! is a compile error, never an out-of-range access.

use hologram_isa::{Kernel, Op};

use crate::error::{BackendError, Result};

/// Checks the facts the interpreter relies on: every register, parameter, array and jump target
/// exists (see [`Kernel::check_references`]), and every load, store and atomic moves elements of
/// its array's size (the lane loops step through an array by the instruction's type).
pub(crate) fn check(kernel: &Kernel) -> Result<()> {
    let malformed = |why: String| {
        BackendError::Compile {
        kernel: kernel.name.clone(),
        log: format!(
            "malformed kernel: {why}; build kernels with hologram_compiler::Canonical, which validates them"
        ),
    }
    };
    kernel.check_references().map_err(malformed)?;
    for (pc, inst) in kernel.insts.iter().enumerate() {
        let (ty, mem) = match &inst.op {
            Op::Ld { ty, mem, .. } | Op::St { ty, mem, .. } | Op::Atom { ty, mem, .. } => {
                (*ty, mem)
            }
            _ => continue,
        };
        let (name, elem, _) = kernel.array_info(mem.array);
        if ty.size_bytes() != elem.size_bytes() {
            return Err(malformed(format!(
                "instruction {pc} accesses '{name}' (elements of {elem}) as {ty}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn kernel(text: &str) -> Kernel {
        hologram_isa::assemble(text).expect("test kernel assembles")
    }

    const COPY: &str = ".kernel copy\n.param .buf.f32 a\n.param .buf.f32 b .rw\n    ld.f32 %x, a[%gid];\n    st.f32 b[%gid], %x;\n";

    #[test]
    fn a_valid_kernel_passes() {
        assert_eq!(check(&kernel(COPY)), Ok(()));
    }

    #[test]
    fn a_register_past_the_file_is_a_compile_error() {
        let mut k = kernel(COPY);
        // The store reads %x; make it read a register the kernel does not have.
        let Op::St { src, .. } = &mut k.insts[1].op else {
            panic!("instruction 1 of the test kernel is the store");
        };
        *src = hologram_isa::Operand::Reg(k.regs.len() as u32 + 40);
        let err = super::super::compile::lower(&Arc::new(k)).err();
        assert!(
            matches!(&err, Some(BackendError::Compile { log, .. }) if log.contains("register")),
            "{err:?}"
        );
    }

    #[test]
    fn a_guard_past_the_file_is_a_compile_error() {
        let mut k = kernel(COPY);
        k.insts[0].guard = Some(hologram_isa::Guard {
            pred: 1000,
            negate: false,
        });
        assert!(matches!(check(&k), Err(BackendError::Compile { .. })));
    }

    #[test]
    fn an_access_wider_than_its_array_is_a_compile_error() {
        let mut k = kernel(COPY);
        let Op::Ld { ty, .. } = &mut k.insts[0].op else {
            panic!("instruction 0 of the test kernel is the load");
        };
        *ty = hologram_isa::Type::F64;
        let err = check(&k).err();
        assert!(
            matches!(&err, Some(BackendError::Compile { log, .. }) if log.contains("as f64")),
            "{err:?}"
        );
    }

    #[test]
    fn an_array_that_does_not_exist_is_a_compile_error() {
        let mut k = kernel(COPY);
        let Op::Ld { mem, .. } = &mut k.insts[0].op else {
            panic!("instruction 0 of the test kernel is the load");
        };
        mem.array = 7;
        assert!(matches!(check(&k), Err(BackendError::Compile { .. })));
    }
}
