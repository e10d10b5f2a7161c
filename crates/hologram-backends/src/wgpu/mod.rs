//! The portable GPU backend on wgpu: Metal on macOS, Vulkan on Linux, DX12 on Windows.
//!
//! Kernels are translated to WGSL ([`codegen`], pure Rust and always built) and run as compute
//! pipelines. The runtime half (adapter choice, memory, pipeline cache, launches) needs the
//! `wgpu` cargo feature. See this folder's README.md for the design and the accuracy bounds.

pub mod codegen;
