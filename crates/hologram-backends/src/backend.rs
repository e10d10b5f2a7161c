//! The `Backend` trait every device implements, and the types it exchanges.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use hologram_compiler::Canonical;
use hologram_isa::semantics::Value;
use hologram_isa::Kernel;

use crate::backend_type::BackendType;
use crate::error::Result;
use crate::host_buffer::HostBuffer;
use crate::library::GemmDesc;

/// What a backend's compiler, kernel cache and launch paths have done so far.
///
/// "Library" launches ran a kernel chosen for a recognized pattern or a vendor library (native
/// loops and the GEMM crate on the CPU, vectorized maps and cuBLAS on CUDA); "generic" launches
/// ran the kernel's own translation (the interpreter on the CPU). The CUDA backend's compile and
/// cache counters are per process (its disk cache is shared by all backends of a process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Kernels compiled to device code (NVRTC runs, WGSL pipelines created, CPU lowerings).
    pub compiles: u64,
    /// Compiled kernels found in the backend's in-memory cache.
    pub memory_hits: u64,
    /// Compiled kernels loaded from the on-disk cache (no compile).
    pub disk_hits: u64,
    /// Compiled kernels written to the on-disk cache.
    pub disk_writes: u64,
    /// Bytes of device code produced or loaded (CUBIN images, WGSL text, CPU lowered programs).
    pub code_bytes: u64,
    /// Launches and GEMMs run by library kernels.
    pub library_launches: u64,
    /// Launches run by the generic path.
    pub generic_launches: u64,
}

impl fmt::Display for BackendStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "compiles={} memory_hits={} disk_hits={} disk_writes={} code_bytes={} library_launches={} generic_launches={}",
            self.compiles,
            self.memory_hits,
            self.disk_hits,
            self.disk_writes,
            self.code_bytes,
            self.library_launches,
            self.generic_launches
        )
    }
}

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The backend (for wgpu: the graphics API it runs on).
    pub kind: BackendType,
    /// Device name, e.g. "NVIDIA H100 80GB HBM3" or "Intel Xeon (2 threads)".
    pub name: String,
    /// Device memory in bytes, if known.
    pub memory_bytes: Option<u64>,
    /// Parallel units: CPU threads, streaming multiprocessors, ...
    pub compute_units: u32,
    /// Architecture, e.g. "x86_64" or "sm_90".
    pub arch: String,
    /// Driver version, if any.
    pub driver: Option<String>,
}

/// What a device can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Most lanes in one block.
    pub max_block_lanes: u32,
    /// Most `.shared` bytes per block.
    pub max_shared_bytes: usize,
    /// True when buffers live in host memory (zero-copy views are possible).
    pub host_memory: bool,
}

/// A device allocation. Freed when the last reference goes.
pub trait DeviceMemory: Send + Sync + 'static {
    /// Size in bytes.
    fn size(&self) -> usize;
    /// For the owning backend to recover its concrete type.
    fn as_any(&self) -> &dyn Any;
    /// The host address of the memory, when it lives in host memory.
    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }
    /// The device address of the memory (a CUDA device pointer), when it has one.
    fn device_ptr(&self) -> Option<u64> {
        None
    }
}

/// Whatever keeps imported memory alive (a DLPack capsule, a NumPy array); dropped when the
/// last reference to the imported memory goes.
pub type MemoryOwner = Box<dyn std::any::Any + Send + Sync>;

/// A shared handle to device memory.
pub type Memory = Arc<dyn DeviceMemory>;

/// A byte range of device memory bound to a buffer parameter.
#[derive(Clone)]
pub struct BufferArg {
    /// The allocation.
    pub memory: Memory,
    /// Start of the range in bytes (a multiple of the element size).
    pub offset: usize,
    /// Length of the range in bytes (a multiple of the element size); the kernel sees
    /// `len / element size` elements and bounds checks use that count.
    pub len: usize,
}

impl fmt::Debug for BufferArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "BufferArg {{ offset: {}, len: {}, size: {} }}",
            self.offset,
            self.len,
            self.memory.size()
        )
    }
}

impl BufferArg {
    /// The whole allocation.
    pub fn whole(memory: Memory) -> Self {
        let len = memory.size();
        BufferArg {
            memory,
            offset: 0,
            len,
        }
    }
}

/// A launch argument, bound to the parameter at the same position.
#[derive(Clone, Debug)]
pub enum KernelArg {
    /// For `.param .buf.T`.
    Buffer(BufferArg),
    /// For `.param .T`: a value of exactly that type.
    Scalar(Value),
}

/// Launch geometry and options.
///
/// Bounds checks are on unless turned off with the `unsafe`
/// [`LaunchConfig::without_bounds_checks`], so a safe [`Backend::launch`] never reaches memory
/// outside its buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Lanes per block in x, y, z.
    pub block: [u32; 3],
    /// Private: only `without_bounds_checks` (unsafe) turns the checks off.
    bounds_checks: bool,
    /// How long the launch may run before it is stopped with
    /// [`BackendError::LaunchTimeout`](crate::BackendError::LaunchTimeout): `None` takes the
    /// process default ([`launch::default_timeout`](crate::launch::default_timeout): 60 s, or
    /// `HOLOGRAM_LAUNCH_TIMEOUT_S`), `Some(Duration::ZERO)` turns the limit off. See
    /// [`launch::TIMEOUT_ENV`](crate::launch::TIMEOUT_ENV) for what each backend measures.
    pub timeout: Option<std::time::Duration>,
}

impl LaunchConfig {
    /// A launch of `grid` blocks of `block` lanes (x, y, z), bounds-checked, with the default
    /// timeout.
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            block,
            bounds_checks: true,
            timeout: None,
        }
    }

    /// A 1-D launch of `grid` blocks of `block` lanes, bounds-checked.
    pub fn linear(grid: u32, block: u32) -> Self {
        Self::new([grid, 1, 1], [block, 1, 1])
    }

    /// True when every global access is checked against its buffer (the default).
    pub fn bounds_checks(&self) -> bool {
        self.bounds_checks
    }

    /// The same launch without bounds checks on global accesses, for kernels known to stay in
    /// bounds (the checks cost a compare and a branch per access on GPUs). The CPU backend
    /// checks anyway; wgpu keeps WebGPU's robust buffer access (an out-of-bounds access reads or
    /// writes some element of the same buffer); CUDA runs the kernel with no check at all.
    ///
    /// # Safety
    /// Every launch made with the returned configuration (or a copy of it) must run a kernel
    /// whose every `ld`, `st` and `atom` on a buffer parameter uses an index inside that
    /// argument's range (`0 <= index < len / element size`) for the arguments it is launched
    /// with. An out-of-bounds access is then undefined behaviour: on CUDA it reads or writes
    /// whatever device memory is there, including other allocations of the process.
    pub unsafe fn without_bounds_checks(mut self) -> Self {
        self.bounds_checks = false;
        self
    }

    /// The same launch with bounds checks (always safe).
    pub fn with_bounds_checks(mut self) -> Self {
        self.bounds_checks = true;
        self
    }

    /// The same launch with its own timeout (`Duration::ZERO`: none).
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The timeout in force for this launch, `None` when there is none.
    pub fn effective_timeout(&self) -> Option<std::time::Duration> {
        let t = self.timeout.or_else(crate::launch::default_timeout)?;
        (!t.is_zero()).then_some(t)
    }

    /// A 1-D launch with enough blocks of `block` lanes to cover `n` lanes.
    pub fn for_elements(n: u64, block: u32) -> Self {
        let block = block.max(1);
        let grid = n.div_ceil(block as u64).clamp(1, u32::MAX as u64) as u32;
        Self::linear(grid, block)
    }

    /// Lanes per block.
    pub fn block_lanes(&self) -> u64 {
        self.block.iter().map(|&d| d as u64).product()
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.grid.iter().map(|&d| d as u64).product()
    }
}

/// A kernel compiled for one backend. Cheap to clone; launch it any number of times with any
/// buffers.
#[derive(Clone)]
pub struct CompiledKernel {
    kernel: Arc<Kernel>,
    inner: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for CompiledKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CompiledKernel({})", self.kernel.name)
    }
}

impl CompiledKernel {
    /// Wraps a backend's compiled form.
    pub fn new(kernel: Arc<Kernel>, inner: Arc<dyn Any + Send + Sync>) -> Self {
        CompiledKernel { kernel, inner }
    }

    /// The validated kernel.
    pub fn kernel(&self) -> &Arc<Kernel> {
        &self.kernel
    }

    /// The backend's compiled form, if it is of type `T`.
    pub fn downcast<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.inner.downcast_ref::<T>()
    }
}

/// Device work captured once and queued again by one call (a CUDA graph): see
/// [`Backend::capture`].
pub trait Replay: Send + Sync {
    /// Queues the captured work again, on the backend's stream, in the captured order.
    fn replay(&self) -> Result<()>;
}

/// A device that runs Atlas ISA kernels.
///
/// Every backend runs every valid kernel. Copies take byte offsets. Launches may be asynchronous:
/// reads ([`Backend::copy_out`]) and [`Backend::synchronize`] wait for earlier work.
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendType;
    /// What the device is.
    fn info(&self) -> DeviceInfo;
    /// What the device can run.
    fn capabilities(&self) -> Capabilities;
    /// Allocates `bytes` of device memory (contents unspecified).
    fn allocate(&self, bytes: usize) -> Result<Memory>;
    /// Copies `src` into `dst` at byte `offset`.
    fn copy_in(&self, dst: &Memory, offset: usize, src: &[u8]) -> Result<()>;
    /// Copies from `src` at byte `offset` into `dst`, after earlier work completes.
    fn copy_out(&self, src: &Memory, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// Copies `len` bytes between device allocations.
    fn copy(
        &self,
        src: &Memory,
        src_offset: usize,
        dst: &Memory,
        dst_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Compiles a kernel in canonical form; its intent ([`Canonical::pattern`]) says which
    /// native or library path may run it.
    fn compile(&self, kernel: &Canonical) -> Result<CompiledKernel>;
    /// Launches a compiled kernel; `args[i]` binds `kernel.params[i]`.
    fn launch(
        &self,
        kernel: &CompiledKernel,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<()>;
    /// Waits for all submitted work.
    fn synchronize(&self) -> Result<()>;

    /// The backend itself as `Any`, for library code that needs the concrete type (the CUDA
    /// collectives and peer copies); `None` by default.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }

    /// Which of its kind's devices this backend runs on (the CUDA device ordinal, as DLPack's
    /// `device_id` spells it); 0 for backends with a single device.
    fn device_ordinal(&self) -> u32 {
        0
    }

    /// True when the device flushes `f32` (and `bf16`, computed in `f32`) subnormal operands and
    /// results to zero, which WGSL and Vulkan permit and no portable shader can turn off (the
    /// wgpu backend finds out with a probe kernel). Kernels then differ from the ISA's rule
    /// only where subnormals occur. The default, for backends that keep subnormals, is false.
    fn flushes_f32_subnormals(&self) -> bool {
        false
    }

    /// Captures the device work that `work` queues (launches, GEMMs, copies between device
    /// buffers) into a [`Replay`] instead of running it, on backends that can (CUDA graphs), so
    /// that queuing it again costs one call. `None` where the backend has no such thing; callers
    /// then queue the work again themselves. `work` must not read device memory on the host.
    fn capture(&self, work: &mut dyn FnMut() -> Result<()>) -> Result<Option<Box<dyn Replay>>> {
        let _ = work;
        Ok(None)
    }

    /// Counters of compiles, cache hits, code bytes and launch paths (see [`BackendStats`]).
    /// The default, for backends that keep none, is all zeros.
    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }

    /// The backend's library operations (GEMM, convolution), if it has any; `None` (the
    /// default) runs them as generic kernels.
    fn library(&self) -> Option<&dyn Library> {
        None
    }

    /// Sharing memory and streams with other libraries, where the backend can; `None` (the
    /// default) for backends whose memory no other library addresses.
    fn interop(&self) -> Option<&dyn Interop> {
        None
    }

    /// `len` bytes of page-locked host memory for a device-to-host read into a new host array
    /// (a NumPy array), lent from a pool the backend keeps: the device copies into it at the
    /// bus's speed, where a copy into pageable memory goes through the driver's own staging.
    /// `None` (the default) where the backend lends none: backends whose memory is host memory,
    /// reads too small to gain from it, or a pool at its limit; callers then read into memory
    /// of their own.
    fn pinned_host(&self, len: usize) -> Option<HostBuffer> {
        let _ = len;
        None
    }

    /// Frees the idle blocks of the pool behind [`Backend::pinned_host`] (lent ones come back
    /// when their arrays are freed); nothing by default.
    fn release_host_pool(&self) {}
}

impl From<Value> for KernelArg {
    fn from(v: Value) -> Self {
        KernelArg::Scalar(v)
    }
}

/// Library operations (GEMM, convolution) that a backend runs with vendor or hand-tuned code
/// instead of generic Atlas ISA kernels: a CPU GEMM crate, cuBLAS and cuDNN, the WGSL GEMM.
/// A backend offers them through [`Backend::library`]; callers go through the methods on
/// `dyn Backend` ([`gemm`](trait.Backend.html#method.gemm), ...), which fall back to the generic
/// kernels of [`crate::library`] where a backend has no library.
pub trait Library: Send + Sync {
    /// `C = alpha · op(A) · op(B) + beta · C` (see [`GemmDesc`]).
    fn gemm(&self, desc: &GemmDesc, a: &BufferArg, b: &BufferArg, c: &BufferArg) -> Result<()>;

    /// Whether [`Library::gemm`] runs descriptors with an outer batch
    /// ([`crate::library::OuterBatch`]) as one call (cuBLAS through pointer arrays). The default
    /// says no: such libraries run an outer batch as a loop of calls
    /// ([`GemmDesc::for_each_outer`]), and callers may prefer packing the operands into one
    /// strided batch.
    fn gemm_outer_in_one_call(&self) -> bool {
        false
    }

    /// Whether [`Library::gemm`] is a vendor BLAS (cuBLAS), which also runs matrix-vector
    /// products (`m == 1`) at memory speed: callers may then sum over a leading axis as a
    /// product with a vector of ones. The default says no.
    fn vendor_blas(&self) -> bool {
        false
    }

    /// Runs a small element-wise map of two operands at once, with library code; `Ok(false)`
    /// where this library does not run it (callers then launch the generic kernel, which gives
    /// the same bits). The default declines every map.
    fn binary_map(&self, map: &crate::library::BinaryMap<'_>) -> Result<bool> {
        let _ = map;
        Ok(false)
    }

    /// Whether [`Library::conv`] runs this pass of this convolution with a vendor library
    /// (cuDNN on CUDA). The default says no: callers lower the convolution to `im2col` and GEMM.
    fn supports_conv(
        &self,
        desc: &crate::library::ConvDesc,
        pass: crate::library::ConvPass,
    ) -> bool {
        let _ = (desc, pass);
        false
    }

    /// Runs one pass of a convolution (operands as [`crate::library::ConvPass`] lists them; the
    /// output is overwritten). Only called where [`Library::supports_conv`] said yes.
    fn conv(
        &self,
        desc: &crate::library::ConvDesc,
        pass: crate::library::ConvPass,
        a: &BufferArg,
        b: &BufferArg,
        out: &BufferArg,
    ) -> Result<()> {
        let _ = (desc, pass, a, b, out);
        Err(crate::error::BackendError::Unsupported {
            kernel: "conv2d".into(),
            feature: "a convolution library".into(),
            device: "this backend".into(),
        })
    }
}

/// Sharing memory and streams with other libraries (DLPack, PyTorch, CuPy): reached through
/// [`Backend::interop`] (the core's `Executor::interop`), offered by backends whose memory other
/// libraries can address (the CPU's host memory, CUDA device memory).
pub trait Interop: Send + Sync {
    /// The stream this backend queues work on, as DLPack spells CUDA streams (an integer
    /// handle); `None` for backends whose work is not on a CUDA stream.
    fn dlpack_stream(&self) -> Option<u64> {
        None
    }

    /// Makes work queued later on the CUDA stream `consumer` (a DLPack stream integer: 1 is the
    /// legacy default stream, 2 the per-thread one) wait for all work queued on this backend so
    /// far, without blocking the host. Backends with synchronous or non-CUDA work do nothing.
    fn order_before(&self, consumer: u64) -> Result<()> {
        let _ = consumer;
        Ok(())
    }

    /// Makes work queued on this backend from now on wait for all work queued so far on the
    /// CUDA stream `producer` (a DLPack stream integer), without blocking the host: the reverse
    /// of [`Interop::order_before`], for importing another library's results once per batch of
    /// tensors. Backends with synchronous or non-CUDA work do nothing.
    fn order_after(&self, producer: u64) -> Result<()> {
        let _ = producer;
        Ok(())
    }

    /// Wraps memory allocated by someone else (zero-copy interop, e.g. DLPack): `address` is a
    /// host pointer on the CPU backend and a device pointer on CUDA; `owner` is kept alive as
    /// long as the returned memory is.
    ///
    /// # Safety
    /// - `address..address + bytes` must be memory of this backend's device (host memory for the
    ///   CPU, memory of this backend's CUDA context for CUDA), allocated, readable and writable
    ///   for as long as `owner` lives. Dropping `owner` may free it.
    /// - While the returned memory is in use (a copy or a launch that names it, until it
    ///   returns or, on asynchronous backends, until the work completes), code outside this
    ///   backend must not write those bytes, nor read them while a launch may write them: the
    ///   backend's accesses are not synchronized with anyone else's.
    ///
    /// Null addresses are rejected; the CPU backend also checks alignment at each launch, so a
    /// misaligned buffer is an error, not undefined behaviour.
    unsafe fn import_memory(
        &self,
        address: u64,
        bytes: usize,
        owner: MemoryOwner,
    ) -> Result<Memory>;
}

/// The library operations as callers use them: the backend's [`Library`] where it has one, the
/// generic Atlas ISA kernels otherwise.
impl dyn Backend + '_ {
    /// `C = alpha · op(A) · op(B) + beta · C` (see [`GemmDesc`]).
    pub fn gemm(&self, desc: &GemmDesc, a: &BufferArg, b: &BufferArg, c: &BufferArg) -> Result<()> {
        match self.library() {
            Some(library) => library.gemm(desc, a, b, c),
            None => crate::library::gemm::generic_gemm(self, desc, a, b, c),
        }
    }

    /// Runs a small element-wise map of two operands with the backend's library code (see
    /// [`Library::binary_map`]); `Ok(false)` where it has none for this map.
    pub fn binary_map(&self, map: &crate::library::BinaryMap<'_>) -> Result<bool> {
        match self.library() {
            Some(library) => library.binary_map(map),
            None => Ok(false),
        }
    }

    /// Whether the backend's GEMM is a vendor BLAS (see [`Library::vendor_blas`]).
    pub fn vendor_blas(&self) -> bool {
        self.library().is_some_and(|library| library.vendor_blas())
    }

    /// Whether [`gemm`](#method.gemm) runs a descriptor with an outer batch as one call (see
    /// [`Library::gemm_outer_in_one_call`]); where not, a loop of calls.
    pub fn gemm_outer_in_one_call(&self) -> bool {
        self.library()
            .is_some_and(|library| library.gemm_outer_in_one_call())
    }

    /// Whether [`conv`](#method.conv) runs this pass of this convolution with a vendor library;
    /// where not, callers lower the convolution to `im2col` and GEMM.
    pub fn supports_conv(
        &self,
        desc: &crate::library::ConvDesc,
        pass: crate::library::ConvPass,
    ) -> bool {
        self.library().is_some_and(|l| l.supports_conv(desc, pass))
    }

    /// Runs one pass of a convolution with the backend's library (only where
    /// [`supports_conv`](#method.supports_conv) said yes).
    pub fn conv(
        &self,
        desc: &crate::library::ConvDesc,
        pass: crate::library::ConvPass,
        a: &BufferArg,
        b: &BufferArg,
        out: &BufferArg,
    ) -> Result<()> {
        match self.library() {
            Some(library) => library.conv(desc, pass, a, b, out),
            None => Err(crate::error::BackendError::Unsupported {
                kernel: "conv2d".into(),
                feature: "a convolution library".into(),
                device: self.info().name,
            }),
        }
    }
}
