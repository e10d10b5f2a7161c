//! The dedicated forms of every reduction and row template generate valid WGSL (naga), with
//! and without bounds checks, subgroups and 64-bit features, and keep the generic code for the
//! workgroups they cannot prove in bounds.

use hologram_compiler::patterns::reduce_templates::{self, Combine};
use hologram_compiler::patterns::softmax_templates::{self, RowOp};
use hologram_compiler::patterns::{ReduceKind, ReducePattern, RowPattern};
use hologram_isa::Type;

use super::dedicated::Dedicated;
use super::*;

fn validate(wgsl: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let caps = naga::valid::Capabilities::SUBGROUP
        | naga::valid::Capabilities::SHADER_INT64
        | naga::valid::Capabilities::FLOAT64;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .map(|_| ())
        .map_err(|e| e.emit_to_string(wgsl))
}

fn options(block: u32, checks: bool, fast: bool, d: Dedicated) -> CodegenOptions {
    CodegenOptions {
        bounds_checks: checks,
        int64: true,
        float64: true,
        subgroups: fast,
        max_storage_buffers: 16,
        dedicated: Some(d),
        ..CodegenOptions::core([block, 1, 1])
    }
}

fn reductions() -> Vec<ReducePattern> {
    let mut out = Vec::new();
    for combine in Combine::ALL {
        for (storage, acc, o) in [
            (Type::F32, Type::F32, Type::F32),
            (Type::F16, Type::F32, Type::F16),
            (Type::BF16, Type::F32, Type::BF16),
            (Type::F64, Type::F64, Type::F64),
            (Type::I32, Type::I64, Type::I64),
            (Type::U8, Type::I64, Type::I64),
            (Type::I32, Type::I32, Type::I32),
        ] {
            let mut kinds = vec![ReduceKind::Lane, ReduceKind::Block { index_input: false }];
            if combine.is_arg() {
                kinds.push(ReduceKind::Block { index_input: true });
            }
            for kind in kinds {
                let out_ty = if combine.is_arg() { acc } else { o };
                let storage = if matches!(kind, ReduceKind::Block { index_input: true }) {
                    acc
                } else {
                    storage
                };
                out.push(ReducePattern {
                    kind,
                    combine,
                    storage,
                    acc,
                    out: out_ty,
                });
            }
        }
    }
    out
}

#[test]
fn every_reduction_template_has_a_valid_dedicated_form() {
    let mut failures = Vec::new();
    for p in reductions() {
        let k = reduce_templates::kernel(&p).expect("template");
        let d = Dedicated::of(k.pattern()).expect("intent");
        assert!(d.fits(k.kernel(), [reduce_templates::BLOCK, 1, 1]), "{p:?}");
        for (checks, fast) in [(true, false), (true, true), (false, true)] {
            let g = generate(
                k.kernel(),
                &options(reduce_templates::BLOCK, checks, fast, d),
            )
            .expect("generates");
            assert!(g.dedicated, "{p:?}");
            assert_eq!(g.wgsl.contains("hg_generic(hg_lid, "), checks);
            let shuffles = fast && p.acc.size_bytes() == 4 && p.kind != ReduceKind::Lane;
            assert_eq!(g.wgsl.contains("subgroupShuffleDown"), shuffles, "{p:?}");
            if let Err(e) = validate(&g.wgsl) {
                failures.push(format!("{p:?} checks={checks} sg={fast}: {e}\n{}", g.wgsl));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_row_template_has_a_valid_dedicated_form() {
    let mut failures = Vec::new();
    for op in RowOp::ALL {
        for storage in [Type::F32, Type::F16, Type::BF16, Type::F64] {
            for (g, resident) in [(32, 0), (128, 8), (256, 16), (32, 1), (64, 3)] {
                let p = RowPattern {
                    op,
                    storage,
                    g,
                    resident,
                };
                let k = softmax_templates::kernel(&p).expect("template");
                let d = Dedicated::of(k.pattern()).expect("intent");
                assert!(d.fits(k.kernel(), [256, 1, 1]));
                assert!(
                    !d.fits(k.kernel(), [128, 1, 1]),
                    "other block sizes stay generic"
                );
                for (checks, fast) in [(true, false), (false, true)] {
                    match generate(k.kernel(), &options(256, checks, fast, d)) {
                        Ok(gen) => {
                            assert!(gen.dedicated);
                            if let Err(e) = validate(&gen.wgsl) {
                                failures.push(format!("{p:?} checks={checks}: {e}\n{}", gen.wgsl));
                            }
                        }
                        // f64 exp/log: no adapter has them, generic or dedicated.
                        Err(CodegenError::Unsupported(why)) => {
                            assert!(storage == Type::F64 && why.contains("f64"), "{why}")
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn kernels_without_intent_or_with_another_block_stay_generic() {
    let p = ReducePattern {
        kind: ReduceKind::Block { index_input: false },
        combine: Combine::Sum,
        storage: Type::F32,
        acc: Type::F32,
        out: Type::F32,
    };
    let k = reduce_templates::kernel(&p).expect("template");
    let d = Dedicated::of(k.pattern()).expect("intent");
    let g = generate(k.kernel(), &options(128, true, false, d)).expect("generates");
    assert!(!g.dedicated);
    assert!(!g.wgsl.contains("hg_generic"));
    // The lane reduction takes any block.
    let lane = reduce_templates::kernel(&ReducePattern {
        kind: ReduceKind::Lane,
        ..p
    })
    .expect("template");
    let d = Dedicated::of(lane.pattern()).expect("intent");
    let g = generate(lane.kernel(), &options(64, true, false, d)).expect("generates");
    assert!(g.dedicated);
}
