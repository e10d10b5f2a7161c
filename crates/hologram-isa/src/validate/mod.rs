//! The validator: checks a [`Program`] statically and resolves it into a [`Kernel`].
//!
//! It rejects, with a message that says what is wrong, everything a backend could not run:
//! malformed or duplicate names, unknown labels, parameters and arrays, type mismatches, writes
//! to read-only buffers, literals that do not fit, constant indexes outside fixed arrays, too much
//! shared or scratch memory, recursion, and barriers in provably divergent code.

mod analysis;
mod calls;
mod divergence;
mod error;
mod typecheck;
mod uninit;

use std::cell::RefCell;
use std::collections::HashMap;

pub use calls::MAX_CALL_DEPTH;
pub use error::{Location, ValidationError, ValidationErrorKind};
pub(crate) use typecheck::check_imm as check_literal;

use crate::inst::{Guard, Inst, Op};
use crate::kernel::{Kernel, KernelFacts, RegInfo};
use crate::operand::Operand;
use crate::program::{Program, Stmt};
use crate::text::RESERVED_WORDS;
use crate::types::Type;

use ValidationErrorKind as K;

/// Bytes of `.shared` memory a kernel may declare (the portable CUDA limit for static shared
/// memory; backends with less report it when compiling).
pub const MAX_SHARED_BYTES: usize = 48 * 1024;
/// Bytes of `.scratch` memory a lane may declare.
pub const MAX_SCRATCH_BYTES: usize = 16 * 1024;
/// Most registers a kernel may use.
pub const MAX_REGISTERS: usize = 4096;
/// Most parameters a kernel may declare (GPUs pass parameters in a few kilobytes of constant
/// memory; the library's fused kernels take a dozen).
pub const MAX_PARAMS: usize = 1024;
/// Most `.shared` or `.scratch` arrays of each kind a kernel may declare.
pub const MAX_ARRAYS: usize = 1024;
/// Most instructions a kernel may have (about a 100 MB source file; every analysis is linear in
/// this, and instruction indexes stay far inside `u32`).
pub const MAX_INSTRUCTIONS: usize = 1 << 22;

/// Checks a program and resolves it into a [`Kernel`].
///
/// ```
/// let program = hologram_isa::parse(".kernel k\n.param .buf.f32 y .rw\n    st.f32 y[%gid], 1.0;\n")?;
/// let kernel = hologram_isa::validate(&program)?;
/// assert_eq!(kernel.insts.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate(program: &Program) -> Result<Kernel, ValidationError> {
    let mut v = Resolver::new(program)?;
    let insts = v.resolve_body()?;
    let mut kernel = Kernel {
        name: program.name.clone(),
        params: program.params.clone(),
        shared: program.shared.clone(),
        scratch: program.scratch.clone(),
        regs: v.regs,
        insts,
        labels: v.label_list,
        facts: KernelFacts::default(),
    };
    kernel.facts = analysis::analyze(&kernel, &v.stmt_of_pc)?;
    Ok(kernel)
}

fn check_ident(what: &'static str, name: &str, loc: Location) -> Result<(), ValidationError> {
    let bad = |why| {
        Err(ValidationError::new(
            loc,
            K::InvalidName {
                what,
                name: name.into(),
                why,
            },
        ))
    };
    let mut chars = name.chars();
    match chars.next() {
        None => return bad("it is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
            return bad("it must start with a letter or '_'")
        }
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return bad("only letters, digits and '_' are allowed");
    }
    if RESERVED_WORDS.contains(&name) {
        return bad("it is a reserved word");
    }
    Ok(())
}

fn check_reg_name(name: &str, loc: Location) -> Result<(), ValidationError> {
    let bad = |why| {
        Err(ValidationError::new(
            loc,
            K::InvalidName {
                what: "register",
                name: name.into(),
                why,
            },
        ))
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if crate::operand::Special::is_reserved(name) {
        return bad("it names a special register, and special registers are read-only");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return bad("only letters, digits and '_' are allowed");
    }
    Ok(())
}

/// Name resolution state.
pub(crate) struct Resolver<'p> {
    program: &'p Program,
    regs: Vec<RegInfo>,
    reg_index: HashMap<&'p str, u32>,
    /// Statement where each register's type was fixed (None for declarations).
    reg_origin: Vec<Option<usize>>,
    params: HashMap<&'p str, u32>,
    arrays: HashMap<&'p str, u32>,
    labels: HashMap<&'p str, u32>,
    label_list: Vec<(String, u32)>,
    /// Body statement index of each instruction.
    stmt_of_pc: Vec<usize>,
}

impl<'p> Resolver<'p> {
    fn new(program: &'p Program) -> Result<Self, ValidationError> {
        check_ident("kernel", &program.name, Location::Kernel)?;
        let mut names: HashMap<&str, ()> = HashMap::new();
        let mut declare = |name: &'p str, loc: Location| -> Result<(), ValidationError> {
            if names.insert(name, ()).is_some() {
                return Err(ValidationError::new(loc, K::DuplicateName(name.into())));
            }
            Ok(())
        };
        let mut params = HashMap::new();
        let mut arrays = HashMap::new();
        for (i, p) in program.params.iter().enumerate() {
            let loc = Location::Param(i);
            if i >= MAX_PARAMS {
                return Err(ValidationError::new(
                    loc,
                    K::TooLarge {
                        what: "parameters",
                        limit: MAX_PARAMS,
                    },
                ));
            }
            check_ident("parameter", &p.name, loc)?;
            declare(&p.name, loc)?;
            if p.is_buffer() && p.ty() == Type::Pred {
                return Err(ValidationError::new(
                    loc,
                    K::Invalid("buffers of pred are not supported; use u8".into()),
                ));
            }
            params.insert(p.name.as_str(), i as u32);
            if p.is_buffer() {
                arrays.insert(p.name.as_str(), i as u32);
            }
        }
        let base = program.params.len() as u32;
        let mut shared_bytes = 0usize;
        for (i, a) in program.shared.iter().enumerate() {
            let loc = Location::Shared(i);
            if i >= MAX_ARRAYS {
                return Err(ValidationError::new(
                    loc,
                    K::TooLarge {
                        what: ".shared arrays",
                        limit: MAX_ARRAYS,
                    },
                ));
            }
            check_ident("array", &a.name, loc)?;
            declare(&a.name, loc)?;
            if a.elem == Type::Pred {
                return Err(ValidationError::new(
                    loc,
                    K::Invalid("arrays of pred are not supported; use u8".into()),
                ));
            }
            // Reported at the declaration that goes over the limit.
            shared_bytes = shared_bytes.saturating_add(a.bytes());
            if shared_bytes > MAX_SHARED_BYTES {
                return Err(ValidationError::new(
                    loc,
                    K::MemoryLimit {
                        space: ".shared",
                        bytes: shared_bytes,
                        limit: MAX_SHARED_BYTES,
                    },
                ));
            }
            arrays.insert(a.name.as_str(), base + i as u32);
        }
        let base = base + program.shared.len() as u32;
        let mut scratch_bytes = 0usize;
        for (i, a) in program.scratch.iter().enumerate() {
            let loc = Location::Scratch(i);
            if i >= MAX_ARRAYS {
                return Err(ValidationError::new(
                    loc,
                    K::TooLarge {
                        what: ".scratch arrays",
                        limit: MAX_ARRAYS,
                    },
                ));
            }
            check_ident("array", &a.name, loc)?;
            declare(&a.name, loc)?;
            if a.elem == Type::Pred {
                return Err(ValidationError::new(
                    loc,
                    K::Invalid("arrays of pred are not supported; use u8".into()),
                ));
            }
            scratch_bytes = scratch_bytes.saturating_add(a.bytes());
            if scratch_bytes > MAX_SCRATCH_BYTES {
                return Err(ValidationError::new(
                    loc,
                    K::MemoryLimit {
                        space: ".scratch",
                        bytes: scratch_bytes,
                        limit: MAX_SCRATCH_BYTES,
                    },
                ));
            }
            arrays.insert(a.name.as_str(), base + i as u32);
        }
        let mut r = Resolver {
            program,
            regs: Vec::new(),
            reg_index: HashMap::new(),
            reg_origin: Vec::new(),
            params,
            arrays,
            labels: HashMap::new(),
            label_list: Vec::new(),
            stmt_of_pc: Vec::new(),
        };
        for (i, d) in program.regs.iter().enumerate() {
            let loc = Location::Reg(i);
            if i >= MAX_REGISTERS {
                return Err(ValidationError::new(
                    loc,
                    K::TooLarge {
                        what: "registers",
                        limit: MAX_REGISTERS,
                    },
                ));
            }
            check_reg_name(&d.name, loc)?;
            if r.reg_index.contains_key(d.name.as_str()) {
                return Err(ValidationError::new(
                    loc,
                    K::DuplicateName(format!("%{}", d.name)),
                ));
            }
            r.add_reg(&d.name, d.ty, true, None);
        }
        r.collect_labels_and_types()?;
        Ok(r)
    }

    fn add_reg(&mut self, name: &'p str, ty: Type, declared: bool, origin: Option<usize>) -> u32 {
        let id = self.regs.len() as u32;
        self.regs.push(RegInfo {
            name: name.to_string(),
            ty,
            declared,
        });
        self.reg_index.insert(name, id);
        self.reg_origin.push(origin);
        id
    }

    /// First pass: label positions, and the type of every register from the instructions that
    /// write it.
    fn collect_labels_and_types(&mut self) -> Result<(), ValidationError> {
        let mut pc = 0u32;
        for (s, stmt) in self.program.body.iter().enumerate() {
            let loc = Location::Stmt(s);
            match stmt {
                Stmt::Label(name) => {
                    check_ident("label", name, loc)?;
                    if self.labels.insert(name, pc).is_some() {
                        return Err(ValidationError::new(loc, K::DuplicateName(name.clone())));
                    }
                    self.label_list.push((name.clone(), pc));
                }
                Stmt::Inst(inst) => {
                    if self.stmt_of_pc.len() >= MAX_INSTRUCTIONS {
                        return Err(ValidationError::new(
                            loc,
                            K::TooLarge {
                                what: "instructions",
                                limit: MAX_INSTRUCTIONS,
                            },
                        ));
                    }
                    self.stmt_of_pc.push(s);
                    pc += 1;
                    let (Some(dst), Some(ty)) = (inst.op.dst(), inst.op.dst_type()) else {
                        continue;
                    };
                    check_reg_name(dst, loc)?;
                    match self.reg_index.get(dst.as_str()) {
                        None => {
                            if self.regs.len() >= MAX_REGISTERS {
                                return Err(ValidationError::new(
                                    loc,
                                    K::TooLarge {
                                        what: "registers",
                                        limit: MAX_REGISTERS,
                                    },
                                ));
                            }
                            self.add_reg(dst, ty, false, Some(s));
                        }
                        Some(&id) => {
                            let have = self.regs[id as usize].ty;
                            if have != ty {
                                let origin = match self.reg_origin[id as usize] {
                                    Some(o) => format!("first written at statement {}", o + 1),
                                    None => "declared with .reg".to_string(),
                                };
                                return Err(ValidationError::new(
                                    loc,
                                    K::TypeMismatch(format!(
                                        "%{dst} is {have} ({origin}) but this instruction writes it as {ty}"
                                    )),
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn reg(&self, name: &str, loc: Location) -> Result<u32, ValidationError> {
        check_reg_name(name, loc)?;
        self.reg_index
            .get(name)
            .copied()
            .ok_or_else(|| ValidationError::new(loc, K::UnwrittenRegister(name.to_string())))
    }

    fn label(&self, name: &str, loc: Location) -> Result<u32, ValidationError> {
        self.labels
            .get(name)
            .copied()
            .ok_or_else(|| ValidationError::new(loc, K::UnknownLabel(name.to_string())))
    }

    fn resolve_body(&mut self) -> Result<Vec<Inst<u32>>, ValidationError> {
        let mut out = Vec::with_capacity(self.stmt_of_pc.len());
        for (s, stmt) in self.program.body.iter().enumerate() {
            let Stmt::Inst(inst) = stmt else { continue };
            let loc = Location::Stmt(s);
            let guard = match &inst.guard {
                None => None,
                Some(g) => {
                    let pred = self.reg(&g.pred, loc)?;
                    let ty = self.regs[pred as usize].ty;
                    if ty != Type::Pred {
                        return Err(ValidationError::new(
                            loc,
                            K::TypeMismatch(format!("guard %{} is {ty}, not pred", g.pred)),
                        ));
                    }
                    Some(Guard {
                        pred,
                        negate: g.negate,
                    })
                }
            };
            let op = self.resolve_op(&inst.op, loc)?;
            typecheck::check(self, &op, loc)?;
            out.push(Inst { guard, op });
        }
        Ok(out)
    }

    fn param_value(&self, name: &str, loc: Location) -> Result<u32, ValidationError> {
        match self.params.get(name) {
            Some(&i) if !self.program.params[i as usize].is_buffer() => Ok(i),
            Some(_) => Err(ValidationError::new(
                loc,
                K::TypeMismatch(format!(
                    "buffer parameter '{name}' used as a value; index it, e.g. {name}[%i]"
                )),
            )),
            None if self.arrays.contains_key(name) => Err(ValidationError::new(
                loc,
                K::TypeMismatch(format!(
                    "array '{name}' used as a value; index it, e.g. {name}[%i]"
                )),
            )),
            None => Err(ValidationError::new(loc, K::UnknownParam(name.to_string()))),
        }
    }

    fn array(&self, name: &str, loc: Location) -> Result<u32, ValidationError> {
        self.arrays
            .get(name)
            .copied()
            .ok_or_else(|| ValidationError::new(loc, K::UnknownArray(name.to_string())))
    }

    fn resolve_op(&self, op: &Op<String>, loc: Location) -> Result<Op<u32>, ValidationError> {
        let first_err: RefCell<Option<ValidationError>> = RefCell::new(None);
        let keep = |r: Result<u32, ValidationError>| match r {
            Ok(v) => v,
            Err(e) => {
                first_err.borrow_mut().get_or_insert(e);
                0
            }
        };
        let resolved = op.map(
            &mut |n| keep(self.reg(n, loc)),
            &mut |n| keep(self.param_value(n, loc)),
            &mut |n| keep(self.array(n, loc)),
            &mut |n| keep(self.label(n, loc)),
        );
        match first_err.into_inner() {
            Some(e) => Err(e),
            None => Ok(resolved),
        }
    }
}

/// Resolves an operand's type in context; used by the type checker.
pub(crate) fn operand_type(r: &Resolver<'_>, op: &Operand<u32>) -> Option<Type> {
    match op {
        Operand::Reg(i) => Some(r.regs[*i as usize].ty),
        Operand::Param(i) => Some(r.program.params[*i as usize].ty()),
        Operand::Special(_) => Some(Type::U32),
        Operand::Imm(_) => None,
    }
}

#[cfg(test)]
mod differential_tests;
#[cfg(test)]
mod reference;
