//! Differential testing: random valid kernels (src/random) run on the CPU backend's native
//! loops, on its interpreter (canonical form and the program as written), on the CUDA backend's
//! generated code compiled for the host (`common/emulator.rs`) and on the wgpu backend through
//! Vulkan (lavapipe in CI), and every buffer must agree.
//!
//! `random_programs_agree_on_every_backend` runs `HOLOGRAM_DIFF_PROGRAMS` programs (default
//! 1000) from seed `HOLOGRAM_DIFF_SEED` on (default: a new one each run, printed). It is slow, so
//! ignored by default; scripts/test.sh runs it with `--release --ignored` and `LP_NUM_THREADS=0`
//! (under a minute on two cores; unoptimized, naga's WGSL front end makes it several times
//! slower, and lavapipe's worker threads twenty times slower on a busy machine). A program on which backends
//! differ is written to `target/differential-failures/` as a `.hasm`/`.json` pair: copy the pair
//! to `tests/differential/` and `kept_programs_agree_on_every_backend` checks it on every run.
//!
//! Lavapipe must be present unless `HOLOGRAM_WGPU_TESTS=skip`; the emulation needs `c++` and is
//! skipped without it unless `HOLOGRAM_REQUIRE_EMULATION=1`. Built with `--features cuda` on a
//! machine with an NVIDIA GPU, the real CUDA backend runs every program too.

#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::emulator::{has_compiler, Emulator};
use hologram_backends::wgpu::adapter::{AdapterOptions, Api};
use hologram_backends::{Backend, CpuBackend, WgpuBackend};
use hologram_compiler::Canonical;
use hologram_conformance::random::{compare_timed, RandomCase};
use hologram_conformance::Case;
use std::time::Duration;

/// Programs compiled into one C++ translation unit.
const EMULATION_BATCH: usize = 125;

fn lavapipe() -> Option<WgpuBackend> {
    let opts = AdapterOptions {
        api: Api::Vulkan,
        allow_software: true,
    };
    match WgpuBackend::with_options(&opts) {
        Ok(b) => Some(b),
        Err(e) if std::env::var("HOLOGRAM_WGPU_TESTS").as_deref() == Ok("skip") => {
            println!("wgpu skipped: {e}");
            None
        }
        Err(e) => panic!(
            "no Vulkan adapter ({e}); install mesa-vulkan-drivers libvulkan1 or set HOLOGRAM_WGPU_TESTS=skip"
        ),
    }
}

fn emulator() -> Option<Emulator> {
    if has_compiler() {
        return Some(Emulator::new("differential"));
    }
    assert!(
        std::env::var("HOLOGRAM_REQUIRE_EMULATION").as_deref() != Ok("1"),
        "no C++ compiler, and HOLOGRAM_REQUIRE_EMULATION=1"
    );
    println!("CUDA emulation skipped: no C++ compiler (c++)");
    None
}

/// The backends, named, and a case's form for each: the CPU's native loops first (the
/// reference), then the interpreter on the canonical form and on the program as written, then
/// the GPU backends.
struct Lineup {
    native: CpuBackend,
    interp: CpuBackend,
    wgpu: Option<WgpuBackend>,
    emu: Option<Emulator>,
    /// The real CUDA backend, with the `cuda` feature on a machine with a GPU.
    cuda: Option<Box<dyn Backend>>,
}

/// The CUDA backend, where this build has it and a GPU answers.
fn cuda() -> Option<Box<dyn Backend>> {
    #[cfg(feature = "cuda")]
    match hologram_backends::cuda::CudaBackend::new() {
        Ok(b) => return Some(Box::new(b)),
        Err(e) => println!("CUDA backend not used: {e}"),
    }
    None
}

impl Lineup {
    fn new() -> Lineup {
        Lineup {
            native: CpuBackend::new(),
            interp: CpuBackend::interpreter_only(),
            wgpu: lavapipe(),
            emu: emulator(),
            cuda: cuda(),
        }
    }

    /// A fresh wgpu device: the backend keeps every pipeline it built, and on lavapipe each
    /// holds its compiled code (megabytes), so a long run opens a new device now and then.
    fn refresh_wgpu(&mut self) {
        if self.wgpu.is_some() {
            self.wgpu = None;
            self.wgpu = lavapipe();
        }
    }

    /// Compiles the CUDA C of every case ahead, two translation units at a time.
    fn prebuild(&self, cases: &[Case]) {
        let Some(emu) = &self.emu else { return };
        let kernels: Vec<Canonical> = cases.iter().map(|c| c.canonical.clone()).collect();
        let batches: Vec<&[Canonical]> = kernels.chunks(EMULATION_BATCH).collect();
        for pair in batches.chunks(2) {
            std::thread::scope(|s| {
                for batch in pair {
                    s.spawn(move || {
                        // A batch that does not compile is built program by program later, so
                        // the program at fault is the one reported.
                        if let Err(e) = emu.prebuild(batch) {
                            println!("a batch of CUDA C did not compile as one unit: {e}");
                        }
                    });
                }
            });
        }
    }

    /// The names of the runs [`Lineup::check`] makes, in order.
    fn names(&self) -> Vec<&'static str> {
        let mut v = vec![
            "cpu native",
            "cpu interpreter",
            "cpu interpreter, program as written",
        ];
        if self.wgpu.is_some() {
            v.push("wgpu");
        }
        if self.emu.is_some() {
            v.push("cuda (emulated)");
        }
        if self.cuda.is_some() {
            v.push("cuda");
        }
        v
    }

    /// Every difference of `case` across the backends, one line each; adds each run's time
    /// (compile, launch and read-back) to `spent`.
    fn check(&self, case: &Case, spent: &mut [Duration]) -> Vec<String> {
        let mut written = case.clone();
        written.canonical = match Canonical::as_written(&case.kernel) {
            Ok(c) => c,
            Err(e) => return vec![format!("as written: {e}")],
        };
        written.kernel = Arc::clone(&case.kernel);
        let mut runs: Vec<(&Case, &dyn Backend)> = vec![
            (case, &self.native),
            (case, &self.interp),
            (&written, &self.interp),
        ];
        if let Some(w) = &self.wgpu {
            runs.push((case, w));
        }
        if let Some(e) = &self.emu {
            runs.push((case, e));
        }
        if let Some(c) = &self.cuda {
            runs.push((case, c.as_ref()));
        }
        let names = self.names();
        compare_timed(&runs, spent)
            .into_iter()
            .map(|d| format!("{} vs {}: {}", names[d.backend], names[0], d.what))
            .collect()
    }
}

fn failures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/differential-failures")
}

fn kept_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/differential")
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
#[ignore = "slow (1000 programs on every backend): scripts/test.sh runs it with --ignored"]
fn random_programs_agree_on_every_backend() {
    let count = env_u64("HOLOGRAM_DIFF_PROGRAMS").unwrap_or(1000);
    let base = env_u64("HOLOGRAM_DIFF_SEED").unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        (now % 1_000_000) * 1000
    });
    println!(
        "{count} random programs, seeds {base}..{} (HOLOGRAM_DIFF_SEED={base} HOLOGRAM_DIFF_PROGRAMS={count} repeats this run)",
        base + count
    );
    let started = std::time::Instant::now();
    let randoms: Vec<RandomCase> = (base..base + count).map(RandomCase::generate).collect();
    let cases: Vec<Case> = randoms
        .iter()
        .map(|r| r.case().unwrap_or_else(|e| panic!("{e}\n{}", r.text)))
        .collect();
    let mut lineup = Lineup::new();
    lineup.prebuild(&cases);
    println!(
        "generated and compiled for the emulation in {:.1?}",
        started.elapsed()
    );

    let mut failures = Vec::new();
    let mut spent = vec![Duration::ZERO; lineup.names().len()];
    // The slowest program on each backend, to see where the time goes.
    let mut slowest = vec![(Duration::ZERO, 0u64); spent.len()];
    // Programs run on several threads (lavapipe compiles each pipeline on one), a chunk at a
    // time; each chunk gets a fresh wgpu device.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let pairs: Vec<(&RandomCase, &Case)> = randoms.iter().zip(&cases).collect();
    for (c, chunk) in pairs.chunks(100).enumerate() {
        if c > 0 {
            lineup.refresh_wgpu();
        }
        let lineup = &lineup;
        let results: Vec<(u64, Vec<Duration>, Vec<String>)> = std::thread::scope(|s| {
            let workers: Vec<_> = chunk
                .chunks(chunk.len().div_ceil(threads))
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .map(|(r, case)| {
                                let mut t = vec![Duration::ZERO; lineup.names().len()];
                                let problems = lineup.check(case, &mut t);
                                (r.seed, t, problems)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a checking thread panicked"))
                .collect()
        });
        for (seed, t, problems) in results {
            for (i, s) in slowest.iter_mut().enumerate() {
                spent[i] += t[i];
                if t[i] > s.0 {
                    *s = (t[i], seed);
                }
            }
            if problems.is_empty() {
                continue;
            }
            let Some(r) = randoms.iter().find(|r| r.seed == seed) else {
                continue;
            };
            let dir = failures_dir();
            let _ = std::fs::create_dir_all(&dir);
            let stem = dir.join(r.name());
            let _ = std::fs::write(stem.with_extension("hasm"), &r.text);
            let _ = std::fs::write(
                stem.with_extension("json"),
                serde_json::to_string_pretty(&r.spec).unwrap_or_default(),
            );
            // Generated code in an error message can run to pages: the start says enough.
            let short: Vec<String> = problems
                .iter()
                .map(|p| p.chars().take(600).collect())
                .collect();
            failures.push(format!(
                "seed {} ({}): {}",
                r.seed,
                stem.with_extension("hasm").display(),
                short.join("; ")
            ));
        }
    }
    let stats = lineup.native.stats();
    println!(
        "done in {:.1?} ({threads} threads; times below are summed over them): {} programs, {} run as native loops on the CPU, {} differ",
        started.elapsed(),
        count,
        stats.library_launches,
        failures.len()
    );
    for ((name, t), (worst, seed)) in lineup.names().iter().zip(&spent).zip(&slowest) {
        println!("  {name:<36} {t:>9.1?}  (slowest: seed {seed}, {worst:.1?})");
    }
    if let Some(e) = &lineup.emu {
        e.clean_up();
    }
    assert!(
        failures.is_empty(),
        "{} of {count} programs differ between backends (copy the files to tests/differential/ to keep them as tests):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn kept_programs_agree_on_every_backend() {
    let dir = kept_dir();
    let suite = hologram_conformance::Suite::load(&dir).expect("load tests/differential");
    let lineup = Lineup::new();
    lineup.prebuild(&suite.cases);
    let mut failures = Vec::new();
    let mut spent = vec![Duration::ZERO; lineup.names().len()];
    for case in &suite.cases {
        for p in lineup.check(case, &mut spent) {
            failures.push(format!("{}: {p}", case.name));
        }
    }
    if let Some(e) = &lineup.emu {
        e.clean_up();
    }
    println!("{} kept programs checked", suite.cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
