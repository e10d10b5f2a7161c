//! Tensor operations, by family.

mod attention;
mod conv;
mod create;
mod elementwise;
mod gemm_views;
mod index;
pub mod legacy;
mod linalg;
mod loss;
mod nn;
mod norm;
mod pool;
mod reduce;

pub use attention::{Attention, AttentionGrads};
pub use conv::Conv2d;
pub use elementwise::Rhs;
pub use pool::MaxPool2d;
pub use reduce::ReduceOp;
