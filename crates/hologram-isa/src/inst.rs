//! Instructions of the Atlas ISA.

use crate::operand::{Mem, Operand};
use crate::types::Type;

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)] // variants are named after their mnemonics
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every variant.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The mnemonic used in `.hasm` text.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses a mnemonic.
            pub fn from_name(text: &str) -> Option<$name> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

named_enum! {
    /// One-operand operations.
    UnaryOp {
        /// Absolute value (signed integers wrap: `abs(MIN) == MIN`).
        Abs = "abs",
        /// Negation (integers wrap).
        Neg = "neg",
        /// Bitwise not (integers) or logical not (predicates).
        Not = "not",
        Exp = "exp",
        Exp2 = "exp2",
        Log = "log",
        Log2 = "log2",
        Log10 = "log10",
        Sqrt = "sqrt",
        /// `1 / sqrt(x)`.
        Rsqrt = "rsqrt",
        Sin = "sin",
        Cos = "cos",
        Tan = "tan",
        Tanh = "tanh",
        /// `1 / (1 + exp(-x))`.
        Sigmoid = "sigmoid",
        Erf = "erf",
        Floor = "floor",
        Ceil = "ceil",
        /// Round half to even.
        Round = "round",
        /// Round toward zero.
        Trunc = "trunc",
    }
}

impl UnaryOp {
    /// True for operations defined only on floats (everything but abs, neg, not).
    pub fn float_only(self) -> bool {
        !matches!(self, UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Not)
    }
}

named_enum! {
    /// Two-operand operations.
    BinaryOp {
        Add = "add",
        Sub = "sub",
        Mul = "mul",
        /// Integer division truncates; `x / 0 == x` and `MIN / -1 == MIN` (no trap).
        Div = "div",
        /// Remainder with the sign of the dividend; `x rem 0 == 0`. On floats, `fmod`.
        Rem = "rem",
        /// Minimum; for floats a NaN operand yields the other operand and -0 < +0.
        Min = "min",
        /// Maximum; for floats a NaN operand yields the other operand and -0 < +0.
        Max = "max",
        And = "and",
        Or = "or",
        Xor = "xor",
        /// Shift left; the amount is taken modulo the bit width.
        Shl = "shl",
        /// Shift right, arithmetic for signed types; the amount is taken modulo the bit width.
        Shr = "shr",
        /// `a` raised to `b` (floats).
        Pow = "pow",
    }
}

impl BinaryOp {
    /// True when `op(a, b) == op(b, a)` for every type the op accepts (used to order operands in
    /// canonical form).
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Min
                | BinaryOp::Max
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
        )
    }
}

named_enum! {
    /// Three-operand operations.
    TernaryOp {
        /// `a * b + c`, rounded twice for floats (never contracted), wrapping for integers.
        Mad = "mad",
        /// `a * b + c` rounded once (floats only).
        Fma = "fma",
    }
}

named_enum! {
    /// Comparisons for `setp`. For floats, every comparison with a NaN is false except `ne`.
    CmpOp {
        Eq = "eq",
        Ne = "ne",
        Lt = "lt",
        Le = "le",
        Gt = "gt",
        Ge = "ge",
    }
}

named_enum! {
    /// Read-modify-write operations of `atom`. Each returns the value held before the operation.
    AtomOp {
        Add = "add",
        Min = "min",
        Max = "max",
        /// Exchange: store the operand.
        Exch = "exch",
        /// Compare and swap: store the second operand if the element equals the first.
        Cas = "cas",
    }
}

named_enum! {
    /// The reach of a memory fence.
    FenceScope {
        /// Orders memory operations as seen by the lanes of the block.
        Block = "block",
        /// Orders memory operations as seen by the whole device.
        Device = "device",
    }
}

/// The operation of an instruction. `I` names registers, parameters, arrays and labels: `String`
/// in a [`crate::Program`], `u32` indices (labels resolved to instruction indices) in a validated
/// [`crate::Kernel`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // fields are the operands shown in each variant's syntax
pub enum Op<I> {
    /// `mov.T %d, a`
    Mov { ty: Type, dst: I, src: Operand<I> },
    /// `cvt.TO.FROM %d, a`: float to integer truncates toward zero and saturates (NaN gives 0);
    /// integer to integer wraps; everything else rounds to nearest even.
    Cvt {
        to: Type,
        from: Type,
        dst: I,
        src: Operand<I>,
    },
    /// `bitcast.TO.FROM %d, a`: the bits of `a` read as a value of `to`, a type of the same
    /// width (`mov.b32`-style reinterpretation, e.g. `bitcast.u32.f32` gives a float's bits).
    Bitcast {
        to: Type,
        from: Type,
        dst: I,
        src: Operand<I>,
    },
    /// `ld.T %d, array[index]`
    Ld { ty: Type, dst: I, mem: Mem<I> },
    /// `st.T array[index], a`
    St {
        ty: Type,
        mem: Mem<I>,
        src: Operand<I>,
    },
    /// `OP.T %d, a`
    Unary {
        op: UnaryOp,
        ty: Type,
        dst: I,
        src: Operand<I>,
    },
    /// `OP.T %d, a, b`
    Binary {
        op: BinaryOp,
        ty: Type,
        dst: I,
        a: Operand<I>,
        b: Operand<I>,
    },
    /// `OP.T %d, a, b, c`
    Ternary {
        op: TernaryOp,
        ty: Type,
        dst: I,
        a: Operand<I>,
        b: Operand<I>,
        c: Operand<I>,
    },
    /// `setp.CMP.T %p, a, b`
    Setp {
        cmp: CmpOp,
        ty: Type,
        dst: I,
        a: Operand<I>,
        b: Operand<I>,
    },
    /// `selp.T %d, a, b, p`: `p ? a : b`.
    Selp {
        ty: Type,
        dst: I,
        a: Operand<I>,
        b: Operand<I>,
        cond: Operand<I>,
    },
    /// `atom.OP.T %d, array[index], a` (and `, b` for `cas`): returns the previous value.
    Atom {
        op: AtomOp,
        ty: Type,
        dst: I,
        mem: Mem<I>,
        a: Operand<I>,
        b: Option<Operand<I>>,
    },
    /// `bra LABEL`
    Bra { target: I },
    /// `loop %c, LABEL`: decrement the integer register `%c`; branch if it is not zero.
    Loop { counter: I, target: I },
    /// `call LABEL`: run the subroutine at `LABEL` until its `ret`.
    Call { target: I },
    /// `ret`: return from a subroutine (at top level, ends the lane like `exit`).
    Ret,
    /// `exit`: end the lane.
    Exit,
    /// `barrier`: wait until every live lane of the block arrives.
    Barrier,
    /// `fence.SCOPE`: order memory operations.
    Fence { scope: FenceScope },
}

/// A predicate guard: `@%p` (run where `%p` is true) or `@!%p` (where it is false).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Guard<I> {
    /// The predicate register.
    pub pred: I,
    /// True for `@!%p`.
    pub negate: bool,
}

/// An instruction: an operation with an optional guard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Inst<I> {
    /// Lanes where the guard is false skip the instruction.
    pub guard: Option<Guard<I>>,
    /// What the instruction does.
    pub op: Op<I>,
}

impl<I> From<Op<I>> for Inst<I> {
    fn from(op: Op<I>) -> Self {
        Inst { guard: None, op }
    }
}

impl<I> Op<I> {
    /// The register this instruction writes, if any (`loop` writes its counter).
    pub fn dst(&self) -> Option<&I> {
        match self {
            Op::Mov { dst, .. }
            | Op::Cvt { dst, .. }
            | Op::Bitcast { dst, .. }
            | Op::Ld { dst, .. }
            | Op::Unary { dst, .. }
            | Op::Binary { dst, .. }
            | Op::Ternary { dst, .. }
            | Op::Setp { dst, .. }
            | Op::Selp { dst, .. }
            | Op::Atom { dst, .. } => Some(dst),
            Op::Loop { counter, .. } => Some(counter),
            _ => None,
        }
    }

    /// The type of the destination register, if the instruction writes one.
    pub fn dst_type(&self) -> Option<Type> {
        match self {
            Op::Mov { ty, .. }
            | Op::Ld { ty, .. }
            | Op::Unary { ty, .. }
            | Op::Binary { ty, .. }
            | Op::Ternary { ty, .. }
            | Op::Selp { ty, .. }
            | Op::Atom { ty, .. } => Some(*ty),
            Op::Cvt { to, .. } | Op::Bitcast { to, .. } => Some(*to),
            Op::Setp { .. } => Some(Type::Pred),
            _ => None,
        }
    }

    /// The source operands with the type each must have, in textual order. The index of a memory
    /// reference is reported with `None` (any integer type).
    pub fn sources(&self) -> Vec<(&Operand<I>, Option<Type>)> {
        match self {
            Op::Mov { ty, src, .. } | Op::Unary { ty, src, .. } => vec![(src, Some(*ty))],
            Op::Cvt { from, src, .. } | Op::Bitcast { from, src, .. } => {
                vec![(src, Some(*from))]
            }
            Op::Ld { mem, .. } => vec![(&mem.index, None)],
            Op::St { ty, mem, src } => vec![(&mem.index, None), (src, Some(*ty))],
            Op::Binary { ty, a, b, .. } => vec![(a, Some(*ty)), (b, Some(*ty))],
            Op::Ternary { ty, a, b, c, .. } => vec![(a, Some(*ty)), (b, Some(*ty)), (c, Some(*ty))],
            Op::Setp { ty, a, b, .. } => vec![(a, Some(*ty)), (b, Some(*ty))],
            Op::Selp { ty, a, b, cond, .. } => {
                vec![(a, Some(*ty)), (b, Some(*ty)), (cond, Some(Type::Pred))]
            }
            Op::Atom { ty, mem, a, b, .. } => {
                let mut v = vec![(&mem.index, None), (a, Some(*ty))];
                if let Some(b) = b {
                    v.push((b, Some(*ty)));
                }
                v
            }
            _ => Vec::new(),
        }
    }

    /// The array this instruction reads or writes, if any.
    pub fn mem(&self) -> Option<&Mem<I>> {
        match self {
            Op::Ld { mem, .. } | Op::St { mem, .. } | Op::Atom { mem, .. } => Some(mem),
            _ => None,
        }
    }

    /// The label this instruction may jump to, if any.
    pub fn target(&self) -> Option<&I> {
        match self {
            Op::Bra { target } | Op::Loop { target, .. } | Op::Call { target } => Some(target),
            _ => None,
        }
    }

    /// Maps every name inside the operation: `reg` for registers, `param` for parameters, `array`
    /// for arrays and `label` for labels.
    pub fn map<J>(
        &self,
        reg: &mut impl FnMut(&I) -> J,
        param: &mut impl FnMut(&I) -> J,
        array: &mut impl FnMut(&I) -> J,
        label: &mut impl FnMut(&I) -> J,
    ) -> Op<J> {
        match self {
            Op::Mov { ty, dst, src } => Op::Mov {
                ty: *ty,
                dst: reg(dst),
                src: src.map2(reg, param),
            },
            Op::Cvt { to, from, dst, src } => Op::Cvt {
                to: *to,
                from: *from,
                dst: reg(dst),
                src: src.map2(reg, param),
            },
            Op::Bitcast { to, from, dst, src } => Op::Bitcast {
                to: *to,
                from: *from,
                dst: reg(dst),
                src: src.map2(reg, param),
            },
            Op::Ld { ty, dst, mem } => Op::Ld {
                ty: *ty,
                dst: reg(dst),
                mem: mem.map2(reg, param, array),
            },
            Op::St { ty, mem, src } => Op::St {
                ty: *ty,
                mem: mem.map2(reg, param, array),
                src: src.map2(reg, param),
            },
            Op::Unary { op, ty, dst, src } => Op::Unary {
                op: *op,
                ty: *ty,
                dst: reg(dst),
                src: src.map2(reg, param),
            },
            Op::Binary { op, ty, dst, a, b } => Op::Binary {
                op: *op,
                ty: *ty,
                dst: reg(dst),
                a: a.map2(reg, param),
                b: b.map2(reg, param),
            },
            Op::Ternary {
                op,
                ty,
                dst,
                a,
                b,
                c,
            } => Op::Ternary {
                op: *op,
                ty: *ty,
                dst: reg(dst),
                a: a.map2(reg, param),
                b: b.map2(reg, param),
                c: c.map2(reg, param),
            },
            Op::Setp { cmp, ty, dst, a, b } => Op::Setp {
                cmp: *cmp,
                ty: *ty,
                dst: reg(dst),
                a: a.map2(reg, param),
                b: b.map2(reg, param),
            },
            Op::Selp {
                ty,
                dst,
                a,
                b,
                cond,
            } => Op::Selp {
                ty: *ty,
                dst: reg(dst),
                a: a.map2(reg, param),
                b: b.map2(reg, param),
                cond: cond.map2(reg, param),
            },
            Op::Atom {
                op,
                ty,
                dst,
                mem,
                a,
                b,
            } => Op::Atom {
                op: *op,
                ty: *ty,
                dst: reg(dst),
                mem: mem.map2(reg, param, array),
                a: a.map2(reg, param),
                b: b.as_ref().map(|b| b.map2(reg, param)),
            },
            Op::Bra { target } => Op::Bra {
                target: label(target),
            },
            Op::Loop { counter, target } => Op::Loop {
                counter: reg(counter),
                target: label(target),
            },
            Op::Call { target } => Op::Call {
                target: label(target),
            },
            Op::Ret => Op::Ret,
            Op::Exit => Op::Exit,
            Op::Barrier => Op::Barrier,
            Op::Fence { scope } => Op::Fence { scope: *scope },
        }
    }

    /// True when control never falls through to the next instruction.
    pub fn is_unconditional_jump(&self) -> bool {
        matches!(self, Op::Bra { .. } | Op::Ret | Op::Exit)
    }
}
