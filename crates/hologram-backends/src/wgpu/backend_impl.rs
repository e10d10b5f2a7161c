//! `WgpuBackend` and its [`Backend`] implementation.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use hologram_compiler::patterns::Pattern;
use hologram_compiler::Canonical;
use hologram_isa::Kernel;

use super::adapter::{AdapterOptions, Api};
use super::codegen::dedicated_checks::DedicatedChecks;
use super::codegen::{self, CodegenError, CodegenOptions};
use super::device::Gpu;
use super::gemm::GemmPipelines;
use super::launch;
use super::memory::{self, WgpuMemory};
use super::pipeline_cache::{self, PipelineCache, PipelineCacheStats};
use super::probe;
use super::staging::{self, LaunchErrors};
use crate::backend::{
    Backend, Capabilities, CompiledKernel, DeviceInfo, KernelArg, LaunchConfig, Memory,
};
use crate::backend_type::BackendType;
use crate::error::{BackendError, Result};
use crate::launch::{check_launch, check_range};
use crate::library::GemmDesc;

static NEXT_OWNER: AtomicUsize = AtomicUsize::new(1);

/// Shared memory the generated code reserves for itself (barrier counters, word padding).
const RESERVED_SHARED_BYTES: usize = 64;

/// A GPU through wgpu.
pub struct WgpuBackend {
    pub(super) gpu: Gpu,
    api: Api,
    owner: usize,
    cache: PipelineCache,
    /// Adapter identity for cache keys: name, backend, driver.
    target: String,
    /// Launches run.
    launches: AtomicU64,
    /// GEMMs run by the hand-written kernel (`gemm.rs`).
    library_launches: AtomicU64,
    /// Its pipelines.
    gemm: GemmPipelines,
    /// The device flushes f32 subnormals to zero (found by a probe kernel, see `probe`).
    flushes_f32_subnormals: bool,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuBackend({})", self.target)
    }
}

/// A kernel compiled for this backend: validated and checked against the adapter's features.
/// Pipelines are built per block size at launch (cached).
struct WgpuKernel {
    kernel: Arc<Kernel>,
    /// The canonical digest: with the adapter and options, the pipeline's cache key.
    digest: hologram_compiler::Digest,
    /// An element-wise map whose loads all read at `%gid`: launched in its 4-lane form
    /// (`codegen/map.rs`).
    vector_map: bool,
    /// A reduction or row template with a dedicated WGSL form (`codegen/dedicated.rs`).
    dedicated: Option<codegen::dedicated::Dedicated>,
    /// What the launcher proves a dedicated launch in bounds from (generated at its first
    /// launch; `None` inside: no proof, every launch runs the checked module).
    proof: std::sync::OnceLock<Option<DedicatedChecks>>,
}

impl WgpuKernel {
    /// True when the dedicated launch with options `opts` (its form, bounds checks on) is
    /// proved in bounds for `config` and `args`: every workgroup's own in-bounds test would
    /// pass, so the module generated without the tests computes the same.
    fn proved_in_bounds(
        &self,
        opts: &CodegenOptions,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> bool {
        let proof = self.proof.get_or_init(|| {
            let unchecked = CodegenOptions {
                bounds_checks: false,
                proven: true,
                ..opts.clone()
            };
            codegen::generate(&self.kernel, &unchecked)
                .ok()
                .and_then(|g| g.dedicated_checks)
        });
        let Some(proof) = proof else { return false };
        let len = |p: u32| launch::buffer_elems(&self.kernel, args, p);
        launch::with_proof_view(config, args, &len, |l| proof.in_bounds(l))
    }
}

/// `HOLOGRAM_WGPU_DEDICATED=0` launches reductions and row kernels in their generic form (for
/// comparing).
fn dedicated_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("HOLOGRAM_WGPU_DEDICATED").as_deref() != Ok("0"))
}

/// `HOLOGRAM_WGPU_MAP4=0` launches maps in their generic form (for measuring the 4-lane form).
fn map4_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("HOLOGRAM_WGPU_MAP4").as_deref() != Ok("0"))
}

impl WgpuBackend {
    /// Opens the best adapter of `api`: hardware first; a software adapter only with
    /// `HOLOGRAM_WGPU_ALLOW_SOFTWARE=1`.
    pub fn new(api: Api) -> Result<Self> {
        Self::with_options(&AdapterOptions::from_env(api))
    }

    /// Opens an adapter with explicit options (tests use `allow_software: true`).
    pub fn with_options(opts: &AdapterOptions) -> Result<Self> {
        let gpu = Gpu::open(opts)?;
        let target = format!(
            "{};{:?};{};{}",
            gpu.info.name, gpu.info.backend, gpu.info.driver, gpu.info.driver_info
        );
        let mut backend = WgpuBackend {
            gpu,
            api: opts.api,
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            cache: PipelineCache::default(),
            target,
            launches: AtomicU64::new(0),
            library_launches: AtomicU64::new(0),
            gemm: GemmPipelines::default(),
            flushes_f32_subnormals: false,
        };
        backend.flushes_f32_subnormals = probe::flushes_f32_subnormals(&backend, &backend.target)?;
        // The probe's pipeline and launch are not the caller's: statistics start at zero.
        backend.cache = PipelineCache::default();
        backend.launches = AtomicU64::new(0);
        Ok(backend)
    }

    /// The native API in use.
    pub fn api(&self) -> Api {
        self.api
    }

    /// True when the adapter is a software rasterizer (lavapipe, llvmpipe, WARP).
    pub fn is_software(&self) -> bool {
        self.gpu.info.device_type == ::wgpu::DeviceType::Cpu
    }

    /// Pipeline cache hit and miss counts.
    pub fn pipeline_cache_stats(&self) -> PipelineCacheStats {
        self.cache.stats()
    }

    /// The WGSL this backend generates for a kernel launched with `config`.
    pub fn wgsl(&self, kernel: &Kernel, config: &LaunchConfig) -> Result<String> {
        let opts = launch::options(&self.gpu, config);
        generate(kernel, &opts, &self.gpu.info.name).map(|g| g.wgsl)
    }

    fn memory<'a>(&self, m: &'a Memory) -> Result<&'a WgpuMemory> {
        WgpuMemory::of(m, self.owner)
    }

    fn device_err(&self, what: &'static str) -> impl FnOnce(String, bool) -> BackendError + '_ {
        move |msg, oom| {
            if oom {
                BackendError::OutOfMemory {
                    bytes: 0,
                    device: self.gpu.info.name.clone(),
                }
            } else {
                BackendError::Device(format!("{what} failed: {msg}"))
            }
        }
    }
}

fn generate(kernel: &Kernel, opts: &CodegenOptions, device: &str) -> Result<codegen::Generated> {
    codegen::generate(kernel, opts).map_err(|e| match e {
        CodegenError::Unsupported(feature) => BackendError::Unsupported {
            kernel: kernel.name.clone(),
            feature,
            device: device.to_string(),
        },
    })
}

impl Backend for WgpuBackend {
    fn kind(&self) -> BackendType {
        // The API the adapter was opened on (wgpu reports GL too; Hologram opens only these).
        match self.gpu.info.backend {
            ::wgpu::Backend::Metal => BackendType::Metal,
            ::wgpu::Backend::Dx12 => BackendType::Dx12,
            _ => BackendType::Vulkan,
        }
    }

    fn info(&self) -> DeviceInfo {
        let i = &self.gpu.info;
        let driver = [i.driver.as_str(), i.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        DeviceInfo {
            kind: self.kind(),
            name: i.name.clone(),
            memory_bytes: None,
            compute_units: 0,
            arch: format!("{:?} {:?}", i.backend, i.device_type),
            driver: (!driver.is_empty()).then_some(driver),
        }
    }

    fn capabilities(&self) -> Capabilities {
        let l = &self.gpu.limits;
        Capabilities {
            max_block_lanes: l.max_compute_invocations_per_workgroup,
            max_shared_bytes: (l.max_compute_workgroup_storage_size as usize)
                .saturating_sub(RESERVED_SHARED_BYTES)
                .min(hologram_isa::MAX_SHARED_BYTES),
            host_memory: false,
        }
    }

    fn allocate(&self, bytes: usize) -> Result<Memory> {
        let size = memory::padded(bytes);
        let oom = || BackendError::OutOfMemory {
            bytes,
            device: self.gpu.info.name.clone(),
        };
        if size > self.gpu.limits.max_buffer_size {
            return Err(oom());
        }
        let buffer = self.gpu.scoped(
            || {
                self.gpu.device.create_buffer(&::wgpu::BufferDescriptor {
                    label: Some("hologram"),
                    size,
                    usage: ::wgpu::BufferUsages::STORAGE
                        | ::wgpu::BufferUsages::COPY_SRC
                        | ::wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            },
            |_, _| oom(),
        )?;
        Ok(Arc::new(WgpuMemory::new(
            buffer,
            bytes,
            self.owner,
            self.gpu.groups.clone(),
        )))
    }

    fn copy_in(&self, dst: &Memory, offset: usize, src: &[u8]) -> Result<()> {
        let m = self.memory(dst)?;
        check_range(offset, src.len(), dst.size())?;
        if src.is_empty() {
            return Ok(());
        }
        let (start, end) = memory::word_range(offset, src.len());
        let data: std::borrow::Cow<[u8]> =
            if start == offset as u64 && end == (offset + src.len()) as u64 {
                src.into()
            } else {
                // Unaligned edges: merge with the words' current contents.
                let mut words = vec![0u8; (end - start) as usize];
                staging::read_into(&self.gpu, &m.buffer, start, &mut words, LaunchErrors::Keep)?;
                let at = offset - start as usize;
                words[at..at + src.len()].copy_from_slice(src);
                words.into()
            };
        self.gpu.scoped(
            || staging::write(&self.gpu, &m.buffer, start, &data),
            self.device_err("copy to the device"),
        )?
    }

    fn copy_out(&self, src: &Memory, offset: usize, dst: &mut [u8]) -> Result<()> {
        let m = self.memory(src)?;
        check_range(offset, dst.len(), src.size())?;
        if dst.is_empty() {
            return Ok(());
        }
        let (start, end) = memory::word_range(offset, dst.len());
        if start == offset as u64 && end == (offset + dst.len()) as u64 {
            return staging::read_into(&self.gpu, &m.buffer, start, dst, LaunchErrors::Report);
        }
        let mut words = vec![0u8; (end - start) as usize];
        staging::read_into(
            &self.gpu,
            &m.buffer,
            start,
            &mut words,
            LaunchErrors::Report,
        )?;
        let at = offset - start as usize;
        dst.copy_from_slice(&words[at..at + dst.len()]);
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
        check_range(src_offset, len, src.size())?;
        check_range(dst_offset, len, dst.size())?;
        let aligned = src_offset % 4 == 0 && dst_offset % 4 == 0 && len % 4 == 0;
        if len == 0 {
            return Ok(());
        }
        if !aligned || Arc::ptr_eq(src, dst) || s.buffer == d.buffer {
            // Unaligned or within one buffer: through the host.
            let mut tmp = vec![0u8; len];
            self.copy_out(src, src_offset, &mut tmp)?;
            return self.copy_in(dst, dst_offset, &tmp);
        }
        self.gpu.work.record(&self.gpu, |enc| {
            enc.copy_buffer_to_buffer(
                &s.buffer,
                src_offset as u64,
                &d.buffer,
                dst_offset as u64,
                len as u64,
            )
        })
    }

    fn compile(&self, canonical: &Canonical) -> Result<CompiledKernel> {
        let kernel = canonical.kernel();
        let _span =
            tracing::debug_span!("compile", backend = "wgpu", kernel = %kernel.name).entered();
        // Reject what the adapter cannot run now, before any launch.
        let opts = launch::options(&self.gpu, &LaunchConfig::linear(1, 64));
        generate(kernel, &opts, &self.gpu.info.name)?;
        // The kernel's intent decides: maps whose loads all read at %gid get the 4-lane form.
        let vector_map = map4_enabled()
            && matches!(canonical.pattern(), Some(Pattern::Map(m)) if !m.gather)
            && codegen::map::vectorizable(kernel).is_some();
        if vector_map {
            tracing::debug!(kernel = %kernel.name, "element-wise map: 4-lane form");
        }
        // Reductions and row kernels carrying their intent get their dedicated form.
        let dedicated =
            codegen::dedicated::Dedicated::of(canonical.pattern()).filter(|_| dedicated_enabled());
        Ok(CompiledKernel::new(
            kernel.clone(),
            Arc::new(WgpuKernel {
                kernel: kernel.clone(),
                digest: canonical.digest(),
                vector_map,
                dedicated,
                proof: std::sync::OnceLock::new(),
            }),
        ))
    }

    fn launch(
        &self,
        kernel: &CompiledKernel,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()> {
        let k: &WgpuKernel = kernel.downcast().ok_or_else(|| BackendError::Compile {
            kernel: kernel.kernel().name.clone(),
            log: "this kernel was compiled by another backend".into(),
        })?;
        let kern = &k.kernel;
        let _span = tracing::debug_span!("launch", backend = "wgpu", kernel = %kern.name, grid = ?config.grid, block = ?config.block).entered();
        check_launch(kern, config, args, &self.capabilities())?;
        let l = &self.gpu.limits;
        let max = [
            l.max_compute_workgroup_size_x,
            l.max_compute_workgroup_size_y,
            l.max_compute_workgroup_size_z,
        ];
        if config.block.iter().zip(max).any(|(&b, m)| b > m) {
            return Err(BackendError::InvalidLaunch {
                kernel: kern.name.clone(),
                reason: format!(
                    "block {:?} exceeds the device's per-axis limits {max:?}",
                    config.block
                ),
            });
        }
        if config.grid_blocks() == 0 {
            return Ok(());
        }
        let mut opts = launch::options(&self.gpu, config);
        let lanes = config.grid_blocks() * config.block_lanes();
        if k.vector_map && lanes <= codegen::map::MAX_LANES {
            // Its own launch shape: the pipeline serves every block size.
            opts.vector_map = true;
            opts.block = [codegen::map::MAP_BLOCK, 1, 1];
        }
        if let Some(d) = k.dedicated.filter(|d| d.fits(kern, config.block)) {
            opts = d.options(opts);
            if opts.bounds_checks && k.proved_in_bounds(&opts, config, args) {
                // Every workgroup's in-bounds test would pass: the module without the tests
                // (and without the generic fallback they guard) computes the same, faster.
                opts.bounds_checks = false;
                opts.proven = true;
            }
        }
        let key = pipeline_cache::key(&k.digest, &self.target, &opts);
        let pipeline = self.cache.get_or_build(key, || {
            let generated = generate(kern, &opts, &self.gpu.info.name)?;
            launch::build_pipeline(
                &self.gpu,
                kern,
                generated,
                opts.bounds_checks || opts.proven,
            )
        })?;
        if opts.dedicated.is_some() {
            self.library_launches.fetch_add(1, Ordering::Relaxed);
        } else {
            self.launches.fetch_add(1, Ordering::Relaxed);
        }
        launch::run(&self.gpu, self.owner, kern, &pipeline, config, args)
    }

    fn flushes_f32_subnormals(&self) -> bool {
        self.flushes_f32_subnormals
    }

    fn stats(&self) -> crate::backend::BackendStats {
        let c = self.cache.stats();
        crate::backend::BackendStats {
            compiles: c.misses + self.gemm.len() as u64,
            memory_hits: c.hits,
            code_bytes: c.code_bytes,
            generic_launches: self.launches.load(Ordering::Relaxed),
            library_launches: self.library_launches.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn synchronize(&self) -> Result<()> {
        self.gpu.work.wait(&self.gpu)
    }

    fn library(&self) -> Option<&dyn crate::backend::Library> {
        Some(self)
    }
}

impl crate::backend::Library for WgpuBackend {
    /// f32 through the hand-written tiled kernel (`gemm.rs`), other types through the generic
    /// kernel.
    fn gemm(
        &self,
        desc: &GemmDesc,
        a: &crate::backend::BufferArg,
        b: &crate::backend::BufferArg,
        c: &crate::backend::BufferArg,
    ) -> Result<()> {
        if desc.outer.count != 1 {
            return desc.for_each_outer(a, b, c, |d, a, b, c| {
                crate::backend::Library::gemm(self, d, a, b, c)
            });
        }
        let ran_library =
            super::gemm::gemm(self, &self.gpu, self.owner, &self.gemm, desc, a, b, c)?;
        if ran_library {
            self.library_launches.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}
