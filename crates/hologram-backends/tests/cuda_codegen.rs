//! CUDA code generation for every conformance program, checked and unchecked, plus the generic
//! GEMM kernels. With the `cuda` feature and NVRTC present (`libnvrtc.so`), every source is also
//! compiled with NVRTC for `compute_90`; without NVRTC that part is skipped with a message, unless
//! `HOLOGRAM_REQUIRE_NVRTC=1`, which makes it fail (scripts/test.sh sets it, with NVRTC from PyPI).
//! `HOLOGRAM_CUDA_DUMP=DIR` writes every generated source to DIR; `HOLOGRAM_CONFORMANCE_DIR`
//! points at the suite when the test binary runs outside this checkout.

use std::path::{Path, PathBuf};

use hologram_backends::cuda::codegen::{generate, CodegenOptions};
use hologram_isa::{Kernel, Type};

/// `HOLOGRAM_CONFORMANCE_DIR`, else the suite in this repository (the binary may run elsewhere).
fn conformance_dir() -> PathBuf {
    match std::env::var_os("HOLOGRAM_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance"),
    }
}

/// Every kernel to check, with a name.
fn kernels() -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("tests/conformance exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "hasm"))
        .collect();
    paths.sort();
    for p in paths {
        let text = std::fs::read_to_string(&p).expect("readable");
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_string();
        let k = hologram_isa::assemble(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.push((name, k));
    }
    for ty in [Type::F16, Type::BF16, Type::F32, Type::F64] {
        let text = hologram_backends::library::gemm::kernel_text(ty);
        let k = hologram_isa::assemble(&text).expect("gemm kernel assembles");
        out.push((format!("gemm_{ty}"), k));
    }
    // The library's max-pooling templates.
    use hologram_compiler::patterns::pool_templates::pool_program;
    use hologram_compiler::patterns::{PoolOp, PoolPattern};
    for storage in [Type::F16, Type::BF16, Type::F32, Type::F64] {
        for op in [PoolOp::Max, PoolOp::MaxWithIndices, PoolOp::MaxBackward] {
            let k = hologram_isa::validate(&pool_program(&PoolPattern { op, storage }))
                .expect("pool template validates");
            out.push((format!("pool_{op:?}_{storage}"), k));
        }
    }
    out
}

/// The options each kernel is generated with: checked and unchecked, and for element-wise maps
/// their vectorized forms too.
fn variants(k: &hologram_isa::Kernel) -> Vec<CodegenOptions> {
    let mut v = vec![
        CodegenOptions::default(),
        CodegenOptions {
            bounds_checks: false,
            launch_bounds: Some(1024),
            vector_map: false,
            dedicated_rows: None,
        },
    ];
    if hologram_backends::cuda::codegen::map::vectorizable(k).is_some() {
        v.extend([true, false].map(|bounds_checks| CodegenOptions {
            bounds_checks,
            launch_bounds: None,
            vector_map: true,
            dedicated_rows: None,
        }));
    }
    v
}

#[test]
fn every_conformance_program_generates() {
    let dump = std::env::var_os("HOLOGRAM_CUDA_DUMP").map(PathBuf::from);
    let all = kernels();
    assert!(all.len() >= 72 + 4, "found only {} kernels", all.len());
    for (name, k) in &all {
        for opts in variants(k) {
            let code = generate(k, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let entry = hologram_backends::cuda::codegen::entry_name(&k.name);
            assert!(code.contains(&format!("{entry}(")), "{name}");
            if let Some(dir) = &dump {
                std::fs::create_dir_all(dir).expect("dump dir");
                let file = dir.join(format!("{name}.{}.cu", opts.tag().replace(';', "_")));
                std::fs::write(file, &code).expect("dump written");
            }
        }
    }
}

/// NVRTC compiles every generated source (PTX for `compute_90`; no driver or GPU needed).
#[cfg(feature = "cuda")]
#[test]
fn every_generated_program_compiles_with_nvrtc() {
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
    let jobs: Vec<(String, String)> = kernels()
        .into_iter()
        .flat_map(|(name, k)| {
            variants(&k).into_iter().map(move |opts| {
                let code = generate(&k, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
                (format!("{name} ({})", opts.tag()), code)
            })
        })
        .collect();
    let failures = nvrtc::compile_all(&jobs, "compute_90", Output::Ptx);
    println!("{} sources compiled with NVRTC", jobs.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
