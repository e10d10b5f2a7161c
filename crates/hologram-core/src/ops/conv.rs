//! 2-D convolution (NCHW, any stride, padding, dilation and groups) and its backward, through
//! `im2col` and the backend's GEMM (cuBLAS, the CPU GEMM crate): a 1×1 convolution with stride
//! 1 and no padding needs no `im2col`; a depthwise convolution is an element-wise product
//! summed over the kernel window; other grouped convolutions run group by group.

use hologram_backends::{ConvDesc, ConvPass, GemmPrecision, KernelArg, LaunchConfig};
use hologram_isa::semantics::Value;

use crate::error::{Error, Result};
use crate::kernels::conv::{col2im_program, im2col_program};
use crate::kernels::generated_kernel;
use crate::tensor::Tensor;

/// Stride, padding and dilation (each `[y, x]`) and the number of groups of a convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conv2d {
    /// Step between output positions.
    pub stride: [usize; 2],
    /// Zeros added on each side of the input.
    pub padding: [usize; 2],
    /// Step between kernel taps.
    pub dilation: [usize; 2],
    /// Channel groups (the input's and output's channels must be multiples).
    pub groups: usize,
    /// The precision of the matrix products (TF32 on CUDA tensor cores, as PyTorch's convolutions
    /// use by default there).
    pub precision: GemmPrecision,
}

impl Default for Conv2d {
    fn default() -> Self {
        Conv2d {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
            precision: GemmPrecision::Exact,
        }
    }
}

/// The shapes of one convolution.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    cout: usize,
    kh: usize,
    kw: usize,
    ho: usize,
    wo: usize,
}

impl Conv2d {
    fn geometry(&self, x: &[usize], weight: &[usize]) -> Result<Geometry> {
        let bad = |why: String| Err(Error::ShapeMismatch(why));
        if x.len() != 4 || weight.len() != 4 {
            return bad(format!(
                "conv2d takes a [N, C, H, W] input and a [Cout, C/groups, kh, kw] weight, got {x:?} and {weight:?}"
            ));
        }
        let (g, [sh, sw], [ph, pw], [dh, dw]) =
            (self.groups, self.stride, self.padding, self.dilation);
        if g == 0 || x[1] % g != 0 || weight[0] % g != 0 || weight[1] * g != x[1] {
            return bad(format!(
                "conv2d with {g} groups: input {x:?} and weight {weight:?} do not fit"
            ));
        }
        if sh == 0 || sw == 0 || dh == 0 || dw == 0 {
            return bad("conv2d stride and dilation must be positive".into());
        }
        let out = |len: usize, k: usize, s: usize, p: usize, d: usize| -> Option<usize> {
            let span = d * (k - 1) + 1;
            (len + 2 * p).checked_sub(span).map(|v| v / s + 1)
        };
        let (kh, kw) = (weight[2].max(1), weight[3].max(1));
        match (out(x[2], kh, sh, ph, dh), out(x[3], kw, sw, pw, dw)) {
            (Some(ho), Some(wo)) => Ok(Geometry {
                n: x[0],
                c: x[1],
                h: x[2],
                w: x[3],
                cout: weight[0],
                kh,
                kw,
                ho,
                wo,
            }),
            _ => bad(format!(
                "conv2d: the kernel {weight:?} is larger than the padded input {x:?}"
            )),
        }
    }

    fn pointwise(&self, g: &Geometry) -> bool {
        g.kh == 1 && g.kw == 1 && self.stride == [1, 1] && self.padding == [0, 0]
    }
}

fn geometry_args(
    t: &Tensor,
    total: usize,
    offset: usize,
    p: &Conv2d,
    g: &Geometry,
) -> Result<Vec<KernelArg>> {
    let vals = [
        total,
        offset,
        g.n,
        g.c,
        g.h,
        g.w,
        g.kh,
        g.kw,
        p.stride[0],
        p.stride[1],
        p.padding[0],
        p.padding[1],
        p.dilation[0],
        p.dilation[1],
        g.ho,
        g.wo,
    ];
    vals.iter()
        .map(|&v| {
            u32::try_from(v)
                .map(|v| KernelArg::Scalar(Value::U32(v)))
                .map_err(|_| {
                    Error::ShapeMismatch(format!(
                        "conv2d of {:?}: {v} does not fit 32 bits",
                        t.shape()
                    ))
                })
        })
        .collect()
}

impl Conv2d {
    /// The convolution as the backend's library sees it, when the library runs this pass.
    fn library(&self, x: &Tensor, g: &Geometry, pass: ConvPass) -> Option<ConvDesc> {
        let desc = ConvDesc {
            ty: x.dtype.storage(),
            input: [g.n, g.c, g.h, g.w],
            weight: [g.cout, g.c / self.groups, g.kh, g.kw],
            output: [g.ho, g.wo],
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
            precision: self.precision,
        };
        let (a, b, c) = desc.sizes();
        let nonempty = a > 0 && b > 0 && c > 0;
        (nonempty && x.exec.backend().supports_conv(&desc, pass)).then_some(desc)
    }
}

/// Runs one pass of a library convolution: `(a, b)` as [`ConvPass`] lists them, the output a
/// new tensor of `shape` in `a`'s dtype.
fn library_conv(
    desc: &ConvDesc,
    pass: ConvPass,
    a: &Tensor,
    b: &Tensor,
    shape: &[usize],
) -> Result<Tensor> {
    let exec = a.exec.clone();
    let out = Tensor::uninit(&exec, shape, a.dtype)?;
    let size = a.dtype.size();
    let arg = |t: &Tensor| -> Result<hologram_backends::BufferArg> {
        let (s, l) = t.storage()?;
        Ok(s.arg(l.offset * size, t.numel() * size))
    };
    let (a, b) = (a.contiguous()?, b.cast(a.dtype)?.contiguous()?);
    exec.conv(desc, pass, &arg(&a)?, &arg(&b)?, &arg(&out)?)?;
    Ok(out)
}

impl Tensor {
    /// `[N, C·kh·kw, Ho·Wo]`: every input patch of a convolution with `weight_shape`'s kernel as
    /// a column.
    fn im2col(&self, p: &Conv2d, g: &Geometry) -> Result<Tensor> {
        let k = g.c * g.kh * g.kw;
        let l = g.ho * g.wo;
        let cols = Tensor::uninit(&self.exec, &[g.n, k, l], self.dtype)?;
        let total = g.n * k * l;
        if total == 0 {
            return Ok(cols);
        }
        let (xs, xl) = self.contiguous()?.storage()?;
        let (cs, _) = cols.storage()?;
        let mut args = vec![
            KernelArg::Buffer(xs.arg(0, xs.bytes)),
            KernelArg::Buffer(cs.arg(0, cs.bytes)),
        ];
        args.extend(geometry_args(self, total, xl.offset, p, g)?);
        let kernel = self.exec.compile(&generated_kernel(
            im2col_program(self.dtype.storage()),
            false,
        )?)?;
        self.exec.launch(
            &kernel,
            &LaunchConfig::for_elements(total as u64, 256),
            &args,
        )?;
        Ok(cols)
    }

    /// The input gradient `[N, C, H, W]` from the gradient of the columns (`self`,
    /// `[N, C·kh·kw, Ho·Wo]`).
    fn col2im(&self, p: &Conv2d, g: &Geometry) -> Result<Tensor> {
        let dx = Tensor::uninit(&self.exec, &[g.n, g.c, g.h, g.w], self.dtype)?;
        let total = g.n * g.c * g.h * g.w;
        if total == 0 {
            return Ok(dx);
        }
        let (cs, cl) = self.contiguous()?.storage()?;
        let (ds, _) = dx.storage()?;
        let mut args = vec![
            KernelArg::Buffer(cs.arg(0, cs.bytes)),
            KernelArg::Buffer(ds.arg(0, ds.bytes)),
        ];
        args.extend(geometry_args(self, total, cl.offset, p, g)?);
        let acc = self.dtype.compute();
        let kernel = self.exec.compile(&generated_kernel(
            col2im_program(self.dtype.storage(), acc),
            false,
        )?)?;
        self.exec.launch(
            &kernel,
            &LaunchConfig::for_elements(total as u64, 256),
            &args,
        )?;
        Ok(dx)
    }

    /// 2-D convolution of `self` (`[N, C, H, W]`) with `weight` (`[Cout, C/groups, kh, kw]`),
    /// plus `bias` (`[Cout]`) when given: PyTorch's `conv2d` (a cross-correlation).
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, p: &Conv2d) -> Result<Tensor> {
        self.check_same_executor(weight)?;
        let g = p.geometry(self.shape(), weight.shape())?;
        if let Some(desc) = p.library(self, &g, ConvPass::Forward) {
            let mut out = library_conv(
                &desc,
                ConvPass::Forward,
                self,
                weight,
                &[g.n, g.cout, g.ho, g.wo],
            )?;
            if let Some(b) = bias {
                out = out.add(&b.reshape(&[1, g.cout as isize, 1, 1])?)?;
            }
            return Ok(out);
        }
        let (kk, l) = (g.kh * g.kw, g.ho * g.wo);
        let cols = if p.pointwise(&g) {
            self.reshape(&[g.n as isize, g.c as isize, l as isize])?
        } else {
            self.im2col(p, &g)?
        };
        let w = weight.cast(self.dtype)?;
        let out = if p.groups == 1 {
            // [Cout, C·kk] @ [N, C·kk, L] -> [N, Cout, L] (the weight broadcast over N).
            w.reshape(&[g.cout as isize, (g.c * kk) as isize])?
                .matmul_with(&cols, p.precision)?
        } else if p.groups == g.c {
            // Depthwise: each output channel sums its own input channel's window.
            let m = g.cout / g.c;
            let cols = cols.reshape(&[g.n as isize, g.c as isize, 1, kk as isize, l as isize])?;
            let w = w.reshape(&[1, g.c as isize, m as isize, kk as isize, 1])?;
            cols.mul(&w)?
                .sum(&[3], false)?
                .reshape(&[g.n as isize, g.cout as isize, l as isize])?
        } else {
            let (cg, og) = (g.c / p.groups, g.cout / p.groups);
            let cols = cols.reshape(&[
                g.n as isize,
                p.groups as isize,
                (cg * kk) as isize,
                l as isize,
            ])?;
            let w = w.reshape(&[p.groups as isize, og as isize, (cg * kk) as isize])?;
            let parts = (0..p.groups)
                .map(|gi| {
                    let wg = w
                        .slice(0, gi, gi + 1, 1)?
                        .reshape(&[og as isize, (cg * kk) as isize])?;
                    let cg_ = cols.slice(1, gi, gi + 1, 1)?.reshape(&[
                        g.n as isize,
                        (cg * kk) as isize,
                        l as isize,
                    ])?;
                    wg.matmul_with(&cg_, p.precision)
                })
                .collect::<Result<Vec<_>>>()?;
            Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1)?
        };
        let mut out =
            out.reshape(&[g.n as isize, g.cout as isize, g.ho as isize, g.wo as isize])?;
        if let Some(b) = bias {
            out = out.add(&b.reshape(&[1, g.cout as isize, 1, 1])?)?;
        }
        Ok(out)
    }

    /// `(dx, dweight, dbias)` of [`Tensor::conv2d`] given the gradient of its output; each is
    /// computed only where `want` (input, weight, bias) asks for it.
    pub fn conv2d_backward(
        &self,
        grad: &Tensor,
        weight: &Tensor,
        p: &Conv2d,
        want: [bool; 3],
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = p.geometry(self.shape(), weight.shape())?;
        let (kk, l) = (g.kh * g.kw, g.ho * g.wo);
        let (n, c, cout) = (g.n as isize, g.c as isize, g.cout as isize);
        let grad = grad.cast(self.dtype)?.reshape(&[n, cout, l as isize])?;
        let w = weight.cast(self.dtype)?;
        let db = if want[2] {
            Some(grad.sum(&[0, 2], false)?.cast(weight.dtype())?)
        } else {
            None
        };
        let data = want[0]
            .then(|| p.library(self, &g, ConvPass::BackwardData))
            .flatten();
        let filter = want[1]
            .then(|| p.library(self, &g, ConvPass::BackwardFilter))
            .flatten();
        if data.is_some() == want[0] && filter.is_some() == want[1] {
            // The library runs every pass asked for.
            let dy = grad.reshape(&[n, cout, g.ho as isize, g.wo as isize])?;
            let dx = match &data {
                Some(d) => Some(library_conv(
                    d,
                    ConvPass::BackwardData,
                    &w,
                    &dy,
                    self.shape(),
                )?),
                None => None,
            };
            let dw = match &filter {
                Some(d) => Some(
                    library_conv(d, ConvPass::BackwardFilter, self, &dy, weight.shape())?
                        .cast(weight.dtype())?,
                ),
                None => None,
            };
            return Ok((dx, dw, db));
        }
        let cols = if want[1] {
            Some(if p.pointwise(&g) {
                self.reshape(&[n, c, l as isize])?
            } else {
                self.im2col(p, &g)?
            })
        } else {
            None
        };
        let back = |dcols: Tensor| -> Result<Tensor> {
            if p.pointwise(&g) {
                dcols.reshape(&[n, c, g.h as isize, g.w as isize])
            } else {
                dcols.col2im(p, &g)
            }
        };
        let (dx, dw) = if p.groups == 1 {
            let wm = w.reshape(&[cout, (g.c * kk) as isize])?;
            let dx = if want[0] {
                // [C·kk, Cout] @ [N, Cout, L] -> [N, C·kk, L]
                Some(back(wm.transpose(0, 1)?.matmul_with(&grad, p.precision)?)?)
            } else {
                None
            };
            let dw = match &cols {
                // Σ_n [Cout, L] @ [L, C·kk]
                Some(cols) => Some(
                    grad.matmul_with(&cols.transpose(1, 2)?, p.precision)?
                        .sum(&[0], false)?,
                ),
                None => None,
            };
            (dx, dw)
        } else if p.groups == g.c {
            let m = (g.cout / g.c) as isize;
            let gr = grad.reshape(&[n, c, m, 1, l as isize])?;
            let dx = if want[0] {
                let wv = w.reshape(&[1, c, m, kk as isize, 1])?;
                let dcols = gr.mul(&wv)?.sum(&[2], false)?.reshape(&[
                    n,
                    (g.c * kk) as isize,
                    l as isize,
                ])?;
                Some(back(dcols)?)
            } else {
                None
            };
            let dw = match &cols {
                Some(cols) => {
                    let cv = cols.reshape(&[n, c, 1, kk as isize, l as isize])?;
                    Some(gr.mul(&cv)?.sum(&[0, 4], false)?)
                }
                None => None,
            };
            (dx, dw)
        } else {
            return Err(Error::InvalidArgument(format!(
                "the backward of a convolution with {} groups over {} channels (only 1 group or depthwise) is not supported",
                p.groups, g.c
            )));
        };
        let dw = match dw {
            Some(t) => Some(
                t.reshape(
                    &weight
                        .shape()
                        .iter()
                        .map(|&d| d as isize)
                        .collect::<Vec<_>>(),
                )?
                .cast(weight.dtype())?,
            ),
            None => None,
        };
        let dx = match dx {
            Some(t) if t.dtype() != self.dtype => Some(t.cast(self.dtype)?),
            other => other,
        };
        Ok((dx, dw, db))
    }
}
