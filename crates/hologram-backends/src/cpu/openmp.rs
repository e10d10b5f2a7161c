//! Running the CPU backend's parallel work on the process's OpenMP threads (PyTorch's).
//!
//! The CPU backend shares its work between the calling thread and rayon's workers
//! (`fanout.rs`). A process that also runs PyTorch on the CPU has a second pool: torch's
//! OpenMP team, whose threads spin for a while after each parallel region before they sleep.
//! On a machine with few cores the two pools then take the cores from each other: on a 2-core
//! VM a 512x1024x256 GEMM took 2.3 ms alone and 3.4 ms right after one `torch.Tensor.add_`,
//! the spinning OpenMP worker holding one of the two cores. A compiled PyTorch training step
//! interleaves both (torch's loss and optimizer, Hologram's plans) at every step.
//!
//! [`share_openmp_threads`] finds an OpenMP runtime already loaded in the process (GNU
//! `libgomp`, or LLVM's `libomp` / Intel's `libiomp5`, which export the same entry point) and
//! from then on hands the helpers' part of each parallel launch to its `GOMP_parallel`: the
//! calling thread is the team's first thread, torch's (spinning) workers are the others, and
//! rayon's pool stays asleep. The GEMMs go to the BLAS loaded with that runtime, when there
//! is one (`blas.rs`). Nothing is loaded that was not loaded already.
//! `HOLOGRAM_CPU_POOL=rayon` keeps rayon's pool whatever is asked.

use std::ffi::c_void;
use std::sync::OnceLock;

use super::fanout::{Participant, Units};

/// `void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags)`:
/// runs `fn(data)` on a team of `num_threads` threads, the caller among them, and returns when
/// every thread has returned.
type GompParallel = unsafe extern "C" fn(extern "C" fn(*mut c_void), *mut c_void, u32, u32);

/// The adopted runtime: its entry point and the path it was found at.
struct Runtime {
    parallel: GompParallel,
    path: String,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// Where the CPU backend's helpers run (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadPool {
    /// Rayon's pool (the default).
    Rayon,
    /// The OpenMP runtime loaded from this path.
    OpenMp(String),
}

/// The pool the CPU backend's parallel work runs on now.
pub fn thread_pool() -> ThreadPool {
    match RUNTIME.get() {
        Some(r) => ThreadPool::OpenMp(r.path.clone()),
        None => ThreadPool::Rayon,
    }
}

/// Runs the CPU backend's parallel work on the OpenMP runtime already loaded in this process
/// from now on, if there is one, and its f32/f64 GEMMs through the BLAS loaded with it
/// (PyTorch's MKL, see [`super::blas_library`]): returns the pool in use afterwards. Loads nothing; with
/// `HOLOGRAM_CPU_POOL=rayon` set, or on a platform without `dlopen`, it keeps rayon's pool.
///
/// ```
/// use hologram_backends::cpu::{share_openmp_threads, ThreadPool};
/// // A process without an OpenMP runtime keeps rayon's pool.
/// let pool = share_openmp_threads();
/// assert!(matches!(pool, ThreadPool::Rayon | ThreadPool::OpenMp(_)));
/// ```
pub fn share_openmp_threads() -> ThreadPool {
    if std::env::var("HOLOGRAM_CPU_POOL").is_ok_and(|v| v.trim().eq_ignore_ascii_case("rayon")) {
        return thread_pool();
    }
    if RUNTIME.get().is_none() {
        if let Some(r) = find_loaded_runtime() {
            let _ = RUNTIME.set(r);
        }
    }
    if RUNTIME.get().is_some() {
        // The BLAS that runs on that team (PyTorch's MKL), for f32/f64 GEMMs.
        super::blas::share_blas();
    }
    thread_pool()
}

/// The team entry point of the adopted runtime, if one was adopted.
pub(crate) fn adopted() -> Option<GompParallel> {
    RUNTIME.get().map(|r| r.parallel)
}

/// An OpenMP runtime mapped into this process (from `/proc/self/maps`), opened without
/// loading anything (`RTLD_NOLOAD`).
#[cfg(target_os = "linux")]
fn find_loaded_runtime() -> Option<Runtime> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let mut seen: Vec<&str> = Vec::new();
    for path in maps.lines().filter_map(|l| l.split_whitespace().nth(5)) {
        let name = path.rsplit('/').next().unwrap_or(path);
        let openmp = ["libgomp", "libomp", "libiomp5"]
            .iter()
            .any(|p| name.starts_with(p) && name.contains(".so"));
        if !openmp || seen.contains(&path) {
            continue;
        }
        seen.push(path);
        let Ok(c_path) = std::ffi::CString::new(path) else {
            continue;
        };
        // SAFETY: RTLD_NOLOAD only returns a handle to a library that is already loaded (and
        // runs no initializer); the handle is never closed, so the symbol stays valid.
        let symbol = unsafe {
            let handle = libc::dlopen(c_path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
            if handle.is_null() {
                continue;
            }
            libc::dlsym(handle, c"GOMP_parallel".as_ptr())
        };
        if symbol.is_null() {
            continue;
        }
        // SAFETY: `GOMP_parallel` has this signature in every runtime that exports it (the
        // GNU OpenMP ABI, which LLVM's and Intel's runtimes implement for GCC-built code).
        let parallel = unsafe { std::mem::transmute::<*mut c_void, GompParallel>(symbol) };
        return Some(Runtime {
            parallel,
            path: path.to_string(),
        });
    }
    None
}

#[cfg(not(target_os = "linux"))]
fn find_loaded_runtime() -> Option<Runtime> {
    None
}

/// One launch's work as the team's threads see it.
struct Team<'a, 'f> {
    participant: &'a Participant<'f>,
    /// Every member's panic is caught there (a panic must not unwind through the runtime's C
    /// frames) and raised again on the calling thread.
    units: Units,
}

extern "C" fn run_member(data: *mut c_void) {
    // SAFETY: `data` is the `Team` that `share` keeps alive until `GOMP_parallel` returns,
    // which is after every member has returned from here.
    let team = unsafe { &*(data as *const Team<'_, '_>) };
    team.units.run_caught(team.participant, None);
}

/// Runs `units` units on a team of `threads` threads of the runtime (the caller first), each
/// taking units until none are left; returns when all have run. A panic in any thread is
/// raised again here.
pub(crate) fn share(
    parallel: GompParallel,
    units: usize,
    threads: usize,
    participant: &Participant<'_>,
) {
    let team = Team {
        participant,
        units: Units::new(units),
    };
    // SAFETY: `run_member` reads `team` only while this call runs (the runtime returns after
    // every member has), and catches every panic before it reaches the runtime.
    unsafe {
        parallel(
            run_member,
            &team as *const Team<'_, '_> as *mut c_void,
            threads as u32,
            0,
        )
    };
    team.units.raise();
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A runtime's team entry point stand-in: `threads - 1` more threads and the caller each
    /// run `f(data)`; returns when all have.
    unsafe extern "C" fn fake_parallel(
        f: extern "C" fn(*mut c_void),
        data: *mut c_void,
        threads: u32,
        _flags: u32,
    ) {
        let data = data as usize;
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(move || f(data as *mut c_void));
            }
            f(data as *mut c_void);
        });
    }

    #[test]
    fn every_unit_runs_once_on_the_team() {
        for threads in [1, 2, 4] {
            for units in [0, 1, 5, 1000] {
                let runs: Vec<AtomicUsize> = (0..units).map(|_| AtomicUsize::new(0)).collect();
                share(fake_parallel, units, threads, &|claims| {
                    while let Some(u) = claims.next_unit() {
                        runs[u].fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(
                    runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                    "{units} units, {threads} threads"
                );
            }
        }
    }

    #[test]
    fn a_panic_on_any_team_thread_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            share(fake_parallel, 64, 3, &|claims| {
                while let Some(u) = claims.next_unit() {
                    assert_ne!(u, 40, "unit 40 fails");
                }
            })
        });
        assert!(caught.is_err());
    }

    #[test]
    fn rayon_stays_without_an_openmp_runtime_in_the_process() {
        // The test binary links no OpenMP runtime.
        assert_eq!(share_openmp_threads(), ThreadPool::Rayon);
        assert!(adopted().is_none());
    }
}
