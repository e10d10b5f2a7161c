//! Canonicalization settles, or leaves a kernel unsimplified, so that it is idempotent; and
//! chains of dead code go in one round (found by tests/fuzz_assemble.rs in hologram-backends).

fn canonical_text(text: &str) -> (String, usize) {
    let k = hologram_isa::assemble(text).unwrap();
    let (c, red) = hologram_compiler::canonicalize(&k);
    (hologram_isa::print(&c.to_program()), red.after)
}

fn assert_idempotent(text: &str) -> String {
    let (once, _) = canonical_text(text);
    let (twice, _) = canonical_text(&once);
    assert_eq!(once, twice);
    once
}

#[test]
fn a_long_chain_of_dead_updates_goes_at_once() {
    // %z is never stored: every add is dead, although each reads the one before.
    let mut text = String::from(".kernel k\n.param .buf.u32 y .rw\n    mov.u32 %z, %gid;\n");
    for _ in 0..100 {
        text.push_str("    add.u32 %z, %z, 1;\n");
    }
    text.push_str("    st.u32 y[%gid], 5;\n");
    let out = assert_idempotent(&text);
    assert!(!out.contains("add.u32"), "{out}");
}

#[test]
fn dead_updates_across_subroutines_go_at_once() {
    let mut text = String::from(
        ".kernel k\n.param .buf.u32 y .rw\n    call F0;\n    st.u32 y[%gid], 1;\n    exit;\n",
    );
    for k in 0..40 {
        text.push_str(&format!("F{k}:\n    add.u32 %z, %z, 1;\n"));
        if k < 39 {
            text.push_str(&format!("    call F{};\n", k + 1));
        }
        text.push_str("    ret;\n");
    }
    let out = assert_idempotent(&text);
    assert!(!out.contains("add.u32"), "{out}");
}

/// `branches` guarded branches to one join: each becomes removable only once the one after it
/// (and the `setp` feeding it) is gone, one per round.
fn branches_to_a_join(branches: usize) -> String {
    let mut text = String::from(".kernel k\n.param .buf.u32 y .rw\n    mov.u32 %v, %gid;\n");
    for d in 0..branches {
        text.push_str(&format!("    setp.lt.u32 %p, %tid.x, {d};\n@%p bra J;\n"));
    }
    text.push_str("J:\n    st.u32 y[%gid], %v;\n");
    text
}

#[test]
fn a_kernel_that_does_not_settle_is_only_renamed() {
    let text = branches_to_a_join(hologram_compiler::MAX_ROUNDS + 8);
    let before = hologram_isa::assemble(&text).unwrap().insts.len();
    let (_, after) = canonical_text(&text);
    assert_eq!(after, before);
    assert_idempotent(&text);
    // A short chain settles, and the branches disappear.
    let out = assert_idempotent(&branches_to_a_join(4));
    assert!(!out.contains("bra"), "{out}");
}
