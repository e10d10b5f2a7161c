//! `ld`, `st` and `atom`, with bounds checks.
//!
//! A checked access widens its index to 64 bits (signed indexes sign-extend, so a negative one
//! becomes huge) and compares it once, unsigned, with the array's length. Out of bounds, the
//! lane records the access with `hg_oob` (kernel, array, index, length), skips it and ends.

use hologram_isa::{AtomOp, Kernel, Mem, Op, Operand, Type};

use super::ctype::{index_type, operand, reg};

/// How generated code reaches one array (buffer parameter, `.shared` or `.scratch`).
#[derive(Debug, Clone)]
pub(crate) struct ArrayC {
    /// The C pointer or array name.
    pub base: String,
    /// The element count: a C expression (buffers) or a constant.
    pub len: ArrayLen,
}

/// An array's length as generated code sees it.
#[derive(Debug, Clone)]
pub(crate) enum ArrayLen {
    /// Passed at launch (buffer parameters), held in this C variable.
    Dynamic(String),
    /// Declared (`.shared`, `.scratch`).
    Static(u32),
}

/// Whether global (buffer) accesses are checked; `.shared` and `.scratch` always are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checks {
    pub global: bool,
}

/// The statement for a memory instruction, or `None` if `op` is not one.
pub(crate) fn statement(
    kernel: &Kernel,
    arrays: &[ArrayC],
    checks: Checks,
    op: &Op<u32>,
) -> Option<Result<String, String>> {
    let o = |x, ty| operand(kernel, x, ty);
    Some(match op {
        Op::Ld { dst, mem, .. } => access(kernel, arrays, checks, mem, |p| {
            Ok(format!("{} = {p};", reg(*dst)))
        }),
        Op::St { ty, mem, src } => access(kernel, arrays, checks, mem, |p| {
            Ok(format!("{p} = {};", o(src, *ty)))
        }),
        Op::Atom {
            op,
            ty,
            dst,
            mem,
            a,
            b,
        } => access(kernel, arrays, checks, mem, |p| {
            atom_call(*op, *ty, &p, &o(a, *ty), b.as_ref().map(|b| o(b, *ty)))
                .map(|call| format!("{} = {call};", reg(*dst)))
        }),
        _ => return None,
    })
}

fn atom_call(
    op: AtomOp,
    ty: Type,
    place: &str,
    a: &str,
    b: Option<String>,
) -> Result<String, String> {
    let int = matches!(ty, Type::I32 | Type::U32 | Type::I64 | Type::U64);
    let float = matches!(ty, Type::F32 | Type::F64);
    let ok = match op {
        AtomOp::Add | AtomOp::Exch => int || float,
        AtomOp::Min | AtomOp::Max | AtomOp::Cas => int,
    };
    if !ok {
        return Err(format!("atom.{}.{ty}", op.name()));
    }
    let name = op.name();
    Ok(match (op, b) {
        (AtomOp::Cas, Some(b)) => format!("hg_atom_cas_{ty}(&{place}, {a}, {b})"),
        (AtomOp::Cas, None) => return Err("atom.cas without its second operand".into()),
        _ => format!("hg_atom_{name}_{ty}(&{place}, {a})"),
    })
}

/// Wraps the access `body(place)` (`place` is the C lvalue of the element) in a bounds check.
fn access(
    kernel: &Kernel,
    arrays: &[ArrayC],
    checks: Checks,
    mem: &Mem<u32>,
    body: impl Fn(String) -> Result<String, String>,
) -> Result<String, String> {
    let array = arrays
        .get(mem.array as usize)
        .ok_or_else(|| format!("array #{} does not exist", mem.array))?;
    let ity = index_type(kernel, &mem.index);
    if !ity.is_int() {
        return Err(format!("an index of type {ity}"));
    }
    let index = operand(kernel, &mem.index, ity);
    let base = &array.base;
    let (len, needs_check) = match &array.len {
        ArrayLen::Dynamic(n) => (n.clone(), checks.global),
        ArrayLen::Static(n) => {
            // A literal index inside a declared array needs no check (the validator rejects
            // literals outside it).
            let in_range = match &mem.index {
                Operand::Imm(hologram_isa::Imm::Int(v)) => *v >= 0 && *v < *n as i128,
                _ => false,
            };
            (format!("{n}ull"), !in_range)
        }
    };
    let place = format!("{base}[hg_x]");
    let inner = body(place)?;
    if !needs_check {
        return Ok(format!(
            "{{ const hg_u64 hg_x = (hg_u64)({index}); {inner} }}"
        ));
    }
    // Report the index as the CPU does: signed as is, u64 values past i64::MAX saturated.
    let report = if ity == Type::U64 {
        "(hg_x > 0x7fffffffffffffffull ? (hg_i64)0x7fffffffffffffffll : (hg_i64)hg_x)"
    } else {
        "(hg_i64)hg_x"
    };
    Ok(format!(
        "{{ const hg_u64 hg_x = (hg_u64)({index}); if (hg_x >= {len}) {{ hg_oob(hg_flag, hg_rec, hg_kid, {id}u, {report}, {len}); return; }} {inner} }}",
        id = mem.array,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomics_are_typed() {
        assert_eq!(
            atom_call(AtomOp::Cas, Type::U64, "p[hg_x]", "a", Some("b".into())).unwrap(),
            "hg_atom_cas_u64(&p[hg_x], a, b)"
        );
        assert!(atom_call(AtomOp::Min, Type::F32, "p", "a", None).is_err());
        assert!(atom_call(AtomOp::Add, Type::U16, "p", "a", None).is_err());
    }
}
