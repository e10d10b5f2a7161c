//! The CUDA backend.
//!
//! [`codegen`] translates Atlas ISA kernels to CUDA C; it is plain Rust and always built. The
//! backend itself needs the `cuda` feature: it loads libcuda, NVRTC, cuBLAS and (when present, for convolutions) cuDNN at run time
//! (through cudarc), compiles generated code with NVRTC for the device's architecture, caches the
//! binaries in memory and on disk, and runs launches asynchronously on one stream.
//! [`CudaBackend::on_device`] picks the GPU; [`peer`] copies between GPUs and [`collective`] runs
//! NCCL collectives across the GPUs of the host.
//!
//! ```no_run
//! # #[cfg(feature = "cuda")] {
//! use hologram_backends::{cuda::CudaBackend, Backend};
//! let gpu = CudaBackend::new()?; // Err(Unavailable { reason }) without driver, NVRTC or GPU
//! println!("{}", gpu.info().name);
//! # }
//! # Ok::<(), hologram_backends::BackendError>(())
//! ```

pub mod codegen;
mod stats;

pub use stats::{backend_stats, stats, CudaStats};

#[cfg(feature = "cuda")]
mod blas;
#[cfg(feature = "cuda")]
mod cache;
#[cfg(feature = "cuda")]
pub mod collective;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod dnn;
#[cfg(feature = "cuda")]
mod dnn_api;
#[cfg(feature = "cuda")]
mod gemm_pointers;
#[cfg(feature = "cuda")]
mod graph;
#[cfg(feature = "cuda")]
mod launch;
#[cfg(feature = "cuda")]
mod memory;
#[cfg(feature = "cuda")]
mod module;
#[cfg(feature = "cuda")]
mod nccl_api;
#[cfg(feature = "cuda")]
pub mod nvrtc;
#[cfg(feature = "cuda")]
pub mod peer;
#[cfg(feature = "cuda")]
mod pinned_pool;
#[cfg(feature = "cuda")]
mod stream_order;

#[cfg(feature = "cuda")]
pub use cache::cache_dir;
#[cfg(feature = "cuda")]
pub use memory::CudaMemory;
#[cfg(feature = "cuda")]
pub use peer::{copy_between, device_count};

#[cfg(feature = "cuda")]
mod backend;
#[cfg(feature = "cuda")]
pub use backend::CudaBackend;
