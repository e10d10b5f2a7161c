//! 2-D convolutions a vendor library runs (cuDNN on CUDA). Backends without one say so through
//! [`crate::Library::supports_conv`] and the caller lowers the convolution to `im2col` and GEMM.

use hologram_isa::Type;

use super::GemmPrecision;
use crate::backend::BufferArg;
use crate::error::{BackendError, Result};

/// One 2-D convolution over NCHW tensors (PyTorch's `conv2d`, a cross-correlation): input
/// `[n, c, h, w]`, weight `[cout, c / groups, kh, kw]`, output `[n, cout, ho, wo]`, every
/// operand contiguous and of type `ty`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvDesc {
    /// Element type of every operand.
    pub ty: Type,
    /// Batch, channels, height and width of the input.
    pub input: [usize; 4],
    /// Output channels, input channels per group, kernel height and width.
    pub weight: [usize; 4],
    /// Output height and width.
    pub output: [usize; 2],
    /// Step between output positions `[y, x]`.
    pub stride: [usize; 2],
    /// Zeros added on each side `[y, x]`.
    pub padding: [usize; 2],
    /// Step between kernel taps `[y, x]`.
    pub dilation: [usize; 2],
    /// Channel groups.
    pub groups: usize,
    /// Whether f32 may be computed with TF32 tensor cores.
    pub precision: GemmPrecision,
}

/// Which product of a convolution to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvPass {
    /// `y = conv(x, w)`; operands `(x, w, y)`.
    Forward,
    /// The input gradient `dx` from `dy`; operands `(w, dy, dx)`.
    BackwardData,
    /// The weight gradient `dw` from `x` and `dy`; operands `(x, dy, dw)`.
    BackwardFilter,
}

impl ConvDesc {
    /// Element counts of `(x, w, y)`.
    pub fn sizes(&self) -> (usize, usize, usize) {
        let [n, _, _, _] = self.input;
        (
            self.input.iter().product(),
            self.weight.iter().product(),
            n * self.weight[0] * self.output[0] * self.output[1],
        )
    }

    /// Checks that the shapes agree and that each operand of `pass` fits in its buffer.
    pub fn check(
        &self,
        pass: ConvPass,
        a: &BufferArg,
        b: &BufferArg,
        out: &BufferArg,
    ) -> Result<()> {
        let bad = |reason: String| BackendError::InvalidArgument {
            kernel: "conv2d".into(),
            reason,
        };
        let [_, c, h, w] = self.input;
        let [cout, cg, kh, kw] = self.weight;
        if self.groups == 0 || c != cg * self.groups || cout % self.groups != 0 {
            return Err(bad(format!(
                "{c} input channels, {cg} per group and {cout} output channels do not fit {} groups",
                self.groups
            )));
        }
        let out_len = |n: usize, k: usize, p: usize, s: usize, d: usize| {
            (n + 2 * p).checked_sub(d * (k - 1) + 1).map(|v| v / s + 1)
        };
        if kh == 0
            || kw == 0
            || self.stride.contains(&0)
            || self.dilation.contains(&0)
            || out_len(h, kh, self.padding[0], self.stride[0], self.dilation[0])
                != Some(self.output[0])
            || out_len(w, kw, self.padding[1], self.stride[1], self.dilation[1])
                != Some(self.output[1])
        {
            return Err(bad(format!("the output size {:?} does not follow from the input, kernel, stride, padding and dilation", self.output)));
        }
        // The element counts, checked: a wrapped product would pass the length check below.
        let count = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let [n, ..] = self.input;
        let (x, wt, y) = match (
            count(&self.input),
            count(&self.weight),
            count(&[n, self.weight[0], self.output[0], self.output[1]]),
        ) {
            (Some(x), Some(wt), Some(y)) => (x, wt, y),
            _ => {
                return Err(bad(
                    "the operands have more elements than fit in memory".into()
                ))
            }
        };
        let want = match pass {
            ConvPass::Forward => [x, wt, y],
            ConvPass::BackwardData => [wt, y, x],
            ConvPass::BackwardFilter => [x, y, wt],
        };
        let size = self.ty.size_bytes();
        for (arg, (elems, name)) in [a, b, out]
            .iter()
            .zip(want.iter().zip(["first", "second", "output"]))
        {
            let bytes = elems.checked_mul(size).ok_or_else(|| {
                bad(format!(
                    "the {name} operand has more bytes than fit in memory"
                ))
            })?;
            crate::launch::check_buffer(arg, arg.memory.size())?;
            if bytes > arg.len {
                return Err(bad(format!(
                    "the {name} operand needs {bytes} bytes, its buffer range has {}",
                    arg.len
                )));
            }
        }
        Ok(())
    }
}
