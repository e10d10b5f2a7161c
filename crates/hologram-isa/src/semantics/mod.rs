//! What every instruction computes, defined once in Rust.
//!
//! The CPU backend runs these functions lane by lane, the compiler folds constants with them, and
//! the GPU code generators emit code with the same results, checked by the conformance suite.

mod branchless;
mod convert;
pub mod eval;
mod scalar;
mod value;

pub use branchless::{exp2_f32, exp_f32, sigmoid_f32, tanh_f32};
pub use convert::{convert, f64_to_f32_round_odd, FromWide, ToWide, Wide};
pub use scalar::{Float, Int, Num};
pub use value::Value;
