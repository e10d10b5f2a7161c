//! The validator accepts what backends can run and rejects the rest with a clear message.

use hologram_isa::{assemble, AsmError, ValidationErrorKind as K};

fn kernel(body: &str) -> String {
    format!(
        ".kernel k\n.param .buf.f32 x\n.param .buf.f32 y .rw\n.param .buf.u32 h .rw\n.param .u32 n\n.shared .f32 tile[256]\n{body}"
    )
}

fn rejects(body: &str) -> (String, K) {
    match assemble(&kernel(body)) {
        Err(AsmError::Invalid { message, error, .. }) => (message, error.kind),
        Err(AsmError::Parse(e)) => panic!("expected a validation error, got parse error {e}"),
        Ok(_) => panic!("expected a validation error for:\n{body}"),
    }
}

#[test]
fn accepts_a_tree_reduction() {
    let k = assemble(&kernel(
        "    mov.u32 %t, %tid.x;
    mov.u32 %i, %gid;
    ld.f32 %v, x[%i];
    st.f32 tile[%t], %v;
    barrier;
    shr.u32 %s, %ntid.x, 1;
TOP:
    setp.eq.u32 %done, %s, 0;
@%done bra END;
    setp.lt.u32 %active, %t, %s;
@!%active bra SKIP;
    add.u32 %o, %t, %s;
    ld.f32 %a, tile[%t];
    ld.f32 %b, tile[%o];
    add.f32 %a, %a, %b;
    st.f32 tile[%t], %a;
SKIP:
    barrier;
    shr.u32 %s, %s, 1;
    bra TOP;
END:
    setp.ne.u32 %first, %t, 0;
@%first exit;
    ld.f32 %r, tile[0];
    st.f32 y[%ctaid.x], %r;
",
    ))
    .unwrap();
    assert!(k.facts.uses_barrier);
    assert!(k.facts.zero_init.is_empty(), "{:?}", k.facts.zero_init);
}

#[test]
fn parse_errors_point_at_line_and_column() {
    let err = assemble(".kernel k\n    mov.u32 %a 1;\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "2:16: expected ',' after the destination, found '1'"
    );
    let err = assemble(".kernel k\n    frob.u32 %a, 1;\n").unwrap_err();
    assert_eq!(err.to_string(), "2:5: unknown instruction 'frob'");
}

#[test]
fn validation_errors_point_at_line_and_column() {
    let (msg, kind) = rejects("    bra NOWHERE;\n");
    assert_eq!(kind, K::UnknownLabel("NOWHERE".into()));
    assert!(msg.starts_with("7:5:"), "{msg}");
}

#[test]
fn rejects_unknown_names() {
    assert_eq!(
        rejects("    mov.u32 %a, m;\n").1,
        K::UnknownParam("m".into())
    );
    assert_eq!(
        rejects("    ld.f32 %a, z[0];\n").1,
        K::UnknownArray("z".into())
    );
    assert_eq!(
        rejects("    add.u32 %a, %b, 1;\n").1,
        K::UnwrittenRegister("b".into())
    );
}

#[test]
fn rejects_type_mismatches() {
    let (msg, _) = rejects("    mov.u32 %a, 1;\n    add.f32 %a, %a, 1.0;\n");
    assert!(msg.contains("%a is u32"), "{msg}");
    let (msg, _) = rejects("    mov.f32 %a, n;\n");
    assert!(msg.contains("n is u32, expected f32"), "{msg}");
    let (msg, _) = rejects("    ld.u32 %a, x[0];\n");
    assert!(msg.contains("'x' holds f32"), "{msg}");
    let (msg, _) = rejects("    mov.f32 %i, 1.0;\n    ld.f32 %a, x[%i];\n");
    assert!(msg.contains("expected an integer"), "{msg}");
    let (msg, _) = rejects("    mov.u32 %a, x;\n");
    assert!(
        msg.contains("buffer parameter 'x' used as a value"),
        "{msg}"
    );
    let (msg, _) = rejects("    sin.u32 %a, 1;\n");
    assert!(msg.contains("floats only"), "{msg}");
    let (msg, _) = rejects("    mov.u32 %a, 1.5;\n");
    assert!(msg.contains("float literal"), "{msg}");
    let (_, kind) = rejects("    mov.u8 %a, 256;\n");
    assert!(matches!(kind, K::ImmediateOutOfRange { .. }));
    let (_, kind) = rejects("    mov.f16 %a, 1e10;\n");
    assert!(matches!(kind, K::ImmediateOutOfRange { .. }));
    let (msg, _) = rejects("    mov.u32 %c, 1;\n@%c exit;\n");
    assert!(msg.contains("not pred"), "{msg}");
}

#[test]
fn rejects_writes_to_read_only_and_special() {
    assert_eq!(
        rejects("    st.f32 x[0], 1.0;\n").1,
        K::ReadOnlyWrite("x".into())
    );
    let (msg, _) = rejects("    atom.add.f32 %o, x[0], 1.0;\n");
    assert!(msg.contains("read-only"), "{msg}");
    // Writing a special register is a syntax error in text ...
    let err = assemble(&kernel("    mov.u32 %tid.x, 1;\n")).unwrap_err();
    assert!(
        err.to_string().contains("special registers are read-only"),
        "{err}"
    );
    // ... and a validation error for programs built in Rust.
    let mut b = hologram_isa::ProgramBuilder::new("k");
    b.mov(hologram_isa::Type::U32, "%tid", 1u32);
    let err = hologram_isa::validate(&b.finish()).unwrap_err();
    assert!(
        err.to_string().contains("special registers are read-only"),
        "{err}"
    );
}

#[test]
fn rejects_shared_memory_misuse() {
    let (_, kind) = rejects("    st.f32 tile[256], 1.0;\n");
    assert_eq!(
        kind,
        K::StaticIndexOutOfBounds {
            array: "tile".into(),
            index: 256,
            len: 256
        }
    );
    let err = assemble(".kernel k\n.shared .f64 big[8192]\n    exit;\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("65536 bytes declared, the limit is 49152"),
        "{err}"
    );
}

#[test]
fn rejects_barrier_in_divergent_code() {
    let (msg, kind) = rejects(
        "    setp.lt.u32 %p, %tid.x, 16;
@!%p bra SKIP;
    barrier;
SKIP:
    exit;
",
    );
    assert!(matches!(kind, K::DivergentBarrier { .. }), "{kind:?}");
    assert!(
        msg.starts_with("9:5:") && msg.contains("divergent branch is at 8:1"),
        "{msg}"
    );
    // Guarded barrier on a lane-dependent predicate.
    let (_, kind) = rejects("    setp.lt.u32 %p, %gid, 16;\n@%p barrier;\n");
    assert!(matches!(kind, K::DivergentBarrier { .. }));
    // Varying through a register chain and a loop counter.
    let (_, kind) = rejects(
        "    mov.u32 %c, %tid.x;
    add.u32 %c, %c, 1;
L:
    barrier;
    loop %c, L;
",
    );
    assert!(matches!(kind, K::DivergentBarrier { .. }));
    // A subroutine with a barrier called by some lanes only.
    let (msg, _) = rejects(
        "    setp.eq.u32 %p, %tid.x, 0;
@%p call SYNC;
    exit;
SYNC:
    barrier;
    ret;
",
    );
    assert!(
        msg.contains("called subroutine contains a barrier"),
        "{msg}"
    );
}

#[test]
fn accepts_barrier_after_uniform_branch() {
    // Branch on a parameter and on the block id: the same for every lane of a block.
    assemble(&kernel(
        "    setp.lt.u32 %p, %ctaid.x, n;
@%p bra SKIP;
    barrier;
SKIP:
    ld.f32 %v, x[0];
    setp.gt.f32 %q, %v, 0.0;
@%q bra END;
    barrier;
END:
    exit;
",
    ))
    .unwrap();
}

#[test]
fn rejects_recursion_and_measures_depth() {
    let (msg, kind) =
        rejects("    call F;\n    exit;\nF:\n    call G;\n    ret;\nG:\n    call F;\n    ret;\n");
    assert!(matches!(kind, K::Recursion(_)));
    assert!(msg.contains("F -> G -> F"), "{msg}");
    let k = assemble(&kernel(
        "    call F;\n    exit;\nF:\n    call G;\n    ret;\nG:\n    ret;\n",
    ))
    .unwrap();
    assert_eq!(k.facts.max_call_depth, 2);
}

#[test]
fn zero_init_lists_maybe_unwritten_reads() {
    let k = assemble(&kernel(
        "    setp.lt.u32 %p, %gid, n;
@%p mov.f32 %a, 1.0;
    st.f32 y[0], %a;
    mov.f32 %b, 2.0;
    st.f32 y[1], %b;
",
    ))
    .unwrap();
    let names: Vec<&str> = k
        .facts
        .zero_init
        .iter()
        .map(|&r| k.regs[r as usize].name.as_str())
        .collect();
    assert_eq!(names, vec!["a"]);
}

#[test]
fn zero_init_follows_calls() {
    let k = assemble(&kernel(
        "    call INIT;
    st.f32 y[0], %a;
    exit;
INIT:
    mov.f32 %a, 1.0;
    ret;
",
    ))
    .unwrap();
    assert!(k.facts.zero_init.is_empty(), "{:?}", k.facts.zero_init);
}

#[test]
fn atomics_types_and_spaces() {
    assemble(&kernel("    atom.add.u32 %o, h[0], 1;\n    atom.add.f32 %f, tile[0], 1.0;\n    atom.cas.u32 %c, h[1], 0, 1;\n")).unwrap();
    let (msg, _) = rejects("    atom.min.f32 %o, y[0], 1.0;\n");
    assert!(
        msg.contains("atomics take 32- and 64-bit integers"),
        "{msg}"
    );
}

#[test]
fn duplicate_and_reserved_names() {
    let err = assemble(".kernel k\n.param .u32 n\n.param .f32 n\n    exit;\n").unwrap_err();
    assert!(err.to_string().contains("'n' is declared twice"), "{err}");
    let err = assemble(".kernel k\nL:\nL:\n    exit;\n").unwrap_err();
    assert!(err.to_string().contains("'L' is declared twice"), "{err}");
    let err = assemble(".kernel k\n.param .u32 nan\n").unwrap_err();
    assert!(err.to_string().contains("reserved word"), "{err}");
}
