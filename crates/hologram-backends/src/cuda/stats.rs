//! Process-wide counters of the CUDA kernel cache, so tests and `hologram` can check that a
//! second process compiles nothing (every kernel comes from the disk cache).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the CUDA backend's kernel cache in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CudaStats {
    /// Kernels compiled by NVRTC.
    pub nvrtc_compiles: u64,
    /// Kernels found already loaded in memory.
    pub memory_hits: u64,
    /// Kernels loaded from the disk cache (no NVRTC).
    pub disk_hits: u64,
    /// Compiled kernels written to the disk cache.
    pub disk_writes: u64,
}

impl std::fmt::Display for CudaStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "nvrtc_compiles={} memory_hits={} disk_hits={} disk_writes={}",
            self.nvrtc_compiles, self.memory_hits, self.disk_hits, self.disk_writes
        )
    }
}

static NVRTC_COMPILES: AtomicU64 = AtomicU64::new(0);
static MEMORY_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_WRITES: AtomicU64 = AtomicU64::new(0);
static CODE_BYTES: AtomicU64 = AtomicU64::new(0);
static LIBRARY_LAUNCHES: AtomicU64 = AtomicU64::new(0);
static GENERIC_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// Which counter to bump.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    NvrtcCompile,
    MemoryHit,
    DiskHit,
    DiskWrite,
    /// A vectorized map launch or a cuBLAS GEMM.
    LibraryLaunch,
    GenericLaunch,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn count(e: Event) {
    let c = match e {
        Event::NvrtcCompile => &NVRTC_COMPILES,
        Event::MemoryHit => &MEMORY_HITS,
        Event::DiskHit => &DISK_HITS,
        Event::DiskWrite => &DISK_WRITES,
        Event::LibraryLaunch => &LIBRARY_LAUNCHES,
        Event::GenericLaunch => &GENERIC_LAUNCHES,
    };
    c.fetch_add(1, Ordering::Relaxed);
}

/// Counts `bytes` of CUBIN loaded into a module.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn count_code_bytes(bytes: usize) {
    CODE_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// This process's counters as the backend-independent [`crate::BackendStats`].
pub fn backend_stats() -> crate::BackendStats {
    let s = stats();
    crate::BackendStats {
        compiles: s.nvrtc_compiles,
        memory_hits: s.memory_hits,
        disk_hits: s.disk_hits,
        disk_writes: s.disk_writes,
        code_bytes: CODE_BYTES.load(Ordering::Relaxed),
        library_launches: LIBRARY_LAUNCHES.load(Ordering::Relaxed),
        generic_launches: GENERIC_LAUNCHES.load(Ordering::Relaxed),
    }
}

/// The counters so far in this process (all zero without the `cuda` feature or a GPU).
pub fn stats() -> CudaStats {
    CudaStats {
        nvrtc_compiles: NVRTC_COMPILES.load(Ordering::Relaxed),
        memory_hits: MEMORY_HITS.load(Ordering::Relaxed),
        disk_hits: DISK_HITS.load(Ordering::Relaxed),
        disk_writes: DISK_WRITES.load(Ordering::Relaxed),
    }
}
