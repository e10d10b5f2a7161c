//! Reductions along axes: sum, mean, prod, max, min, argmax, argmin.

use hologram_backends::{GemmDesc, KernelArg, LaunchConfig};
use hologram_isa::semantics::Value;
use hologram_isa::Type;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::layout::axis as norm_axis;
use crate::tensor::{Source, Tensor};
use hologram_compiler::patterns::reduce_templates::{self, Combine, BLOCK, BLOCK_UNROLL};
use hologram_compiler::patterns::{ReduceKind, ReducePattern};
use hologram_compiler::Canonical;

/// The library reduction kernel of a template, carrying its intent.
fn reduce_kernel(
    kind: ReduceKind,
    combine: Combine,
    storage: Type,
    acc: Type,
    out: Type,
) -> Result<Canonical> {
    Ok(reduce_templates::kernel(&ReducePattern {
        kind,
        combine,
        storage,
        acc,
        out,
    })?)
}

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (integers and bool accumulate in i64).
    Sum,
    /// Mean (integers give f32).
    Mean,
    /// Product.
    Prod,
    /// Maximum (NaN propagates).
    Max,
    /// Minimum (NaN propagates).
    Min,
    /// Index of the first maximum, as i64.
    ArgMax,
    /// Index of the first minimum, as i64.
    ArgMin,
}

/// Elements one block of the block kernel reduces at least (16 per lane) ...
const MIN_CHUNK: usize = 16 * BLOCK as usize;
/// ... and at most (256 per lane).
const MAX_CHUNK: usize = 256 * BLOCK as usize;
/// Blocks a large reduction is cut into: enough to fill a big GPU several times over (132 SMs
/// with 8 blocks each), few enough that the partial results are a small second stage.
const TARGET_BLOCKS: usize = 4096;
/// Outputs of the lane kernel below which a long reduced axis is split (each lane then reduces a
/// slice of it into a partial result): too few lanes cannot keep a GPU's memory busy.
const LANE_TARGET: usize = 1 << 17;
/// Elements each lane of a split lane reduction reduces at least.
const LANE_MIN_LEN: usize = 16;

/// The chunk length of the block kernel for `rows` rows of `rlen` elements: a multiple of one
/// unrolled step, between [`MIN_CHUNK`] and [`MAX_CHUNK`], aiming at [`TARGET_BLOCKS`] blocks.
fn chunk_len(rows: usize, rlen: usize) -> usize {
    let step = (BLOCK * BLOCK_UNROLL) as usize;
    let want = rows.saturating_mul(rlen).div_ceil(TARGET_BLOCKS);
    want.clamp(MIN_CHUNK, MAX_CHUNK).next_multiple_of(step)
}

/// How many slices to cut a reduced axis of `rlen` elements into when only `n_out` lanes would
/// reduce it: a divisor of `rlen` (so the slices are a reshape) giving at least
/// [`LANE_TARGET`] lanes where one exists with slices of at least [`LANE_MIN_LEN`] elements,
/// else the largest such divisor; None when no split helps.
fn lane_split(n_out: usize, rlen: usize) -> Option<usize> {
    if n_out >= LANE_TARGET || rlen < 4 * LANE_MIN_LEN {
        return None;
    }
    let want = LANE_TARGET.div_ceil(n_out);
    let most = rlen / LANE_MIN_LEN;
    let mut divisors = Vec::new();
    let mut d = 1;
    while d * d <= rlen {
        if rlen % d == 0 {
            divisors.push(d);
            divisors.push(rlen / d);
        }
        d += 1;
    }
    divisors.retain(|&d| (2..=most).contains(&d));
    divisors
        .iter()
        .copied()
        .filter(|&d| d >= want)
        .min()
        .or_else(|| divisors.iter().copied().max())
        .filter(|&d| d >= 4)
}

impl Tensor {
    /// Reduces over `axes` (all axes when empty), keeping reduced dimensions as size 1 when
    /// `keepdim`.
    pub fn reduce(&self, op: ReduceOp, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let rank = self.rank();
        let mut axes: Vec<usize> = axes
            .iter()
            .map(|&a| norm_axis(a, rank))
            .collect::<Result<_>>()?;
        if axes.is_empty() {
            axes = (0..rank).collect();
        }
        axes.sort_unstable();
        axes.dedup();
        if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) && axes.len() > 1 && axes.len() != rank
        {
            return Err(Error::ShapeMismatch(
                "argmax/argmin reduce one axis, or all of them".into(),
            ));
        }
        let mut t = self.clone();
        if rank == 0 {
            t = t.reshape(&[1])?;
            axes = vec![0];
        }
        if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) && axes.len() > 1 {
            // Over all axes: the index into the flattened tensor.
            let flat = t.reshape(&[-1])?;
            let r = flat.reduce_axis(op, 0)?;
            return if keepdim {
                r.reshape(&vec![1isize; rank])
            } else {
                r.reshape(&[])
            };
        }
        let count: usize = axes.iter().map(|&a| t.shape()[a]).product();
        let inner_op = if op == ReduceOp::Mean {
            ReduceOp::Sum
        } else {
            op
        };
        // Adjacent axes reduce as one (a row-major merge of them: a view, or a reshape of a
        // pending expression): a layer norm's weight gradient over [batch, tokens] is one
        // reduction, not one per axis.
        let mut reduced = axes.clone();
        if axes.len() > 1 && axes.windows(2).all(|w| w[1] == w[0] + 1) {
            let (first, last) = (axes[0], axes[axes.len() - 1]);
            let dims = t.shape();
            let merged: Vec<isize> = dims[..first]
                .iter()
                .chain(std::iter::once(&count))
                .chain(&dims[last + 1..])
                .map(|&d| d as isize)
                .collect();
            t = t.reshape(&merged)?;
            reduced = vec![first];
        }
        for &a in reduced.iter().rev() {
            t = t.reduce_axis(inner_op, a)?;
        }
        if op == ReduceOp::Mean {
            let float = if self.dtype.is_float() {
                self.dtype
            } else {
                DType::F32
            };
            t = t.cast(float)?.div(count as f64)?;
        }
        let shape: Vec<isize> = self
            .shape()
            .iter()
            .enumerate()
            .filter_map(|(i, &d)| match (axes.contains(&i), keepdim) {
                (false, _) => Some(d as isize),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        if rank > 0 || !keepdim {
            t = t.reshape(&shape)?;
        }
        Ok(t)
    }

    /// Sum over `axes` (all when empty).
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, axes, keepdim)
    }

    /// Mean over `axes` (all when empty).
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, axes, keepdim)
    }

    /// Maximum over `axes` (all when empty).
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, axes, keepdim)
    }

    /// Minimum over `axes` (all when empty).
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, axes, keepdim)
    }

    /// Product over `axes` (all when empty).
    pub fn prod(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, axes, keepdim)
    }

    /// Index of the first maximum along `axis` (over the flattened tensor when None).
    pub fn argmax(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        self.reduce(
            ReduceOp::ArgMax,
            &axis.map(|a| vec![a]).unwrap_or_default(),
            keepdim,
        )
    }

    /// Index of the first minimum along `axis` (over the flattened tensor when None).
    pub fn argmin(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        self.reduce(
            ReduceOp::ArgMin,
            &axis.map(|a| vec![a]).unwrap_or_default(),
            keepdim,
        )
    }

    /// Reduces one axis, keeping it as size 1.
    fn reduce_axis(&self, op: ReduceOp, axis: usize) -> Result<Tensor> {
        let shape = self.shape().to_vec();
        let rlen = shape[axis];
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..].iter().product();
        let mut out_shape = shape.clone();
        out_shape[axis] = 1;
        let (combine, acc, out_dt) = plan(op, self.dtype)?;
        if rlen == 0 {
            return match op {
                ReduceOp::Sum => Tensor::zeros(&self.exec, &out_shape, out_dt),
                ReduceOp::Prod => Tensor::ones(&self.exec, &out_shape, out_dt),
                _ => Err(Error::ShapeMismatch(format!(
                    "cannot take {op:?} over an empty axis"
                ))),
            };
        }
        let src = self.contiguous()?;
        let (storage, layout) = src.storage()?;
        let n_out = outer * inner;
        let st = self.dtype.storage();
        let u = |v: usize| KernelArg::Scalar(Value::U32(v as u32));
        let is_arg = matches!(combine, Combine::ArgMax | Combine::ArgMin);
        if inner > 1 || rlen < BLOCK as usize {
            if combine == Combine::Sum && inner > 1 && self.exec.has_vendor_blas() {
                if let Some(r) = sum_by_gemm(&src, outer, rlen, inner, out_dt)? {
                    return r.reshape(&out_shape.iter().map(|&d| d as isize).collect::<Vec<_>>());
                }
            }
            if let Some(parts) = lane_split(n_out, rlen).filter(|_| !is_arg) {
                // Few outputs over a long axis: partial results over slices of the axis (in the
                // accumulator type), then the partials.
                let part_dt = DType::from_type(acc).unwrap_or(out_dt);
                let partial = Tensor::uninit(&self.exec, &[outer, parts, inner], part_dt)?;
                let (ps, _) = partial.storage()?;
                let kernel =
                    self.exec
                        .compile(&reduce_kernel(ReduceKind::Lane, combine, st, acc, acc)?)?;
                let lanes = n_out * parts;
                let args = [
                    KernelArg::Buffer(storage.arg(0, storage.bytes)),
                    KernelArg::Buffer(ps.arg(0, ps.bytes)),
                    u(layout.offset),
                    u(rlen / parts),
                    u(inner),
                    u(lanes),
                ];
                self.exec.launch(
                    &kernel,
                    &LaunchConfig::for_elements(lanes as u64, 256),
                    &args,
                )?;
                let r = partial.reduce_axis(op, 1)?;
                let r = if r.dtype == out_dt {
                    r
                } else {
                    r.cast(out_dt)?
                };
                return r.reshape(&out_shape.iter().map(|&d| d as isize).collect::<Vec<_>>());
            }
            // One lane per output.
            let out = Tensor::uninit(
                &self.exec,
                &out_shape,
                if is_arg { DType::U32 } else { out_dt },
            )?;
            let Source::Stored(os) = &out.src else {
                return Err(Error::Internal("a fresh reduction output is lazy".into()));
            };
            let kernel = self.exec.compile(&reduce_kernel(
                ReduceKind::Lane,
                combine,
                st,
                acc,
                out_dt.storage(),
            )?)?;
            let args = [
                KernelArg::Buffer(storage.arg(0, storage.bytes)),
                KernelArg::Buffer(os.arg(0, os.bytes)),
                u(layout.offset),
                u(rlen),
                u(inner),
                u(n_out),
            ];
            self.exec.launch(
                &kernel,
                &LaunchConfig::for_elements(n_out as u64, 256),
                &args,
            )?;
            return if is_arg {
                out.cast(DType::I64)
            } else {
                Ok(out)
            };
        }
        // Rows are contiguous (inner == 1): blocks of lanes per row chunk, then the partials.
        let clen = chunk_len(outer, rlen);
        let chunks = rlen.div_ceil(clen);
        let mut stage_storage = storage;
        let mut stage_off = layout.offset;
        let mut stage_len = rlen;
        let mut stage_chunks = chunks;
        let mut stage_clen = clen;
        let mut stage_ty = st;
        let mut index_input: Option<Tensor> = None;
        loop {
            let last = stage_chunks == 1;
            let blocks = outer * stage_chunks;
            let res_dt = if is_arg || !last {
                DType::from_type(acc).unwrap_or(out_dt)
            } else {
                out_dt
            };
            let vals = Tensor::uninit(&self.exec, &[blocks], res_dt)?;
            let ixs = if is_arg {
                Some(Tensor::uninit(&self.exec, &[blocks], DType::U32)?)
            } else {
                None
            };
            let kernel = self.exec.compile(&reduce_kernel(
                ReduceKind::Block {
                    index_input: index_input.is_some(),
                },
                combine,
                stage_ty,
                acc,
                if last { out_dt.storage() } else { acc },
            )?)?;
            let mut args = vec![KernelArg::Buffer(stage_storage.arg(0, stage_storage.bytes))];
            if let Some(ix) = &index_input {
                let (s, _) = ix.storage()?;
                args.push(KernelArg::Buffer(s.arg(0, s.bytes)));
            }
            let (vs, _) = vals.storage()?;
            args.push(KernelArg::Buffer(vs.arg(0, vs.bytes)));
            if let Some(ix) = &ixs {
                let (s, _) = ix.storage()?;
                args.push(KernelArg::Buffer(s.arg(0, s.bytes)));
            }
            args.extend([u(stage_off), u(stage_len), u(stage_chunks), u(stage_clen)]);
            let grid = u32::try_from(blocks)
                .map_err(|_| Error::ShapeMismatch("too many rows to reduce".into()))?;
            self.exec
                .launch(&kernel, &LaunchConfig::linear(grid, BLOCK), &args)?;
            if last {
                let result = if is_arg {
                    ixs.unwrap_or(vals).cast(DType::I64)?
                } else {
                    vals
                };
                return result.reshape(&out_shape.iter().map(|&d| d as isize).collect::<Vec<_>>());
            }
            // Reduce the partials of every row next.
            stage_storage = vals.storage()?.0;
            stage_off = 0;
            stage_len = stage_chunks;
            stage_clen = chunk_len(outer, stage_len);
            stage_chunks = stage_len.div_ceil(stage_clen);
            stage_ty = acc;
            index_input = ixs;
        }
    }
}

/// Sums `src` (contiguous `[outer, rlen, inner]`) over its middle axis as one vendor-BLAS call,
/// `ones[1, rlen] · src[o]` for each `o < outer`: one launch at memory speed where the lane
/// reduction takes two or three (a linear layer's bias gradient, a layer norm's weight and bias
/// gradients). Float dtypes only, summed as GEMMs sum (f16 and bf16 in f32); `None` when the
/// sizes do not fit the BLAS or the dtype is not a float.
fn sum_by_gemm(
    src: &Tensor,
    outer: usize,
    rlen: usize,
    inner: usize,
    out_dt: DType,
) -> Result<Option<Tensor>> {
    let dt = src.dtype;
    let float = matches!(dt, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
    let fits = |v: usize| v <= i32::MAX as usize;
    if !float || out_dt != dt || ![outer, rlen, inner, rlen * inner].into_iter().all(fits) {
        return Ok(None);
    }
    let exec = &src.exec;
    let ones = exec.ones_vector(dt, rlen)?;
    let (storage, layout) = src.storage()?;
    let size = dt.size();
    let x = storage.arg(layout.offset * size, outer * rlen * inner * size);
    let out = Tensor::uninit(exec, &[outer, 1, inner], dt)?;
    let (os, ol) = out.storage()?;
    let c = os.arg(ol.offset * size, outer * inner * size);
    let mut desc = GemmDesc::new(dt.storage(), 1, inner, rlen);
    (desc.batch, desc.stride_a, desc.stride_b, desc.stride_c) = (outer, 0, rlen * inner, inner);
    exec.gemm(&desc, &ones, &x, &c)?;
    Ok(Some(out))
}

/// The combine function, accumulator type and result dtype of a reduction over `dt`.
fn plan(op: ReduceOp, dt: DType) -> Result<(Combine, Type, DType)> {
    let float_acc = |d: DType| {
        if matches!(d, DType::F16 | DType::BF16) {
            Type::F32
        } else {
            d.storage()
        }
    };
    Ok(match op {
        ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod => {
            let c = if op == ReduceOp::Prod {
                Combine::Prod
            } else {
                Combine::Sum
            };
            if dt.is_float() {
                (c, float_acc(dt), dt)
            } else if dt == DType::U64 {
                (c, Type::U64, DType::U64)
            } else {
                // Integers and bool accumulate in i64, as in PyTorch.
                return Ok((c, Type::I64, DType::I64)).and_then(|(c, a, o)| {
                    if dt == DType::Bool || dt.is_int() {
                        Ok((c, a, o))
                    } else {
                        Err(Error::TypeMismatch(format!("cannot sum {dt}")))
                    }
                });
            }
        }
        ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin => {
            if dt == DType::Bool {
                return Err(Error::TypeMismatch(format!(
                    "{op:?} of a bool tensor: cast it to u8 first"
                )));
            }
            let c = match op {
                ReduceOp::Max => Combine::Max,
                ReduceOp::Min => Combine::Min,
                ReduceOp::ArgMax => Combine::ArgMax,
                _ => Combine::ArgMin,
            };
            (c, float_acc(dt), dt)
        }
    })
}
