//! Tensor operations, by family.

mod create;
mod elementwise;
mod index;
pub mod legacy;
mod linalg;
mod loss;
mod nn;
mod norm;
mod reduce;

pub use elementwise::Rhs;
pub use reduce::ReduceOp;
