//! Prints a [`Program`] as `.hasm` text that parses back to the same program.

use std::fmt::{self, Write};

use crate::inst::{Inst, Op};
use crate::operand::{Mem, Operand};
use crate::program::{Access, ParamKind, Program, Stmt};

/// Prints a program in the canonical layout: header directives one per line, instructions
/// indented by four spaces, labels flush left.
pub fn print(program: &Program) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_program(&mut out, program);
    out
}

fn write_program(out: &mut String, p: &Program) -> fmt::Result {
    writeln!(out, ".kernel {}", p.name)?;
    for param in &p.params {
        match param.kind {
            ParamKind::Buffer { elem, access } => {
                let rw = if access == Access::ReadWrite {
                    " .rw"
                } else {
                    ""
                };
                writeln!(out, ".param .buf.{elem} {}{rw}", param.name)?;
            }
            ParamKind::Scalar(ty) => writeln!(out, ".param .{ty} {}", param.name)?,
        }
    }
    for a in &p.shared {
        writeln!(out, ".shared .{} {}[{}]", a.elem, a.name, a.len)?;
    }
    for a in &p.scratch {
        writeln!(out, ".scratch .{} {}[{}]", a.elem, a.name, a.len)?;
    }
    for r in &p.regs {
        writeln!(out, ".reg .{} %{}", r.ty, r.name)?;
    }
    for stmt in &p.body {
        match stmt {
            Stmt::Label(l) => writeln!(out, "{l}:")?,
            Stmt::Inst(inst) => {
                out.push_str("    ");
                write_inst(out, inst)?;
                out.push('\n');
            }
        }
    }
    Ok(())
}

/// Writes one instruction (without indentation or newline), names printed as written.
pub fn write_inst(out: &mut String, inst: &Inst<String>) -> fmt::Result {
    if let Some(g) = &inst.guard {
        write!(out, "@{}%{} ", if g.negate { "!" } else { "" }, g.pred)?;
    }
    let o = |op: &Operand<String>| operand(op);
    let m = |mem: &Mem<String>| format!("{}[{}]", mem.array, operand(&mem.index));
    match &inst.op {
        Op::Mov { ty, dst, src } => write!(out, "mov.{ty} %{dst}, {}", o(src))?,
        Op::Cvt { to, from, dst, src } => write!(out, "cvt.{to}.{from} %{dst}, {}", o(src))?,
        Op::Bitcast { to, from, dst, src } => {
            write!(out, "bitcast.{to}.{from} %{dst}, {}", o(src))?
        }
        Op::Ld { ty, dst, mem } => write!(out, "ld.{ty} %{dst}, {}", m(mem))?,
        Op::St { ty, mem, src } => write!(out, "st.{ty} {}, {}", m(mem), o(src))?,
        Op::Unary { op, ty, dst, src } => write!(out, "{}.{ty} %{dst}, {}", op.name(), o(src))?,
        Op::Binary { op, ty, dst, a, b } => {
            write!(out, "{}.{ty} %{dst}, {}, {}", op.name(), o(a), o(b))?
        }
        Op::Ternary {
            op,
            ty,
            dst,
            a,
            b,
            c,
        } => write!(
            out,
            "{}.{ty} %{dst}, {}, {}, {}",
            op.name(),
            o(a),
            o(b),
            o(c)
        )?,
        Op::Setp { cmp, ty, dst, a, b } => {
            write!(out, "setp.{}.{ty} %{dst}, {}, {}", cmp.name(), o(a), o(b))?
        }
        Op::Selp {
            ty,
            dst,
            a,
            b,
            cond,
        } => write!(out, "selp.{ty} %{dst}, {}, {}, {}", o(a), o(b), o(cond))?,
        Op::Atom {
            op,
            ty,
            dst,
            mem,
            a,
            b,
        } => {
            write!(out, "atom.{}.{ty} %{dst}, {}, {}", op.name(), m(mem), o(a))?;
            if let Some(b) = b {
                write!(out, ", {}", o(b))?;
            }
        }
        Op::Bra { target } => write!(out, "bra {target}")?,
        Op::Loop { counter, target } => write!(out, "loop %{counter}, {target}")?,
        Op::Call { target } => write!(out, "call {target}")?,
        Op::Ret => out.push_str("ret"),
        Op::Exit => out.push_str("exit"),
        Op::Barrier => out.push_str("barrier"),
        Op::Fence { scope } => write!(out, "fence.{}", scope.name())?,
    }
    out.push(';');
    Ok(())
}

fn operand(op: &Operand<String>) -> String {
    match op {
        Operand::Reg(r) => format!("%{r}"),
        Operand::Param(p) => p.clone(),
        Operand::Imm(i) => i.to_string(),
        Operand::Special(s) => s.to_string(),
    }
}
