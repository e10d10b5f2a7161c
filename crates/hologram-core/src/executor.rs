//! The Executor: one backend, its caching allocator and its kernel cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hologram_backends::{
    Backend, Capabilities, CompiledKernel, DeviceInfo, KernelArg, LaunchConfig,
};
use hologram_compiler::{Canonical, Digest};
use hologram_isa::Kernel;

use crate::alloc::{AllocatorStats, CachingAllocator};
use crate::backend_type::{self, BackendType};
use crate::buffer::Buffer;
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::plan::step::{Recorder, Step};

/// Counters of an executor's kernel cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelCacheStats {
    /// Kernels compiled by the backend.
    pub compiles: u64,
    /// Requests served from the cache.
    pub hits: u64,
    /// Kernels held.
    pub entries: u64,
    /// Element-wise launches whose kernel came from the launch cache (keyed by the expression
    /// and operand addressing), skipping kernel building, canonicalization and the digest
    /// lookup; such launches do not count as `hits`.
    pub launch_hits: u64,
}

/// Everything an executor counts: its kernel cache, its backend's compiler and launch paths,
/// its allocator, and the launches made through it.
///
/// ```
/// let exec = hologram_core::Executor::cpu();
/// let a = hologram_core::Tensor::from_slice(&exec, &[1.0f32, 2.0, 3.0], &[3])?;
/// let _ = a.add(&a)?.relu()?.to_vec::<f32>()?;
/// let s = exec.stats();
/// assert_eq!(s.kernels.compiles, 1); // one kernel for relu(a + a)
/// assert_eq!(s.backend.library_launches, 1); // run as a native element-wise loop
/// assert_eq!(s.launches, 1);
/// # Ok::<(), hologram_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutorStats {
    /// The executor's kernel cache (keyed by canonical form).
    pub kernels: KernelCacheStats,
    /// The backend's counters: device-code compiles, its own caches, code bytes, launch paths.
    pub backend: hologram_backends::BackendStats,
    /// The caching allocator.
    pub allocator: AllocatorStats,
    /// Launches made through this executor.
    pub launches: u64,
}

impl std::fmt::Display for ExecutorStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = &self.kernels;
        let a = &self.allocator;
        writeln!(
            f,
            "kernel cache: {} compiled, {} hits, {} held, {} launch-cache hits",
            k.compiles, k.hits, k.entries, k.launch_hits
        )?;
        writeln!(f, "backend: {}", self.backend)?;
        writeln!(
            f,
            "allocator: {} allocations, {} from cache, {} bytes in use, {} reserved (peak {})",
            a.allocations, a.cache_hits, a.bytes_in_use, a.bytes_reserved, a.peak_reserved
        )?;
        write!(f, "launches: {}", self.launches)
    }
}

/// A plan output buffer handed out as a view: its memory and the byte offset of the view.
type PlanBuffer = (std::sync::Weak<dyn hologram_backends::DeviceMemory>, usize);

pub(crate) struct Inner {
    pub backend: Arc<dyn Backend>,
    pub backend_type: BackendType,
    pub allocator: CachingAllocator,
    /// The one kernel cache: compiled kernels by canonical digest (the target is this
    /// executor's backend).
    kernels: Mutex<(HashMap<Digest, CompiledKernel>, KernelCacheStats)>,
    /// Element-wise kernels by launch key (see [`crate::kernels::launch_cache`]).
    pub(crate) launch_cache: crate::kernels::launch_cache::LaunchCache,
    launches: std::sync::atomic::AtomicU64,
    /// The plan being recorded, if any (see [`crate::plan`]).
    recorder: Mutex<Option<Recorder>>,
    /// Whether `recorder` is set (checked without locking on every launch).
    recording: std::sync::atomic::AtomicBool,
    /// Plan output buffers handed out as views, by the address of their first element: when
    /// one comes back as another plan's input (through DLPack, as another library's tensor),
    /// that plan reads the buffer itself, not the import.
    plan_buffers: Mutex<std::collections::BTreeMap<u64, PlanBuffer>>,
    /// Vectors of ones by dtype (the longest made so far), for sums as GEMMs
    /// ([`Executor::ones_vector`]). Raw backend memory, outside the allocator: plans that read
    /// one keep it alive through their steps, and nothing writes it after it is filled.
    ones: Mutex<Vec<(DType, hologram_backends::Memory)>>,
}

/// Runs kernels on one backend. Cheap to clone (clones share the backend, allocator and cache).
///
/// ```
/// use hologram_core::{Executor, BackendType, LaunchConfig};
/// use hologram_isa::semantics::Value;
///
/// let exec = Executor::new_with_backend(BackendType::Cpu)?;
/// let kernel = exec.assemble(".kernel iota\n.param .buf.u32 y .rw\n    mov.u32 %i, %gid;\n    st.u32 y[%i], %i;\n")?;
/// let y = exec.allocate::<u32>(64)?;
/// exec.launch(&kernel, &LaunchConfig::linear(2, 32), &[y.arg()])?;
/// assert_eq!(y.to_vec()?[63], 63);
/// # Ok::<(), hologram_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Executor {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Executor({})", self.inner.backend_type)
    }
}

impl Executor {
    fn from_backend(backend_type: BackendType, backend: Arc<dyn Backend>) -> Self {
        Executor {
            inner: Arc::new(Inner {
                allocator: CachingAllocator::new(backend.clone()),
                backend,
                backend_type,
                kernels: Mutex::new((HashMap::new(), KernelCacheStats::default())),
                launch_cache: Default::default(),
                launches: std::sync::atomic::AtomicU64::new(0),
                recorder: Mutex::new(None),
                recording: std::sync::atomic::AtomicBool::new(false),
                plan_buffers: Mutex::new(std::collections::BTreeMap::new()),
                ones: Mutex::new(Vec::new()),
            }),
        }
    }

    /// An executor on the given backend, or an error saying why it cannot run here.
    pub fn new_with_backend(backend: BackendType) -> Result<Self> {
        Ok(Self::from_backend(backend, backend_type::open(backend)?))
    }

    /// An executor on the best available backend: `HOLOGRAM_BACKEND` if set, else CUDA, then a
    /// hardware Metal/Vulkan/DX12 GPU, then the CPU.
    pub fn new_auto() -> Result<Self> {
        let (kind, backend) = backend_type::open_auto()?;
        Ok(Self::from_backend(kind, backend))
    }

    /// An executor on a backend built by the caller (for tests and custom setups).
    pub fn with_backend(backend_type: BackendType, backend: Arc<dyn Backend>) -> Self {
        Self::from_backend(backend_type, backend)
    }

    /// An executor on the CPU backend (always available).
    pub fn cpu() -> Self {
        Self::from_backend(
            BackendType::Cpu,
            Arc::new(hologram_backends::CpuBackend::new()),
        )
    }

    /// Which backend this executor runs on.
    pub fn backend_type(&self) -> BackendType {
        self.inner.backend_type
    }

    /// The backend itself, for library code that talks to it directly.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// Sharing memory and streams with other libraries (DLPack: PyTorch, CuPy, NumPy), where
    /// the backend can: the CPU (host memory) and CUDA (device memory, streams); `None` on wgpu.
    pub fn interop(&self) -> Option<&dyn hologram_backends::Interop> {
        self.inner.backend.interop()
    }

    /// The device.
    pub fn info(&self) -> DeviceInfo {
        self.inner.backend.info()
    }

    /// What the device can run.
    pub fn capabilities(&self) -> Capabilities {
        self.inner.backend.capabilities()
    }

    /// A buffer of `len` elements (contents unspecified; use [`Executor::zeros`] for zeros).
    pub fn allocate<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        Buffer::new(self, len)
    }

    /// A buffer of `len` zeros.
    pub fn zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let b = Buffer::new(self, len)?;
        b.write(&vec![T::zeroed(); len])?;
        Ok(b)
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        let b = Buffer::new(self, data.len())?;
        b.write(data)?;
        Ok(b)
    }

    /// Compiles a kernel in canonical form, or returns the compiled kernel of the same
    /// canonical digest from the cache.
    pub fn compile(&self, kernel: &Canonical) -> Result<CompiledKernel> {
        let key = kernel.digest();
        {
            let mut guard = self.inner.kernels.lock().unwrap_or_else(|p| p.into_inner());
            let (cache, stats) = &mut *guard;
            if let Some(k) = cache.get(&key) {
                stats.hits += 1;
                return Ok(k.clone());
            }
        }
        let compiled = self.inner.backend.compile(kernel)?;
        let mut guard = self.inner.kernels.lock().unwrap_or_else(|p| p.into_inner());
        let (cache, stats) = &mut *guard;
        stats.compiles += 1;
        let compiled = cache.entry(key).or_insert(compiled).clone();
        stats.entries = cache.len() as u64;
        Ok(compiled)
    }

    /// Validates, canonicalizes and compiles a kernel (one assembled by hand is checked
    /// again first). Keep the [`Canonical`] (or the compiled kernel) to launch it many times:
    /// canonicalization costs more than a launch.
    pub fn compile_kernel(&self, kernel: &Kernel) -> Result<CompiledKernel> {
        self.compile(&Canonical::new(kernel)?)
    }

    /// Assembles `.hasm` text and compiles it. Keep the result to launch it many times.
    pub fn assemble(&self, text: &str) -> Result<CompiledKernel> {
        self.compile(&Canonical::assemble(text)?)
    }

    /// Launches a compiled kernel. `args[i]` binds parameter `i`: use [`Buffer::arg`] for
    /// buffers and a [`hologram_isa::semantics::Value`] (`.into()`) for scalars.
    pub fn launch(
        &self,
        kernel: &CompiledKernel,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        self.inner
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.backend.launch(kernel, config, args)?;
        self.record(|| Step::Launch {
            kernel: kernel.clone(),
            config: *config,
            args: args.to_vec(),
        });
        Ok(())
    }

    /// Runs a small element-wise map of two operands with the backend's library code, counted
    /// as a launch when it ran; false where the backend has none for it (see
    /// [`hologram_backends::Library::binary_map`]). Never while this thread records a plan,
    /// whose steps are launches.
    pub(crate) fn binary_map(&self, map: &hologram_backends::BinaryMap<'_>) -> Result<bool> {
        if self.recording_here() || !self.inner.backend.binary_map(map)? {
            return Ok(false);
        }
        self.inner
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(true)
    }

    /// Runs a GEMM on the backend (counted as a launch).
    pub fn gemm(
        &self,
        desc: &hologram_backends::GemmDesc,
        a: &hologram_backends::BufferArg,
        b: &hologram_backends::BufferArg,
        c: &hologram_backends::BufferArg,
    ) -> Result<()> {
        self.inner
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.backend.gemm(desc, a, b, c)?;
        self.record(|| Step::Gemm {
            desc: *desc,
            a: a.clone(),
            b: b.clone(),
            c: c.clone(),
        });
        Ok(())
    }

    /// Whether [`Executor::gemm`] runs a descriptor with an outer batch
    /// ([`hologram_backends::OuterBatch`]) as one call (cuBLAS); where not, as a loop of calls.
    pub fn gemm_outer_in_one_call(&self) -> bool {
        self.inner.backend.gemm_outer_in_one_call()
    }

    /// `len` ones of a float `dtype` in device memory that stays unchanged, as a GEMM operand
    /// (sums over an axis as products with it). Made once per dtype and length class.
    pub(crate) fn ones_vector(
        &self,
        dtype: DType,
        len: usize,
    ) -> Result<hologram_backends::BufferArg> {
        let one: &[u8] = match dtype {
            DType::F32 => &[0x00, 0x00, 0x80, 0x3f],
            DType::F64 => &[0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
            DType::F16 => &[0x00, 0x3c],
            DType::BF16 => &[0x80, 0x3f],
            other => {
                return Err(Error::Internal(format!(
                    "a vector of ones for GEMMs of {other}"
                )))
            }
        };
        let bytes = len * one.len();
        let mut ones = self.inner.ones.lock().unwrap_or_else(|p| p.into_inner());
        let have = ones
            .iter()
            .find(|(d, m)| *d == dtype && m.size() >= bytes)
            .map(|(_, m)| m.clone());
        let memory = match have {
            Some(m) => m,
            None => {
                let elements = len.max(4096).next_power_of_two();
                let memory = self.inner.backend.allocate(elements * one.len())?;
                self.inner
                    .backend
                    .copy_in(&memory, 0, &one.repeat(elements))?;
                ones.retain(|(d, _)| *d != dtype);
                ones.push((dtype, memory.clone()));
                memory
            }
        };
        Ok(hologram_backends::BufferArg {
            memory,
            offset: 0,
            len: bytes,
        })
    }

    /// Whether the backend's GEMM is a vendor BLAS (cuBLAS), fast for matrix-vector products.
    pub fn has_vendor_blas(&self) -> bool {
        self.inner.backend.vendor_blas()
    }

    /// Runs one convolution pass through the backend's library (see
    /// [`hologram_backends::Library::supports_conv`]); recorded when a plan is being recorded.
    pub fn conv(
        &self,
        desc: &hologram_backends::ConvDesc,
        pass: hologram_backends::ConvPass,
        a: &hologram_backends::BufferArg,
        b: &hologram_backends::BufferArg,
        out: &hologram_backends::BufferArg,
    ) -> Result<()> {
        self.inner
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.backend.conv(desc, pass, a, b, out)?;
        self.record(|| Step::Conv {
            desc: *desc,
            pass,
            a: a.clone(),
            b: b.clone(),
            out: out.clone(),
        });
        Ok(())
    }

    /// Copies `len` bytes between device buffers (recorded when a plan is being recorded).
    pub(crate) fn copy_device(
        &self,
        src: &hologram_backends::Memory,
        src_offset: usize,
        dst: &hologram_backends::Memory,
        dst_offset: usize,
        len: usize,
    ) -> Result<()> {
        self.inner
            .backend
            .copy(src, src_offset, dst, dst_offset, len)?;
        self.record(|| Step::Copy {
            src: src.clone(),
            src_offset,
            dst: dst.clone(),
            dst_offset,
            len,
        });
        Ok(())
    }

    /// Queues a recorded step again (a plan's replay, step by step): on the backend, counted
    /// like the call that recorded it, and recorded in turn when a plan is being recorded here.
    pub(crate) fn queue_step(&self, step: &Step) -> Result<()> {
        if matches!(
            step,
            Step::Launch { .. } | Step::Gemm { .. } | Step::Conv { .. }
        ) {
            self.inner
                .launches
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        step.run(self.inner.backend.as_ref())?;
        self.record(|| step.clone());
        Ok(())
    }

    /// Remembers a plan output buffer (`memory` at byte `offset`) handed out as a view.
    pub(crate) fn register_plan_buffer(
        &self,
        address: u64,
        memory: &hologram_backends::Memory,
        offset: usize,
    ) {
        let mut map = self
            .inner
            .plan_buffers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.retain(|_, (m, _)| m.strong_count() > 0);
        map.insert(address, (Arc::downgrade(memory), offset));
    }

    /// The plan output buffer holding the `bytes` bytes at `address` (from its first element,
    /// or inside it: a view another library made of it), if one does: its memory and the byte
    /// offset of `address` in that memory.
    pub(crate) fn plan_buffer(
        &self,
        address: u64,
        bytes: usize,
    ) -> Option<(hologram_backends::Memory, usize)> {
        let map = self
            .inner
            .plan_buffers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (&start, (m, off)) = map.range(..=address).next_back()?;
        let m = m.upgrade()?;
        let at = off + usize::try_from(address - start).ok()?;
        (at.checked_add(bytes)? <= m.size()).then_some((m, at))
    }

    /// True when this thread is recording a plan on this executor.
    pub(crate) fn recording_here(&self) -> bool {
        if !self
            .inner
            .recording
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return false;
        }
        let guard = self
            .inner
            .recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .is_some_and(|r| r.thread == std::thread::current().id())
    }

    /// Appends the step `make` builds to the plan this thread records, if it records one.
    pub(crate) fn record(&self, make: impl FnOnce() -> Step) {
        if !self
            .inner
            .recording
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let mut guard = self
            .inner
            .recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(r) = guard
            .as_mut()
            .filter(|r| r.thread == std::thread::current().id())
        {
            r.steps.push(make());
        }
    }

    /// Starts recording this thread's device work (and serving its allocations from `arena`).
    pub(crate) fn begin_recording(&self, arena: Arc<crate::alloc::arena::Arena>) -> Result<()> {
        let mut guard = self
            .inner
            .recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if guard.is_some() {
            return Err(Error::InvalidArgument(
                "a plan is already being recorded on this executor; finish it first".into(),
            ));
        }
        *guard = Some(Recorder {
            thread: std::thread::current().id(),
            steps: Vec::new(),
        });
        self.inner
            .recording
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.allocator.begin_arena(arena);
        Ok(())
    }

    /// Stops recording and returns the steps recorded.
    pub(crate) fn end_recording(&self) -> Vec<Step> {
        self.inner.allocator.end_arena();
        self.inner
            .recording
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let mut guard = self
            .inner
            .recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        guard.take().map(|r| r.steps).unwrap_or_default()
    }

    /// Serves this thread's allocations from `arena` without recording (binding a plan's
    /// inputs).
    pub(crate) fn allocate_in(&self, arena: Option<Arc<crate::alloc::arena::Arena>>) {
        match arena {
            Some(a) => self.inner.allocator.begin_arena(a),
            None => self.inner.allocator.end_arena(),
        }
    }

    /// Kernel launches made through this executor so far (tensor ops included).
    pub fn launch_count(&self) -> u64 {
        self.inner
            .launches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True when both handles share one executor.
    pub fn same_as(&self, other: &Executor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Waits for all submitted work.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.inner.backend.synchronize()?)
    }

    /// Counters of the caching allocator.
    pub fn allocator_stats(&self) -> AllocatorStats {
        self.inner.allocator.stats()
    }

    /// Returns cached free blocks to the device, and idle page-locked host blocks (see
    /// [`Tensor::pinned_buffer`](crate::Tensor::pinned_buffer)) to the system.
    pub fn empty_cache(&self) {
        self.inner.allocator.empty_cache();
        self.backend().release_host_pool();
    }

    /// All counters: kernel cache, backend, allocator, launches.
    pub fn stats(&self) -> ExecutorStats {
        ExecutorStats {
            kernels: self.kernel_cache_stats(),
            backend: self.inner.backend.stats(),
            allocator: self.allocator_stats(),
            launches: self.launch_count(),
        }
    }

    /// Counters of the kernel cache.
    pub fn kernel_cache_stats(&self) -> KernelCacheStats {
        let mut s = self
            .inner
            .kernels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1;
        s.launch_hits = self.inner.launch_cache.hits();
        s
    }
}
