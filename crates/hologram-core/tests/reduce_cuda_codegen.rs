//! The reduction, fused row (softmax) and layer-norm templates that tensor ops launch, through the CUDA code
//! generator (canonical form, as the CUDA backend compiles them), and through NVRTC for
//! `compute_90` when it is present: without NVRTC that part is skipped with a message unless
//! `HOLOGRAM_REQUIRE_NVRTC=1`. The backends' own codegen test covers the conformance suite, not
//! these templates. `HOLOGRAM_CUDA_DUMP=DIR` writes every generated source to DIR.

#![cfg(feature = "cuda")]

use hologram_backends::cuda::codegen::{generate, CodegenOptions, RowForm};
use hologram_compiler::patterns::norm_templates::{self, NormKernel};
use hologram_compiler::patterns::reduce_templates::{block_program, lane_program, Combine};
use hologram_compiler::patterns::softmax_templates::{row_program, RowOp};
use hologram_compiler::patterns::{Pattern, RowPattern};
use hologram_isa::{Program, Type};

/// Every template with a name: each combine over the dtypes tensors use, every row op over the
/// float types and group sizes.
fn templates() -> Vec<(String, Program, Option<Pattern>)> {
    let mut out = Vec::new();
    for c in Combine::ALL {
        for (s, a, o) in [
            (Type::F32, Type::F32, Type::F32),
            (Type::F16, Type::F32, Type::F16),
            (Type::BF16, Type::F32, Type::F32),
            (Type::F64, Type::F64, Type::F64),
            (Type::I32, Type::I64, Type::I64),
            (Type::U8, Type::U8, Type::U8),
        ] {
            out.push((format!("lane_{c:?}_{s}"), lane_program(c, s, a, o), None));
            out.push((
                format!("block_{c:?}_{s}"),
                block_program(c, s, a, o, false),
                None,
            ));
            if c.is_arg() {
                out.push((
                    format!("block_ix_{c:?}_{a}"),
                    block_program(c, a, a, a, true),
                    None,
                ));
            }
        }
    }
    for op in RowOp::ALL {
        for s in [Type::F32, Type::F16, Type::BF16, Type::F64] {
            for (g, resident) in [
                (32, 0),
                (128, 0),
                (256, 0),
                (32, 3),
                (128, 8),
                (256, 16),
                (64, 16),
            ] {
                out.push((
                    format!("rows_{op:?}_{s}_{g}_{resident}"),
                    row_program(op, s, g, resident),
                    Some(Pattern::Rows(RowPattern {
                        op,
                        storage: s,
                        g,
                        resident,
                    })),
                ));
            }
        }
    }
    for backward in [false, true] {
        for affine in [false, true] {
            for storage in [Type::F32, Type::F16, Type::BF16, Type::F64] {
                for (g, resident) in [(32, 0), (32, 16), (64, 16), (256, 16), (32, 1)] {
                    let k = NormKernel {
                        backward,
                        affine,
                        storage,
                        g,
                        resident,
                    };
                    out.push((
                        format!("norm_{backward}_{affine}_{storage}_{g}_{resident}"),
                        norm_templates::program(&k),
                        Some(Pattern::Norm(k)),
                    ));
                }
            }
        }
    }
    out
}

/// CUDA C of every template, checked (as launched by default) and unchecked.
fn sources() -> Vec<(String, String)> {
    let dump = std::env::var_os("HOLOGRAM_CUDA_DUMP").map(std::path::PathBuf::from);
    let mut out = Vec::new();
    for (name, program, row) in templates() {
        let k = hologram_compiler::Canonical::from_program(&program)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", hologram_isa::print(&program)));
        // Row kernels with a dedicated form: that form too (it has no bounds checks).
        let dedicated = RowForm::of(row.as_ref()).map(|f| CodegenOptions {
            dedicated_rows: Some(f),
            ..CodegenOptions::default()
        });
        let k = k.kernel();
        for opts in [
            CodegenOptions::default(),
            CodegenOptions {
                bounds_checks: false,
                ..CodegenOptions::default()
            },
        ]
        .into_iter()
        .chain(dedicated)
        {
            let code = generate(k, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let name = format!("{name}.{}", opts.tag());
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).expect("dump dir");
                std::fs::write(dir.join(format!("{name}.cu")), &code).expect("dump written");
            }
            out.push((name, code));
        }
    }
    out
}

#[test]
fn templates_generate_cuda_c() {
    let all = sources();
    assert!(all.len() >= 2 * (6 * 6 * 2 + 2 * 6 + 4 * 4 * 6));
    for (name, code) in &all {
        assert!(code.contains("__global__ void "), "{name}");
        // Every lane reaches the row kernels' barriers in order: plain __syncthreads(), no
        // rendezvous. (The block reduction's barrier sits in a loop with a uniform trip count,
        // which the code generator does not prove: it keeps the rendezvous.)
        if name.starts_with("rows_") {
            assert!(
                !code.contains("HG_SYNC"),
                "{name}: barriers kept the rendezvous\n{code}"
            );
        }
        // The unrolled loop issues all its loads before the first one is used.
        if name.starts_with("block_Sum_f32") {
            let body = &code[code.find("__global__").unwrap_or(0)..];
            let eighth_load = body.match_indices("= p0[hg_x];").nth(7).map(|(i, _)| i);
            let first_add = body.find("hg_add_f32(");
            assert!(
                matches!((eighth_load, first_add), (Some(l), Some(a)) if l < a),
                "{name}: loads and folds interleave\n{code}"
            );
        }
    }
}

#[test]
fn templates_compile_with_nvrtc() {
    use hologram_backends::cuda::nvrtc::{self, Output};
    let required = std::env::var("HOLOGRAM_REQUIRE_NVRTC").as_deref() == Ok("1");
    match nvrtc::version() {
        Ok((major, minor)) => println!("NVRTC {major}.{minor}"),
        Err(e) => {
            assert!(
                !required,
                "HOLOGRAM_REQUIRE_NVRTC=1 but NVRTC is unusable: {e}"
            );
            println!("skipped: {e}");
            return;
        }
    }
    let jobs = sources();
    let failures = nvrtc::compile_all(&jobs, "compute_90", Output::Ptx);
    println!("{} sources compiled with NVRTC", jobs.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
