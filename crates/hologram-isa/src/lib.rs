//! # hologram-isa: the Atlas ISA
//!
//! A kernel is one instruction stream that every lane of a launch grid runs (like PTX). This crate
//! defines its types, instructions and programs, the `.hasm` text format, a builder for writing
//! programs from Rust, and the validator that checks a program statically and resolves it into a
//! [`Kernel`] that backends run.
//!
//! ```
//! let text = "\
//! .kernel saxpy
//! .param .f32 alpha
//! .param .buf.f32 x
//! .param .buf.f32 y .rw
//! .param .u32 n
//!     mov.u32 %i, %gid;
//!     setp.ge.u32 %p, %i, n;
//! @%p exit;
//!     ld.f32 %a, x[%i];
//!     ld.f32 %b, y[%i];
//!     fma.f32 %c, alpha, %a, %b;
//!     st.f32 y[%i], %c;
//! ";
//! let kernel = hologram_isa::assemble(text)?;
//! assert_eq!(kernel.params.len(), 4);
//! // Printing and parsing again gives the same program.
//! let program = hologram_isa::parse(text)?;
//! assert_eq!(hologram_isa::parse(&hologram_isa::print(&program))?, program);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! See the crate README for the full syntax with an example of every instruction group.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod builder;
pub mod flow;
mod inst;
mod kernel;
mod operand;
mod program;
pub mod semantics;
pub mod text;
mod types;
mod validate;

pub use builder::{IntoOperand, ProgramBuilder};
pub use inst::{AtomOp, BinaryOp, CmpOp, FenceScope, Guard, Inst, Op, TernaryOp, UnaryOp};
pub use kernel::{ArrayRef, Kernel, KernelFacts, RegInfo};
pub use operand::{linear_gid, Dim, Imm, Mem, Operand, Special};
pub use program::{Access, ArrayDecl, Param, ParamKind, Program, RegDecl, Stmt};
pub use text::{parse, parse_with_source_map, print, ParseError, SourceMap};
pub use types::Type;
pub use validate::{
    validate, Location, ValidationError, ValidationErrorKind, MAX_ARRAYS, MAX_CALL_DEPTH,
    MAX_INSTRUCTIONS, MAX_PARAMS, MAX_REGISTERS, MAX_SCRATCH_BYTES, MAX_SHARED_BYTES,
};

/// A program that failed to parse or to validate, with its position in the text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AsmError {
    /// The text is not well formed.
    #[error("{0}")]
    Parse(#[from] ParseError),
    /// The program is well formed but not valid; `message` carries `line:col:`.
    #[error("{message}")]
    Invalid {
        /// The rendered message, starting with `line:col:`.
        message: String,
        /// The underlying error (boxed: it keeps `Result<_, AsmError>` small).
        error: Box<ValidationError>,
        /// 1-based line and column of what is invalid (an error about the kernel as a whole
        /// points at its name after `.kernel`).
        position: (u32, u32),
    },
}

impl AsmError {
    /// 1-based line and column the error points at: every error from text has one (bytes that
    /// are not UTF-8: the position of the first bad byte, whose offset the message gives).
    ///
    /// ```
    /// let e = hologram_isa::assemble(".kernel k\n    add.f32 %a, %b;\n").unwrap_err();
    /// assert_eq!(e.position().0, 2);
    /// let e = hologram_isa::assemble_bytes(b".kernel k\n    exit; \xff\n").unwrap_err();
    /// assert_eq!(e.position(), (2, 11));
    /// ```
    pub fn position(&self) -> (usize, usize) {
        match self {
            AsmError::Parse(p) => (p.line, p.col),
            AsmError::Invalid { position, .. } => (position.0 as usize, position.1 as usize),
        }
    }
}

/// Decodes, parses and validates `.hasm` source given as bytes (a file's contents); errors point
/// at line and column, and text that is not UTF-8 at the offending byte.
pub fn assemble_bytes(bytes: &[u8]) -> Result<Kernel, AsmError> {
    assemble(text::decode(bytes)?)
}

/// Parses and validates `.hasm` text in one step; errors point at line and column.
pub fn assemble(text: &str) -> Result<Kernel, AsmError> {
    let (program, map) = parse_with_source_map(text)?;
    validate(&program).map_err(|error| AsmError::Invalid {
        message: error.render(&map),
        position: {
            let (l, c) = error.position(&map);
            let narrow = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
            (narrow(l), narrow(c))
        },
        error: Box::new(error),
    })
}
