//! Straight-line instructions: moves, arithmetic, compares, selects, loads, stores, atomics.
//! (Control flow is in `blocks.rs`, conversions in `convert.rs`.)

use hologram_isa::semantics::Value;
use hologram_isa::{
    AtomOp, BinaryOp, CmpOp, Imm, Inst, Mem, Op, Operand, Special, TernaryOp, Type, UnaryOp,
};

use super::types::{self, is_narrow, normalize, reg_type};
use super::{CodegenError, Gen, Site};

impl Gen<'_> {
    /// A WGSL expression for an operand used as type `ty`.
    pub(crate) fn operand(&self, op: &Operand<u32>, ty: Type, opaque: bool) -> String {
        match op {
            Operand::Reg(r) => format!("r{r}"),
            Operand::Param(p) => format!("p{p}"),
            Operand::Special(s) => self.special(*s),
            Operand::Imm(imm) => types::literal(Value::from_imm(*imm, ty), opaque),
        }
    }

    fn special(&self, s: Special) -> String {
        let [bx, by, bz] = self.opts.block;
        let axis = |d: hologram_isa::Dim| ["x", "y", "z"][d.index()];
        match s {
            Special::Tid(d) => format!("hg_tid.{}", axis(d)),
            Special::Ntid(d) => format!("{}u", [bx, by, bz][d.index()]),
            Special::Ctaid(d) => format!("hg_ctaid.{}", axis(d)),
            Special::Nctaid(d) => format!("hg_nctaid.{}", axis(d)),
            Special::Gid(d) => format!(
                "(hg_ctaid.{a} * {n}u + hg_tid.{a})",
                a = axis(d),
                n = [bx, by, bz][d.index()]
            ),
            Special::GidLinear => "hg_gid".into(),
        }
    }

    /// Runs `body` inside the instruction's guard, if any.
    pub(crate) fn guarded(&mut self, inst: &Inst<u32>, body: impl FnOnce(&mut Self)) {
        match &inst.guard {
            Some(g) => {
                let not = if g.negate { "!" } else { "" };
                self.line(&format!("if ({not}r{}) {{", g.pred));
                self.indent += 1;
                body(self);
                self.indent -= 1;
                self.line("}");
            }
            None => body(self),
        }
    }

    /// Emits a straight-line instruction (guard included).
    pub(crate) fn emit_inst(&mut self, inst: &Inst<u32>) -> Result<(), CodegenError> {
        let opaque = {
            let srcs = inst.op.sources();
            !srcs.is_empty() && srcs.iter().all(|(o, _)| matches!(o, Operand::Imm(_)))
        };
        let mut result = Ok(());
        self.guarded(inst, |g| result = g.emit_op(&inst.op, opaque));
        result
    }

    fn emit_op(&mut self, op: &Op<u32>, opaque: bool) -> Result<(), CodegenError> {
        let o = |g: &Self, x: &Operand<u32>, ty: Type| g.operand(x, ty, opaque);
        match op {
            Op::Mov { ty, dst, src } => {
                let v = o(self, src, *ty);
                self.line(&format!("r{dst} = {v};"));
            }
            Op::Cvt { to, from, dst, src } => {
                let v = o(self, src, *from);
                let e = self.convert(*to, *from, &v);
                self.line(&format!("r{dst} = {e};"));
            }
            Op::Bitcast { to, from, dst, src } => {
                let v = o(self, src, *from);
                let e = super::bitcast::bitcast(*to, *from, &v);
                self.line(&format!("r{dst} = {e};"));
            }
            Op::Unary { op, ty, dst, src } => {
                let a = o(self, src, *ty);
                let e = unary(*op, *ty, &a, self.opts.float64);
                self.line(&format!("r{dst} = {e};"));
            }
            Op::Binary { op, ty, dst, a, b } => {
                let a_op = a;
                let a = o(self, a, *ty);
                let e = match (op, b) {
                    // A literal shift amount is reduced here: naga cannot fold 64-bit casts.
                    (BinaryOp::Shl | BinaryOp::Shr, Operand::Imm(imm)) if ty.is_int() => {
                        let amount = Value::from_imm(*imm, *ty).to_bits() % ty.bits() as u64;
                        shift(*op, *ty, &a, &format!("{amount}u"))
                    }
                    _ => {
                        // naga rejects a constant zero divisor at pipeline creation, while the
                        // ISA (like WGSL at run time) defines x / 0 = x and x rem 0 = 0: such a
                        // divisor is formed at run time.
                        let zero_divisor = matches!(op, BinaryOp::Div | BinaryOp::Rem)
                            && ty.is_int()
                            && matches!(b, Operand::Imm(imm) if Value::from_imm(*imm, *ty).to_bits() == 0);
                        let b_expr = self.operand(b, *ty, opaque || zero_divisor);
                        if ty.is_float() && super::math::needs_ieee_guard(a_op, b) {
                            // Shield one operand so drivers' unsafe float folds (x - x = 0,
                            // x * 0 = 0, x + 0 = x) cannot apply.
                            // (Only one side when both are the same operand: shielding both
                            // would make them equal again after common-subexpression folding.)
                            let g = |x: &str| super::math::opaque(*ty, x);
                            let b_expr = if a_op == b { b_expr } else { g(&b_expr) };
                            binary(*op, *ty, &g(&a), &b_expr, self.opts.float64)
                        } else if ty.is_float() && *op == BinaryOp::Sub {
                            // Drivers also find equal operands the program does not spell the
                            // same (lavapipe folds `x - neg(neg(x))` and `x - f32(f64(x))` to 0,
                            // wrong for NaN and infinities): a shielded subtrahend hides that.
                            let b_expr = super::math::opaque(*ty, &b_expr);
                            binary(*op, *ty, &a, &b_expr, self.opts.float64)
                        } else {
                            binary(*op, *ty, &a, &b_expr, self.opts.float64)
                        }
                    }
                };
                self.line(&format!("r{dst} = {e};"));
            }
            Op::Ternary {
                op,
                ty,
                dst,
                a,
                b,
                c,
            } => {
                // Literal 0 and ±1 operands are shielded: inlined into the product or the fma
                // helpers, they let drivers fold `x * 0` to 0 or `p + 0` to p (wrong for
                // infinities, NaN and signed zeros).
                let f = |g: &Self, x: &Operand<u32>| {
                    let e = o(g, x, *ty);
                    if ty.is_float() && super::math::special_literal(x) {
                        super::math::opaque(*ty, &e)
                    } else {
                        e
                    }
                };
                let (a, b, c) = (f(self, a), f(self, b), f(self, c));
                let e = if ty.is_float() {
                    super::math::float_ternary(*op, *ty, &a, &b, &c, self.opts.float64)
                } else {
                    ternary(*op, *ty, &a, &b, &c)
                };
                self.line(&format!("r{dst} = {e};"));
            }
            Op::Setp { cmp, ty, dst, a, b } => {
                // lavapipe (LLVM 15) gets `sext(x) > -1` and `sext(x) < 0` on i64 wrong when
                // the bound is a constant: 64-bit literals are formed at run time.
                let shield = ty.is_int() && ty.bits() == 64;
                let (a, b) = (
                    self.operand(a, *ty, opaque || shield),
                    self.operand(b, *ty, opaque || shield),
                );
                let e = compare(*cmp, *ty, &a, &b);
                self.line(&format!("r{dst} = {e};"));
            }
            Op::Selp {
                ty,
                dst,
                a,
                b,
                cond,
            } => {
                // Mesa turns `select(1.0, -0.0, p)` into a bool-to-float conversion that gives
                // +0.0: float literals of a select are formed at run time.
                let shield = ty.is_float();
                let (a, b, c) = (
                    self.operand(a, *ty, opaque || shield),
                    self.operand(b, *ty, opaque || shield),
                    o(self, cond, Type::Pred),
                );
                self.line(&format!("r{dst} = select({b}, {a}, {c});"));
            }
            Op::Ld { dst, mem, .. } => {
                let dst = *dst;
                self.checked(mem, |g, i| {
                    let e = g.arrays[mem.array as usize].load(i);
                    g.line(&format!("r{dst} = {e};"));
                });
            }
            Op::St { ty, mem, src } => {
                let v = o(self, src, *ty);
                self.checked(mem, |g, i| {
                    for s in g.arrays[mem.array as usize].store(i, &v) {
                        g.line(&s);
                    }
                });
            }
            Op::Atom {
                op,
                ty,
                dst,
                mem,
                a,
                b,
            } => {
                let a = o(self, a, *ty);
                let b = b.as_ref().map(|b| o(self, b, *ty));
                let (op, ty, dst) = (*op, *ty, *dst);
                self.checked(mem, |g, i| {
                    g.atomic(op, ty, dst, mem.array, i, &a, b.as_deref())
                });
            }
            Op::Fence { .. } => {
                // WGSL has no memory fence outside of control barriers; storage and workgroup
                // accesses that race are made atomic by the caller's program.
                self.line("// fence (no WGSL equivalent outside barriers)");
            }
            other => {
                return Err(CodegenError::Unsupported(format!(
                    "internal error: '{other:?}' reached the straight-line emitter"
                )))
            }
        }
        Ok(())
    }

    /// Emits a bounds-checked access: `body` gets the in-bounds element index (u32).
    fn checked(&mut self, mem: &Mem<u32>, body: impl FnOnce(&mut Self, &str)) {
        let layout = &self.arrays[mem.array as usize];
        let len = layout.len_expr();
        let site = self.sites.len() as u32;
        let index_ty = match &mem.index {
            Operand::Imm(Imm::Int(v)) => {
                if *v < 0 || *v > u32::MAX as i128 {
                    // A literal index that can never be in bounds.
                    self.sites.push(Site {
                        array: mem.array,
                        index_ty: None,
                    });
                    let bits = *v as i64 as u64;
                    self.line(&format!(
                        "if (hg_state == 0u) {{ hg_oob({site}u, {}u, {}u); }}",
                        bits as u32,
                        (bits >> 32) as u32
                    ));
                    return;
                }
                None
            }
            Operand::Imm(Imm::Float(_)) => Some(Type::U32),
            Operand::Special(_) => Some(Type::U32),
            op => self.k.operand_type(op),
        };
        let ity = index_ty.unwrap_or(Type::U32);
        let idx = self.operand(&mem.index, ity, false);
        self.sites.push(Site {
            array: mem.array,
            index_ty,
        });
        self.line("{");
        self.indent += 1;
        self.line(&format!("let hg_i = {idx};"));
        let (elem, cond, lo, hi) = match reg_type(ity) {
            "i32" => (
                "bitcast<u32>(hg_i)".to_string(),
                format!("hg_i >= 0i && bitcast<u32>(hg_i) < {len}"),
                "bitcast<u32>(hg_i)".to_string(),
                "0u".to_string(),
            ),
            "u64" => (
                "u32(hg_i)".to_string(),
                format!("hg_i < u64({len})"),
                "u32(hg_i)".to_string(),
                "u32(hg_i >> 32u)".to_string(),
            ),
            "i64" => (
                "u32(hg_i)".to_string(),
                format!("hg_i >= 0li && u64(hg_i) < u64({len})"),
                "u32(hg_i)".to_string(),
                "u32(hg_i >> 32u)".to_string(),
            ),
            _ => (
                "hg_i".to_string(),
                format!("hg_i < {len}"),
                "hg_i".to_string(),
                "0u".to_string(),
            ),
        };
        // A lane that has ended (exit, or an earlier fault) skips every later access.
        if self.opts.bounds_checks {
            self.line(&format!("if (hg_state == 0u && {cond}) {{"));
            self.indent += 1;
            body(self, &elem);
            self.indent -= 1;
            self.line("} else if (hg_state == 0u) {");
            self.line(&format!("    hg_oob({site}u, {lo}, {hi});"));
            self.line("}");
        } else {
            // (The 4-lane form of maps runs only live lanes: no test, see `map.rs`.)
            self.line(if self.live_checks {
                "if (hg_state == 0u) {"
            } else {
                "{"
            });
            self.indent += 1;
            body(self, &elem);
            self.indent -= 1;
            self.line("}");
        }
        self.indent -= 1;
        self.line("}");
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &mut self,
        op: AtomOp,
        ty: Type,
        dst: u32,
        array: u32,
        i: &str,
        a: &str,
        b: Option<&str>,
    ) {
        let layout = self.arrays[array as usize].clone();
        let p = layout.atomic_ptr(i);
        let word = layout.word;
        if ty.is_float() {
            let bits = if ty == Type::F64 { "u64" } else { "u32" };
            let ft = reg_type(ty);
            match op {
                AtomOp::Exch => self.line(&format!(
                    "r{dst} = bitcast<{ft}>(atomicExchange({p}, bitcast<{bits}>({a})));"
                )),
                _ => {
                    // add: compare-and-swap loop on the bits.
                    self.line(&format!("var hg_old = atomicLoad({p});"));
                    self.line("loop {");
                    self.line(&format!(
                        "    let hg_new = bitcast<{bits}>(bitcast<{ft}>(hg_old) + {a});"
                    ));
                    self.line(&format!(
                        "    let hg_r = atomicCompareExchangeWeak({p}, hg_old, hg_new);"
                    ));
                    self.line("    if (hg_r.exchanged) { break; }");
                    self.line("    hg_old = hg_r.old_value;");
                    self.line("}");
                    self.line(&format!("r{dst} = bitcast<{ft}>(hg_old);"));
                }
            }
            return;
        }
        let va = layout.atomic_value(a);
        let f = match op {
            AtomOp::Add => "atomicAdd",
            AtomOp::Min => "atomicMin",
            AtomOp::Max => "atomicMax",
            AtomOp::Exch => "atomicExchange",
            AtomOp::Cas => {
                // A strong compare-and-swap from the weak one: retry spurious failures.
                let vb = layout.atomic_value(b.unwrap_or("0u"));
                self.line(&format!("var hg_old: {word};"));
                self.line("loop {");
                self.line(&format!(
                    "    let hg_r = atomicCompareExchangeWeak({p}, {va}, {vb});"
                ));
                self.line(&format!(
                    "    if (hg_r.exchanged || hg_r.old_value != {va}) {{ hg_old = hg_r.old_value; break; }}"
                ));
                self.line("}");
                let res = layout.atomic_result("hg_old");
                self.line(&format!("r{dst} = {res};"));
                return;
            }
        };
        let res = layout.atomic_result(&format!("{f}({p}, {va})"));
        self.line(&format!("r{dst} = {res};"));
    }
}

/// One-operand operations.
pub(crate) fn unary(op: UnaryOp, ty: Type, a: &str, float64: bool) -> String {
    if ty == Type::Pred {
        return format!("!{a}");
    }
    if ty.is_float() {
        return super::math::float_unary(op, ty, a, float64);
    }
    let e = match op {
        UnaryOp::Abs if ty.is_signed_int() => format!("abs({a})"),
        UnaryOp::Abs => a.to_string(),
        UnaryOp::Neg if ty.is_signed_int() => format!("-({a})"),
        UnaryOp::Neg => format!("({zero} - {a})", zero = zero(ty)),
        _ => format!("~({a})"),
    };
    if is_narrow(ty) {
        normalize(ty, &e)
    } else {
        e
    }
}

/// The zero literal of an integer type, in its register type.
pub(crate) fn zero(ty: Type) -> &'static str {
    match reg_type(ty) {
        "i32" => "0i",
        "u64" => "0lu",
        "i64" => "0li",
        _ => "0u",
    }
}

/// Two-operand operations.
pub(crate) fn binary(op: BinaryOp, ty: Type, a: &str, b: &str, float64: bool) -> String {
    if ty == Type::Pred {
        return match op {
            BinaryOp::And => format!("({a} && {b})"),
            BinaryOp::Or => format!("({a} || {b})"),
            _ => format!("({a} != {b})"),
        };
    }
    if ty.is_float() {
        return super::math::float_binary(op, ty, a, b, float64);
    }
    let bits = ty.bits();
    let amount = |b: &str| match reg_type(ty) {
        "u32" => format!("({b} & {}u)", bits - 1),
        "i32" => format!("(bitcast<u32>({b}) & {}u)", bits - 1),
        _ => format!("(u32({b}) & 63u)"),
    };
    if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        return shift(op, ty, a, &amount(b));
    }
    let e = match op {
        BinaryOp::Add => format!("({a} + {b})"),
        BinaryOp::Sub => format!("({a} - {b})"),
        BinaryOp::Mul => format!("({a} * {b})"),
        BinaryOp::Div => format!("({a} / {b})"),
        BinaryOp::Rem => format!("({a} % {b})"),
        BinaryOp::Min => format!("min({a}, {b})"),
        BinaryOp::Max => format!("max({a}, {b})"),
        BinaryOp::And => format!("({a} & {b})"),
        BinaryOp::Or => format!("({a} | {b})"),
        BinaryOp::Xor => format!("({a} ^ {b})"),
        BinaryOp::Shl | BinaryOp::Shr => String::new(), // handled above
        BinaryOp::Pow => format!("({a} * {b})"),        // unreachable: pow is floats only
    };
    // Narrow results are re-normalized (mul/add/shl may leave the narrow range; div of
    // MIN by -1 too). Bitwise ops on normalized values stay normalized.
    if is_narrow(ty) && !matches!(op, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) {
        normalize(ty, &e)
    } else {
        e
    }
}

/// A shift by an amount (u32 expression) already reduced modulo the bit width.
fn shift(op: BinaryOp, ty: Type, a: &str, amount: &str) -> String {
    let e = if op == BinaryOp::Shl {
        format!("({a} << {amount})")
    } else {
        format!("({a} >> {amount})")
    };
    if is_narrow(ty) {
        normalize(ty, &e)
    } else {
        e
    }
}

/// Three-operand operations.
pub(crate) fn ternary(op: TernaryOp, ty: Type, a: &str, b: &str, c: &str) -> String {
    if ty.is_float() {
        return super::math::float_ternary(op, ty, a, b, c, false);
    }
    let e = format!("({a} * {b} + {c})");
    if is_narrow(ty) {
        normalize(ty, &e)
    } else {
        e
    }
}

/// `setp`: every float comparison with NaN is false except `ne`.
pub(crate) fn compare(cmp: CmpOp, ty: Type, a: &str, b: &str) -> String {
    let sym = match cmp {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    };
    if ty.is_float() && cmp == CmpOp::Ne {
        // naga lowers float `!=` to an ordered compare (false for NaN); the ISA wants true.
        return format!("!({a} == {b})");
    }
    format!("({a} {sym} {b})")
}
