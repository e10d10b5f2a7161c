//! Splits `.hasm` text into tokens with their line and column.

use super::ParseError;

/// What a token is; the text is borrowed from the source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Tok<'a> {
    /// A name or mnemonic: letters, digits, `_` and `.` (`setp.lt.u32`, `LOOP`, `n`).
    Ident(&'a str),
    /// A directive or type tag starting with `.` (`.kernel`, `.buf.f32`, `.rw`).
    Directive(&'a str),
    /// A register: `%` then a name (`%a`, `%tid.x`); the text is without the `%`.
    Reg(&'a str),
    /// A numeric literal as written (`-12`, `0x1f`, `1.5e3`, `0d7ff8000000000000`).
    Number(&'a str),
    /// One of `, ; : [ ] @ !`.
    Punct(char),
    /// End of a line.
    Newline,
    /// End of the input.
    Eof,
}

impl Tok<'_> {
    /// How the token reads in an error message (long tokens shortened).
    pub(crate) fn describe(&self) -> String {
        let short = |s: &str| -> String {
            const MAX: usize = 40;
            match s.char_indices().nth(MAX) {
                Some((cut, _)) => format!("{}...", &s[..cut]),
                None => s.to_string(),
            }
        };
        match self {
            Tok::Ident(s) | Tok::Directive(s) | Tok::Number(s) => format!("'{}'", short(s)),
            Tok::Reg(s) => format!("'%{}'", short(s)),
            Tok::Punct(c) => format!("'{c}'"),
            Tok::Newline => "end of line".to_string(),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

/// A token and where it starts (1-based line and column, counted in characters).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Token<'a> {
    pub tok: Tok<'a>,
    pub line: usize,
    pub col: usize,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// Splits `.hasm` text into tokens on demand, so that a large file is never held as a token
/// list. After an error it reports end of input and keeps the error for [`Lexer::error`].
pub(crate) struct Lexer<'a> {
    src: &'a str,
    i: usize,
    line: usize,
    col: usize,
    error: Option<ParseError>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Lexer {
            src,
            i: 0,
            line: 1,
            col: 1,
            error: None,
        }
    }

    /// The first character error met, if any.
    pub(crate) fn error(&self) -> Option<&ParseError> {
        self.error.as_ref()
    }

    fn eof(&self) -> Token<'a> {
        Token {
            tok: Tok::Eof,
            line: self.line,
            col: self.col,
        }
    }

    /// End of the run of bytes satisfying `pred` from `from`.
    fn run(&self, from: usize, pred: impl Fn(u8) -> bool) -> usize {
        let b = self.src.as_bytes();
        let mut j = from;
        while j < b.len() && pred(b[j]) {
            j += 1;
        }
        j
    }

    fn fail(&mut self, message: String) -> Token<'a> {
        self.error = Some(ParseError::new(self.line, self.col, message));
        // Nothing after an error is read.
        self.i = self.src.len();
        self.eof()
    }

    /// The next token (`Eof` at the end, and after an error).
    pub(crate) fn next_token(&mut self) -> Token<'a> {
        let bytes = self.src.as_bytes();
        loop {
            if self.error.is_some() || self.i >= bytes.len() {
                return self.eof();
            }
            let (i, line, col) = (self.i, self.line, self.col);
            let at = |tok| Token { tok, line, col };
            let b = bytes[i];
            match b {
                b'\n' => {
                    self.i += 1;
                    self.line += 1;
                    self.col = 1;
                    return at(Tok::Newline);
                }
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    let end = self.run(i, |c| c != b'\n');
                    // Columns count characters: skip UTF-8 continuation bytes.
                    self.col += bytes[i..end].iter().filter(|&&c| c & 0xC0 != 0x80).count();
                    self.i = end;
                    continue;
                }
                b',' | b';' | b':' | b'[' | b']' | b'@' | b'!' => {
                    self.i += 1;
                    self.col += 1;
                    return at(Tok::Punct(b as char));
                }
                _ => {}
            }
            if !b.is_ascii() {
                let c = self.src[i..].chars().next().unwrap_or('\u{fffd}');
                if c.is_whitespace() {
                    self.i += c.len_utf8();
                    self.col += 1;
                    continue;
                }
                return self.fail(format!("unexpected character '{c}'"));
            }
            if b.is_ascii_whitespace() || b == 0x0b {
                self.i += 1;
                self.col += 1;
                continue;
            }
            let end;
            let tok;
            if b == b'.' || b == b'%' {
                end = self.run(i + 1, is_name_byte);
                if end == i + 1 {
                    let what = if b == b'.' {
                        "a directive name"
                    } else {
                        "a register name"
                    };
                    return self.fail(format!("expected {what} after '{}'", b as char));
                }
                tok = if b == b'.' {
                    Tok::Directive(&self.src[i..end])
                } else {
                    Tok::Reg(&self.src[i + 1..end])
                };
            } else if b.is_ascii_digit()
                || (b == b'-' && bytes.get(i + 1).is_some_and(|d| d.is_ascii_alphanumeric()))
            {
                let mut j = i + 1;
                // Whether the literal so far has an 'x' (hex: 'e' is a digit, not an exponent).
                let mut hex = false;
                while j < bytes.len() {
                    let d = bytes[j];
                    let prev = bytes[j - 1];
                    let exponent_sign =
                        (d == b'+' || d == b'-') && (prev == b'e' || prev == b'E') && !hex;
                    if is_name_byte(d) || exponent_sign {
                        hex |= d == b'x' || d == b'X';
                        j += 1;
                    } else {
                        break;
                    }
                }
                end = j;
                tok = Tok::Number(&self.src[i..end]);
            } else if b.is_ascii_alphabetic() || b == b'_' {
                end = self.run(i, is_name_byte);
                tok = Tok::Ident(&self.src[i..end]);
            } else {
                return self.fail(format!("unexpected character '{}'", b as char));
            }
            // Tokens are ASCII: one column per byte.
            self.col += end - i;
            self.i = end;
            return at(tok);
        }
    }
}

/// Tokenizes the whole input (for tests).
#[cfg(test)]
pub(crate) fn lex(src: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let mut lexer = Lexer::new(src);
    let mut toks = Vec::new();
    loop {
        let t = lexer.next_token();
        if let Some(e) = lexer.error() {
            return Err(e.clone());
        }
        toks.push(t);
        if t.tok == Tok::Eof {
            return Ok(toks);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_an_instruction() {
        let toks = lex("@!%p add.f32 %a, x[%i], -1.5e-3; // comment\nL:").unwrap();
        let kinds: Vec<Tok> = toks.into_iter().map(|t| t.tok).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::Punct('@'),
                Tok::Punct('!'),
                Tok::Reg("p"),
                Tok::Ident("add.f32"),
                Tok::Reg("a"),
                Tok::Punct(','),
                Tok::Ident("x"),
                Tok::Punct('['),
                Tok::Reg("i"),
                Tok::Punct(']'),
                Tok::Punct(','),
                Tok::Number("-1.5e-3"),
                Tok::Punct(';'),
                Tok::Newline,
                Tok::Ident("L"),
                Tok::Punct(':'),
                Tok::Eof,
            ]
        );
    }

    #[test]
    fn positions_are_one_based() {
        let toks = lex("\n  mov").unwrap();
        assert_eq!((toks[1].line, toks[1].col), (2, 3));
    }

    #[test]
    fn bad_character_reports_position() {
        let err = lex("mov $").unwrap_err();
        assert_eq!((err.line, err.col), (1, 5));
    }
}
