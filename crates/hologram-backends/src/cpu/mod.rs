//! The CPU backend: an interpreter that runs any valid kernel.
//!
//! Each block executes instruction by instruction across all of its lanes at once
//! (structure-of-arrays registers, active masks for divergence), and blocks run in parallel on
//! rayon's thread pool. Every access to a buffer, shared or scratch array is bounds-checked.
//! Launches are synchronous; a batch of blocks that runs past the launch timeout stops the
//! launch with `LaunchTimeout` (`deadline.rs`).

mod bind;
mod blas;
mod compile;
mod deadline;
mod device_lock;
mod exec;
mod fanout;
mod gemm;
mod lanes;
mod lanes_scalar;
mod memops;
mod memory;
mod native;
mod native_divide;
mod native_pool;
mod native_reduce;
mod native_rows;
mod native_scalar;
mod native_walk;
mod openmp;
mod private;
mod small_map;
mod trust;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hologram_compiler::patterns::Pattern;
use hologram_compiler::Canonical;

pub use blas::blas_library;
pub use memory::CpuMemory;
pub use openmp::{share_openmp_threads, thread_pool, ThreadPool};

use self::compile::CpuKernel;
use self::exec::{BlockState, LaunchCtx};
use crate::backend::{
    Backend, BackendStats, Capabilities, CompiledKernel, DeviceInfo, KernelArg, LaunchConfig,
    Memory,
};
use crate::backend_type::BackendType;
use crate::error::{BackendError, Result};
use crate::launch::{check_launch, check_range};

/// Most lanes in one block on the CPU (as on CUDA).
pub const MAX_BLOCK_LANES: u32 = 1024;
/// Lanes the interpreter runs together when blocks are independent.
const BATCH_LANES: usize = 1024;

/// The CPU backend. Always available.
#[derive(Debug)]
pub struct CpuBackend {
    /// Run recognized patterns (element-wise maps) as native loops.
    native_patterns: bool,
    counters: Counters,
}

/// The CPU's [`BackendStats`] counters.
#[derive(Debug, Default)]
struct Counters {
    compiles: AtomicU64,
    code_bytes: AtomicU64,
    library_launches: AtomicU64,
    generic_launches: AtomicU64,
}

fn bump(c: &AtomicU64, by: u64) {
    c.fetch_add(by, Ordering::Relaxed);
}

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::new()
    }
}

impl CpuBackend {
    /// Creates the backend (it uses rayon's global thread pool).
    pub fn new() -> Self {
        CpuBackend {
            native_patterns: true,
            counters: Counters::default(),
        }
    }

    /// A backend that runs every kernel on the interpreter, recognized patterns included (for
    /// testing the two paths against each other).
    pub fn interpreter_only() -> Self {
        CpuBackend {
            native_patterns: false,
            counters: Counters::default(),
        }
    }

    fn memory<'a>(&self, m: &'a Memory) -> Result<&'a CpuMemory> {
        m.as_any()
            .downcast_ref::<CpuMemory>()
            .ok_or_else(|| BackendError::ForeignBuffer("not host memory".into()))
    }
}

fn cpu_name() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!("{model} ({} threads)", rayon::current_num_threads())
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendType {
        BackendType::Cpu
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: BackendType::Cpu,
            name: cpu_name(),
            memory_bytes: None,
            compute_units: rayon::current_num_threads() as u32,
            arch: std::env::consts::ARCH.to_string(),
            driver: None,
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_block_lanes: MAX_BLOCK_LANES,
            max_shared_bytes: hologram_isa::MAX_SHARED_BYTES,
            host_memory: true,
        }
    }

    fn allocate(&self, bytes: usize) -> Result<Memory> {
        Ok(Arc::new(CpuMemory::new(bytes)?))
    }

    fn copy_in(&self, dst: &Memory, offset: usize, src: &[u8]) -> Result<()> {
        let m = self.memory(dst)?;
        check_range(offset, src.len(), m.size_bytes())?;
        let _device = device_lock::lock();
        // SAFETY: the range is inside the allocation (checked above), and no launch or copy
        // touches it meanwhile (the device lock). `src` is a shared slice, so nothing writes its
        // bytes while it lives: it cannot overlap the bytes written here.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), m.as_ptr().add(offset), src.len()) };
        Ok(())
    }

    fn copy_out(&self, src: &Memory, offset: usize, dst: &mut [u8]) -> Result<()> {
        let m = self.memory(src)?;
        check_range(offset, dst.len(), m.size_bytes())?;
        let _device = device_lock::lock();
        // SAFETY: as for `copy_in`; `dst` is an exclusive slice, so it overlaps nothing else.
        unsafe {
            std::ptr::copy_nonoverlapping(m.as_ptr().add(offset), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }

    fn copy(
        &self,
        src: &Memory,
        src_offset: usize,
        dst: &Memory,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        let (s, d) = (self.memory(src)?, self.memory(dst)?);
        check_range(src_offset, len, s.size_bytes())?;
        check_range(dst_offset, len, d.size_bytes())?;
        let _device = device_lock::lock();
        // SAFETY: both ranges are inside their allocations (checked above) and nothing else
        // touches them meanwhile (the device lock); `copy` allows the ranges to overlap.
        unsafe { std::ptr::copy(s.as_ptr().add(src_offset), d.as_ptr().add(dst_offset), len) };
        Ok(())
    }

    fn compile(&self, canonical: &Canonical) -> Result<CompiledKernel> {
        let kernel = canonical.kernel();
        let _span =
            tracing::debug_span!("compile", backend = "cpu", kernel = %kernel.name).entered();
        let mut lowered = compile::lower(kernel)?;
        // The kernel's intent picks the native loop; everything else runs on the interpreter.
        match canonical.pattern().filter(|_| self.native_patterns) {
            Some(Pattern::Map(pattern)) => {
                tracing::debug!(kernel = %kernel.name, "element-wise map: native loop");
                lowered.native = Some(native::NativeMap::plan(&lowered, pattern.clone()));
            }
            Some(Pattern::Reduce(pattern)) => {
                tracing::debug!(kernel = %kernel.name, "reduction: native loop");
                lowered.native_reduce = Some(*pattern);
            }
            Some(Pattern::Rows(pattern)) => {
                tracing::debug!(kernel = %kernel.name, "row kernel: native loop");
                lowered.native_rows = Some(*pattern);
            }
            Some(Pattern::Pool(pattern)) => {
                tracing::debug!(kernel = %kernel.name, "max pooling: native loop");
                lowered.native_pool = Some(*pattern);
            }
            // Layer norm runs fused only on GPUs (the core composes it on the CPU).
            Some(Pattern::Norm(_)) | None => {}
        }
        bump(&self.counters.compiles, 1);
        bump(&self.counters.code_bytes, lowered.code_bytes() as u64);
        Ok(CompiledKernel::new(kernel.clone(), Arc::new(lowered)))
    }

    fn launch(
        &self,
        kernel: &CompiledKernel,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        let k: &CpuKernel = kernel.downcast().ok_or_else(|| BackendError::Compile {
            kernel: kernel.kernel().name.clone(),
            log: "this kernel was compiled by another backend".into(),
        })?;
        let kern = &k.kernel;
        let _span = tracing::debug_span!("launch", backend = "cpu", kernel = %kern.name, grid = ?config.grid, block = ?config.block).entered();
        check_launch(kern, config, args, &self.capabilities())?;
        let blocks = config.grid_blocks();
        if blocks == 0 {
            return Ok(());
        }
        let block_lanes = config.block_lanes() as usize;
        // Blocks of kernels without barriers or shared memory are independent lane sets, so
        // several run together as one wider batch, which amortizes per-instruction overhead.
        let batch_blocks = if kern.facts.uses_barrier || !kern.shared.is_empty() {
            1
        } else {
            (BATCH_LANES / block_lanes).max(1)
        };
        let lanes = block_lanes * batch_blocks;
        let bind::Bound {
            mut globals,
            scalars,
            sizes,
        } = bind::bind(kern, args, lanes, |m| self.memory(m))?;
        let device = device_lock::lock();
        let const_bits = exec::const_bits(k, &scalars);
        if let Some(native) = &k.native {
            let total = blocks.saturating_mul(block_lanes as u64);
            if let Some(n) = native.count(&globals, &scalars, total) {
                if native.can_run(&globals, &sizes, n)
                    && native.run(k, &globals, &const_bits, &sizes, n, device.parallel)
                {
                    bump(&self.counters.library_launches, 1);
                    return Ok(());
                }
            }
        }
        if let Some(pattern) = &k.native_reduce {
            let args = native_reduce::Args {
                globals: &globals,
                scalars: &scalars,
                sizes: &sizes,
                parallel: device.parallel,
            };
            if native_reduce::run(pattern, &args, config).is_some() {
                bump(&self.counters.library_launches, 1);
                return Ok(());
            }
        }
        if let Some(pattern) = &k.native_rows {
            let args = native_reduce::Args {
                globals: &globals,
                scalars: &scalars,
                sizes: &sizes,
                parallel: device.parallel,
            };
            if native_rows::run(pattern, &args, config).is_some() {
                bump(&self.counters.library_launches, 1);
                return Ok(());
            }
        }
        if let Some(pattern) = &k.native_pool {
            let args = native_reduce::Args {
                globals: &globals,
                scalars: &scalars,
                sizes: &sizes,
                parallel: device.parallel,
            };
            let lanes = blocks.saturating_mul(block_lanes as u64);
            if native_pool::run(pattern, &args, lanes).is_some() {
                bump(&self.counters.library_launches, 1);
                return Ok(());
            }
        }
        let batches = blocks.div_ceil(batch_blocks as u64);
        // Batches run in parallel only where buffers that overlap a written one do so element
        // for element (see `bind::racy_buffers`); accesses to buffers where blocks on different
        // threads may meet are then relaxed atomics, the rest plain copies.
        let racy = bind::racy_buffers(&globals, &sizes, &k.written, &k.gid_private);
        let parallel = batches > 1 && device.parallel && racy.is_some();
        for (g, r) in globals.iter_mut().zip(racy.unwrap_or_default()) {
            g.racy = parallel && r;
        }
        bump(&self.counters.generic_launches, 1);
        let failed = AtomicBool::new(false);
        let ctx = LaunchCtx {
            k,
            grid: config.grid,
            block: config.block,
            block_lanes,
            batch_blocks,
            lanes,
            gid_block_major: exec::gid_is_block_major(config.grid, config.block),
            globals: globals.into_vec(),
            const_bits: const_bits.into_vec(),
            timeout: config.effective_timeout(),
            failed: &failed,
        };
        let first_error: Mutex<Option<BackendError>> = Mutex::new(None);
        let run = |state: &mut BlockState, batch: u64| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let first = batch * batch_blocks as u64;
            let count = (blocks - first).min(batch_blocks as u64) as usize;
            if let Err(e) = state.run_batch(&ctx, first, count) {
                // The error is stored before the flag is raised, so the batches that stop because
                // of the flag cannot report their stop in its place.
                if let Ok(mut slot) = first_error.lock() {
                    slot.get_or_insert(e);
                }
                failed.store(true, Ordering::Relaxed);
            }
        };
        if !parallel {
            let mut state = BlockState::new(&ctx);
            for batch in 0..batches {
                run(&mut state, batch);
            }
        } else {
            fanout::shared_range(..batches as usize)
                .for_each_init(|| BlockState::new(&ctx), |state, b| run(state, b as u64));
        }
        match first_error.into_inner() {
            Ok(Some(e)) => Err(e),
            Ok(None) => Ok(()),
            Err(_) => Err(BackendError::Device(
                "a CPU worker panicked during the launch".into(),
            )),
        }
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn stats(&self) -> BackendStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        BackendStats {
            compiles: get(&self.counters.compiles),
            code_bytes: get(&self.counters.code_bytes),
            library_launches: get(&self.counters.library_launches),
            generic_launches: get(&self.counters.generic_launches),
            ..BackendStats::default()
        }
    }

    fn library(&self) -> Option<&dyn crate::backend::Library> {
        Some(self)
    }

    fn interop(&self) -> Option<&dyn crate::backend::Interop> {
        Some(self)
    }
}

impl crate::backend::Library for CpuBackend {
    fn gemm(
        &self,
        desc: &crate::library::GemmDesc,
        a: &crate::backend::BufferArg,
        b: &crate::backend::BufferArg,
        c: &crate::backend::BufferArg,
    ) -> Result<()> {
        let _span =
            tracing::debug_span!("gemm", backend = "cpu", m = desc.m, n = desc.n, k = desc.k)
                .entered();
        bump(&self.counters.library_launches, 1);
        gemm::gemm(desc, a, b, c)
    }

    fn binary_map(&self, map: &crate::library::BinaryMap<'_>) -> Result<bool> {
        self.small_binary_map(map)
    }
}

impl crate::backend::Interop for CpuBackend {
    unsafe fn import_memory(
        &self,
        address: u64,
        bytes: usize,
        owner: crate::backend::MemoryOwner,
    ) -> Result<Memory> {
        // SAFETY: `CpuMemory::import` asks what this function's own contract asks of the
        // caller: host memory that stays valid and writable while `owner` lives.
        Ok(Arc::new(unsafe {
            CpuMemory::import(address, bytes, owner)?
        }))
    }
}

impl CpuMemory {
    fn size_bytes(&self) -> usize {
        crate::backend::DeviceMemory::size(self)
    }
}

#[cfg(test)]
mod branchless_ulp_tests;
#[cfg(test)]
mod soundness_tests;

#[cfg(test)]
mod native_tests;
