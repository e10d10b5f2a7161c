//! Which buffers a kernel touches only at each lane's own `%gid`.
//!
//! `%gid` is distinct for every lane of a launch (at most 2^32 lanes, checked at launch), so a
//! buffer every `ld`, `st` and `atom` of which indexes it with `%gid` is touched element by
//! element by one lane each: blocks running on different threads never meet in it, and its
//! loads and stores need no atomics (`bind::racy_buffers`). The analysis is local and
//! conservative; a soundness argument should not rest on another crate's dataflow facts.

use hologram_isa::{Kernel, Op, Operand, Special, Type};

/// Per parameter: every access to it indexes it with the lane's `%gid` (see the module docs).
pub(crate) fn gid_private_params(kernel: &Kernel) -> Vec<bool> {
    let gid_regs = gid_registers(kernel);
    let is_gid = |o: &Operand<u32>| match o {
        Operand::Special(Special::GidLinear) => true,
        Operand::Reg(r) => gid_regs.get(*r as usize).copied().unwrap_or(false),
        _ => false,
    };
    let mut private = vec![true; kernel.params.len()];
    for inst in &kernel.insts {
        if let Some(mem) = inst.op.mem() {
            if let Some(p) = private.get_mut(mem.array as usize) {
                *p &= is_gid(&mem.index);
            }
        }
    }
    private
}

/// Per register: it holds the lane's `%gid` wherever it is read. True for a register whose only
/// write is an unguarded `mov.u32 %r, %gid` that every lane reaches, from the kernel's start,
/// before any branch, call or return, and that nothing reads before it.
fn gid_registers(kernel: &Kernel) -> Vec<bool> {
    let mut gid = vec![false; kernel.regs.len()];
    let mut writes = vec![0u32; kernel.regs.len()];
    for inst in &kernel.insts {
        if let Some(&d) = inst.op.dst() {
            if let Some(w) = writes.get_mut(d as usize) {
                *w += 1;
            }
        }
    }
    let mut read_so_far = vec![false; kernel.regs.len()];
    for inst in &kernel.insts {
        if let Op::Mov {
            ty: Type::U32,
            dst,
            src: Operand::Special(Special::GidLinear),
        } = &inst.op
        {
            let d = *dst as usize;
            if inst.guard.is_none() && writes.get(d) == Some(&1) && !read_so_far[d] {
                gid[d] = true;
            }
        }
        if matches!(
            inst.op,
            Op::Bra { .. } | Op::Loop { .. } | Op::Call { .. } | Op::Ret
        ) {
            // Past the first jump, a later `mov` may be skipped or reached after a read.
            break;
        }
        for (o, _) in inst.op.sources() {
            if let Some(&r) = o.as_reg() {
                if let Some(seen) = read_so_far.get_mut(r as usize) {
                    *seen = true;
                }
            }
        }
        if let Some(g) = &inst.guard {
            if let Some(seen) = read_so_far.get_mut(g.pred as usize) {
                *seen = true;
            }
        }
    }
    gid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(text: &str) -> Vec<bool> {
        gid_private_params(&hologram_isa::assemble(text).expect("test kernel assembles"))
    }

    #[test]
    fn buffers_indexed_by_gid_or_an_early_copy_of_it_are_private() {
        let p = private(".kernel k\n.param .buf.f32 x\n.param .buf.f32 y .rw\n.param .u32 n\n    mov.u32 %i, %gid;\n    setp.ge.u32 %p, %i, n;\n@%p exit;\n    ld.f32 %v, x[%i];\n    add.u32 %j, %i, 1;\n    ld.f32 %w, x[%j];\n    add.f32 %v, %v, %w;\n    st.f32 y[%gid], %v;\n");
        // x is also read at %gid + 1, another lane's element; n is a scalar.
        assert_eq!(p, vec![false, true, true]);
    }

    #[test]
    fn a_copy_made_after_a_branch_is_not_trusted() {
        let p = private(".kernel k\n.param .buf.u32 y .rw\n    bra L;\nL:\n    mov.u32 %i, %gid;\n    st.u32 y[%i], 1;\n");
        assert_eq!(p, vec![false]);
    }

    #[test]
    fn a_register_read_before_its_copy_is_not_trusted() {
        let p = private(".kernel k\n.param .buf.u32 y .rw\n.reg .u32 %i\n    st.u32 y[%i], 1;\n    mov.u32 %i, %gid;\n    st.u32 y[%i], 2;\n");
        assert_eq!(p, vec![false]);
    }
}
