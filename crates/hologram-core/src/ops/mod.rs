//! Tensor operations, by family.

mod create;
mod elementwise;
pub mod legacy;
mod linalg;
mod loss;
mod nn;
mod reduce;

pub use elementwise::Rhs;
pub use reduce::ReduceOp;
