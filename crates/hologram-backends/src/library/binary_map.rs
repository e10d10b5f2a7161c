//! A small element-wise map of two operands (`out = a OP b`), which a backend may run at once
//! with library code instead of launching the generic kernel that computes it: a tensor op on
//! a few elements then costs little more than the loop itself (see [`crate::Library::binary_map`]).
//!
//! The generic implementation is that kernel: a backend without such code says so, and the
//! caller launches the kernel as for any other element-wise map.

use hologram_isa::semantics::Value;
use hologram_isa::{BinaryOp, Type};

use crate::backend::BufferArg;

/// One operand of a [`BinaryMap`].
#[derive(Debug, Clone, Copy)]
pub enum MapOperand<'a> {
    /// `n` elements of the map's type, dense from the range's start.
    Buffer(&'a BufferArg),
    /// One value of the map's type for every element.
    Scalar(Value),
}

/// `out[i] = a[i] OP b[i]` for `i < n`, each operand a buffer or one value, all of type `ty`,
/// with the ISA's semantics of `op` (the same bits as the instruction `op.ty`).
#[derive(Debug, Clone, Copy)]
pub struct BinaryMap<'a> {
    /// The operation.
    pub op: BinaryOp,
    /// The type of both operands and the result.
    pub ty: Type,
    /// The first operand.
    pub a: MapOperand<'a>,
    /// The second operand.
    pub b: MapOperand<'a>,
    /// `n` elements of `ty`, dense from the range's start; it may be an input's range exactly
    /// (an in-place map), and overlaps no input otherwise (or the backend declines).
    pub out: &'a BufferArg,
    /// Elements.
    pub n: usize,
}
