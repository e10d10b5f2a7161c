//! Writing programs from Rust.

use crate::inst::{AtomOp, BinaryOp, CmpOp, FenceScope, Guard, Inst, Op, TernaryOp, UnaryOp};
use crate::operand::{Imm, Mem, Operand, Special};
use crate::program::{ArrayDecl, Param, Program, RegDecl, Stmt};
use crate::types::Type;

/// Anything that can be a source operand: a register name (`"%a"`), a parameter name (`"n"`), a
/// [`Special`], or a number.
pub trait IntoOperand {
    /// Converts into an operand.
    fn into_operand(self) -> Operand<String>;
}

impl IntoOperand for Operand<String> {
    fn into_operand(self) -> Operand<String> {
        self
    }
}

impl IntoOperand for &str {
    /// `"%name"` is a register (or a special register such as `"%tid.x"`); any other text is a
    /// parameter name.
    fn into_operand(self) -> Operand<String> {
        match self.strip_prefix('%') {
            Some(r) => match Special::from_name(r) {
                Some(s) => Operand::Special(s),
                None => Operand::Reg(r.to_string()),
            },
            None => Operand::Param(self.to_string()),
        }
    }
}

impl IntoOperand for Special {
    fn into_operand(self) -> Operand<String> {
        Operand::Special(self)
    }
}

macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl IntoOperand for $t {
            fn into_operand(self) -> Operand<String> {
                Operand::Imm(Imm::Int(self as i128))
            }
        }
    )*};
}
int_operand!(i8, i16, i32, i64, u8, u16, u32, u64, usize, i128);

impl IntoOperand for f64 {
    fn into_operand(self) -> Operand<String> {
        Operand::Imm(Imm::Float(self))
    }
}

impl IntoOperand for f32 {
    fn into_operand(self) -> Operand<String> {
        Operand::Imm(Imm::Float(self as f64))
    }
}

impl IntoOperand for bool {
    fn into_operand(self) -> Operand<String> {
        Operand::Imm(Imm::Int(self as i128))
    }
}

impl IntoOperand for Imm {
    fn into_operand(self) -> Operand<String> {
        Operand::Imm(self)
    }
}

/// Builder methods for two-operand operations: `name => BinaryOp variant`.
macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),+ $(,)?) => {$(
        $(#[$doc])*
        pub fn $name(
            &mut self,
            ty: Type,
            dst: &str,
            a: impl IntoOperand,
            b: impl IntoOperand,
        ) -> &mut Self {
            self.binary(BinaryOp::$op, ty, dst, a, b)
        }
    )+};
}

fn reg_name(r: &str) -> String {
    r.strip_prefix('%').unwrap_or(r).to_string()
}

/// Builds a [`Program`] instruction by instruction. Registers are written `"%name"`; labels and
/// parameters by their names.
///
/// ```
/// use hologram_isa::{ProgramBuilder, Type, CmpOp, Special, validate};
///
/// let mut b = ProgramBuilder::new("saxpy");
/// b.scalar("alpha", Type::F32).buffer("x", Type::F32).buffer_rw("y", Type::F32).scalar("n", Type::U32);
/// b.mov(Type::U32, "%i", Special::GidLinear);
/// b.setp(CmpOp::Ge, Type::U32, "%p", "%i", "n");
/// b.guard("%p", false).exit();
/// b.ld(Type::F32, "%x", "x", "%i");
/// b.ld(Type::F32, "%y", "y", "%i");
/// b.fma(Type::F32, "%r", "alpha", "%x", "%y");
/// b.st(Type::F32, "y", "%i", "%r");
/// let kernel = validate(&b.finish())?;
/// assert_eq!(kernel.insts.len(), 7);
/// # Ok::<(), hologram_isa::ValidationError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ProgramBuilder {
    program: Program,
    guard: Option<Guard<String>>,
}

impl ProgramBuilder {
    /// Starts a kernel called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ProgramBuilder {
            program: Program {
                name: name.into(),
                ..Program::default()
            },
            guard: None,
        }
    }

    /// Declares a read-only buffer parameter.
    pub fn buffer(&mut self, name: &str, elem: Type) -> &mut Self {
        self.program.params.push(Param::buffer(name, elem));
        self
    }

    /// Declares a read-write buffer parameter.
    pub fn buffer_rw(&mut self, name: &str, elem: Type) -> &mut Self {
        self.program.params.push(Param::buffer_rw(name, elem));
        self
    }

    /// Declares a scalar parameter.
    pub fn scalar(&mut self, name: &str, ty: Type) -> &mut Self {
        self.program.params.push(Param::scalar(name, ty));
        self
    }

    /// Declares a block-shared array.
    pub fn shared(&mut self, name: &str, elem: Type, len: u32) -> &mut Self {
        self.program.shared.push(ArrayDecl {
            name: name.into(),
            elem,
            len,
        });
        self
    }

    /// Declares a per-lane scratch array.
    pub fn scratch(&mut self, name: &str, elem: Type, len: u32) -> &mut Self {
        self.program.scratch.push(ArrayDecl {
            name: name.into(),
            elem,
            len,
        });
        self
    }

    /// Declares a register explicitly.
    pub fn reg(&mut self, name: &str, ty: Type) -> &mut Self {
        self.program.regs.push(RegDecl {
            name: reg_name(name),
            ty,
        });
        self
    }

    /// Places a label before the next instruction.
    pub fn label(&mut self, name: &str) -> &mut Self {
        self.program.body.push(Stmt::Label(name.into()));
        self
    }

    /// Guards the next instruction with `@%p` (or `@!%p` when `negate`).
    pub fn guard(&mut self, pred: &str, negate: bool) -> &mut Self {
        self.guard = Some(Guard {
            pred: reg_name(pred),
            negate,
        });
        self
    }

    /// Appends any operation (taking the pending guard, if any).
    pub fn op(&mut self, op: Op<String>) -> &mut Self {
        let guard = self.guard.take();
        self.program.body.push(Stmt::Inst(Inst { guard, op }));
        self
    }

    /// `mov.T dst, src`
    pub fn mov(&mut self, ty: Type, dst: &str, src: impl IntoOperand) -> &mut Self {
        self.op(Op::Mov {
            ty,
            dst: reg_name(dst),
            src: src.into_operand(),
        })
    }

    /// `cvt.TO.FROM dst, src`
    pub fn cvt(&mut self, to: Type, from: Type, dst: &str, src: impl IntoOperand) -> &mut Self {
        self.op(Op::Cvt {
            to,
            from,
            dst: reg_name(dst),
            src: src.into_operand(),
        })
    }

    /// `bitcast.TO.FROM dst, src`: the bits of `src` as a value of `to` (same width).
    pub fn bitcast(&mut self, to: Type, from: Type, dst: &str, src: impl IntoOperand) -> &mut Self {
        self.op(Op::Bitcast {
            to,
            from,
            dst: reg_name(dst),
            src: src.into_operand(),
        })
    }

    /// `ld.T dst, array[index]`
    pub fn ld(&mut self, ty: Type, dst: &str, array: &str, index: impl IntoOperand) -> &mut Self {
        let mem = Mem {
            array: array.into(),
            index: index.into_operand(),
        };
        self.op(Op::Ld {
            ty,
            dst: reg_name(dst),
            mem,
        })
    }

    /// `st.T array[index], src`
    pub fn st(
        &mut self,
        ty: Type,
        array: &str,
        index: impl IntoOperand,
        src: impl IntoOperand,
    ) -> &mut Self {
        let mem = Mem {
            array: array.into(),
            index: index.into_operand(),
        };
        self.op(Op::St {
            ty,
            mem,
            src: src.into_operand(),
        })
    }

    /// A one-operand operation.
    pub fn unary(&mut self, op: UnaryOp, ty: Type, dst: &str, src: impl IntoOperand) -> &mut Self {
        self.op(Op::Unary {
            op,
            ty,
            dst: reg_name(dst),
            src: src.into_operand(),
        })
    }

    /// A two-operand operation.
    pub fn binary(
        &mut self,
        op: BinaryOp,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
    ) -> &mut Self {
        self.op(Op::Binary {
            op,
            ty,
            dst: reg_name(dst),
            a: a.into_operand(),
            b: b.into_operand(),
        })
    }

    /// `add.T dst, a, b`
    pub fn add(
        &mut self,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
    ) -> &mut Self {
        self.binary(BinaryOp::Add, ty, dst, a, b)
    }

    /// `mul.T dst, a, b`
    pub fn mul(
        &mut self,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
    ) -> &mut Self {
        self.binary(BinaryOp::Mul, ty, dst, a, b)
    }

    binary_methods! {
        /// `sub.T dst, a, b`
        sub => Sub,
        /// `div.T dst, a, b`
        div => Div,
        /// `rem.T dst, a, b`
        rem => Rem,
        /// `min.T dst, a, b`
        min => Min,
        /// `max.T dst, a, b`
        max => Max,
        /// `and.T dst, a, b`
        and => And,
        /// `or.T dst, a, b`
        or => Or,
        /// `xor.T dst, a, b`
        xor => Xor,
        /// `shl.T dst, a, b`
        shl => Shl,
        /// `shr.T dst, a, b`
        shr => Shr,
    }

    /// `mad.T dst, a, b, c` (floats: rounded twice)
    pub fn mad(
        &mut self,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
        c: impl IntoOperand,
    ) -> &mut Self {
        self.ternary(TernaryOp::Mad, ty, dst, a, b, c)
    }

    /// `fma.T dst, a, b, c`
    pub fn fma(
        &mut self,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
        c: impl IntoOperand,
    ) -> &mut Self {
        self.ternary(TernaryOp::Fma, ty, dst, a, b, c)
    }

    /// A three-operand operation.
    pub fn ternary(
        &mut self,
        op: TernaryOp,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
        c: impl IntoOperand,
    ) -> &mut Self {
        let (a, b, c) = (a.into_operand(), b.into_operand(), c.into_operand());
        self.op(Op::Ternary {
            op,
            ty,
            dst: reg_name(dst),
            a,
            b,
            c,
        })
    }

    /// `setp.CMP.T dst, a, b`
    pub fn setp(
        &mut self,
        cmp: CmpOp,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
    ) -> &mut Self {
        self.op(Op::Setp {
            cmp,
            ty,
            dst: reg_name(dst),
            a: a.into_operand(),
            b: b.into_operand(),
        })
    }

    /// `selp.T dst, a, b, cond`
    pub fn selp(
        &mut self,
        ty: Type,
        dst: &str,
        a: impl IntoOperand,
        b: impl IntoOperand,
        cond: impl IntoOperand,
    ) -> &mut Self {
        let (a, b, cond) = (a.into_operand(), b.into_operand(), cond.into_operand());
        self.op(Op::Selp {
            ty,
            dst: reg_name(dst),
            a,
            b,
            cond,
        })
    }

    /// `atom.OP.T dst, array[index], a` (pass `b` for `cas`).
    #[allow(clippy::too_many_arguments)]
    pub fn atom(
        &mut self,
        op: AtomOp,
        ty: Type,
        dst: &str,
        array: &str,
        index: impl IntoOperand,
        a: impl IntoOperand,
        b: Option<Operand<String>>,
    ) -> &mut Self {
        let mem = Mem {
            array: array.into(),
            index: index.into_operand(),
        };
        self.op(Op::Atom {
            op,
            ty,
            dst: reg_name(dst),
            mem,
            a: a.into_operand(),
            b,
        })
    }

    /// `bra LABEL`
    pub fn bra(&mut self, label: &str) -> &mut Self {
        self.op(Op::Bra {
            target: label.into(),
        })
    }

    /// `loop %counter, LABEL`
    pub fn loop_(&mut self, counter: &str, label: &str) -> &mut Self {
        self.op(Op::Loop {
            counter: reg_name(counter),
            target: label.into(),
        })
    }

    /// `call LABEL`
    pub fn call(&mut self, label: &str) -> &mut Self {
        self.op(Op::Call {
            target: label.into(),
        })
    }

    /// `ret`
    pub fn ret(&mut self) -> &mut Self {
        self.op(Op::Ret)
    }

    /// `exit`
    pub fn exit(&mut self) -> &mut Self {
        self.op(Op::Exit)
    }

    /// `barrier`
    pub fn barrier(&mut self) -> &mut Self {
        self.op(Op::Barrier)
    }

    /// `fence.SCOPE`
    pub fn fence(&mut self, scope: FenceScope) -> &mut Self {
        self.op(Op::Fence { scope })
    }

    /// The program built so far.
    pub fn finish(&self) -> Program {
        self.program.clone()
    }
}
