//! Batched matrix products over two batch dimensions of strided 4-D views (`[B, H, rows,
//! cols]`), read and written in place: attention's operands are views of a projection's output
//! (`[B, L, 3, H, D]` permuted) whose two batch strides do not collapse into one. The two
//! dimensions become one strided batch when their strides allow; else they are the GEMM's batch
//! and outer batch ([`OuterBatch`]), one call where the backend's library takes that (cuBLAS,
//! through pointer arrays). Where it does not and the matrices are small, the operands that do
//! not merge are packed into [B, H] order (one copy each) for one batched call instead of a
//! loop of calls.

use hologram_backends::{BufferArg, GemmDesc, GemmPrecision, OuterBatch};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A `[B, H, rows, cols]` view as a GEMM operand: its matrices are row-major (`trans` false,
/// rows `ld` apart) or column-major (`trans` true, columns `ld` apart); `batch` holds the
/// strides of the two batch dimensions.
pub(crate) struct ViewOperand {
    tensor: Tensor,
    trans: bool,
    ld: usize,
    batch: [usize; 2],
    /// The view was copied (no matrix stride of 1): writes would not reach it.
    copied: bool,
}

impl ViewOperand {
    /// `t` (rank 4) in place when one of its matrix strides is 1, else a contiguous copy.
    pub(crate) fn new(t: &Tensor) -> Result<ViewOperand> {
        if t.rank() != 4 {
            return Err(Error::Internal(format!(
                "a batched view GEMM of a rank-{} operand",
                t.rank()
            )));
        }
        let t = t.realize()?;
        let (d, s) = (t.shape(), t.strides());
        let (rows, cols, sr, sc) = (d[2], d[3], s[2], s[3]);
        // A dimension of one element may have any stride: it never moves.
        let row_major = (sc == 1 || cols <= 1) && (rows <= 1 || sr >= cols.max(1));
        let col_major = (sr == 1 || rows <= 1) && (cols <= 1 || sc >= rows.max(1));
        let batch = [s[0], s[1]];
        if row_major {
            let ld = if rows <= 1 { cols.max(1) } else { sr };
            return Ok(ViewOperand {
                tensor: t.clone(),
                trans: false,
                ld,
                batch,
                copied: false,
            });
        }
        if col_major {
            let ld = if cols <= 1 { rows.max(1) } else { sc };
            return Ok(ViewOperand {
                tensor: t.clone(),
                trans: true,
                ld,
                batch,
                copied: false,
            });
        }
        let c = t.contiguous()?;
        let batch = [c.strides()[0], c.strides()[1]];
        Ok(ViewOperand {
            ld: cols.max(1),
            tensor: c,
            trans: false,
            batch,
            copied: true,
        })
    }

    /// The operand's buffer from its first element.
    fn arg(&self) -> Result<BufferArg> {
        let (s, l) = self.tensor.storage()?;
        let at = l.offset * self.tensor.dtype().size();
        if at > s.bytes {
            return Err(Error::Internal(
                "a batched view GEMM past its buffer".into(),
            ));
        }
        Ok(s.arg(at, s.bytes - at))
    }
}

/// Multiply-adds per matrix (`m · n · k`) from which, on GPUs whose GEMM runs an outer batch as
/// a loop of calls, views whose two batch dimensions do not merge are multiplied in place; below
/// it the operands are packed into [B, H] order first.
const LOOP_MIN_WORK: usize = 1 << 26;

/// `c[b, h] = alpha · a[b, h] · bm[b, h]` for every `b < B`, `h < H`: `a` is `[B, H, m, k]`,
/// `bm` `[B, H, k, n]` and `c` a row-major `[B, H, m, n]` view (any batch and row strides) that
/// is written. All of one float dtype and executor; shapes checked by the caller.
pub(crate) fn gemm_views(
    a: &Tensor,
    bm: &Tensor,
    c: &Tensor,
    alpha: f64,
    precision: GemmPrecision,
) -> Result<()> {
    // Packing pays on GPUs whose GEMM loops over an outer batch, where each call of the loop is
    // too small to fill the device; host GEMMs run a loop of calls at full speed (and the CPU
    // keeps its native paths: no copies).
    let exec = c.executor();
    let loops_on_gpu = !exec.capabilities().host_memory && !exec.gemm_outer_in_one_call();
    let loop_min_work = if loops_on_gpu { LOOP_MIN_WORK } else { 0 };
    gemm_views_packing_below(a, bm, c, alpha, precision, loop_min_work)
}

/// [`gemm_views`] with the per-matrix work below which unmergeable operands are packed.
fn gemm_views_packing_below(
    a: &Tensor,
    bm: &Tensor,
    c: &Tensor,
    alpha: f64,
    precision: GemmPrecision,
    loop_min_work: usize,
) -> Result<()> {
    let (d, k) = (c.shape().to_vec(), a.shape()[3]);
    let (bdim, hdim, m, n) = (d[0], d[1], d[2], d[3]);
    if bdim * hdim * m * n == 0 {
        return Ok(());
    }
    let (oa, ob, oc) = (
        ViewOperand::new(a)?,
        ViewOperand::new(bm)?,
        ViewOperand::new(c)?,
    );
    if oc.copied || (oc.trans && m > 1) {
        return Err(Error::Internal(
            "a batched view GEMM into a column-major output".into(),
        ));
    }
    let ops = [&oa, &ob, &oc];
    // One strided batch when every operand's outer stride is H inner strides.
    let collapses = |o: &ViewOperand| o.batch[0] == hdim * o.batch[1];
    let merged = hdim == 1 || bdim == 1 || ops.iter().all(|o| collapses(o));
    if !merged && m * n * k < loop_min_work {
        // Small matrices: a loop of calls, each too small to fill a GPU (attention's 256 x 256 x
        // 64 products ran as 8 calls of batch 16 at a quarter of the GEMM's speed), costs more
        // than copying the operands whose batch strides do not merge into [B, H] order (one copy
        // each) and running one batched call.
        let pack = |t: &Tensor, o: &ViewOperand| {
            if collapses(o) {
                Ok(t.clone())
            } else {
                t.contiguous()
            }
        };
        let (a, bm) = (pack(a, &oa)?, pack(bm, &ob)?);
        if collapses(&oc) {
            return gemm_views(&a, &bm, c, alpha, precision);
        }
        let packed = Tensor::uninit(c.executor(), c.shape(), c.dtype())?;
        gemm_views(&a, &bm, &packed, alpha, precision)?;
        return packed.copy_into(c);
    }
    // (GEMM batch count, its dimension, outer batch count, its dimension)
    let (count, inner, outers, outer) = if merged {
        let inner = if hdim == 1 { 0 } else { 1 };
        (bdim * hdim, inner, 1, 1 - inner)
    } else if hdim >= bdim {
        (hdim, 1, bdim, 0)
    } else {
        (bdim, 0, hdim, 1)
    };
    let stride = |o: &ViewOperand| if count > 1 { o.batch[inner] } else { 0 };
    let outer_stride = |o: &ViewOperand| if outers > 1 { o.batch[outer] } else { 0 };
    let desc = GemmDesc {
        ty: c.dtype().storage(),
        m,
        n,
        k,
        trans_a: oa.trans,
        trans_b: ob.trans,
        alpha,
        beta: 0.0,
        lda: oa.ld,
        ldb: ob.ld,
        ldc: if m <= 1 { n.max(1) } else { oc.ld },
        batch: count,
        stride_a: stride(&oa),
        stride_b: stride(&ob),
        stride_c: stride(&oc),
        precision,
        outer: OuterBatch {
            count: outers,
            stride_a: outer_stride(&oa),
            stride_b: outer_stride(&ob),
            stride_c: outer_stride(&oc),
        },
    };
    c.executor().gemm(&desc, &oa.arg()?, &ob.arg()?, &oc.arg()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Executor};

    /// `[B, H, L, D]` views of one `[B, L, 3, H, D]` projection (batch strides that do not
    /// merge), as attention gets them.
    fn projection_heads(exec: &Executor, b: usize, l: usize, h: usize, d: usize) -> Vec<Tensor> {
        let n = b * l * 3 * h * d;
        let data: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
            .collect();
        let proj = Tensor::from_slice(exec, &data, &[b, l, 3, h, d]).unwrap();
        (0..3)
            .map(|w| {
                proj.slice(2, w, w + 1, 1)
                    .unwrap()
                    .squeeze(2)
                    .unwrap()
                    .permute(&[0, 2, 1, 3])
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn packed_and_looped_products_agree_with_contiguous_ones() {
        let exec = Executor::cpu();
        let (b, l, h, d) = (3, 9, 2, 5);
        let qkv = projection_heads(&exec, b, l, h, d);
        let (q, kt) = (&qkv[0], qkv[1].transpose(2, 3).unwrap());
        // The reference: contiguous operands, one merged batch.
        let want = Tensor::uninit(&exec, &[b, h, l, l], DType::F32).unwrap();
        let (qc, ktc) = (q.contiguous().unwrap(), kt.contiguous().unwrap());
        gemm_views(&qc, &ktc, &want, 0.5, GemmPrecision::Exact).unwrap();
        let want = want.to_vec::<f32>().unwrap();
        // Written in place into a strided output view, by packing and by a loop of calls.
        for loop_min_work in [usize::MAX, 0] {
            let out = projection_heads(&exec, b, l, h, l)[2].clone();
            gemm_views_packing_below(q, &kt, &out, 0.5, GemmPrecision::Exact, loop_min_work)
                .unwrap();
            let got = out.contiguous().unwrap().to_vec::<f32>().unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{loop_min_work}: {i}: {g} vs {w}"
                );
            }
        }
    }
}
