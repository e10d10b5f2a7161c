//! [`CudaBackend`]: the [`Backend`] implementation for NVIDIA GPUs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cudarc::driver::result as drv;
use cudarc::driver::sys;
use hologram_compiler::patterns::Pattern;
use hologram_compiler::{Canonical, Digest};
use hologram_isa::Kernel;

use super::blas::Blas;
use super::cache::ModuleCache;
use super::codegen::{self, CodegenOptions, RowForm, CODEGEN_VERSION};
use super::device::{cublas, device_error, Device};
use super::dnn::{self, Dnn};
use super::dnn_api;
use super::gemm_pointers::{self, PointerArrays};
use super::launch::{self, ErrorRecord};
use super::memory::{device_address, CudaMemory, Staging, STAGING_THRESHOLD};
use super::module::Module;
use super::nvrtc::{self, Output};
use super::pinned_pool::{self, PinnedPool};
use super::stats::{self, count, CudaStats, Event};
use super::stream_order::StreamOrder;
use crate::backend::{
    Backend, BufferArg, Capabilities, CompiledKernel, DeviceInfo, KernelArg, LaunchConfig, Memory,
    MemoryOwner,
};
use crate::backend_type::BackendType;
use crate::error::{BackendError, Result};
use crate::launch::{check_launch, check_range};
use crate::library::{gemm::generic_gemm, ConvDesc, ConvPass, GemmDesc};

/// Most `.shared` bytes a kernel may declare (static shared memory on every CUDA GPU).
const MAX_SHARED_BYTES: usize = 48 * 1024;

/// A kernel compiled for CUDA: the checked variant is loaded at compile time, others (unchecked,
/// or with `__launch_bounds__` for large blocks) on first use.
struct CudaKernel {
    kernel: Arc<Kernel>,
    id: u32,
    digest: Digest,
    checked: Arc<Module>,
    variants: Mutex<HashMap<CodegenOptions, Arc<Module>>>,
    /// An element-wise map compiled in its vectorized form (four lanes per thread).
    vector_map: bool,
    /// A row kernel with a dedicated form (`codegen::RowForm`), for launches that fit it.
    rows: Option<RowForm>,
    /// The parameters divided by through host-computed multipliers (`codegen::divide`).
    divisors: Vec<u32>,
}

/// Launches queued since the stream was last drained, for the host's limit on waiting.
#[derive(Default)]
struct Queued {
    launches: u64,
    /// The longest timeout among them.
    longest: Duration,
    /// One of them has no timeout: wait as long as it takes.
    unlimited: bool,
    /// The last one's kernel (named if the wait gives up).
    last: String,
}

/// The CUDA backend: one device, one stream, a kernel cache in memory and on disk, and cuBLAS
/// for GEMM when it is installed.
pub struct CudaBackend {
    modules: ModuleCache,
    kernels: Mutex<Vec<Arc<Kernel>>>,
    record: ErrorRecord,
    queued: Mutex<Queued>,
    /// A wait gave up on the GPU: the stream may never drain, so no more work is taken.
    stuck: AtomicBool,
    staging: Mutex<Option<Staging>>,
    /// Page-locked blocks lent to reads into new host arrays (`Backend::pinned_host`).
    pinned: Arc<PinnedPool>,
    blas: Mutex<Option<std::result::Result<Blas, String>>>,
    /// The device pointer arrays of outer-batched GEMMs (see `gemm_pointers`).
    pointer_arrays: Mutex<PointerArrays>,
    dnn: Mutex<Option<std::result::Result<Dnn, String>>>,
    nvrtc_version: (i32, i32),
    /// The event that orders our stream and other libraries' (DLPack exchanges).
    order: StreamOrder,
    // Last: everything above needs the context and the stream while it is dropped.
    dev: Device,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CudaBackend {
    /// Opens the CUDA device (`HOLOGRAM_CUDA_DEVICE`, default 0). Without libcuda, NVRTC or a
    /// GPU this returns [`BackendError::Unavailable`] saying which is missing.
    pub fn new() -> Result<CudaBackend> {
        CudaBackend::open(Device::open()?)
    }

    /// Opens CUDA device `ordinal` (0 is the first GPU, as in `cuda:0`). An ordinal past the
    /// last GPU is [`BackendError::Unavailable`] naming how many there are.
    pub fn on_device(ordinal: usize) -> Result<CudaBackend> {
        CudaBackend::open(Device::open_at(Some(ordinal))?)
    }

    /// The device and its stream, for the collectives and peer copies of this crate.
    pub(crate) fn device(&self) -> &Device {
        &self.dev
    }

    /// Fails once the backend refused further work, for the collectives of this crate.
    pub(crate) fn check_usable(&self) -> Result<()> {
        self.usable()
    }

    fn open(dev: Device) -> Result<CudaBackend> {
        let nvrtc_version = nvrtc::version()?;
        let record = ErrorRecord::new(&dev)?;
        let order = StreamOrder::new(&dev);
        let pinned = Arc::new(PinnedPool::new(
            dev.ctx.clone(),
            pinned_pool::limit_from_env()?,
        ));
        Ok(CudaBackend {
            modules: ModuleCache::new(),
            kernels: Mutex::new(Vec::new()),
            record,
            queued: Mutex::new(Queued::default()),
            stuck: AtomicBool::new(false),
            staging: Mutex::new(None),
            pinned,
            blas: Mutex::new(None),
            pointer_arrays: Mutex::new(PointerArrays::default()),
            dnn: Mutex::new(None),
            nvrtc_version,
            order,
            dev,
        })
    }

    /// Kernel-cache counters of this process (NVRTC compiles, memory and disk hits).
    pub fn stats(&self) -> CudaStats {
        stats::stats()
    }

    /// The device architecture, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        self.dev.arch()
    }

    /// Makes work queued later on `consumer` wait for the work queued so far on `producer`,
    /// without blocking the host.
    fn stream_wait(&self, producer: sys::CUstream, consumer: sys::CUstream) -> Result<()> {
        // DLPack's 0 is ambiguous for CUDA; the driver reads a null stream as the legacy one.
        if consumer == producer || self.dev.ordered_by_legacy(producer, consumer) {
            return Ok(());
        }
        self.order.order(&self.dev, producer, consumer)
    }

    /// True when GEMM runs on cuBLAS (else on the generic kernel).
    pub fn has_cublas(&self) -> bool {
        cublas().is_ok()
    }

    fn target(&self, opts: &CodegenOptions) -> String {
        let (maj, min) = self.nvrtc_version;
        format!(
            "cuda;{};codegen={CODEGEN_VERSION};{};nvrtc={maj}.{min}",
            self.dev.arch(),
            opts.tag()
        )
    }

    /// The module of `kernel` compiled with `opts`, from the caches or NVRTC.
    fn module(
        &self,
        kernel: &Kernel,
        digest: &Digest,
        opts: CodegenOptions,
    ) -> Result<Arc<Module>> {
        let key = hologram_compiler::key_of(digest, &self.target(&opts));
        let arch = self.dev.arch();
        self.modules.get(
            key,
            || {
                let _span =
                    tracing::debug_span!("nvrtc", kernel = %kernel.name, options = %opts.tag())
                        .entered();
                let source = codegen::generate(kernel, &opts)?;
                nvrtc::compile(&kernel.name, &source, &arch, Output::Cubin)
            },
            |image| Module::load(&self.dev.ctx, &kernel.name, image),
        )
    }

    fn variant(&self, k: &CudaKernel, opts: CodegenOptions) -> Result<Arc<Module>> {
        if opts == k.default_options() {
            return Ok(k.checked.clone());
        }
        if let Some(m) = lock(&k.variants).get(&opts) {
            return Ok(m.clone());
        }
        let m = self.module(&k.kernel, &k.digest, opts)?;
        lock(&k.variants).insert(opts, m.clone());
        Ok(m)
    }

    fn memory<'a>(&self, m: &'a Memory) -> Result<&'a CudaMemory> {
        m.as_any()
            .downcast_ref::<CudaMemory>()
            .ok_or_else(|| BackendError::ForeignBuffer("not CUDA device memory".into()))
    }

    /// Fails once a wait gave up on the GPU (see [`CudaBackend::drain`]).
    fn usable(&self) -> Result<()> {
        if self.stuck.load(Ordering::Relaxed) {
            return Err(BackendError::Device(
                "this CUDA backend is unusable: an earlier kernel ran past the launch timeout and \
                 the GPU did not stop it; restart the process"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Waits for the stream. Lanes stop themselves at the launch timeout, so a stream with
    /// launches queued ends within about that; the host waits far longer (twice the longest
    /// timeout per queued launch, plus a minute), and past that gives up: the GPU did not stop
    /// the kernel, and the backend refuses further work.
    fn drain(&self) -> Result<()> {
        let queued = std::mem::take(&mut *lock(&self.queued));
        let limit = (queued.launches > 0 && !queued.unlimited).then(|| {
            queued
                .longest
                .saturating_mul(2)
                .saturating_mul(queued.launches.min(u32::MAX as u64) as u32)
                .saturating_add(Duration::from_secs(60))
        });
        if self.dev.sync_within(limit)? {
            return Ok(());
        }
        self.stuck.store(true, Ordering::Relaxed);
        tracing::error!(kernel = %queued.last, "the GPU did not finish within {limit:?}; the CUDA backend stops taking work");
        Err(BackendError::LaunchTimeout {
            kernel: queued.last,
            seconds: queued.longest.as_secs_f64(),
            stuck: true,
        })
    }

    /// Reports (and clears) an error recorded by an earlier launch; the stream must have been
    /// synchronized.
    fn take_error(&self) -> Result<()> {
        self.record.take(&self.dev, |id| {
            lock(&self.kernels).get(id as usize).cloned()
        })
    }

    fn staging(&self) -> Result<MutexGuard<'_, Option<Staging>>> {
        let mut s = lock(&self.staging);
        if s.is_none() {
            *s = Some(Staging::new(&self.dev)?);
        }
        Ok(s)
    }
}

impl CudaKernel {
    /// The options of the module compiled up front (`checked`).
    fn default_options(&self) -> CodegenOptions {
        CodegenOptions {
            vector_map: self.vector_map,
            ..CodegenOptions::default()
        }
    }
}

impl Backend for CudaBackend {
    fn kind(&self) -> BackendType {
        BackendType::Cuda
    }

    fn info(&self) -> DeviceInfo {
        let v = self.dev.driver_version;
        let (maj, min) = self.nvrtc_version;
        let cublas = if self.has_cublas() {
            "cuBLAS"
        } else {
            "no cuBLAS"
        };
        DeviceInfo {
            kind: BackendType::Cuda,
            name: self.dev.name.clone(),
            memory_bytes: Some(self.dev.memory),
            compute_units: self.dev.sms,
            arch: self.dev.arch(),
            driver: Some(format!(
                "CUDA {}.{}, NVRTC {maj}.{min}, {cublas}",
                v / 1000,
                (v % 1000) / 10
            )),
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_block_lanes: self.dev.max_threads.min(1024),
            max_shared_bytes: MAX_SHARED_BYTES.min(hologram_isa::MAX_SHARED_BYTES),
            host_memory: false,
        }
    }

    fn allocate(&self, bytes: usize) -> Result<Memory> {
        self.dev.bind()?;
        Ok(Arc::new(CudaMemory::new(&self.dev, bytes)?))
    }

    fn copy_in(&self, dst: &Memory, offset: usize, src: &[u8]) -> Result<()> {
        let m = self.memory(dst)?;
        check_range(offset, src.len(), m.size_bytes())?;
        if src.is_empty() {
            return Ok(());
        }
        self.usable()?;
        self.dev.bind()?;
        let at = m.address() + offset as u64;
        if src.len() >= STAGING_THRESHOLD {
            // The staged copy waits for queued kernels through events: bound that wait first.
            self.drain()?;
            let mut s = self.staging()?;
            if let Some(s) = s.as_mut() {
                return s.copy_in(&self.dev, at, src);
            }
        }
        // SAFETY: range checked; from pageable memory the driver stages `src` before returning.
        unsafe { drv::memcpy_htod_async(at, src, self.dev.stream) }
            .map_err(device_error("cuMemcpyHtoDAsync"))
    }

    fn copy_out(&self, src: &Memory, offset: usize, dst: &mut [u8]) -> Result<()> {
        let m = self.memory(src)?;
        check_range(offset, dst.len(), m.size_bytes())?;
        self.usable()?;
        self.dev.bind()?;
        let at = m.address() + offset as u64;
        if dst.len() >= STAGING_THRESHOLD && !self.pinned.lends(dst.as_ptr(), dst.len()) {
            self.drain()?;
            let mut s = self.staging()?;
            if let Some(s) = s.as_mut() {
                s.copy_out(&self.dev, at, dst)?;
                return self.take_error();
            }
        }
        if !dst.is_empty() {
            // SAFETY: range checked; `dst` stays borrowed until the stream is synchronized below.
            unsafe { drv::memcpy_dtoh_async(dst, at, self.dev.stream) }
                .map_err(device_error("cuMemcpyDtoHAsync"))?;
        }
        self.drain()?;
        self.take_error()
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
        if len == 0 {
            return Ok(());
        }
        self.dev.bind()?;
        let (from, to) = (
            s.address() + src_offset as u64,
            d.address() + dst_offset as u64,
        );
        let overlap = from < to + len as u64 && to < from + len as u64;
        let dtod = |a: u64, b: u64| {
            // SAFETY: both ranges lie inside live allocations (checked above).
            unsafe { drv::memcpy_dtod_async(b, a, len, self.dev.stream) }
                .map_err(device_error("cuMemcpyDtoDAsync"))
        };
        if overlap && from != to {
            // Overlapping ranges go through a temporary buffer.
            let tmp = CudaMemory::new(&self.dev, len)?;
            dtod(from, tmp.address())?;
            dtod(tmp.address(), to)?;
            return self.drain();
        }
        if from == to {
            return Ok(());
        }
        dtod(from, to)
    }

    fn compile(&self, canonical: &Canonical) -> Result<CompiledKernel> {
        let kernel = canonical.kernel();
        let _span =
            tracing::debug_span!("compile", backend = "cuda", kernel = %kernel.name).entered();
        self.dev.bind()?;
        let digest = canonical.digest();
        // The kernel's intent decides: element-wise maps (gathers included) get the vectorized
        // form.
        let vector_map = matches!(canonical.pattern(), Some(Pattern::Map(_)));
        if vector_map {
            tracing::debug!(kernel = %kernel.name, "element-wise map: vectorized form");
        }
        let rows = RowForm::of(canonical.pattern());
        let opts = CodegenOptions {
            vector_map,
            ..CodegenOptions::default()
        };
        let checked = self.module(kernel, &digest, opts)?;
        let id = {
            let mut ks = lock(&self.kernels);
            ks.push(kernel.clone());
            (ks.len() - 1) as u32
        };
        let k = CudaKernel {
            kernel: kernel.clone(),
            id,
            digest,
            checked,
            variants: Mutex::new(HashMap::new()),
            vector_map,
            rows,
            divisors: codegen::divide::divisor_params(kernel),
        };
        Ok(CompiledKernel::new(kernel.clone(), Arc::new(k)))
    }

    fn launch(
        &self,
        kernel: &CompiledKernel,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        let k: &CudaKernel = kernel.downcast().ok_or_else(|| BackendError::Compile {
            kernel: kernel.kernel().name.clone(),
            log: "this kernel was compiled by another backend".into(),
        })?;
        let _span = tracing::debug_span!("launch", backend = "cuda", kernel = %k.kernel.name, grid = ?config.grid, block = ?config.block).entered();
        check_launch(&k.kernel, config, args, &self.capabilities())?;
        launch::check_geometry(&k.kernel, config)?;
        if config.grid_blocks() == 0 {
            return Ok(());
        }
        self.usable()?;
        self.dev.bind()?;
        // A vectorized map runs in its own shape, four lanes per thread (see codegen::map).
        let map_shape = if k.vector_map {
            codegen::map::geometry(config)
        } else {
            None
        };
        // A row kernel runs its dedicated form where the host proves the launch in bounds and
        // aligned (see codegen::rows), else the generic form.
        let dedicated_rows = k.rows.filter(|form| {
            let buffer = |i: usize| match (args.get(i), k.kernel.params.get(i)) {
                (Some(KernelArg::Buffer(b)), Some(param)) => Some((b, param.ty().size_bytes())),
                _ => None,
            };
            form.fits(
                args,
                |i| buffer(i).and_then(|(b, _)| device_address(b).ok()),
                |i| buffer(i).map(|(b, elem)| (b.len / elem.max(1)) as u64),
            )
        });
        let mut opts = CodegenOptions {
            bounds_checks: config.bounds_checks(),
            launch_bounds: None,
            vector_map: map_shape.is_some(),
            dedicated_rows,
        };
        let mut module = self.variant(k, opts)?;
        let timeout = config.effective_timeout();
        let shape = match map_shape {
            Some((grid, block, total)) => launch::Shape {
                grid,
                block,
                total: Some(total),
                timeout,
                divisors: &k.divisors,
            },
            None => launch::Shape {
                grid: config.grid,
                block: config.block,
                total: None,
                timeout,
                divisors: &k.divisors,
            },
        };
        let lanes: u64 = shape.block.iter().map(|&b| b as u64).product();
        if lanes > module.max_threads as u64 {
            // Too many registers for this block size: recompile with a register budget for it.
            opts.launch_bounds = Some(1024);
            module = self.variant(k, opts)?;
            if lanes > module.max_threads as u64 {
                return Err(BackendError::InvalidLaunch {
                    kernel: k.kernel.name.clone(),
                    reason: format!(
                        "blocks of {lanes} lanes; this kernel runs at most {} per block on this GPU",
                        module.max_threads
                    ),
                });
            }
        }
        launch::launch(
            &self.dev,
            module.function,
            &k.kernel,
            &shape,
            args,
            &self.record,
            k.id,
        )?;
        {
            let mut q = lock(&self.queued);
            q.launches += 1;
            match timeout {
                Some(t) => q.longest = q.longest.max(t),
                None => q.unlimited = true,
            }
            q.last.clone_from(&k.kernel.name);
        }
        count(if shape.total.is_some() || dedicated_rows.is_some() {
            Event::LibraryLaunch
        } else {
            Event::GenericLaunch
        });
        Ok(())
    }

    fn stats(&self) -> crate::BackendStats {
        stats::backend_stats()
    }

    fn capture(
        &self,
        work: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Option<Box<dyn crate::backend::Replay>>> {
        Ok(super::graph::capture(&self.dev, work)?
            .map(|r| Box::new(r) as Box<dyn crate::backend::Replay>))
    }

    fn device_ordinal(&self) -> u32 {
        self.dev.ctx.ordinal() as u32
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn synchronize(&self) -> Result<()> {
        self.usable()?;
        self.dev.bind()?;
        self.drain()?;
        self.take_error()
    }

    fn library(&self) -> Option<&dyn crate::backend::Library> {
        Some(self)
    }

    fn pinned_host(&self, len: usize) -> Option<crate::HostBuffer> {
        self.pinned.lend(len)
    }

    fn release_host_pool(&self) {
        self.pinned.release_idle();
    }

    fn interop(&self) -> Option<&dyn crate::backend::Interop> {
        Some(self)
    }
}

impl crate::backend::Library for CudaBackend {
    fn gemm(&self, desc: &GemmDesc, a: &BufferArg, b: &BufferArg, c: &BufferArg) -> Result<()> {
        if desc.outer.count != 1 && !self.gemm_outer_in_one_call() {
            return desc.for_each_outer(a, b, c, |d, a, b, c| self.gemm(d, a, b, c));
        }
        desc.check(a, b, c)?;
        if desc.m == 0 || desc.n == 0 || desc.matrices() == 0 {
            return Ok(());
        }
        if self.has_cublas() && Blas::supports(desc) {
            self.dev.bind()?;
            let mut guard = lock(&self.blas);
            let handle =
                guard.get_or_insert_with(|| Blas::new(&self.dev).map_err(|e| e.to_string()));
            match handle {
                Ok(blas) => {
                    let arrays = if desc.outer.count != 1 {
                        let base = [device_address(a)?, device_address(b)?, device_address(c)?];
                        Some(lock(&self.pointer_arrays).fill(self, desc, base)?)
                    } else {
                        None
                    };
                    blas.gemm(desc, a, b, c, arrays)?;
                    count(Event::LibraryLaunch);
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cuBLAS unusable; GEMM uses the generic kernel")
                }
            }
        }
        generic_gemm(self, desc, a, b, c)
    }

    fn gemm_outer_in_one_call(&self) -> bool {
        self.has_cublas() && gemm_pointers::enabled()
    }

    fn vendor_blas(&self) -> bool {
        self.has_cublas()
    }

    fn supports_conv(&self, desc: &ConvDesc, _pass: ConvPass) -> bool {
        dnn_api::api().is_ok() && dnn::supports(desc)
    }

    fn conv(
        &self,
        desc: &ConvDesc,
        pass: ConvPass,
        a: &BufferArg,
        b: &BufferArg,
        out: &BufferArg,
    ) -> Result<()> {
        desc.check(pass, a, b, out)?;
        if let Err(why) = dnn_api::api() {
            return Err(BackendError::Unsupported {
                kernel: "conv2d".into(),
                feature: format!("cuDNN ({why})"),
                device: self.info().name,
            });
        }
        self.dev.bind()?;
        let mut guard = lock(&self.dnn);
        let handle = guard.get_or_insert_with(|| Dnn::new(&self.dev).map_err(|e| e.to_string()));
        match handle {
            Ok(d) => {
                d.conv(&self.dev, desc, pass, a, b, out)?;
                count(Event::LibraryLaunch);
                Ok(())
            }
            Err(e) => Err(BackendError::Device(format!("cuDNN unusable: {e}"))),
        }
    }
}

impl crate::backend::Interop for CudaBackend {
    fn dlpack_stream(&self) -> Option<u64> {
        Some(self.dev.stream as u64)
    }

    fn order_before(&self, consumer: u64) -> Result<()> {
        self.stream_wait(self.dev.stream, consumer as sys::CUstream)
    }

    fn order_after(&self, producer: u64) -> Result<()> {
        self.stream_wait(producer as sys::CUstream, self.dev.stream)
    }

    unsafe fn import_memory(
        &self,
        address: u64,
        bytes: usize,
        owner: MemoryOwner,
    ) -> Result<Memory> {
        if address == 0 {
            return Err(BackendError::InvalidArgument {
                kernel: "import".into(),
                reason: "a null device pointer".into(),
            });
        }
        // SAFETY: this function's contract is `CudaMemory::import`'s.
        Ok(Arc::new(unsafe {
            CudaMemory::import(&self.dev, address, bytes, owner)
        }))
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Finish queued work, then release cuBLAS and the staging buffers with the context
        // current (the fields drop in declaration order, the device last).
        let _ = self.dev.bind();
        if self.stuck.load(Ordering::Relaxed) {
            // Waiting would never end; the process exits with the context.
            return;
        }
        let _ = self.dev.sync();
        if let Some(Ok(b)) = lock(&self.blas).take() {
            drop(b);
        }
        if let Some(Ok(d)) = lock(&self.dnn).take() {
            drop(d);
        }
    }
}

impl CudaMemory {
    fn size_bytes(&self) -> usize {
        crate::backend::DeviceMemory::size(self)
    }
}
