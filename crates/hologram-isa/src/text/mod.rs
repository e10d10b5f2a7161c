//! The `.hasm` text format: a parser and a printer that round-trip exactly.
//!
//! `print(&parse(text)?)` is the canonical layout of `text`, and parsing it again gives the same
//! [`crate::Program`]. Comments (`// ...`) and layout are not kept.

mod lexer;
mod parser;
mod printer;

pub use parser::{parse, parse_with_source_map};
pub(crate) use parser::{parse_number as parse_literal, RESERVED_WORDS};
pub use printer::{print, write_inst};

/// A syntax error: where it is and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub col: usize,
    /// What went wrong, e.g. "expected ',' after the destination, found '%b'".
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(line: usize, col: usize, message: impl Into<String>) -> Self {
        ParseError {
            line,
            col,
            message: message.into(),
        }
    }
}

/// Where each declaration and body statement of a parsed program starts, as (line, column).
/// Index `i` of `body` is statement `i` of [`crate::Program::body`], and so on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    /// `.param` lines.
    pub params: Vec<(usize, usize)>,
    /// `.shared` lines.
    pub shared: Vec<(usize, usize)>,
    /// `.scratch` lines.
    pub scratch: Vec<(usize, usize)>,
    /// `.reg` entries.
    pub regs: Vec<(usize, usize)>,
    /// Labels and instructions.
    pub body: Vec<(usize, usize)>,
}
