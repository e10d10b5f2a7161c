//! Library entry points every backend offers. Each has a generic implementation written in the
//! Atlas ISA (so every backend runs it); backends override them with faster library code
//! (a CPU GEMM crate, cuBLAS).

pub mod binary_map;
pub mod conv;
pub mod gemm;

pub use binary_map::{BinaryMap, MapOperand};
pub use conv::{ConvDesc, ConvPass};
pub use gemm::{GemmDesc, GemmPrecision, OuterBatch};
