//! # hologram-backends
//!
//! The [`Backend`] trait and its implementations. Every backend runs every valid Atlas ISA
//! kernel; the CPU backend is always available.
//!
//! ```
//! use hologram_backends::{Backend, BufferArg, CpuBackend, KernelArg, LaunchConfig};
//! use hologram_compiler::Canonical;
//! use hologram_isa::semantics::Value;
//!
//! // Backends compile kernels in canonical form (validated, canonicalized, with a digest).
//! let kernel = Canonical::assemble(
//!     ".kernel double\n.param .buf.f32 y .rw\n.param .u32 n\n    mov.u32 %i, %gid;\n    setp.ge.u32 %p, %i, n;\n@%p exit;\n    ld.f32 %v, y[%i];\n    add.f32 %v, %v, %v;\n    st.f32 y[%i], %v;\n",
//! )?;
//! let cpu = CpuBackend::new();
//! let compiled = cpu.compile(&kernel)?;
//! let y = cpu.allocate(4 * 1000)?;
//! let data: Vec<f32> = (0..1000).map(|i| i as f32).collect();
//! cpu.copy_in(&y, 0, bytemuck::cast_slice(&data))?;
//! let args = [KernelArg::Buffer(BufferArg::whole(y.clone())), KernelArg::Scalar(Value::U32(1000))];
//! cpu.launch(&compiled, &LaunchConfig::for_elements(1000, 256), &args)?;
//! let mut out = vec![0f32; 1000];
//! cpu.copy_out(&y, 0, bytemuck::cast_slice_mut(&mut out))?;
//! assert_eq!(out[999], 1998.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
// Every `unsafe` block says why it is sound, and `unsafe fn` bodies spell out their unsafe
// operations (CI runs clippy with `-D warnings`). See SOUNDNESS.md for the unsafe API.
#![warn(clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

mod backend;
mod backend_type;
pub mod cpu;
pub mod cuda;
mod error;
mod host_buffer;
pub mod launch;
pub mod library;
pub mod wgpu;

pub use backend::{
    Backend, BackendStats, BufferArg, Capabilities, CompiledKernel, DeviceInfo, DeviceMemory,
    Interop, KernelArg, LaunchConfig, Library, Memory, MemoryOwner, Replay,
};
pub use backend_type::BackendType;
pub use cpu::CpuBackend;
pub use error::{BackendError, Result};
pub use host_buffer::{HostBuffer, ReturnBuffer};
pub use library::{BinaryMap, ConvDesc, ConvPass, GemmDesc, GemmPrecision, MapOperand, OuterBatch};
#[cfg(feature = "wgpu")]
pub use wgpu::WgpuBackend;
