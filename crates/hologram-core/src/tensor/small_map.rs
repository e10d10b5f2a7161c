//! A pending expression that is one binary operation on dense operands of its own dtype (`x + 1`,
//! `a * b`), handed to the backend's library code ([`hologram_backends::Library::binary_map`])
//! before a kernel is looked up and launched for it. The CPU backend runs small ones at once
//! with the lane functions its kernels use (the same bits); others, and every other backend,
//! decline, and the expression's kernel runs as before.

use hologram_backends::{BinaryMap, BufferArg, MapOperand};

use crate::dtype::DType;
use crate::error::Result;
use crate::executor::Executor;
use crate::kernels::elementwise::isa_op;
use crate::tensor::expr::{Node, NodeId};
use crate::tensor::fused::{dense_as, is_dense, Fused};
use crate::tensor::Tensor;

/// Runs `expr` into `out` (stored, of the expression's shape) through the backend's library
/// when it takes it; false otherwise.
pub(crate) fn run(exec: &Executor, expr: &Fused<'_>, out: &Tensor) -> Result<bool> {
    let [root] = expr.roots else {
        return Ok(false);
    };
    let Some(&(Node::Binary(f, x, y), dtype)) = expr.graph.nodes.get(*root as usize) else {
        return Ok(false);
    };
    // Dtypes whose kernels compute in their storage type (f16 and bf16 compute in f32).
    let computed_as_stored = matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64);
    if out.dtype != dtype || !computed_as_stored || !is_dense(out) {
        return Ok(false);
    }
    // A dense input of the dtype (its whole buffer), or a constant.
    let buffer = |id: NodeId| -> Option<BufferArg> {
        match expr.graph.nodes.get(id as usize)? {
            (Node::Input(k), dt) if *dt == dtype => {
                let input = expr.inputs.get(*k as usize)?;
                (input.dtype == dtype && dense_as(&input.layout, expr.shape))
                    .then(|| input.storage.arg(0, input.storage.bytes))
            }
            _ => None,
        }
    };
    let constant = |id: NodeId| match expr.graph.nodes.get(id as usize) {
        Some((Node::Scalar(v), dt)) if *dt == dtype => Some(*v),
        _ => None,
    };
    let (bx, by) = (buffer(x), buffer(y));
    let (Some(a), Some(b)) = (operand(&bx, x, constant), operand(&by, y, constant)) else {
        return Ok(false);
    };
    let crate::tensor::Source::Stored(storage) = &out.src else {
        return Ok(false);
    };
    let out_arg = storage.arg(0, storage.bytes);
    exec.binary_map(&BinaryMap {
        op: isa_op(f),
        ty: dtype.storage(),
        a,
        b,
        out: &out_arg,
        n: out.numel(),
    })
}

/// A buffer operand, else the node's constant.
fn operand(
    buffer: &Option<BufferArg>,
    id: NodeId,
    constant: impl Fn(NodeId) -> Option<hologram_isa::semantics::Value>,
) -> Option<MapOperand<'_>> {
    match buffer {
        Some(b) => Some(MapOperand::Buffer(b)),
        None => constant(id).map(MapOperand::Scalar),
    }
}
