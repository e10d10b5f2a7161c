//! The portable GPU backend on wgpu: Metal on macOS, Vulkan on Linux, DX12 on Windows.
//!
//! Kernels are translated to WGSL ([`codegen`], pure Rust and always built) and run as compute
//! pipelines. The runtime half (adapter choice, memory, pipeline cache, launches) needs the
//! `wgpu` cargo feature. See this folder's README.md for the design and the accuracy bounds.
//!
//! Launches are asynchronous: they are queued without waiting (see `work_queue.rs`), and a launch's
//! device-side error (an out-of-bounds access, a timeout) is reported, naming its kernel, by the
//! next `synchronize` or `copy_out`, as on CUDA.

pub mod codegen;
pub mod gemm_wgsl;

#[cfg(feature = "wgpu")]
pub mod adapter;
#[cfg(feature = "wgpu")]
mod bind_groups;
#[cfg(feature = "wgpu")]
mod device;
#[cfg(feature = "wgpu")]
pub mod driver_output;
#[cfg(feature = "wgpu")]
mod gemm;
#[cfg(feature = "wgpu")]
mod launch;
#[cfg(feature = "wgpu")]
pub mod memory;
#[cfg(feature = "wgpu")]
pub mod pipeline_cache;
#[cfg(feature = "wgpu")]
mod probe;
#[cfg(feature = "wgpu")]
pub mod profile;
#[cfg(feature = "wgpu")]
mod spin_wait;
#[cfg(feature = "wgpu")]
mod staging;
#[cfg(feature = "wgpu")]
mod work_queue;

#[cfg(feature = "wgpu")]
pub use self::backend_impl::WgpuBackend;

#[cfg(feature = "wgpu")]
mod backend_impl;
