//! Hostile programs: deep call chains, long cycles, overlapping subroutines, huge literals,
//! bytes that are not UTF-8. Each is validated or rejected with a located message; none may
//! overflow the stack or take long (no timing is asserted: a quadratic pass would show as a
//! test that never ends).

use hologram_isa::{assemble, assemble_bytes, AsmError, ValidationErrorKind as K, MAX_CALL_DEPTH};

/// `depth` subroutines, each adding one and calling the next.
fn call_chain(depth: usize) -> String {
    let mut s = String::from(
        ".kernel chain\n.param .buf.u32 y .rw\n    mov.u32 %a, 0;\n    call F0;\n    st.u32 y[%gid], %a;\n    exit;\n",
    );
    for k in 0..depth {
        s.push_str(&format!("F{k}:\n    add.u32 %a, %a, 1;\n"));
        if k + 1 < depth {
            s.push_str(&format!("    call F{};\n", k + 1));
        }
        s.push_str("    ret;\n");
    }
    s
}

fn invalid(text: &str) -> (String, K) {
    match assemble(text) {
        Err(AsmError::Invalid { message, error, .. }) => (message, error.kind),
        Err(AsmError::Parse(e)) => panic!("expected a validation error, got {e}"),
        Ok(_) => panic!("expected a validation error"),
    }
}

#[test]
fn a_chain_at_the_call_depth_limit_validates() {
    let k = assemble(&call_chain(MAX_CALL_DEPTH as usize)).unwrap();
    assert_eq!(k.facts.max_call_depth, MAX_CALL_DEPTH);
}

#[test]
fn a_50000_deep_chain_is_rejected_at_the_call_one_too_deep() {
    let text = call_chain(50_000);
    let (message, kind) = invalid(&text);
    assert!(
        matches!(kind, K::CallDepth { depth: 50_000, limit, .. } if limit == MAX_CALL_DEPTH),
        "{kind:?}"
    );
    // The call that makes nesting 65 deep is `call F64;` inside F63.
    let line = text
        .lines()
        .position(|l| l.trim() == format!("call F{};", MAX_CALL_DEPTH))
        .unwrap()
        + 1;
    assert!(
        message.starts_with(&format!(
            "{line}:5: calls nest 50000 deep (the kernel entry -> F0"
        )),
        "{message}"
    );
    assert!(message.contains("-> F64)"), "{message}");
    assert!(message.len() < 400, "{message}");
}

#[test]
fn a_long_recursive_cycle_is_reported_briefly() {
    // F0 -> F1 -> ... -> F9999 -> F0.
    let mut text = call_chain(10_000);
    text = text.replacen(
        "    add.u32 %a, %a, 1;\n    ret;\n",
        "    add.u32 %a, %a, 1;\n    call F0;\n    ret;\n",
        1,
    );
    let text = text.replace(
        "F9999:\n    add.u32 %a, %a, 1;\n    ret;",
        "F9999:\n    add.u32 %a, %a, 1;\n    call F0;\n    ret;",
    );
    let (message, kind) = invalid(&text);
    assert!(matches!(kind, K::Recursion(_)), "{kind:?}");
    assert!(
        message.contains(
            "F0 -> F1 -> F2 -> F3 -> ... (9993 more) ... -> F9997 -> F9998 -> F9999 -> F0"
        ),
        "{message}"
    );
}

#[test]
fn subroutines_that_fall_into_each_other_are_bounded() {
    // 20,000 entry points into one straight run: each body is the whole rest of the run.
    let n = 20_000;
    let mut text = String::from(".kernel k\n.param .buf.u32 y .rw\n");
    for k in 0..n {
        text.push_str(&format!("    call E{k};\n"));
    }
    text.push_str("    exit;\n");
    for k in 0..n {
        text.push_str(&format!("E{k}:\n    add.u32 %a, %a, 1;\n"));
    }
    text.push_str("    st.u32 y[0], %a;\n    ret;\n");
    let (message, kind) = invalid(&text);
    assert!(matches!(kind, K::SharedCode { .. }), "{kind:?}");
    assert!(message.contains("shares too much code"), "{message}");
    // A few overlapping entries are fine.
    let few = text.replace("    call E", "    // call E");
    let few = few.replacen("    // call E0;", "    call E0;", 1).replacen(
        "    // call E1;",
        "    call E1;",
        1,
    );
    assemble(&few).unwrap();
}

#[test]
fn the_first_error_in_the_text_wins() {
    // A bad character after a syntax error: the syntax error is first.
    let err = assemble(".kernel k\n    add.u32 %a 1;\n    $\n").unwrap_err();
    assert!(err.to_string().starts_with("2:16: expected ','"), "{err}");
    // A bad character before one: the character.
    let err = assemble(".kernel k\n    $\n    add.u32 %a 1;\n").unwrap_err();
    assert!(
        err.to_string().starts_with("2:5: unexpected character '$'"),
        "{err}"
    );
    // A bad character where a program could end.
    let err = assemble(".kernel k\n    exit;\n$").unwrap_err();
    assert!(
        err.to_string().starts_with("3:1: unexpected character"),
        "{err}"
    );
}

#[test]
fn memory_limits_point_at_the_declaration_that_goes_over() {
    let text =
        ".kernel k\n.shared .f32 a[8192]\n.shared .f32 b[8192]\n.scratch .u8 c[100]\n    exit;\n";
    let (message, kind) = invalid(text);
    assert!(
        matches!(
            kind,
            K::MemoryLimit {
                space: ".shared",
                ..
            }
        ),
        "{kind:?}"
    );
    assert!(
        message.starts_with("3:1: .shared memory: 65536 bytes"),
        "{message}"
    );
    let text = ".kernel k\n.scratch .u32 a[4000]\n.scratch .u32 b[97]\n    exit;\n";
    let (message, _) = invalid(text);
    assert!(
        message.starts_with("3:1: .scratch memory: 16388 bytes"),
        "{message}"
    );
    // A declaration whose size overflows arithmetic is just over the limit.
    let text = ".kernel k\n.shared .f64 a[4294967295]\n    exit;\n";
    let (message, _) = invalid(text);
    assert!(message.starts_with("2:1: .shared memory"), "{message}");
}

#[test]
fn declaration_counts_are_bounded_at_the_declaration_that_goes_over() {
    use hologram_isa::{MAX_ARRAYS, MAX_PARAMS, MAX_REGISTERS};
    let n = 100_000;
    // (declaration, after its number, limit, what the message names, column of the position)
    let cases = [
        (".param .u32 p", "", MAX_PARAMS, "parameters", 1),
        (".reg .u32 %r", "", MAX_REGISTERS, "registers", 11),
        (".shared .u8 s", "[1]", MAX_ARRAYS, ".shared arrays", 1),
        (".scratch .u8 s", "[1]", MAX_ARRAYS, ".scratch arrays", 1),
    ];
    for (decl, suffix, limit, what, col) in cases {
        let mut text = String::from(".kernel k\n");
        for i in 0..n {
            text.push_str(&format!("{decl}{i}{suffix}\n"));
        }
        text.push_str("    exit;\n");
        let (message, kind) = invalid(&text);
        assert!(matches!(kind, K::TooLarge { .. }), "{kind:?}");
        // Line 1 is `.kernel`: declaration `limit + 1` is on line `limit + 2`.
        let expect = format!("{}:{col}: more than {limit} {what}", limit + 2);
        assert!(message.starts_with(&expect), "{message}");
    }
    // Registers an instruction creates count too, at the instruction.
    let mut text = String::from(".kernel k\n");
    for i in 0..=MAX_REGISTERS {
        text.push_str(&format!("    mov.u32 %r{i}, {i};\n"));
    }
    let (message, _) = invalid(&text);
    let expect = format!(
        "{}:5: more than {MAX_REGISTERS} registers",
        MAX_REGISTERS + 2
    );
    assert!(message.starts_with(&expect), "{message}");
}

#[test]
fn kernel_errors_point_at_the_kernel_name() {
    let (_, map) =
        hologram_isa::parse_with_source_map("// a comment first\n.kernel k\n    exit;\n").unwrap();
    assert_eq!(hologram_isa::Location::Kernel.position(&map), Some((2, 9)));
}

#[test]
fn an_error_outside_the_source_map_points_at_the_kernel() {
    // A program built in Rust and rendered against another text's map: the location is not in
    // the map, and the message still starts with a position (the `.kernel` name).
    let map = hologram_isa::SourceMap {
        kernel: Some((2, 9)),
        ..Default::default()
    };
    let error = hologram_isa::ValidationError {
        location: hologram_isa::Location::Stmt(5),
        kind: K::Invalid("x".into()),
    };
    assert_eq!(error.position(&map), (2, 9));
    assert_eq!(error.render(&map), "2:9: x");
    let bare = hologram_isa::SourceMap::default();
    assert_eq!(error.render(&bare), "1:1: x");
}

#[test]
fn text_that_is_not_utf8_is_located_by_byte() {
    let bytes = b".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[0], \xe9;\n";
    let err = assemble_bytes(bytes).unwrap_err();
    let AsmError::Parse(e) = &err else {
        panic!("{err}")
    };
    assert_eq!((e.line, e.col), (3, 18));
    assert_eq!(err.position(), (3, 18));
    assert!(e.message.contains("byte 49 (0xe9)"), "{err}");
    // Multi-byte characters before the bad byte count as one column each.
    let mut bytes = ".kernel k\n// é ü\n\u{1F600}".as_bytes().to_vec();
    bytes.push(0x80);
    let err = assemble_bytes(&bytes).unwrap_err();
    assert!(err.to_string().starts_with("3:2:"), "{err}");
    assert!(assemble_bytes(b".kernel k\n    exit;\n").is_ok());
}

#[test]
fn huge_literals_and_names_are_rejected_with_a_position() {
    // A 2 MB number with exponent signs all along it lexes in linear time.
    let literal = format!("1{}", "e-".repeat(1 << 20));
    let text = format!(".kernel k\n.param .buf.f32 y .rw\n    st.f32 y[0], {literal};\n");
    let err = assemble(&text).unwrap_err();
    assert!(
        err.to_string().starts_with("3:18: malformed number"),
        "{}",
        &err.to_string()[..80]
    );
    // A 1 MB digit string does not fit any type.
    let digits = "9".repeat(1 << 20);
    let text = format!(".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[0], {digits};\n");
    assert!(assemble(&text).unwrap_err().to_string().starts_with("3:"));
    // A 1 MB label name is just a name; an unknown one is quoted briefly.
    let name = "L".repeat(1 << 20);
    let text = format!(".kernel k\n    bra {name};\n{name}:\n    exit;\n");
    assemble(&text).unwrap();
    let text = format!(".kernel k\n    bra {name};\n    exit;\n");
    let err = assemble(&text).unwrap_err().to_string();
    assert!(
        err.starts_with("2:5: unknown label") && err.len() < 400,
        "{err}"
    );
}
