//! `bitcast.TO.FROM`: reinterpreting bits between types of one width.

use hologram_isa::semantics::{eval, Value};
use hologram_isa::{assemble, parse, print, AsmError, ProgramBuilder, Type, ValidationErrorKind};

const TYPES: [Type; 12] = [
    Type::I8,
    Type::U8,
    Type::I16,
    Type::U16,
    Type::F16,
    Type::BF16,
    Type::I32,
    Type::U32,
    Type::F32,
    Type::I64,
    Type::U64,
    Type::F64,
];

fn program(to: Type, from: Type) -> String {
    format!(
        ".kernel k\n.param .buf.{from} x\n.param .buf.{to} y .rw\n    ld.{from} %a, x[%gid];\n    bitcast.{to}.{from} %b, %a;\n    st.{to} y[%gid], %b;\n"
    )
}

#[test]
fn every_pair_of_one_width_validates_and_round_trips() {
    for to in TYPES {
        for from in TYPES {
            let text = program(to, from);
            let result = assemble(&text);
            if to.bits() == from.bits() {
                result.unwrap_or_else(|e| panic!("{to} <- {from}: {e}"));
                let p = parse(&text).expect("parses");
                assert_eq!(parse(&print(&p)).expect("reparses"), p);
                assert!(print(&p).contains(&format!("bitcast.{to}.{from} %b, %a;")));
            } else {
                match result {
                    Err(AsmError::Invalid { message, error, .. }) => {
                        assert!(
                            matches!(error.kind, ValidationErrorKind::TypeMismatch(_)),
                            "{message}"
                        );
                        assert!(message.contains("same width"), "{message}");
                        assert!(message.starts_with("5:5:"), "{message}");
                    }
                    other => panic!("{to} <- {from}: expected a validation error, got {other:?}"),
                }
            }
        }
    }
}

#[test]
fn predicates_and_malformed_mnemonics_are_rejected() {
    let text = ".kernel k\n.param .buf.u32 y .rw\n    setp.eq.u32 %p, %gid, 0;\n    bitcast.u8.pred %b, %p;\n";
    let err = assemble(text).expect_err("pred has no bits");
    assert!(err.to_string().contains("predicate"), "{err}");
    let err = assemble(".kernel k\n    bitcast.u32 %b, 1;\n").expect_err("one type");
    assert!(err.to_string().contains("bitcast.TO.FROM"), "{err}");
}

#[test]
fn builder_writes_the_same_program() {
    let mut b = ProgramBuilder::new("k");
    b.buffer("x", Type::F32).buffer_rw("y", Type::U32);
    b.ld(Type::F32, "%a", "x", hologram_isa::Special::GidLinear);
    b.bitcast(Type::U32, Type::F32, "%b", "%a");
    b.st(Type::U32, "y", hologram_isa::Special::GidLinear, "%b");
    assert_eq!(b.finish(), parse(&program(Type::U32, Type::F32)).unwrap());
}

#[test]
fn semantics_keep_every_bit() {
    let nan = Value::F32(f32::from_bits(0x7f80_0001)); // a signalling NaN
    assert_eq!(eval::bitcast(nan, Type::U32), Some(Value::U32(0x7f80_0001)));
    assert_eq!(
        eval::bitcast(Value::U16(0x7c01), Type::F16).map(|v| v.to_bits()),
        Some(0x7c01)
    );
    assert_eq!(
        eval::bitcast(Value::I8(-1), Type::U8),
        Some(Value::U8(0xff))
    );
    assert_eq!(
        eval::bitcast(Value::F64(-0.0), Type::I64),
        Some(Value::I64(i64::MIN))
    );
    assert_eq!(
        eval::bitcast(Value::F16(half::f16::ONE), Type::BF16).map(|v| v.to_bits()),
        Some(0x3c00)
    );
    assert_eq!(eval::bitcast(Value::U32(1), Type::U64), None);
}
