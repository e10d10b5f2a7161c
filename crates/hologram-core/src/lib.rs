//! # hologram-core
//!
//! The [`Executor`] owns a backend, a caching allocator with 96 size classes and a kernel cache;
//! [`Buffer`] is a typed, self-freeing allocation on it.
//!
//! ```
//! use hologram_core::{Executor, LaunchConfig};
//! use hologram_isa::semantics::Value;
//!
//! let exec = Executor::new_auto()?; // HOLOGRAM_BACKEND, else CUDA, a GPU, or the CPU
//! let saxpy = exec.assemble("
//! .kernel saxpy
//! .param .f32 a
//! .param .buf.f32 x
//! .param .buf.f32 y .rw
//! .param .u32 n
//!     mov.u32 %i, %gid;
//!     setp.ge.u32 %p, %i, n;
//! @%p exit;
//!     ld.f32 %x, x[%i];
//!     ld.f32 %y, y[%i];
//!     fma.f32 %y, a, %x, %y;
//!     st.f32 y[%i], %y;
//! ")?;
//! let n = 1000;
//! let x = exec.from_slice(&vec![1.0f32; n])?;
//! let y = exec.from_slice(&vec![2.0f32; n])?;
//! let args = [Value::F32(3.0).into(), x.arg(), y.arg(), Value::U32(n as u32).into()];
//! exec.launch(&saxpy, &LaunchConfig::for_elements(n as u64, 256), &args)?;
//! assert!(y.to_vec()?.iter().all(|&v| v == 5.0));
//! # Ok::<(), hologram_core::Error>(())
//! ```

#![warn(missing_docs)]
// Every `unsafe` block says why it is sound (CI runs clippy with `-D warnings`).
#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

pub mod alloc;
mod backend_type;
mod buffer;
#[cfg(feature = "cuda")]
pub mod collective;
pub mod data_parallel;
mod device;
mod dtype;
mod element;
mod error;
mod executor;
mod kernels;
pub mod named_args;
mod op_names;
pub mod ops;
pub mod plan;
mod storage;
pub mod tensor;

pub use alloc::AllocatorStats;
pub use backend_type::{availability, availability_of, Availability, BackendType};
pub use buffer::Buffer;
pub use device::{cuda_device_count, Device};
pub use dtype::DType;
pub use element::Element;
pub use error::{Error, Result};
pub use executor::{Executor, ExecutorStats, KernelCacheStats};
pub use hologram_backends::{
    BackendStats, Capabilities, CompiledKernel, DeviceInfo, HostBuffer, KernelArg, LaunchConfig,
};
pub use ops::{Attention, AttentionGrads, ReduceOp};
pub use tensor::{BinaryFn, Tensor, UnaryFn};
