//! Commutative operand ordering: the operands of `add`, `mul`, `min`, `max`, `and`, `or`, `xor`,
//! the factors of `mad`/`fma` and the operands of `setp` (flipping `lt`/`gt`, `le`/`ge`) are put
//! in an order that does not depend on register names.

use hologram_isa::{CmpOp, Op, Operand, Special};

use super::body::Body;

/// Sort key of an operand: registers by the position of their first write, then special
/// registers, parameters and literals.
fn key(o: &Operand<u32>, first_def: &[usize]) -> (u8, u64) {
    match o {
        Operand::Reg(r) => (
            0,
            first_def.get(*r as usize).copied().unwrap_or(usize::MAX) as u64,
        ),
        Operand::Special(s) => (1, special_rank(*s)),
        Operand::Param(p) => (2, *p as u64),
        Operand::Imm(i) => (
            3,
            match i {
                hologram_isa::Imm::Int(v) => *v as u64,
                hologram_isa::Imm::Float(f) => f.to_bits(),
            },
        ),
    }
}

fn special_rank(s: Special) -> u64 {
    Special::all().iter().position(|&x| x == s).unwrap_or(0) as u64
}

/// Orders operands; returns true if anything moved.
pub(crate) fn run(nregs: usize, body: &mut Body) -> bool {
    let mut first_def = vec![usize::MAX; nregs];
    for (pc, inst) in body.slots().iter().enumerate() {
        if let Some(&d) = inst.as_ref().and_then(|i| i.op.dst()) {
            if first_def[d as usize] == usize::MAX {
                first_def[d as usize] = pc;
            }
        }
    }
    let mut changed = false;
    for inst in body.live_mut() {
        let k = |o: &Operand<u32>| key(o, &first_def);
        match &mut inst.op {
            Op::Binary { op, a, b, .. } if op.is_commutative() && k(a) > k(b) => {
                std::mem::swap(a, b);
                changed = true;
            }
            Op::Ternary { a, b, .. } if k(a) > k(b) => {
                std::mem::swap(a, b);
                changed = true;
            }
            Op::Setp { cmp, a, b, .. } if k(a) > k(b) => {
                std::mem::swap(a, b);
                *cmp = match *cmp {
                    CmpOp::Lt => CmpOp::Gt,
                    CmpOp::Gt => CmpOp::Lt,
                    CmpOp::Le => CmpOp::Ge,
                    CmpOp::Ge => CmpOp::Le,
                    other => other,
                };
                changed = true;
            }
            _ => {}
        }
    }
    changed
}
