//! Matrix products through the backend's GEMM (a CPU GEMM crate, cuBLAS, or the generic kernel).

use hologram_backends::{GemmDesc, GemmPrecision};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::Tensor;

/// A batch of matrices as the GEMM sees it: storage, element offset, leading dimension,
/// transposition and the stride between matrices.
struct MatOperand {
    tensor: Tensor,
    trans: bool,
    ld: usize,
    batch_stride: usize,
}

fn as_gemm_operand(t: &Tensor, batch: &[usize]) -> Result<MatOperand> {
    let r = t.rank();
    let (rows, cols) = (t.shape()[r - 2], t.shape()[r - 1]);
    let mut shape = batch.to_vec();
    shape.extend([rows, cols]);
    let t = t.broadcast_to(&shape)?.realize()?;
    let s = t.strides().to_vec();
    let (sr, sc) = (s[s.len() - 2], s[s.len() - 1]);
    // One stride between consecutive matrices across all batch dimensions.
    let batch_stride = |t: &Tensor| -> Option<usize> {
        let nb = t.rank() - 2;
        if nb == 0 {
            return Some(0);
        }
        let bs = &t.strides()[..nb];
        let bd = &t.shape()[..nb];
        let inner = bs[nb - 1];
        let mut expect = inner;
        for i in (0..nb).rev() {
            if bd[i] != 1 && bs[i] != expect && !(bs[i] == 0 && bs.iter().all(|&x| x == 0)) {
                return None;
            }
            expect *= bd[i];
        }
        Some(inner)
    };
    if sc == 1 && sr >= cols.max(1) {
        if let Some(bs) = batch_stride(&t) {
            return Ok(MatOperand {
                tensor: t,
                trans: false,
                ld: sr.max(1),
                batch_stride: bs,
            });
        }
    } else if sr == 1 && sc >= rows.max(1) {
        if let Some(bs) = batch_stride(&t) {
            return Ok(MatOperand {
                tensor: t,
                trans: true,
                ld: sc.max(1),
                batch_stride: bs,
            });
        }
    }
    let c = t.contiguous()?;
    let bs = rows * cols;
    Ok(MatOperand {
        tensor: c,
        trans: false,
        ld: cols.max(1),
        batch_stride: if batch.iter().product::<usize>() > 1 {
            bs
        } else {
            0
        },
    })
}

impl Tensor {
    /// Matrix product with NumPy semantics: 1-D operands are vectors, leading dimensions are
    /// broadcast batch dimensions.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_with(other, GemmPrecision::Exact)
    }

    /// [`Tensor::matmul`] with a precision policy (TF32 on CUDA tensor cores).
    pub fn matmul_with(&self, other: &Tensor, precision: GemmPrecision) -> Result<Tensor> {
        self.check_same_executor(other)?;
        if self.rank() == 0 || other.rank() == 0 {
            return Err(Error::ShapeMismatch(
                "matmul needs at least 1-D operands".into(),
            ));
        }
        let dtype = DType::promote(self.dtype, other.dtype);
        if !dtype.is_float() {
            return Err(Error::TypeMismatch(format!(
                "matmul supports float tensors, not {dtype}; cast first"
            )));
        }
        let a = if self.rank() == 1 {
            self.unsqueeze(0)?
        } else {
            self.clone()
        }
        .cast(dtype)?;
        let b = if other.rank() == 1 {
            other.unsqueeze(1)?
        } else {
            other.clone()
        }
        .cast(dtype)?;
        let (ar, br) = (a.rank(), b.rank());
        let (m, k) = (a.shape()[ar - 2], a.shape()[ar - 1]);
        let (k2, n) = (b.shape()[br - 2], b.shape()[br - 1]);
        if k != k2 {
            return Err(Error::ShapeMismatch(format!(
                "matmul of {:?} and {:?}: inner dimensions {k} and {k2} differ",
                self.shape(),
                other.shape()
            )));
        }
        let batch = broadcast_shapes(&a.shape()[..ar - 2], &b.shape()[..br - 2])?;
        let nb: usize = batch.iter().product();
        let mut out_shape = batch.clone();
        out_shape.extend([m, n]);
        let out = Tensor::uninit(&self.exec, &out_shape, dtype)?;
        if m * n * nb > 0 {
            let oa = as_gemm_operand(&a, &batch)?;
            let ob = as_gemm_operand(&b, &batch)?;
            let size = dtype.size();
            let arg = |t: &Tensor| -> Result<hologram_backends::BufferArg> {
                let (s, l) = t.storage()?;
                Ok(s.arg(l.offset * size, s.bytes - l.offset * size))
            };
            let desc = GemmDesc {
                ty: dtype.storage(),
                m,
                n,
                k,
                trans_a: oa.trans,
                trans_b: ob.trans,
                alpha: 1.0,
                beta: 0.0,
                lda: oa.ld,
                ldb: ob.ld,
                ldc: n.max(1),
                batch: nb,
                stride_a: oa.batch_stride,
                stride_b: ob.batch_stride,
                stride_c: m * n,
                precision,
                outer: hologram_backends::OuterBatch::NONE,
            };
            self.exec
                .gemm(&desc, &arg(&oa.tensor)?, &arg(&ob.tensor)?, &arg(&out)?)?;
        }
        let mut result = out;
        if self.rank() == 1 {
            result = result.squeeze(-2)?;
        }
        if other.rank() == 1 {
            result = result.squeeze(-1)?;
        }
        Ok(result)
    }
}
