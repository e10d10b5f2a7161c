//! Tensor operations, by family.

mod conv;
mod create;
mod elementwise;
mod index;
pub mod legacy;
mod linalg;
mod loss;
mod nn;
mod norm;
mod pool;
mod reduce;

pub use conv::Conv2d;
pub use elementwise::Rhs;
pub use pool::MaxPool2d;
pub use reduce::ReduceOp;
