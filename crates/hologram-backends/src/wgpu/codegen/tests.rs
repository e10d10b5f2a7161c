//! The generated WGSL of every conformance kernel and README example parses and validates
//! with naga (the WGSL front end wgpu uses), with and without 64-bit features.

use std::path::PathBuf;

use super::*;

fn conformance_kernels() -> Vec<(String, Kernel)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("conformance folder") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("hasm") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let kernel = hologram_isa::assemble(&text).expect("assemble");
        out.push((path.display().to_string(), kernel));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn validate(wgsl: &str, wide: bool) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let mut caps = naga::valid::Capabilities::default();
    caps |= naga::valid::Capabilities::SUBGROUP;
    if wide {
        caps |= naga::valid::Capabilities::SHADER_INT64
            | naga::valid::Capabilities::FLOAT64
            | naga::valid::Capabilities::SHADER_INT64_ATOMIC_ALL_OPS
            | naga::valid::Capabilities::SHADER_INT64_ATOMIC_MIN_MAX;
    }
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .map(|_| ())
        .map_err(|e| e.emit_to_string(wgsl))
}

fn options(block: [u32; 3], wide: bool) -> CodegenOptions {
    CodegenOptions {
        int64: wide,
        float64: wide,
        int64_atomics: wide,
        max_storage_buffers: 96,
        ..CodegenOptions::core(block)
    }
}

#[test]
fn conformance_kernels_generate_valid_wgsl() {
    let mut failures = Vec::new();
    let mut generated = 0;
    let mut maps = 0;
    for (wide, fast) in [(false, false), (true, false), (false, true), (true, true)] {
        for (name, kernel) in conformance_kernels() {
            let opts = CodegenOptions {
                vector_map: fast,
                subgroups: fast,
                ..options([64, 1, 1], wide)
            };
            match generate(&kernel, &opts) {
                Ok(g) => {
                    generated += 1;
                    maps += usize::from(g.vector_map);
                    if let Err(e) = validate(&g.wgsl, wide) {
                        failures.push(format!(
                            "{name} (64-bit: {wide}, 4-lane maps and subgroups: {fast}): {e}\n{}",
                            g.wgsl
                        ));
                    }
                }
                Err(CodegenError::Unsupported(why)) => {
                    assert!(
                        !wide || why.contains("transcendental"),
                        "{name}: unsupported with every feature: {why}"
                    );
                }
            }
        }
    }
    assert!(generated > 160, "only {generated} kernels generated");
    assert!(maps > 0, "no conformance kernel took the 4-lane map form");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn sixty_four_bit_kernels_are_rejected_without_features() {
    let k = hologram_isa::assemble(
        ".kernel k\n.param .buf.u64 y .rw\n    cvt.u64.u32 %v, %gid;\n    st.u64 y[%gid], %v;\n",
    )
    .expect("assemble");
    match generate(&k, &CodegenOptions::core([32, 1, 1])) {
        Err(CodegenError::Unsupported(why)) => assert!(why.contains("64-bit"), "{why}"),
        Ok(_) => panic!("generated a 64-bit kernel without SHADER_INT64"),
    }
}

#[test]
fn straight_line_kernels_have_no_state_machine() {
    let k = hologram_isa::assemble(
        ".kernel k\n.param .buf.f32 y .rw\n.param .u32 n\n    mov.u32 %i, %gid;\n    setp.ge.u32 %p, %i, n;\n@%p exit;\n    ld.f32 %v, y[%i];\n    add.f32 %v, %v, 1.0;\n    st.f32 y[%i], %v;\n",
    )
    .expect("assemble");
    let g = generate(&k, &CodegenOptions::core([256, 1, 1])).expect("generate");
    assert!(!g.wgsl.contains("switch"), "{}", g.wgsl);
    validate(&g.wgsl, false).expect("valid");
}

#[test]
fn helpers_are_included_only_when_called() {
    assert!(prelude::mentions("x = hg_rh(y);", "hg_rh"));
    assert!(!prelude::mentions("x = hg_rhx(y);", "hg_rh"));
    assert!(!prelude::mentions("x = ahg_rh(y);", "hg_rh"));
}

#[test]
fn loops_spend_a_budget_and_report_a_cut_loop() {
    let k = hologram_isa::assemble(
        ".kernel k\n.param .buf.u32 y .rw\n.param .u32 n\n    mov.u32 %c, n;\n    mov.u32 %k, 0;\nL:\n    add.u32 %k, %k, 1;\n    loop %c, L;\n    st.u32 y[%gid], %k;\n",
    )
    .expect("assemble");
    let g = generate(&k, &CodegenOptions::core([64, 1, 1])).expect("generate");
    assert!(g.wgsl.contains("hg_tick = hg_tick - 1u;"), "{}", g.wgsl);
    assert!(g.wgsl.contains("hg_refill();"), "{}", g.wgsl);
    // Past the state machine's loop (left only by `return`) the driver cut it.
    assert!(
        g.wgsl.contains("    }\n    // The loop only ends by `return`: the driver cut it (see the module documentation).\n    hg_report(4u, 0u, 0u);\n}"),
        "{}",
        g.wgsl
    );
    assert!(
        !g.wgsl.contains("hg_pass"),
        "no canary where the state machine checks"
    );
    validate(&g.wgsl, false).expect("valid");
}

#[test]
fn straight_line_kernels_that_loop_end_with_the_canary() {
    // An f32 atomic add is a compare-and-swap loop in straight-line code.
    let k = hologram_isa::assemble(
        ".kernel k\n.param .buf.f32 y .rw\n    atom.add.f32 %o, y[0], 1.0;\n",
    )
    .expect("assemble");
    let g = generate(&k, &CodegenOptions::core([64, 1, 1])).expect("generate");
    assert!(!g.wgsl.contains("switch"), "{}", g.wgsl);
    assert!(
        g.wgsl
            .contains("if (hg_pass < 2u) { hg_report(4u, 0u, 0u); }"),
        "{}",
        g.wgsl
    );
    validate(&g.wgsl, false).expect("valid");
}

#[test]
fn timeout_budgets_split_into_chunks() {
    let total = |[first, chunks]: [u32; 2]| first as u64 + chunks as u64 * TICKS_PER_CHUNK;
    for blocks in [1u64, 2, 65535, 65536, 65537, 13422, 4_026_531_840, 1 << 40] {
        let words = timeout_budget(Some(blocks));
        assert!(
            words[0] >= 1 && words[0] as u64 <= TICKS_PER_CHUNK,
            "{blocks}: {words:?}"
        );
        assert_eq!(total(words), blocks, "{blocks}");
    }
    assert_eq!(timeout_budget(None)[1], u32::MAX, "no limit");
    assert_eq!(total(timeout_budget(Some(0))), 1, "at least one block runs");
}
