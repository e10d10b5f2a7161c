//! Property tests of the text format: print -> parse -> print is stable, and no input, however
//! malformed, makes the parser or the validator panic.

use hologram_isa::*;
use proptest::prelude::*;

fn ident() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,6}".prop_filter("reserved", |s| {
        !["inf", "nan", "true", "false"].contains(&s.as_str())
    })
}

fn reg() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_]{1,5}".prop_filter("special", |s| !Special::is_reserved(s))
}

fn ty() -> impl Strategy<Value = Type> {
    prop::sample::select(Type::ALL.to_vec())
}

fn imm() -> impl Strategy<Value = Imm> {
    prop_oneof![
        any::<i64>().prop_map(|v| Imm::Int(v as i128)),
        any::<u64>().prop_map(|v| Imm::Int(v as i128)),
        any::<f64>().prop_map(Imm::Float),
        any::<u64>().prop_map(|b| Imm::Float(f64::from_bits(b))),
        Just(Imm::Float(f64::NAN)),
        Just(Imm::Float(-f64::NAN)),
        Just(Imm::Float(f64::INFINITY)),
        Just(Imm::Float(-0.0)),
    ]
}

fn operand() -> impl Strategy<Value = Operand<String>> {
    prop_oneof![
        reg().prop_map(Operand::Reg),
        ident().prop_map(Operand::Param),
        imm().prop_map(Operand::Imm),
        prop::sample::select(Special::all()).prop_map(Operand::Special),
    ]
}

fn mem() -> impl Strategy<Value = Mem<String>> {
    (ident(), operand()).prop_map(|(array, index)| Mem { array, index })
}

fn op() -> impl Strategy<Value = Op<String>> {
    prop_oneof![
        (ty(), reg(), operand()).prop_map(|(ty, dst, src)| Op::Mov { ty, dst, src }),
        (ty(), ty(), reg(), operand()).prop_map(|(to, from, dst, src)| Op::Cvt {
            to,
            from,
            dst,
            src
        }),
        (ty(), ty(), reg(), operand()).prop_map(|(to, from, dst, src)| Op::Bitcast {
            to,
            from,
            dst,
            src
        }),
        (ty(), reg(), mem()).prop_map(|(ty, dst, mem)| Op::Ld { ty, dst, mem }),
        (ty(), mem(), operand()).prop_map(|(ty, mem, src)| Op::St { ty, mem, src }),
        (prop::sample::select(UnaryOp::ALL), ty(), reg(), operand())
            .prop_map(|(op, ty, dst, src)| Op::Unary { op, ty, dst, src }),
        (
            prop::sample::select(BinaryOp::ALL),
            ty(),
            reg(),
            operand(),
            operand()
        )
            .prop_map(|(op, ty, dst, a, b)| Op::Binary { op, ty, dst, a, b }),
        (
            prop::sample::select(TernaryOp::ALL),
            ty(),
            reg(),
            operand(),
            operand(),
            operand()
        )
            .prop_map(|(op, ty, dst, a, b, c)| Op::Ternary {
                op,
                ty,
                dst,
                a,
                b,
                c
            }),
        (
            prop::sample::select(CmpOp::ALL),
            ty(),
            reg(),
            operand(),
            operand()
        )
            .prop_map(|(cmp, ty, dst, a, b)| Op::Setp { cmp, ty, dst, a, b }),
        (ty(), reg(), operand(), operand(), operand()).prop_map(|(ty, dst, a, b, cond)| Op::Selp {
            ty,
            dst,
            a,
            b,
            cond
        }),
        (
            prop::sample::select(AtomOp::ALL),
            ty(),
            reg(),
            mem(),
            operand(),
            operand()
        )
            .prop_map(|(op, ty, dst, mem, a, b)| {
                let b = (op == AtomOp::Cas).then_some(b);
                Op::Atom {
                    op,
                    ty,
                    dst,
                    mem,
                    a,
                    b,
                }
            }),
        ident().prop_map(|target| Op::Bra { target }),
        (reg(), ident()).prop_map(|(counter, target)| Op::Loop { counter, target }),
        ident().prop_map(|target| Op::Call { target }),
        Just(Op::Ret),
        Just(Op::Exit),
        Just(Op::Barrier),
        prop::sample::select(FenceScope::ALL).prop_map(|scope| Op::Fence { scope }),
    ]
}

fn stmt() -> impl Strategy<Value = Stmt> {
    prop_oneof![
        1 => ident().prop_map(Stmt::Label),
        6 => (prop::option::of((reg(), any::<bool>())), op()).prop_map(|(g, op)| {
            let guard = g.map(|(pred, negate)| Guard { pred, negate });
            Stmt::Inst(Inst { guard, op })
        }),
    ]
}

fn program() -> impl Strategy<Value = Program> {
    let param = (ident(), ty(), 0..3u8).prop_map(|(name, t, k)| match k {
        0 => Param::scalar(name, t),
        1 => Param::buffer(name, t),
        _ => Param::buffer_rw(name, t),
    });
    let array =
        || (ident(), ty(), 1..1000u32).prop_map(|(name, elem, len)| ArrayDecl { name, elem, len });
    (
        ident(),
        prop::collection::vec(param, 0..4),
        prop::collection::vec(array(), 0..2),
        prop::collection::vec(array(), 0..2),
        prop::collection::vec(
            (reg(), ty()).prop_map(|(name, ty)| RegDecl { name, ty }),
            0..3,
        ),
        prop::collection::vec(stmt(), 0..24),
    )
        .prop_map(|(name, params, shared, scratch, regs, body)| Program {
            name,
            params,
            shared,
            scratch,
            regs,
            body,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn print_parse_print_is_stable(p in program()) {
        let text = print(&p);
        let parsed = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&parsed, &p);
        prop_assert_eq!(print(&parsed), text);
    }

    #[test]
    fn validator_never_panics(p in program()) {
        let _ = validate(&p);
    }

    #[test]
    fn random_text_never_panics(text in "[ -~\n\t]{0,200}") {
        if let Err(e) = assemble(&text) {
            // Every rejection says where.
            let (line, col) = e.position();
            let prefix = format!("{line}:{col}: ");
            prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
        }
    }

    #[test]
    fn mutated_programs_never_panic(p in program(), cuts in prop::collection::vec((any::<prop::sample::Index>(), "[ -~\n]{0,3}"), 1..4)) {
        let mut text: Vec<char> = print(&p).chars().collect();
        for (at, insert) in cuts {
            if text.is_empty() { break; }
            let i = at.index(text.len());
            let end = (i + 2).min(text.len());
            text.splice(i..end, insert.chars());
        }
        let text: String = text.into_iter().collect();
        if let Ok(kernel) = assemble(&text) {
            // Anything that validates prints and re-assembles to the same kernel.
            let again = assemble(&print(&kernel.to_program())).expect("re-assemble");
            prop_assert_eq!(again, kernel);
        }
    }
}
