//! Validation errors.

use std::fmt;

use crate::text::SourceMap;
use crate::types::Type;

/// What part of a program an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// The kernel as a whole (its `.kernel` line).
    Kernel,
    /// The i-th `.param`.
    Param(usize),
    /// The i-th `.shared` array.
    Shared(usize),
    /// The i-th `.scratch` array.
    Scratch(usize),
    /// The i-th `.reg` declaration.
    Reg(usize),
    /// The i-th body statement (labels and instructions, counted from 0).
    Stmt(usize),
}

impl Location {
    /// Line and column of this location in parsed text.
    pub fn position(self, map: &SourceMap) -> Option<(usize, usize)> {
        match self {
            Location::Kernel => Some(map.kernel.unwrap_or((1, 1))),
            Location::Param(i) => map.params.get(i).copied(),
            Location::Shared(i) => map.shared.get(i).copied(),
            Location::Scratch(i) => map.scratch.get(i).copied(),
            Location::Reg(i) => map.regs.get(i).copied(),
            Location::Stmt(i) => map.body.get(i).copied(),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Kernel => write!(f, "kernel"),
            Location::Param(i) => write!(f, "parameter {}", i + 1),
            Location::Shared(i) => write!(f, ".shared declaration {}", i + 1),
            Location::Scratch(i) => write!(f, ".scratch declaration {}", i + 1),
            Location::Reg(i) => write!(f, ".reg declaration {}", i + 1),
            Location::Stmt(i) => write!(f, "statement {}", i + 1),
        }
    }
}

/// Why a program is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[allow(missing_docs)] // fields are named for what the message shows
pub enum ValidationErrorKind {
    /// A name is malformed or reserved.
    #[error("invalid {what} name '{name}': {why}")]
    InvalidName {
        what: &'static str,
        name: String,
        why: &'static str,
    },
    /// Two declarations (or two labels) share a name.
    #[error("'{0}' is declared twice")]
    DuplicateName(String),
    /// A branch, loop or call names a label that does not exist.
    #[error("unknown label '{0}'")]
    UnknownLabel(String),
    /// An operand names a parameter that does not exist.
    #[error("unknown parameter '{0}'")]
    UnknownParam(String),
    /// A memory operand names something that is not an array.
    #[error("unknown array '{0}' (not a buffer parameter, .shared or .scratch array)")]
    UnknownArray(String),
    /// A register is read but nothing writes it.
    #[error("register %{0} is read but never written")]
    UnwrittenRegister(String),
    /// Operand or register types do not agree.
    #[error("type mismatch: {0}")]
    TypeMismatch(String),
    /// An operation is not defined for a type.
    #[error("'{op}' is not defined for {ty}: {why}")]
    UnsupportedType {
        op: String,
        ty: Type,
        why: &'static str,
    },
    /// A store or atomic targets a read-only buffer.
    #[error("cannot write '{0}': it is a read-only buffer parameter (declare it with .rw)")]
    ReadOnlyWrite(String),
    /// A literal does not fit the type it is used as.
    #[error("literal {value} does not fit {ty}")]
    ImmediateOutOfRange { value: String, ty: Type },
    /// A constant index is outside a fixed-size array.
    #[error("index {index} is outside {array}[{len}]")]
    StaticIndexOutOfBounds {
        array: String,
        index: i128,
        len: u32,
    },
    /// Too much shared or scratch memory.
    #[error("{space} memory: {bytes} bytes declared, the limit is {limit} bytes")]
    MemoryLimit {
        space: &'static str,
        bytes: usize,
        limit: usize,
    },
    /// A barrier only some lanes of a block can reach.
    #[error("barrier in divergent code: {reason}; every live lane of a block must reach the same barrier")]
    DivergentBarrier {
        reason: String,
        branch_stmt: Option<usize>,
    },
    /// A subroutine calls itself, directly or through others.
    #[error("recursive call: {0} (the ISA has no call stack for recursion)")]
    Recursion(String),
    /// Calls nest deeper than [`crate::MAX_CALL_DEPTH`].
    #[error("calls nest {depth} deep ({chain}); the limit is {limit}: every lane keeps a return stack of that size on the GPU, so inline the innermost subroutines into their callers")]
    CallDepth {
        depth: u32,
        limit: u32,
        chain: String,
    },
    /// Subroutine bodies overlap more than [`crate::flow::SHARED_CODE_FACTOR`] allows.
    #[error("subroutine {subroutine} shares too much code with others: counting each instruction once for every subroutine that reaches it before 'ret' gives more than {limit}; subroutines that fall into one another or jump into a common tail multiply this, so give each subroutine its own code ending in its own 'ret'")]
    SharedCode { subroutine: String, limit: usize },
    /// The program has more of something than the validator accepts.
    #[error("more than {limit} {what}: split the kernel")]
    TooLarge { what: &'static str, limit: usize },
    /// Anything else a backend could not run.
    #[error("{0}")]
    Invalid(String),
}

/// A validation error and where it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{location}: {kind}")]
pub struct ValidationError {
    /// Where the problem is.
    pub location: Location,
    /// What the problem is.
    pub kind: ValidationErrorKind,
}

impl ValidationError {
    pub(crate) fn new(location: Location, kind: ValidationErrorKind) -> Self {
        ValidationError { location, kind }
    }

    /// Renders the error with line:column positions from a source map.
    pub fn render(&self, map: &SourceMap) -> String {
        let mut msg = self.kind.to_string();
        if let ValidationErrorKind::DivergentBarrier {
            branch_stmt: Some(s),
            ..
        } = &self.kind
        {
            if let Some((l, c)) = Location::Stmt(*s).position(map) {
                msg.push_str(&format!(" (the divergent branch is at {l}:{c})"));
            }
        }
        let (l, c) = self.position(map);
        format!("{l}:{c}: {}", crate::text::shorten(msg))
    }

    /// Line and column of the error in the text `map` describes. A location the map does not
    /// hold (a program built in Rust, not parsed from this text) falls back to the `.kernel`
    /// line, so an error from text always says where.
    pub fn position(&self, map: &SourceMap) -> (usize, usize) {
        self.location
            .position(map)
            .unwrap_or_else(|| map.kernel.unwrap_or((1, 1)))
    }
}
