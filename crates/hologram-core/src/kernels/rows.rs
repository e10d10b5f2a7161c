//! Launching the fused row kernels (softmax, log-softmax and their backward ops over the last
//! axis) of [`hologram_compiler::patterns::softmax_templates`].

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_compiler::patterns::softmax_templates::{self, row_plan, RowOp, ROW_BLOCK};
use hologram_compiler::patterns::RowPattern;
use hologram_isa::semantics::Value;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Runs `op` over the last axis of `inputs` (one tensor forward; `y` then `g` backward, all of
/// one shape and float dtype, non-empty) and returns the result, contiguous. Inputs may be lazy
/// or strided views: they are made contiguous first.
pub(crate) fn run(op: RowOp, inputs: &[&Tensor]) -> Result<Tensor> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::Internal("a row kernel without inputs".into()))?;
    let out = Tensor::uninit(first.executor(), first.shape(), first.dtype())?;
    run_into(op, inputs, &out, &[])?;
    Ok(out)
}

/// [`run`] writing into `out` (contiguous, of the inputs' shape and dtype, and either distinct
/// from every input or exactly one of them), with the attention ops' `extra` scalar arguments
/// (after `cols`).
pub(crate) fn run_into(
    op: RowOp,
    inputs: &[&Tensor],
    out: &Tensor,
    extra: &[KernelArg],
) -> Result<()> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::Internal("a row kernel without inputs".into()))?;
    let (exec, dtype, shape) = (first.executor(), first.dtype(), first.shape().to_vec());
    let cols = shape.last().copied().unwrap_or(1);
    let rows = first.numel().checked_div(cols).unwrap_or(0);
    if out.shape() != shape.as_slice() || out.dtype() != dtype || !out.is_contiguous() {
        return Err(Error::Internal(format!(
            "a row kernel's output {:?} does not match its input {shape:?}",
            out.shape()
        )));
    }
    let u32_of = |v: usize| -> Result<KernelArg> {
        u32::try_from(v)
            .map(|v| KernelArg::Scalar(Value::U32(v)))
            .map_err(|_| Error::ShapeMismatch(format!("{shape:?} is too large for a row kernel")))
    };
    let mut buffers = Vec::new();
    let mut offsets = Vec::new();
    for t in inputs {
        let (s, layout) = t.contiguous()?.storage()?;
        buffers.push(KernelArg::Buffer(s.arg(0, s.bytes)));
        offsets.push(u32_of(layout.offset)?);
    }
    let (os, ol) = out.storage()?;
    let ob = ol.offset * dtype.size();
    buffers.push(KernelArg::Buffer(os.arg(ob, os.bytes - ob)));
    let mut args = buffers;
    args.extend(offsets);
    args.push(u32_of(rows)?);
    args.push(u32_of(cols)?);
    args.extend(extra.iter().cloned());
    let (g, resident) = row_plan(cols);
    let blocks = rows.div_ceil((ROW_BLOCK / g) as usize);
    let grid = u32::try_from(blocks)
        .map_err(|_| Error::ShapeMismatch(format!("{shape:?} has too many rows")))?;
    if grid > 0 {
        let kernel = exec.compile(&softmax_templates::kernel(&RowPattern {
            op,
            storage: dtype.storage(),
            g,
            resident,
        })?)?;
        exec.launch(&kernel, &LaunchConfig::linear(grid, ROW_BLOCK), &args)?;
    }
    Ok(())
}
