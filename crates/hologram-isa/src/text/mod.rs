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
            message: shorten(message.into()),
        }
    }
}

/// Messages quote the program's text; a megabyte literal or name is quoted by its ends.
pub(crate) fn shorten(message: String) -> String {
    const HEAD: usize = 160;
    const TAIL: usize = 80;
    let count = message.chars().count();
    if count <= HEAD + TAIL + 40 {
        return message;
    }
    let head: String = message.chars().take(HEAD).collect();
    let tail: String = message.chars().skip(count - TAIL).collect();
    format!("{head}... ({} characters) ...{tail}", count - HEAD - TAIL)
}

/// The text of `.hasm` source given as bytes. A file that is not UTF-8 is an error that says
/// at which byte (offset, and line:column counted in characters) the first invalid sequence starts.
///
/// ```
/// let err = hologram_isa::text::decode(b".kernel k\n  \xff").unwrap_err();
/// assert_eq!((err.line, err.col), (2, 3));
/// assert!(err.message.contains("byte 12"));
/// ```
pub fn decode(bytes: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        // The prefix before the bad byte is valid UTF-8 by construction.
        let before = std::str::from_utf8(&bytes[..offset]).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        ParseError::new(
            line,
            col,
            format!(
                "the text is not UTF-8: the byte sequence at byte {offset} (0x{:02x}) is invalid; save the file as UTF-8",
                bytes[offset]
            ),
        )
    })
}

/// Where each declaration and body statement of a parsed program starts, as (line, column).
/// Index `i` of `body` is statement `i` of [`crate::Program::body`], and so on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    /// The kernel's name after `.kernel`.
    pub kernel: Option<(usize, usize)>,
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
