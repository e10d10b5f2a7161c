//! The CUDA backend.
//!
//! [`codegen`] translates Atlas ISA kernels to CUDA C; it is plain Rust and always built. The
//! backend itself (driver, NVRTC, caches, memory, cuBLAS) needs the `cuda` feature.

pub mod codegen;
