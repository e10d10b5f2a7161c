//! Splits `.hasm` text into tokens with their line and column.

use super::ParseError;

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// A name or mnemonic: letters, digits, `_` and `.` (`setp.lt.u32`, `LOOP`, `n`).
    Ident(String),
    /// A directive or type tag starting with `.` (`.kernel`, `.buf.f32`, `.rw`).
    Directive(String),
    /// A register: `%` then a name (`%a`, `%tid.x`); the text is without the `%`.
    Reg(String),
    /// A numeric literal as written (`-12`, `0x1f`, `1.5e3`, `0d7ff8000000000000`).
    Number(String),
    /// One of `, ; : [ ] @ !`.
    Punct(char),
    /// End of a line.
    Newline,
    /// End of the input.
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Directive(s) => format!("'{s}'"),
            Tok::Reg(s) => format!("'%{s}'"),
            Tok::Number(s) => format!("'{s}'"),
            Tok::Punct(c) => format!("'{c}'"),
            Tok::Newline => "end of line".to_string(),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

/// A token and where it starts (1-based line and column, counted in characters).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Tokenizes the whole input.
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1usize, 1usize);
    while i < chars.len() {
        let c = chars[i];
        let start = (line, col);
        let push = |toks: &mut Vec<Token>, tok: Tok| {
            toks.push(Token {
                tok,
                line: start.0,
                col: start.1,
            });
        };
        // Take a run of characters satisfying `pred`, starting at `from`.
        let run = |from: usize, pred: &dyn Fn(char) -> bool| -> usize {
            let mut j = from;
            while j < chars.len() && pred(chars[j]) {
                j += 1;
            }
            j
        };
        match c {
            '\n' => {
                push(&mut toks, Tok::Newline);
                i += 1;
                line += 1;
                col = 1;
                continue;
            }
            c if c.is_whitespace() => {
                i += 1;
                col += 1;
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                let end = run(i, &|c| c != '\n');
                col += end - i;
                i = end;
                continue;
            }
            ',' | ';' | ':' | '[' | ']' | '@' | '!' => {
                push(&mut toks, Tok::Punct(c));
                i += 1;
                col += 1;
                continue;
            }
            _ => {}
        }
        let end;
        if c == '.' || c == '%' {
            end = run(i + 1, &is_name_char);
            if end == i + 1 {
                let what = if c == '.' {
                    "a directive name"
                } else {
                    "a register name"
                };
                return Err(ParseError::new(
                    line,
                    col,
                    format!("expected {what} after '{c}'"),
                ));
            }
            let text: String = chars[i + 1..end].iter().collect();
            if c == '.' {
                push(&mut toks, Tok::Directive(format!(".{text}")));
            } else {
                push(&mut toks, Tok::Reg(text));
            }
        } else if c.is_ascii_digit()
            || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_alphanumeric()))
        {
            let mut j = i + 1;
            // Whether the literal so far has an 'x' (hex: 'e' is a digit, not an exponent).
            let mut hex = c == 'x' || c == 'X';
            while j < chars.len() {
                let d = chars[j];
                let prev = chars[j - 1];
                let exponent_sign = (d == '+' || d == '-') && (prev == 'e' || prev == 'E') && !hex;
                if is_name_char(d) || exponent_sign {
                    hex |= d == 'x' || d == 'X';
                    j += 1;
                } else {
                    break;
                }
            }
            end = j;
            let text: String = chars[i..end].iter().collect();
            push(&mut toks, Tok::Number(text));
        } else if c.is_ascii_alphabetic() || c == '_' {
            end = run(i, &is_name_char);
            let text: String = chars[i..end].iter().collect();
            push(&mut toks, Tok::Ident(text));
        } else {
            return Err(ParseError::new(
                line,
                col,
                format!("unexpected character '{c}'"),
            ));
        }
        col += end - i;
        i = end;
    }
    toks.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    Ok(toks)
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
                Tok::Reg("p".into()),
                Tok::Ident("add.f32".into()),
                Tok::Reg("a".into()),
                Tok::Punct(','),
                Tok::Ident("x".into()),
                Tok::Punct('['),
                Tok::Reg("i".into()),
                Tok::Punct(']'),
                Tok::Punct(','),
                Tok::Number("-1.5e-3".into()),
                Tok::Punct(';'),
                Tok::Newline,
                Tok::Ident("L".into()),
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
