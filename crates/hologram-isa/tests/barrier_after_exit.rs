//! Lanes that exit are not waited for at a barrier, so a barrier after a divergent branch in
//! which some lanes exit is valid; a barrier that lanes still alive may skip is not.

use hologram_isa::{assemble, AsmError, ValidationErrorKind};

const HEAD: &str = ".kernel k\n.param .buf.u32 y .rw\n.shared .u32 t[64]\n";

#[test]
fn a_barrier_after_a_branch_that_exits_some_lanes_is_valid() {
    // The branch depends on %tid.x; lanes that take it may exit, the rest meet at END.
    let body = "    and.u32 %odd, %tid.x, 1;\n    setp.eq.u32 %p, %odd, 0;\n@%p bra END;\n    setp.gt.u32 %q, %tid.x, 8;\n@%q exit;\n    st.u32 y[%tid.x], 1;\nEND:\n    st.u32 t[%tid.x], %tid.x;\n    barrier;\n    ld.u32 %v, t[0];\n    st.u32 y[%tid.x], %v;\n";
    assemble(&format!("{HEAD}{body}")).expect("valid");
    // An if/else whose then-side always exits.
    let body = "    setp.lt.u32 %p, %tid.x, 4;\n@!%p bra ELSE;\n    exit;\nELSE:\n    barrier;\n    st.u32 y[%tid.x], 2;\n";
    assemble(&format!("{HEAD}{body}")).expect("valid");
}

#[test]
fn a_barrier_that_live_lanes_skip_is_still_rejected() {
    let body = "    setp.lt.u32 %p, %tid.x, 4;\n@%p bra SKIP;\n    barrier;\nSKIP:\n    st.u32 y[%tid.x], 2;\n";
    match assemble(&format!("{HEAD}{body}")) {
        Err(AsmError::Invalid { error, .. }) => {
            assert!(matches!(
                error.kind,
                ValidationErrorKind::DivergentBarrier { .. }
            ))
        }
        other => panic!("expected a divergent barrier, got {other:?}"),
    }
}

#[test]
fn a_guarded_ret_at_the_top_level_ends_lanes_like_exit() {
    let body = "    setp.lt.u32 %p, %tid.x, 4;\n@%p bra END;\n    setp.gt.u32 %q, %tid.x, 9;\n@%q ret;\nEND:\n    barrier;\n    st.u32 y[%tid.x], 2;\n";
    assemble(&format!("{HEAD}{body}")).expect("valid");
    // In a subroutine, ret returns to the caller: lanes that skip the barrier go on running.
    let body = "    call SUB;\n    exit;\nSUB:\n    setp.lt.u32 %p, %tid.x, 4;\n@%p ret;\n    barrier;\n    ret;\n";
    match assemble(&format!("{HEAD}{body}")) {
        Err(AsmError::Invalid { error, .. }) => {
            assert!(matches!(
                error.kind,
                ValidationErrorKind::DivergentBarrier { .. }
            ))
        }
        other => panic!("expected a divergent barrier, got {other:?}"),
    }
}
