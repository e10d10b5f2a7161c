//! The CUDA backend's generated code, run on the host: every conformance program is translated
//! to CUDA C exactly as for a GPU, compiled with the host C++ compiler against a shim of the CUDA
//! built-ins (`cuda_emulation/shim.h`, one std::thread per lane where a block synchronizes), and
//! run through the same harness as the real backends (see `common/emulator.rs`). This checks the
//! code generator's logic (control flow, types, conversions, bounds checks, atomics) on machines
//! without a GPU; what it cannot check is CUDA's own math library and hardware, which the GPU run
//! covers.
//!
//! It also cross-checks the emulated code against the CPU interpreter on every buffer.
//!
//! Slow (it compiles every program as C++), so it is ignored by default: `cargo test -p
//! hologram-conformance --test cuda_emulation -- --ignored` (scripts/test.sh runs it). Needs `c++`
//! (GCC or Clang with C++20); skipped with a message when there is none, unless
//! `HOLOGRAM_REQUIRE_EMULATION=1`.

#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

mod common;

use common::emulator::{has_compiler, vector_map, Emulator};
use hologram_compiler::Canonical;

#[test]
#[ignore = "slow (compiles every conformance program as C++): scripts/test.sh runs it with --ignored"]
fn conformance_suite_passes_on_emulated_cuda_code() {
    if !has_compiler() {
        assert!(
            std::env::var("HOLOGRAM_REQUIRE_EMULATION").as_deref() != Ok("1"),
            "no C++ compiler, and HOLOGRAM_REQUIRE_EMULATION=1"
        );
        println!("skipped: no C++ compiler (c++) for the CUDA emulation");
        return;
    }
    let suite =
        hologram_conformance::Suite::load(hologram_conformance::default_dir()).expect("load suite");
    let emu = Emulator::new("conformance");
    // Every program in two translation units, compiled side by side.
    let kernels: Vec<Canonical> = suite.cases.iter().map(|c| c.canonical.clone()).collect();
    let half = kernels.len().div_ceil(2);
    std::thread::scope(|s| {
        for chunk in kernels.chunks(half.max(1)) {
            let emu = &emu;
            s.spawn(move || emu.prebuild(chunk).unwrap_or_else(|e| panic!("{e}")));
        }
    });
    let maps = kernels.iter().filter(|c| vector_map(c)).count();
    println!("{maps} programs are element-wise maps and run in the vectorized form");
    let report = suite.run(&emu);
    println!("{}", report.summary());
    let cross =
        hologram_conformance::cross_check(&suite, &hologram_backends::CpuBackend::new(), &emu);
    println!("{}", cross.summary());
    emu.clean_up();
    assert!(report.all_passed(), "{}", report.summary());
    assert_eq!(cross.mismatches(), 0, "{}", cross.summary());
}
