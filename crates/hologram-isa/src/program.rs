//! Programs as written: named registers, parameters, arrays and labels.

use crate::inst::Inst;
use crate::types::Type;

/// Whether a kernel may write a buffer parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// The default: loads only.
    ReadOnly,
    /// `.rw`: loads, stores and atomics.
    ReadWrite,
}

/// What a parameter is bound to at launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// `.param .buf.T name [.rw]`: a buffer of elements of type `T`.
    Buffer {
        /// Element type.
        elem: Type,
        /// Read-only or read-write.
        access: Access,
    },
    /// `.param .T name`: one value of type `T`, the same for every lane.
    Scalar(Type),
}

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Param {
    /// Name used by instructions and by launch arguments.
    pub name: String,
    /// Buffer or scalar, and its type.
    pub kind: ParamKind,
}

impl Param {
    /// A read-only buffer parameter.
    pub fn buffer(name: impl Into<String>, elem: Type) -> Param {
        Param {
            name: name.into(),
            kind: ParamKind::Buffer {
                elem,
                access: Access::ReadOnly,
            },
        }
    }

    /// A read-write buffer parameter.
    pub fn buffer_rw(name: impl Into<String>, elem: Type) -> Param {
        Param {
            name: name.into(),
            kind: ParamKind::Buffer {
                elem,
                access: Access::ReadWrite,
            },
        }
    }

    /// A scalar parameter.
    pub fn scalar(name: impl Into<String>, ty: Type) -> Param {
        Param {
            name: name.into(),
            kind: ParamKind::Scalar(ty),
        }
    }

    /// The element type of a buffer, or the type of a scalar.
    pub fn ty(&self) -> Type {
        match self.kind {
            ParamKind::Buffer { elem, .. } => elem,
            ParamKind::Scalar(t) => t,
        }
    }

    /// True for buffer parameters.
    pub fn is_buffer(&self) -> bool {
        matches!(self.kind, ParamKind::Buffer { .. })
    }

    /// True for buffers declared `.rw`.
    pub fn is_writable(&self) -> bool {
        matches!(
            self.kind,
            ParamKind::Buffer {
                access: Access::ReadWrite,
                ..
            }
        )
    }
}

/// A fixed-size array: `.shared` (one per block) or `.scratch` (one per lane).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArrayDecl {
    /// Name used by `ld`, `st` and `atom`.
    pub name: String,
    /// Element type.
    pub elem: Type,
    /// Number of elements.
    pub len: u32,
}

impl ArrayDecl {
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.elem.size_bytes() * self.len as usize
    }
}

/// An explicit register declaration (`.reg .f32 %a`). Registers may also be left undeclared:
/// their type is then the type of the instructions that write them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegDecl {
    /// Register name without the `%` sigil.
    pub name: String,
    /// Register type.
    pub ty: Type,
}

/// A body statement: a label or an instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stmt {
    /// `NAME:` marks the next instruction.
    Label(String),
    /// An instruction, names as written.
    Inst(Inst<String>),
}

/// A kernel as written in `.hasm` text or built with [`crate::ProgramBuilder`]. Names are
/// strings; [`crate::validate`] checks it and resolves it into a [`crate::Kernel`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Program {
    /// Kernel name.
    pub name: String,
    /// Parameters in declaration order (launch arguments bind to them by name or position).
    pub params: Vec<Param>,
    /// Block-shared arrays.
    pub shared: Vec<ArrayDecl>,
    /// Per-lane scratch arrays.
    pub scratch: Vec<ArrayDecl>,
    /// Explicitly declared registers.
    pub regs: Vec<RegDecl>,
    /// Labels and instructions.
    pub body: Vec<Stmt>,
}

impl Program {
    /// Number of instructions (labels not counted).
    pub fn instruction_count(&self) -> usize {
        self.body
            .iter()
            .filter(|s| matches!(s, Stmt::Inst(_)))
            .count()
    }

    /// Looks up a parameter by name.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}
