//! Element-wise maps: `if (%gid >= n) exit; loads at %gid; pure ops; stores at %gid`.

use hologram_isa::{ArrayRef, CmpOp, Kernel, Op, Operand, Special, Type};

/// A recognized element-wise map.
#[derive(Debug, Clone, PartialEq)]
pub struct MapPattern {
    /// The scalar parameter bounding `%gid` (`n`), if the kernel guards with one. The number of
    /// elements is `min(n, lanes launched)`.
    pub bound: Option<u32>,
    /// Index of the first instruction after the guard: instructions `body_start..` are the map.
    pub body_start: usize,
    /// Buffer parameters the map loads from.
    pub inputs: Vec<u32>,
    /// Buffer parameters the map stores to.
    pub outputs: Vec<u32>,
    /// True when some load reads at an index other than `%gid` (a gather, e.g. a broadcast
    /// operand); such indexes are computed per element and bounds-checked.
    pub gather: bool,
}

fn is_gid(o: &Operand<u32>) -> bool {
    matches!(o, Operand::Special(Special::GidLinear))
}

/// Recognizes an element-wise map in a canonical kernel.
///
/// ```
/// let k = hologram_isa::assemble(".kernel add\n.param .buf.f32 a\n.param .buf.f32 b\n.param .buf.f32 c .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n    ld.f32 %x, a[%gid];\n    ld.f32 %y, b[%gid];\n    add.f32 %z, %x, %y;\n    st.f32 c[%gid], %z;\n")?;
/// let m = hologram_compiler::patterns::recognize_map(&k).unwrap();
/// assert_eq!((m.bound, m.inputs.clone(), m.outputs.clone()), (Some(3), vec![0, 1], vec![2]));
/// # Ok::<(), hologram_isa::AsmError>(())
/// ```
pub fn recognize_map(k: &Kernel) -> Option<MapPattern> {
    if !k.shared.is_empty() || !k.scratch.is_empty() || !k.facts.zero_init.is_empty() {
        return None;
    }
    let insts = &k.insts;
    // Optional guard: setp.ge.u32 %p, %gid, n; @%p exit   (or setp.lt + @!%p exit)
    let mut bound = None;
    let mut start = 0;
    if let (Some(a), Some(b)) = (insts.first(), insts.get(1)) {
        if let (
            Op::Setp {
                cmp,
                ty: Type::U32,
                dst,
                a: x,
                b: Operand::Param(n),
            },
            Op::Exit,
        ) = (&a.op, &b.op)
        {
            let guard_ok = match (cmp, &b.guard) {
                (CmpOp::Ge, Some(g)) => g.pred == *dst && !g.negate,
                (CmpOp::Lt, Some(g)) => g.pred == *dst && g.negate,
                _ => false,
            };
            if guard_ok && a.guard.is_none() && is_gid(x) {
                bound = Some(*n);
                start = 2;
            }
        }
    }
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let (mut is_input, mut is_output) = (vec![false; k.params.len()], vec![false; k.params.len()]);
    let mut gather = false;
    for inst in &insts[start..] {
        if inst.guard.is_some() {
            return None;
        }
        // Only %gid may appear among the special registers.
        for (src, _) in inst.op.sources() {
            if let Operand::Special(s) = src {
                if *s != Special::GidLinear {
                    return None;
                }
            }
        }
        match &inst.op {
            Op::Ld { mem, .. } => {
                let ArrayRef::Param(p) = k.array(mem.array) else {
                    return None;
                };
                if !is_gid(&mem.index) {
                    gather = true;
                }
                if !std::mem::replace(&mut is_input[p as usize], true) {
                    inputs.push(p);
                }
            }
            Op::St { mem, .. } => {
                let ArrayRef::Param(p) = k.array(mem.array) else {
                    return None;
                };
                if !is_gid(&mem.index) {
                    return None;
                }
                if !std::mem::replace(&mut is_output[p as usize], true) {
                    outputs.push(p);
                }
            }
            Op::Mov { .. }
            | Op::Cvt { .. }
            | Op::Bitcast { .. }
            | Op::Unary { .. }
            | Op::Binary { .. }
            | Op::Ternary { .. }
            | Op::Setp { .. }
            | Op::Selp { .. } => {}
            _ => return None,
        }
    }
    if outputs.is_empty() {
        return None;
    }
    Some(MapPattern {
        bound,
        body_start: start,
        inputs,
        outputs,
        gather,
    })
}
