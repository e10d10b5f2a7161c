//! Collectives across the GPUs of one host through NCCL: all-reduce, broadcast, all-gather and
//! reduce-scatter on device buffers, queued on each backend's own stream (in order with its
//! kernels and copies, without blocking the host).
//!
//! Two ways to set up the communicators, as NCCL offers:
//! - one process drives every GPU: [`Communicator::init_all`] makes one communicator per
//!   backend, and the calls of all ranks are issued inside one [`group`] (NCCL needs that when
//!   one thread drives several GPUs, else the first call waits for the others forever);
//! - one process per GPU: rank 0 makes a [`UniqueId`], the caller hands its bytes to the other
//!   processes (a pipe, a file, a socket), and each process calls [`Communicator::init_rank`].
//!
//! ```no_run
//! # #[cfg(feature = "cuda")] {
//! use std::sync::Arc;
//! use hologram_backends::cuda::{collective::{group, Communicator, ReduceOp}, CudaBackend};
//! use hologram_backends::{Backend, BufferArg};
//! let gpus: Vec<Arc<dyn Backend>> = (0..2)
//!     .map(|i| Ok(Arc::new(CudaBackend::on_device(i)?) as Arc<dyn Backend>))
//!     .collect::<hologram_backends::Result<_>>()?;
//! let comms = Communicator::init_all(&gpus)?;
//! let bufs: Vec<BufferArg> = gpus.iter().map(|g| Ok(BufferArg::whole(g.allocate(4096)?))).collect::<hologram_backends::Result<_>>()?;
//! group(|| {
//!     for (c, b) in comms.iter().zip(&bufs) {
//!         c.all_reduce(b, b, 1024, hologram_isa::Type::F32, ReduceOp::Sum)?;
//!     }
//!     Ok(())
//! })?;
//! # }
//! # Ok::<(), hologram_backends::BackendError>(())
//! ```

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use hologram_isa::Type;

use super::backend::CudaBackend;
use super::memory::CudaMemory;
use super::nccl_api::{self, api, Api, SUCCESS};
use crate::backend::{Backend, BufferArg};
use crate::error::{BackendError, Result};

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// How an all-reduce or reduce-scatter combines the ranks' elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The mean: the sum divided by the number of ranks (NCCL's `ncclAvg`).
    Mean,
    /// The product.
    Prod,
    /// The largest.
    Max,
    /// The smallest.
    Min,
}

impl ReduceOp {
    /// Parses `sum`, `mean` (or `avg`), `prod`, `max` or `min`.
    pub fn parse(name: &str) -> Option<ReduceOp> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "sum" => ReduceOp::Sum,
            "mean" | "avg" => ReduceOp::Mean,
            "prod" | "product" => ReduceOp::Prod,
            "max" => ReduceOp::Max,
            "min" => ReduceOp::Min,
            _ => return None,
        })
    }

    fn nccl(self) -> ncclRedOp_t {
        match self {
            ReduceOp::Sum => ncclRedOp_t::ncclSum,
            ReduceOp::Mean => ncclRedOp_t::ncclAvg,
            ReduceOp::Prod => ncclRedOp_t::ncclProd,
            ReduceOp::Max => ncclRedOp_t::ncclMax,
            ReduceOp::Min => ncclRedOp_t::ncclMin,
        }
    }
}

/// NCCL's element type for an ISA type, or `None` where NCCL has none (16-bit integers, bool
/// is passed as `u8` by the caller).
pub fn nccl_type(ty: Type) -> Option<ncclDataType_t> {
    Some(match ty {
        Type::I8 => ncclDataType_t::ncclInt8,
        Type::U8 => ncclDataType_t::ncclUint8,
        Type::I32 => ncclDataType_t::ncclInt32,
        Type::U32 => ncclDataType_t::ncclUint32,
        Type::I64 => ncclDataType_t::ncclInt64,
        Type::U64 => ncclDataType_t::ncclUint64,
        Type::F16 => ncclDataType_t::ncclFloat16,
        Type::BF16 => ncclDataType_t::ncclBfloat16,
        Type::F32 => ncclDataType_t::ncclFloat32,
        Type::F64 => ncclDataType_t::ncclFloat64,
        _ => return None,
    })
}

fn nccl_unavailable(reason: &str) -> BackendError {
    BackendError::Unavailable {
        backend: "nccl".into(),
        reason: reason.into(),
    }
}

/// The NCCL library, or [`BackendError::Unavailable`] saying why it cannot be used.
fn nccl() -> Result<&'static Api> {
    api().map_err(nccl_unavailable)
}

/// The loaded NCCL's version (`2.21.5`), or why NCCL is unavailable.
pub fn nccl_version() -> Result<String> {
    Ok(nccl_api::version_text(nccl()?.version))
}

fn check(api: &Api, what: &str, status: c_int) -> Result<()> {
    if status == SUCCESS {
        Ok(())
    } else {
        Err(BackendError::Device(format!(
            "NCCL {what} failed: {}",
            nccl_api::describe(api, status)
        )))
    }
}

/// The id every rank of a multi-process communicator is created with: rank 0 makes it and the
/// caller passes its bytes ([`UniqueId::to_bytes`]) to the other processes.
#[derive(Clone)]
pub struct UniqueId(ncclUniqueId);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueId(..)")
    }
}

impl UniqueId {
    /// A new id (NCCL opens its bootstrap socket here, so make it once, on rank 0).
    pub fn new() -> Result<UniqueId> {
        let api = nccl()?;
        let mut id = ncclUniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: writes one ncclUniqueId.
        check(api, "ncclGetUniqueId", unsafe {
            (api.ncclGetUniqueId)(&mut id)
        })?;
        Ok(UniqueId(id))
    }

    /// The id's bytes, to send to the other ranks.
    pub fn to_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        self.0.internal.map(|c| c as u8)
    }

    /// An id received from rank 0 (exactly [`UNIQUE_ID_BYTES`] bytes).
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let bytes: &[u8; UNIQUE_ID_BYTES] =
            bytes
                .try_into()
                .map_err(|_| BackendError::InvalidArgument {
                    kernel: "nccl".into(),
                    reason: format!(
                        "an NCCL unique id has {UNIQUE_ID_BYTES} bytes, {} were given",
                        bytes.len()
                    ),
                })?;
        Ok(UniqueId(ncclUniqueId {
            internal: bytes.map(|b| b as std::ffi::c_char),
        }))
    }
}

/// The CUDA backend behind `backend`, or an error naming what was passed instead.
pub(crate) fn cuda_of(backend: &dyn Backend) -> Result<&CudaBackend> {
    backend
        .as_any()
        .and_then(|a| a.downcast_ref::<CudaBackend>())
        .ok_or_else(|| {
            BackendError::ForeignBuffer(format!(
                "NCCL and peer copies run on CUDA executors only, not on {}",
                backend.kind()
            ))
        })
}

/// One rank of an NCCL communicator, bound to one CUDA backend (its GPU and stream).
pub struct Communicator {
    comm: ncclComm_t,
    rank: usize,
    size: usize,
    // Keeps the stream the communicator's work is queued on alive.
    backend: Arc<dyn Backend>,
}

// SAFETY: an NCCL communicator may be used from any thread (not from two at once for the same
// communicator: every call takes `&self` but NCCL serializes calls on one communicator through
// its stream, and Hologram's executors already serialize their work).
unsafe impl Send for Communicator {}
// SAFETY: as for `Send`.
unsafe impl Sync for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator(rank {} of {}, cuda:{})",
            self.rank,
            self.size,
            self.backend.device_ordinal()
        )
    }
}

impl Communicator {
    /// One communicator per backend, driven by this process (`ncclCommInitAll`): rank `i` runs
    /// on `backends[i]`. Every backend must be CUDA and on a different GPU.
    pub fn init_all(backends: &[Arc<dyn Backend>]) -> Result<Vec<Communicator>> {
        let api = nccl()?;
        if backends.is_empty() {
            return Ok(Vec::new());
        }
        let mut devices: Vec<c_int> = Vec::with_capacity(backends.len());
        for b in backends {
            let cuda = cuda_of(b.as_ref())?;
            let ordinal = cuda.device_ordinal() as c_int;
            if devices.contains(&ordinal) {
                return Err(BackendError::InvalidArgument {
                    kernel: "nccl".into(),
                    reason: format!(
                        "two ranks on cuda:{ordinal}: a communicator driven by one process \
                         needs one executor per GPU"
                    ),
                });
            }
            devices.push(ordinal);
        }
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); backends.len()];
        // SAFETY: `comms` has room for one communicator per device in `devices`.
        let status = unsafe {
            (api.ncclCommInitAll)(comms.as_mut_ptr(), devices.len() as c_int, devices.as_ptr())
        };
        check(api, "ncclCommInitAll", status)?;
        let size = backends.len();
        Ok(comms
            .into_iter()
            .zip(backends)
            .enumerate()
            .map(|(rank, (comm, backend))| Communicator {
                comm,
                rank,
                size,
                backend: backend.clone(),
            })
            .collect())
    }

    /// Rank `rank` of a communicator of `size` ranks, one per process (`ncclCommInitRank`):
    /// blocks until every rank has joined with the same `id`.
    pub fn init_rank(
        backend: Arc<dyn Backend>,
        id: &UniqueId,
        rank: usize,
        size: usize,
    ) -> Result<Communicator> {
        let api = nccl()?;
        if size == 0 || rank >= size {
            return Err(BackendError::InvalidArgument {
                kernel: "nccl".into(),
                reason: format!("rank {rank} of a communicator of {size} ranks"),
            });
        }
        let cuda = cuda_of(backend.as_ref())?;
        // NCCL creates the communicator on the current device: this backend's.
        cuda.device().bind()?;
        let mut comm: ncclComm_t = std::ptr::null_mut();
        // SAFETY: writes one communicator; the id is passed by value as nccl.h declares.
        let status =
            unsafe { (api.ncclCommInitRank)(&mut comm, size as c_int, id.0, rank as c_int) };
        check(api, "ncclCommInitRank", status)?;
        Ok(Communicator {
            comm,
            rank,
            size,
            backend,
        })
    }

    /// This communicator's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The backend the rank runs on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The backend, made current, checked usable: ready for an NCCL call.
    fn ready(&self) -> Result<(&'static Api, &CudaBackend)> {
        let api = nccl()?;
        let cuda = cuda_of(self.backend.as_ref())?;
        cuda.check_usable()?;
        cuda.device().bind()?;
        Ok((api, cuda))
    }

    /// The device address of `count` elements of `ty` in `arg`, checked to be this rank's GPU
    /// memory.
    fn address(&self, arg: &BufferArg, count: usize, ty: Type, what: &str) -> Result<u64> {
        let bytes = count
            .checked_mul(ty.size_bytes())
            .ok_or_else(|| invalid(format!("{count} elements of {ty} overflow")))?;
        if bytes > arg.len {
            return Err(invalid(format!(
                "the {what} buffer holds {} bytes; {count} elements of {ty} need {bytes}",
                arg.len
            )));
        }
        crate::launch::check_range(arg.offset, arg.len, arg.memory.size())?;
        let m = arg
            .memory
            .as_any()
            .downcast_ref::<CudaMemory>()
            .ok_or_else(|| {
                BackendError::ForeignBuffer(format!("the {what} buffer is not CUDA device memory"))
            })?;
        let ordinal = self.backend.device_ordinal() as usize;
        if m.ordinal() != ordinal {
            return Err(BackendError::ForeignBuffer(format!(
                "the {what} buffer lives on cuda:{}, this rank runs on cuda:{ordinal}",
                m.ordinal()
            )));
        }
        Ok(m.address() + arg.offset as u64)
    }

    /// Combines `count` elements of every rank's `send` with `op` into every rank's `recv`
    /// (`send` and `recv` may be the same buffer: in place).
    pub fn all_reduce(
        &self,
        send: &BufferArg,
        recv: &BufferArg,
        count: usize,
        ty: Type,
        op: ReduceOp,
    ) -> Result<()> {
        let t = data_type(ty)?;
        let s = self.address(send, count, ty, "send")?;
        let r = self.address(recv, count, ty, "receive")?;
        let (api, cuda) = self.ready()?;
        // SAFETY: both ranges hold `count` elements of this GPU's memory (checked above); the
        // stream is the backend's, alive as long as `self.backend`.
        let status = unsafe {
            (api.ncclAllReduce)(
                s as *const c_void,
                r as *mut c_void,
                count,
                t,
                op.nccl(),
                self.comm,
                cuda.device().stream as _,
            )
        };
        check(api, "all-reduce", status)
    }

    /// Copies `count` elements of rank `root`'s `send` into every rank's `recv` (`send` is only
    /// read on the root; in place when they are the same buffer).
    pub fn broadcast(
        &self,
        send: &BufferArg,
        recv: &BufferArg,
        count: usize,
        ty: Type,
        root: usize,
    ) -> Result<()> {
        if root >= self.size {
            return Err(invalid(format!(
                "root rank {root} of a communicator of {} ranks",
                self.size
            )));
        }
        let t = data_type(ty)?;
        let s = self.address(send, count, ty, "send")?;
        let r = self.address(recv, count, ty, "receive")?;
        let (api, cuda) = self.ready()?;
        // SAFETY: as in `all_reduce`.
        let status = unsafe {
            (api.ncclBroadcast)(
                s as *const c_void,
                r as *mut c_void,
                count,
                t,
                root as c_int,
                self.comm,
                cuda.device().stream as _,
            )
        };
        check(api, "broadcast", status)
    }

    /// Gathers `count` elements from every rank's `send` into every rank's `recv`, rank `i`'s at
    /// element `i * count` (`recv` holds `size * count` elements).
    pub fn all_gather(
        &self,
        send: &BufferArg,
        recv: &BufferArg,
        count: usize,
        ty: Type,
    ) -> Result<()> {
        let t = data_type(ty)?;
        let total = count
            .checked_mul(self.size)
            .ok_or_else(|| invalid("all-gather size overflows".into()))?;
        let s = self.address(send, count, ty, "send")?;
        let r = self.address(recv, total, ty, "receive")?;
        let (api, cuda) = self.ready()?;
        // SAFETY: as in `all_reduce`; `recv` holds `size * count` elements.
        let status = unsafe {
            (api.ncclAllGather)(
                s as *const c_void,
                r as *mut c_void,
                count,
                t,
                self.comm,
                cuda.device().stream as _,
            )
        };
        check(api, "all-gather", status)
    }

    /// Combines every rank's `send` (`size * count` elements) with `op` and leaves block `i`
    /// (`count` elements at `i * count`) of the result in rank `i`'s `recv`.
    pub fn reduce_scatter(
        &self,
        send: &BufferArg,
        recv: &BufferArg,
        count: usize,
        ty: Type,
        op: ReduceOp,
    ) -> Result<()> {
        let t = data_type(ty)?;
        let total = count
            .checked_mul(self.size)
            .ok_or_else(|| invalid("reduce-scatter size overflows".into()))?;
        let s = self.address(send, total, ty, "send")?;
        let r = self.address(recv, count, ty, "receive")?;
        let (api, cuda) = self.ready()?;
        // SAFETY: as in `all_reduce`; `send` holds `size * count` elements.
        let status = unsafe {
            (api.ncclReduceScatter)(
                s as *const c_void,
                r as *mut c_void,
                count,
                t,
                op.nccl(),
                self.comm,
                cuda.device().stream as _,
            )
        };
        check(api, "reduce-scatter", status)
    }

    /// An error a rank's earlier work ran into asynchronously (a peer that died, a network
    /// failure), or `Ok`.
    pub fn async_error(&self) -> Result<()> {
        let api = nccl()?;
        let mut code: c_int = SUCCESS;
        // SAFETY: writes one int.
        check(api, "ncclCommGetAsyncError", unsafe {
            (api.ncclCommGetAsyncError)(self.comm, &mut code)
        })?;
        check(api, "an earlier collective", code)
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let Ok(api) = api() else { return };
        // Finish this rank's queued work, then free the communicator locally: ncclCommAbort
        // needs no other rank (ncclCommDestroy is collective across the host's ranks, and would
        // hang where one thread drops the communicators of several GPUs one after another).
        if let Ok(cuda) = cuda_of(self.backend.as_ref()) {
            if cuda.check_usable().is_ok() {
                let _ = cuda.device().sync();
            }
            let _ = cuda.device().bind();
        }
        // SAFETY: the communicator was created by NCCL and is freed once, here.
        let _ = unsafe { (api.ncclCommAbort)(self.comm) };
    }
}

fn invalid(reason: String) -> BackendError {
    BackendError::InvalidArgument {
        kernel: "nccl".into(),
        reason,
    }
}

fn data_type(ty: Type) -> Result<ncclDataType_t> {
    nccl_type(ty).ok_or_else(|| {
        invalid(format!(
            "NCCL has no {ty} elements (it takes 8-, 32- and 64-bit integers, f16, bf16, f32 and f64)"
        ))
    })
}

/// Starts an NCCL group by hand, for callers that cannot pass a closure (Python's `with`); pair
/// every call with [`group_end`]. Prefer [`group`].
pub fn group_start() -> Result<()> {
    let api = nccl()?;
    // SAFETY: no arguments; nests with other groups.
    check(api, "ncclGroupStart", unsafe { (api.ncclGroupStart)() })
}

/// Ends the group [`group_start`] began: the grouped collectives are launched here.
pub fn group_end() -> Result<()> {
    let api = nccl()?;
    // SAFETY: no arguments; NCCL reports a group end without a start as an error.
    check(api, "ncclGroupEnd", unsafe { (api.ncclGroupEnd)() })
}

/// Runs `calls` as one NCCL group (`ncclGroupStart` .. `ncclGroupEnd`): needed when one thread
/// issues the collectives of several ranks, and fuses small collectives. The group is ended even
/// when `calls` fails; its error comes first.
pub fn group<T>(calls: impl FnOnce() -> Result<T>) -> Result<T> {
    let api = nccl()?;
    // SAFETY: no arguments; nests with other groups.
    check(api, "ncclGroupStart", unsafe { (api.ncclGroupStart)() })?;
    let out = calls();
    // SAFETY: as above; ends the group started here.
    let end = check(api, "ncclGroupEnd", unsafe { (api.ncclGroupEnd)() });
    let out = out?;
    end?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_ops_parse_by_name() {
        assert_eq!(ReduceOp::parse("sum"), Some(ReduceOp::Sum));
        assert_eq!(ReduceOp::parse(" Mean "), Some(ReduceOp::Mean));
        assert_eq!(ReduceOp::parse("avg"), Some(ReduceOp::Mean));
        assert_eq!(ReduceOp::parse("max"), Some(ReduceOp::Max));
        assert_eq!(ReduceOp::parse("median"), None);
    }

    #[test]
    fn nccl_types_cover_what_nccl_has() {
        assert_eq!(nccl_type(Type::F32), Some(ncclDataType_t::ncclFloat32));
        assert_eq!(nccl_type(Type::BF16), Some(ncclDataType_t::ncclBfloat16));
        assert_eq!(nccl_type(Type::U8), Some(ncclDataType_t::ncclUint8));
        assert_eq!(nccl_type(Type::I16), None);
        assert!(data_type(Type::U16)
            .unwrap_err()
            .to_string()
            .contains("NCCL has no u16"));
    }

    #[test]
    fn unique_ids_round_trip_and_check_their_length() {
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let id = UniqueId::from_bytes(&bytes).unwrap();
        assert_eq!(id.to_bytes(), bytes);
        let short = UniqueId::from_bytes(&bytes[..12]).unwrap_err().to_string();
        assert!(short.contains("128 bytes, 12 were given"), "{short}");
    }
}
