//! Launching the fused layer-norm row kernels of
//! [`hologram_compiler::patterns::norm_templates`].

use hologram_backends::{KernelArg, LaunchConfig};
use hologram_compiler::patterns::norm_templates::{self, NormKernel};
use hologram_compiler::patterns::softmax_templates::{row_acc, row_plan, ROW_BLOCK};
use hologram_isa::semantics::Value;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

fn u32_of(v: usize, shape: &[usize]) -> Result<KernelArg> {
    u32::try_from(v)
        .map(|v| KernelArg::Scalar(Value::U32(v)))
        .map_err(|_| Error::ShapeMismatch(format!("{shape:?} is too large for a row kernel")))
}

fn buffer(t: &Tensor) -> Result<(KernelArg, usize)> {
    let (s, layout) = t.contiguous()?.storage()?;
    Ok((KernelArg::Buffer(s.arg(0, s.bytes)), layout.offset))
}

/// A buffer whose element 0 is the tensor's first element (for arrays the kernels index from
/// 0: weights, biases, statistics).
fn dense(t: &Tensor) -> Result<KernelArg> {
    let c = t.contiguous()?;
    let c = if c.layout.offset == 0 {
        c
    } else {
        let f = Tensor::uninit(c.executor(), c.shape(), c.dtype())?;
        c.copy_into(&f)?;
        f
    };
    Ok(buffer(&c)?.0)
}

/// `(rows, cols)` of `x` normalized over its last `cols` elements.
fn rows_cols(x: &Tensor, cols: usize) -> (usize, usize) {
    (x.numel().checked_div(cols).unwrap_or(0), cols)
}

fn launch(x: &Tensor, k: NormKernel, rows: usize, args: Vec<KernelArg>) -> Result<()> {
    let exec = x.executor();
    let blocks = rows.div_ceil((ROW_BLOCK / k.g) as usize);
    let grid = u32::try_from(blocks)
        .map_err(|_| Error::ShapeMismatch(format!("{:?} has too many rows", x.shape())))?;
    if grid > 0 {
        let kernel = exec.compile(&norm_templates::kernel(&k)?)?;
        exec.launch(&kernel, &LaunchConfig::linear(grid, ROW_BLOCK), &args)?;
    }
    Ok(())
}

/// `(y, mean, rstd)`: `x` normalized over its last `cols` elements (rows of `[rows, cols]`),
/// times `w` plus `b` when given; `mean` and `rstd` are `[rows]` in the compute dtype.
pub(crate) fn forward(
    x: &Tensor,
    cols: usize,
    wb: Option<(&Tensor, &Tensor)>,
    eps: f64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (rows, cols) = rows_cols(x, cols);
    let st = x.dtype().storage();
    let acc = DType::from_type(row_acc(st)).unwrap_or(DType::F32);
    let exec = x.executor();
    let y = Tensor::uninit(exec, x.shape(), x.dtype())?;
    let mean = Tensor::uninit(exec, &[rows], acc)?;
    let rstd = Tensor::uninit(exec, &[rows], acc)?;
    let (g, resident) = row_plan(cols);
    let (xa, xoff) = buffer(x)?;
    let mut args = vec![xa];
    if let Some((w, b)) = wb {
        args.push(dense(&w.cast(x.dtype())?)?);
        args.push(dense(&b.cast(x.dtype())?)?);
    }
    for t in [&y, &mean, &rstd] {
        args.push(buffer(t)?.0);
    }
    args.push(u32_of(xoff, x.shape())?);
    args.push(u32_of(rows, x.shape())?);
    args.push(u32_of(cols, x.shape())?);
    args.push(KernelArg::Scalar(if acc == DType::F64 {
        Value::F64(eps)
    } else {
        Value::F32(eps as f32)
    }));
    let k = NormKernel {
        backward: false,
        affine: wb.is_some(),
        storage: st,
        g,
        resident,
    };
    launch(x, k, rows, args)?;
    Ok((y, mean, rstd))
}

/// The input gradient of layer norm from the statistics the forward kernel saved.
pub(crate) fn backward(
    x: &Tensor,
    dy: &Tensor,
    cols: usize,
    w: Option<&Tensor>,
    mean: &Tensor,
    rstd: &Tensor,
) -> Result<Tensor> {
    let (rows, cols) = rows_cols(x, cols);
    let st = x.dtype().storage();
    let acc = DType::from_type(row_acc(st)).unwrap_or(DType::F32);
    let dx = Tensor::uninit(x.executor(), x.shape(), x.dtype())?;
    let (g, resident) = row_plan(cols);
    let (xa, xoff) = buffer(x)?;
    let (da, doff) = buffer(&dy.cast(x.dtype())?)?;
    let mut args = vec![xa, da];
    if let Some(w) = w {
        args.push(dense(&w.cast(x.dtype())?)?);
    }
    args.push(dense(&mean.cast(acc)?.reshape(&[rows as isize])?)?);
    args.push(dense(&rstd.cast(acc)?.reshape(&[rows as isize])?)?);
    args.push(buffer(&dx)?.0);
    args.push(u32_of(xoff, x.shape())?);
    args.push(u32_of(doff, x.shape())?);
    args.push(u32_of(rows, x.shape())?);
    args.push(u32_of(cols, x.shape())?);
    let k = NormKernel {
        backward: true,
        affine: w.is_some(),
        storage: st,
        g,
        resident,
    };
    launch(x, k, rows, args)?;
    Ok(dx)
}
