//! Parses `.hasm` text into a [`Program`].

use super::lexer::{Lexer, Tok, Token};
use super::{ParseError, SourceMap};
use crate::inst::{AtomOp, BinaryOp, CmpOp, FenceScope, Guard, Inst, Op, TernaryOp, UnaryOp};
use crate::operand::{Imm, Mem, Operand, Special};
use crate::program::{Access, ArrayDecl, Param, ParamKind, Program, RegDecl, Stmt};
use crate::types::Type;

/// Words that cannot name a parameter, array or label because they read as literals.
pub(crate) const RESERVED_WORDS: [&str; 4] = ["inf", "nan", "true", "false"];

/// Parses `.hasm` text. Errors carry the line and column and say what was expected.
pub fn parse(src: &str) -> Result<Program, ParseError> {
    parse_with_source_map(src).map(|(p, _)| p)
}

/// Parses `.hasm` text and also returns where each declaration and statement starts, so that
/// validation errors can point at the text.
pub fn parse_with_source_map(src: &str) -> Result<(Program, SourceMap), ParseError> {
    let mut lexer = Lexer::new(src);
    let cur = lexer.next_token();
    let mut p = Parser {
        lexer,
        cur,
        ahead: None,
        map: SourceMap::default(),
    };
    let parsed = p.program();
    // Tokens are read on demand: a character error stops the stream there, and whichever
    // error comes first in the text is the one to report.
    match (parsed, p.lexer.error().cloned()) {
        (Ok(program), None) => Ok((program, p.map)),
        (Ok(_), Some(lex)) => Err(lex),
        (Err(e), None) => Err(e),
        (Err(e), Some(lex)) => Err(if (lex.line, lex.col) <= (e.line, e.col) {
            lex
        } else {
            e
        }),
    }
}

struct Parser<'a> {
    lexer: Lexer<'a>,
    /// The current token, and the one after it once looked at.
    cur: Token<'a>,
    ahead: Option<Token<'a>>,
    map: SourceMap,
}

type PResult<T> = Result<T, ParseError>;

impl<'a> Parser<'a> {
    fn peek(&self) -> &Token<'a> {
        &self.cur
    }

    /// The token after the current one.
    fn peek_second(&mut self) -> &Token<'a> {
        if self.ahead.is_none() {
            self.ahead = Some(self.lexer.next_token());
        }
        self.ahead.as_ref().unwrap_or(&self.cur)
    }

    fn next(&mut self) -> Token<'a> {
        let t = self.cur;
        if t.tok != Tok::Eof {
            self.cur = match self.ahead.take() {
                Some(a) => a,
                None => self.lexer.next_token(),
            };
        }
        t
    }

    fn err_at(&self, t: &Token, msg: impl Into<String>) -> ParseError {
        ParseError::new(t.line, t.col, msg)
    }

    fn expected(&self, what: &str) -> ParseError {
        let t = self.peek();
        self.err_at(t, format!("expected {what}, found {}", t.tok.describe()))
    }

    fn skip_newlines(&mut self) {
        while self.peek().tok == Tok::Newline {
            self.next();
        }
    }

    fn expect_punct(&mut self, c: char, what: &str) -> PResult<()> {
        if self.peek().tok == Tok::Punct(c) {
            self.next();
            Ok(())
        } else {
            Err(self.expected(&format!("'{c}' {what}")))
        }
    }

    fn end_of_directive(&mut self) -> PResult<()> {
        match self.peek().tok {
            Tok::Newline => {
                self.next();
                Ok(())
            }
            Tok::Eof => Ok(()),
            _ => Err(self.expected("end of line after the directive")),
        }
    }

    fn name(&mut self, what: &str) -> PResult<String> {
        let t = *self.peek();
        match &t.tok {
            Tok::Ident(s) if !s.contains('.') => {
                if RESERVED_WORDS.contains(s) {
                    return Err(self.err_at(&t, format!("'{s}' is a reserved word, not {what}")));
                }
                self.next();
                Ok(s.to_string())
            }
            Tok::Ident(s) => Err(self.err_at(&t, format!("{what} '{s}' must not contain '.'"))),
            _ => Err(self.expected(what)),
        }
    }

    fn type_tag(&mut self, what: &str) -> PResult<Type> {
        let t = *self.peek();
        if let Tok::Directive(d) = &t.tok {
            if let Some(ty) = Type::from_name(&d[1..]) {
                self.next();
                return Ok(ty);
            }
            return Err(self.err_at(&t, format!("unknown type '{d}' for {what}")));
        }
        Err(self.expected(&format!("a type such as .f32 for {what}")))
    }

    fn register_name(&mut self, what: &str) -> PResult<String> {
        let t = *self.peek();
        match &t.tok {
            Tok::Reg(r) => {
                if Special::is_reserved(r) {
                    return Err(self.err_at(
                        &t,
                        format!("cannot use special register %{r} as {what}: special registers are read-only"),
                    ));
                }
                if r.contains('.') {
                    return Err(self.err_at(&t, format!("register name %{r} must not contain '.'")));
                }
                self.next();
                Ok(r.to_string())
            }
            _ => Err(self.expected(&format!("a register for {what}"))),
        }
    }

    fn array_len(&mut self) -> PResult<u32> {
        self.expect_punct('[', "to give the array length")?;
        let t = self.next();
        let len = match &t.tok {
            Tok::Number(s) => match parse_number(s) {
                Some(Imm::Int(v)) if v > 0 && v <= u32::MAX as i128 => v as u32,
                _ => {
                    return Err(self.err_at(
                        &t,
                        format!("array length must be a positive integer, found '{s}'"),
                    ))
                }
            },
            other => {
                return Err(self.err_at(
                    &t,
                    format!("expected an array length, found {}", other.describe()),
                ))
            }
        };
        self.expect_punct(']', "after the array length")?;
        Ok(len)
    }

    fn program(&mut self) -> PResult<Program> {
        self.skip_newlines();
        let t = *self.peek();
        if t.tok != Tok::Directive(".kernel") {
            return Err(self.expected("'.kernel NAME' at the start of the program"));
        }
        self.next();
        self.map.kernel = Some((self.peek().line, self.peek().col));
        let name = self.name("a kernel name")?;
        self.end_of_directive()?;
        let mut prog = Program {
            name,
            ..Program::default()
        };
        // Header directives.
        loop {
            self.skip_newlines();
            let t = *self.peek();
            let Tok::Directive(d) = &t.tok else { break };
            let pos = (t.line, t.col);
            self.next();
            match *d {
                ".param" => {
                    let tag = *self.peek();
                    let kind = match &tag.tok {
                        Tok::Directive(s) if s.starts_with(".buf.") => {
                            let ty = Type::from_name(&s[5..]).ok_or_else(|| {
                                self.err_at(&tag, format!("unknown element type in '{s}'"))
                            })?;
                            self.next();
                            ParamKind::Buffer {
                                elem: ty,
                                access: Access::ReadOnly,
                            }
                        }
                        _ => ParamKind::Scalar(self.type_tag("the parameter")?),
                    };
                    let name = self.name("a parameter name")?;
                    let kind = match kind {
                        ParamKind::Buffer { elem, .. } => {
                            let access = if self.peek().tok == Tok::Directive(".rw") {
                                self.next();
                                Access::ReadWrite
                            } else {
                                Access::ReadOnly
                            };
                            ParamKind::Buffer { elem, access }
                        }
                        k => k,
                    };
                    prog.params.push(Param { name, kind });
                    self.map.params.push(pos);
                }
                ".shared" | ".scratch" => {
                    let elem = self.type_tag("the array")?;
                    let name = self.name("an array name")?;
                    let len = self.array_len()?;
                    let decl = ArrayDecl { name, elem, len };
                    if *d == ".shared" {
                        prog.shared.push(decl);
                        self.map.shared.push(pos);
                    } else {
                        prog.scratch.push(decl);
                        self.map.scratch.push(pos);
                    }
                }
                ".reg" => {
                    let ty = self.type_tag("the register")?;
                    loop {
                        let rpos = (self.peek().line, self.peek().col);
                        let name = self.register_name("a register declaration")?;
                        prog.regs.push(RegDecl { name, ty });
                        self.map.regs.push(rpos);
                        if self.peek().tok == Tok::Punct(',') {
                            self.next();
                        } else {
                            break;
                        }
                    }
                }
                ".kernel" => {
                    return Err(self.err_at(&t, "only one .kernel per program"));
                }
                other => {
                    return Err(self.err_at(
                        &t,
                        format!(
                        "unknown directive '{other}' (expected .param, .shared, .scratch or .reg)"
                    ),
                    ))
                }
            }
            self.end_of_directive()?;
        }
        // Body.
        loop {
            self.skip_newlines();
            let t = *self.peek();
            match &t.tok {
                Tok::Eof => break,
                Tok::Directive(d) => {
                    return Err(self.err_at(
                        &t,
                        format!("directive '{d}' must come before the first instruction"),
                    ))
                }
                Tok::Ident(name) if self.peek_second().tok == Tok::Punct(':') => {
                    if name.contains('.') || RESERVED_WORDS.contains(name) {
                        return Err(self.err_at(&t, format!("'{name}' cannot be a label name")));
                    }
                    self.next();
                    self.next();
                    prog.body.push(Stmt::Label(name.to_string()));
                    self.map.body.push((t.line, t.col));
                }
                _ => {
                    let inst = self.instruction()?;
                    prog.body.push(Stmt::Inst(inst));
                    self.map.body.push((t.line, t.col));
                }
            }
        }
        Ok(prog)
    }

    fn instruction(&mut self) -> PResult<Inst<String>> {
        let guard = if self.peek().tok == Tok::Punct('@') {
            self.next();
            let negate = if self.peek().tok == Tok::Punct('!') {
                self.next();
                true
            } else {
                false
            };
            let pred = self.register_name("a guard predicate")?;
            Some(Guard { pred, negate })
        } else {
            None
        };
        let t = self.next();
        let Tok::Ident(mnemonic) = &t.tok else {
            return Err(self.err_at(
                &t,
                format!("expected an instruction, found {}", t.tok.describe()),
            ));
        };
        let op = self.operation(&t, mnemonic)?;
        if self.peek().tok != Tok::Punct(';') {
            return Err(self.expected("';' at the end of the instruction"));
        }
        self.next();
        Ok(Inst { guard, op })
    }

    fn operation(&mut self, at: &Token, mnemonic: &str) -> PResult<Op<String>> {
        let parts: Vec<&str> = mnemonic.split('.').collect();
        let base = parts[0];
        let suffix_count = parts.len() - 1;
        let want = |n: usize, form: &str| -> PResult<()> {
            if suffix_count == n {
                Ok(())
            } else {
                Err(ParseError::new(
                    at.line,
                    at.col,
                    format!("'{mnemonic}' is malformed: write {form}"),
                ))
            }
        };
        let ty_at = |i: usize| -> PResult<Type> {
            Type::from_name(parts[i]).ok_or_else(|| {
                ParseError::new(
                    at.line,
                    at.col,
                    format!("unknown type '{}' in '{mnemonic}'", parts[i]),
                )
            })
        };
        Ok(match base {
            "mov" => {
                want(1, "mov.TYPE")?;
                let ty = ty_at(1)?;
                let dst = self.dst()?;
                let src = self.operand()?;
                Op::Mov { ty, dst, src }
            }
            "cvt" => {
                want(2, "cvt.TO.FROM, e.g. cvt.f32.i32")?;
                let (to, from) = (ty_at(1)?, ty_at(2)?);
                let dst = self.dst()?;
                let src = self.operand()?;
                Op::Cvt { to, from, dst, src }
            }
            "bitcast" => {
                want(2, "bitcast.TO.FROM, e.g. bitcast.u32.f32")?;
                let (to, from) = (ty_at(1)?, ty_at(2)?);
                let dst = self.dst()?;
                let src = self.operand()?;
                Op::Bitcast { to, from, dst, src }
            }
            "ld" => {
                want(1, "ld.TYPE")?;
                let ty = ty_at(1)?;
                let dst = self.dst()?;
                let mem = self.mem()?;
                Op::Ld { ty, dst, mem }
            }
            "st" => {
                want(1, "st.TYPE")?;
                let ty = ty_at(1)?;
                let mem = self.mem()?;
                self.expect_punct(',', "after the stored element")?;
                let src = self.operand()?;
                Op::St { ty, mem, src }
            }
            "mad" | "fma" => {
                want(1, &format!("{base}.TYPE"))?;
                let ty = ty_at(1)?;
                let op =
                    TernaryOp::from_name(base).ok_or_else(|| self.err_at(at, "unreachable"))?;
                let dst = self.dst()?;
                let a = self.operand()?;
                self.comma()?;
                let b = self.operand()?;
                self.comma()?;
                let c = self.operand()?;
                Op::Ternary {
                    op,
                    ty,
                    dst,
                    a,
                    b,
                    c,
                }
            }
            "setp" => {
                want(2, "setp.CMP.TYPE, e.g. setp.lt.u32")?;
                let cmp = CmpOp::from_name(parts[1]).ok_or_else(|| {
                    self.err_at(
                        at,
                        format!(
                            "unknown comparison '{}' (expected eq, ne, lt, le, gt or ge)",
                            parts[1]
                        ),
                    )
                })?;
                let ty = ty_at(2)?;
                let dst = self.dst()?;
                let a = self.operand()?;
                self.comma()?;
                let b = self.operand()?;
                Op::Setp { cmp, ty, dst, a, b }
            }
            "selp" => {
                want(1, "selp.TYPE")?;
                let ty = ty_at(1)?;
                let dst = self.dst()?;
                let a = self.operand()?;
                self.comma()?;
                let b = self.operand()?;
                self.comma()?;
                let cond = self.operand()?;
                Op::Selp {
                    ty,
                    dst,
                    a,
                    b,
                    cond,
                }
            }
            "atom" => {
                want(2, "atom.OP.TYPE, e.g. atom.add.u32")?;
                let op = AtomOp::from_name(parts[1]).ok_or_else(|| {
                    self.err_at(
                        at,
                        format!(
                            "unknown atomic operation '{}' (expected add, min, max, exch or cas)",
                            parts[1]
                        ),
                    )
                })?;
                let ty = ty_at(2)?;
                let dst = self.dst()?;
                let mem = self.mem()?;
                self.comma()?;
                let a = self.operand()?;
                let b = if op == AtomOp::Cas {
                    self.comma()?;
                    Some(self.operand()?)
                } else {
                    None
                };
                Op::Atom {
                    op,
                    ty,
                    dst,
                    mem,
                    a,
                    b,
                }
            }
            "bra" | "call" => {
                want(0, base)?;
                let target = self.label_ref()?;
                if base == "bra" {
                    Op::Bra { target }
                } else {
                    Op::Call { target }
                }
            }
            "loop" => {
                want(0, "loop %counter, LABEL")?;
                let counter = self.register_name("the loop counter")?;
                self.comma()?;
                let target = self.label_ref()?;
                Op::Loop { counter, target }
            }
            "ret" | "exit" | "barrier" => {
                want(0, base)?;
                match base {
                    "ret" => Op::Ret,
                    "exit" => Op::Exit,
                    _ => Op::Barrier,
                }
            }
            "fence" => {
                want(1, "fence.block or fence.device")?;
                let scope = FenceScope::from_name(parts[1]).ok_or_else(|| {
                    self.err_at(
                        at,
                        format!(
                            "unknown fence scope '{}' (expected block or device)",
                            parts[1]
                        ),
                    )
                })?;
                Op::Fence { scope }
            }
            _ => {
                if let Some(op) = UnaryOp::from_name(base) {
                    want(1, &format!("{base}.TYPE"))?;
                    let ty = ty_at(1)?;
                    let dst = self.dst()?;
                    let src = self.operand()?;
                    Op::Unary { op, ty, dst, src }
                } else if let Some(op) = BinaryOp::from_name(base) {
                    want(1, &format!("{base}.TYPE"))?;
                    let ty = ty_at(1)?;
                    let dst = self.dst()?;
                    let a = self.operand()?;
                    self.comma()?;
                    let b = self.operand()?;
                    Op::Binary { op, ty, dst, a, b }
                } else {
                    return Err(self.err_at(at, format!("unknown instruction '{base}'")));
                }
            }
        })
    }

    fn comma(&mut self) -> PResult<()> {
        self.expect_punct(',', "between operands")
    }

    /// A destination register followed by its comma.
    fn dst(&mut self) -> PResult<String> {
        let r = self.register_name("a destination")?;
        self.expect_punct(',', "after the destination")?;
        Ok(r)
    }

    fn label_ref(&mut self) -> PResult<String> {
        self.name("a label")
    }

    fn mem(&mut self) -> PResult<Mem<String>> {
        let array = self.name("an array (buffer parameter, .shared or .scratch name)")?;
        self.expect_punct('[', "to index the array")?;
        let index = self.operand()?;
        self.expect_punct(']', "after the index")?;
        Ok(Mem { array, index })
    }

    fn operand(&mut self) -> PResult<Operand<String>> {
        let t = *self.peek();
        let op = match &t.tok {
            Tok::Reg(r) => {
                if let Some(s) = Special::from_name(r) {
                    Operand::Special(s)
                } else if Special::is_reserved(r) || r.contains('.') {
                    return Err(self.err_at(&t, format!("unknown special register %{r}")));
                } else {
                    Operand::Reg(r.to_string())
                }
            }
            Tok::Number(s) => Operand::Imm(
                parse_number(s)
                    .ok_or_else(|| self.err_at(&t, format!("malformed number '{s}'")))?,
            ),
            Tok::Ident(s) => match *s {
                "true" => Operand::Imm(Imm::Int(1)),
                "false" => Operand::Imm(Imm::Int(0)),
                "inf" => Operand::Imm(Imm::Float(f64::INFINITY)),
                "nan" => Operand::Imm(Imm::Float(f64::NAN)),
                _ if s.contains('.') => {
                    return Err(self.err_at(&t, format!("expected an operand, found '{s}'")))
                }
                _ => Operand::Param(s.to_string()),
            },
            _ => return Err(self.expected("an operand (register, parameter or number)")),
        };
        self.next();
        Ok(op)
    }
}

/// Parses a numeric literal: decimal or `0x` hexadecimal integers, decimal floats, `inf`, `nan`
/// (each optionally negated) and `0d` followed by 16 hex digits for exact f64 bits.
pub(crate) fn parse_number(text: &str) -> Option<Imm> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let sign = |v: f64| if neg { -v } else { v };
    if body == "inf" {
        return Some(Imm::Float(sign(f64::INFINITY)));
    }
    if body == "nan" {
        return Some(Imm::Float(sign(f64::NAN)));
    }
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        if hex.starts_with(['+', '-']) {
            return None;
        }
        let v = i128::from_str_radix(hex, 16).ok()?;
        return Some(Imm::Int(if neg { -v } else { v }));
    }
    if let Some(hex) = body.strip_prefix("0d") {
        if neg || hex.len() != 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        return Some(Imm::Float(f64::from_bits(
            u64::from_str_radix(hex, 16).ok()?,
        )));
    }
    if !body.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if body.chars().all(|c| c.is_ascii_digit()) {
        let v: i128 = body.parse().ok()?;
        return Some(Imm::Int(if neg { -v } else { v }));
    }
    if body.contains(['.', 'e', 'E'])
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || ".eE+-".contains(c))
    {
        let v: f64 = body.parse().ok()?;
        return Some(Imm::Float(sign(v)));
    }
    None
}
