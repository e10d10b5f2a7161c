//! Shapes, strides and views: how a tensor's elements sit in its storage.

use smallvec::SmallVec;

use crate::error::{Error, Result};

/// Sizes or strides of a view's dimensions, held inline up to four dimensions (tensors are
/// cloned and re-laid-out on every op; heap vectors made that a visible part of a tiny op).
pub type Dims = SmallVec<[usize; 4]>;

/// Element strides (in elements, never negative) and offset of a view over storage.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Size of each dimension.
    pub shape: Dims,
    /// Elements between neighbours along each dimension (0 for a broadcast dimension).
    pub strides: Dims,
    /// Index of the first element in the storage.
    pub offset: usize,
}

impl Clone for Layout {
    /// A copy of the dimensions as one block (the derived clone copies element by element).
    fn clone(&self) -> Self {
        Layout {
            shape: Dims::from_slice(&self.shape),
            strides: Dims::from_slice(&self.strides),
            offset: self.offset,
        }
    }
}

/// Row-major strides of a shape.
pub fn contiguous_strides(shape: &[usize]) -> Dims {
    // Filled in a fixed array first: building the small vector element by element went through
    // its generic growth path, a visible part of a one-element op (three layouts per op).
    const INLINE: usize = 4;
    if shape.len() <= INLINE {
        let mut strides = [0usize; INLINE];
        let mut acc = 1usize;
        for k in (0..shape.len()).rev() {
            strides[k] = acc;
            acc = acc.saturating_mul(shape[k]);
        }
        let mut out = Dims::from_buf(strides);
        out.truncate(shape.len());
        return out;
    }
    let mut strides: Dims = smallvec::smallvec![0; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d);
    }
    strides
}

/// The shape two shapes broadcast to (NumPy rules), or an error naming both.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Dims> {
    let n = a.len().max(b.len());
    // Inline up to four dimensions: an operator on two tensors calls this, and a heap vector
    // per call was one of the few allocations of a small op.
    let mut out: Dims = smallvec::smallvec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::ShapeMismatch(format!(
                    "shapes {a:?} and {b:?} do not broadcast (dimension {i}: {da} vs {db})"
                )))
            }
        };
    }
    Ok(out)
}

/// Normalizes a possibly negative axis for a tensor of `rank` dimensions.
pub fn axis(axis: isize, rank: usize) -> Result<usize> {
    let r = rank as isize;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r.max(1) {
        return Err(Error::ShapeMismatch(format!(
            "axis {axis} is out of range for a tensor of rank {rank}"
        )));
    }
    Ok(a as usize)
}

impl Layout {
    /// A contiguous layout of a shape.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            shape: Dims::from_slice(shape),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// True when the elements are row-major and dense (offset allowed).
    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1usize;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d != 1 && s != expect {
                return false;
            }
            expect *= d;
        }
        true
    }

    /// One past the largest storage index the view touches (0 for an empty view).
    pub fn span(&self) -> usize {
        if self.numel() == 0 {
            return 0;
        }
        self.offset
            + self
                .shape
                .iter()
                .zip(&self.strides)
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>()
            + 1
    }

    /// This view broadcast to `shape` (stride 0 along new or size-1 dimensions).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Layout> {
        if shape.len() < self.rank() {
            return Err(Error::ShapeMismatch(format!(
                "cannot broadcast {:?} to {shape:?}",
                self.shape
            )));
        }
        let lead = shape.len() - self.rank();
        let mut strides: Dims = smallvec::smallvec![0; shape.len()];
        for (i, &d) in shape.iter().enumerate() {
            if i < lead {
                continue;
            }
            let (sd, ss) = (self.shape[i - lead], self.strides[i - lead]);
            strides[i] = if sd == d {
                ss
            } else if sd == 1 {
                0
            } else {
                return Err(Error::ShapeMismatch(format!(
                    "cannot broadcast {:?} to {shape:?}",
                    self.shape
                )));
            };
        }
        Ok(Layout {
            shape: Dims::from_slice(shape),
            strides,
            offset: self.offset,
        })
    }

    /// Dimensions reordered: dimension `i` of the result is dimension `dims[i]` of this view.
    pub fn permute(&self, dims: &[usize]) -> Result<Layout> {
        let mut seen = vec![false; self.rank()];
        if dims.len() != self.rank()
            || dims
                .iter()
                .any(|&d| d >= self.rank() || std::mem::replace(&mut seen[d], true))
        {
            return Err(Error::ShapeMismatch(format!(
                "permutation {dims:?} is not a permutation of {} dimensions",
                self.rank()
            )));
        }
        Ok(Layout {
            shape: dims.iter().map(|&d| self.shape[d]).collect(),
            strides: dims.iter().map(|&d| self.strides[d]).collect(),
            offset: self.offset,
        })
    }

    /// A view of `start..end` (step `step`) along `dim`.
    pub fn slice(&self, dim: usize, start: usize, end: usize, step: usize) -> Result<Layout> {
        if dim >= self.rank() {
            return Err(Error::ShapeMismatch(format!(
                "dimension {dim} is out of range for rank {}",
                self.rank()
            )));
        }
        if step == 0 || start > end || end > self.shape[dim] {
            return Err(Error::ShapeMismatch(format!(
                "slice {start}..{end} step {step} is out of range for dimension {dim} of size {}",
                self.shape[dim]
            )));
        }
        let mut l = self.clone();
        l.offset += start * self.strides[dim];
        l.shape[dim] = (end - start).div_ceil(step);
        l.strides[dim] *= step;
        Ok(l)
    }

    /// A view with a new shape of the same size, over the same elements in the same order:
    /// always for a contiguous view, and for a strided one when each run of old dimensions
    /// that the new shape splits or merges is itself contiguous (a view of one part of a
    /// `split`, or of a permuted tensor whose merged dimensions stay adjacent, reshapes in
    /// place, as torch's `view` does). `None` otherwise: the caller copies first.
    pub fn reshape(&self, shape: &[usize]) -> Option<Layout> {
        if self.is_contiguous() {
            return Some(Layout {
                shape: Dims::from_slice(shape),
                strides: contiguous_strides(shape),
                offset: self.offset,
            });
        }
        let strides = view_strides(&self.shape, &self.strides, shape)?;
        Some(Layout {
            shape: Dims::from_slice(shape),
            strides: strides.into(),
            offset: self.offset,
        })
    }
}

/// Strides that give `new_shape` the elements of a `(shape, strides)` view in row-major order,
/// if any. The old dimensions are cut into chunks whose elements are evenly spaced (each
/// dimension's stride is the next one's stride times its size; size-1 dimensions join any
/// chunk); every chunk must be matched by whole new dimensions, which then take strides within
/// the chunk.
fn view_strides(shape: &[usize], strides: &[usize], new_shape: &[usize]) -> Option<Vec<usize>> {
    let numel: usize = shape.iter().product();
    if numel == 0 || shape.is_empty() {
        return Some(contiguous_strides(new_shape).to_vec());
    }
    let mut out = vec![0usize; new_shape.len()];
    // New dimensions not yet given a stride: 0..next (filled from the back).
    let mut next = new_shape.len();
    let mut chunk_stride = strides[shape.len() - 1];
    let (mut chunk_numel, mut view_numel) = (1usize, 1usize);
    for d in (0..shape.len()).rev() {
        chunk_numel *= shape[d];
        let chunk_ends =
            d == 0 || (shape[d - 1] != 1 && strides[d - 1] != chunk_numel * chunk_stride);
        if !chunk_ends {
            continue;
        }
        while next > 0 && (view_numel < chunk_numel || new_shape[next - 1] == 1) {
            out[next - 1] = view_numel * chunk_stride;
            view_numel *= new_shape[next - 1];
            next -= 1;
        }
        if view_numel != chunk_numel {
            return None;
        }
        if d > 0 {
            chunk_stride = strides[d - 1];
            chunk_numel = 1;
            view_numel = 1;
        }
    }
    (next == 0).then_some(out)
}

/// Resolves a shape with at most one `-1` for a tensor of `numel` elements.
pub fn infer_shape(shape: &[isize], numel: usize) -> Result<Vec<usize>> {
    let unknown = shape.iter().filter(|&&d| d == -1).count();
    if unknown > 1 || shape.iter().any(|&d| d < -1) {
        return Err(Error::ShapeMismatch(format!("invalid shape {shape:?}")));
    }
    let known: usize = shape
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .product();
    let out: Vec<usize> = shape
        .iter()
        .map(|&d| {
            if d == -1 {
                numel.checked_div(known).unwrap_or(0)
            } else {
                d as usize
            }
        })
        .collect();
    if out.iter().product::<usize>() != numel {
        return Err(Error::ShapeMismatch(format!(
            "cannot reshape {numel} elements into {shape:?}"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn strided_views_reshape_in_place_where_torch_views_do() {
        use super::view_strides;
        // One third of a split last dimension, [B=2, L=3, 12] of [2, 3, 36]: the last
        // dimension splits into heads in place.
        assert_eq!(
            view_strides(&[2, 3, 12], &[108, 36, 1], &[2, 3, 4, 3]),
            Some(vec![108, 36, 3, 1])
        );
        // A permuted [B, H, L, D] view back to [B, L, H*D]: H and D are not adjacent in memory
        // in the permuted order [B, L, H, D] of strides [L*H*D, D, L*D, 1]: no view.
        assert_eq!(
            view_strides(&[2, 3, 4, 5], &[60, 5, 15, 1], &[2, 3, 20]),
            None
        );
        // Permuted so that H, D are adjacent again: merges.
        assert_eq!(
            view_strides(&[2, 3, 4, 5], &[60, 20, 5, 1], &[6, 20]),
            Some(vec![20, 1])
        );
        // A transposed matrix does not flatten; a broadcast dimension does not merge.
        assert_eq!(view_strides(&[3, 4], &[1, 3], &[12]), None);
        assert_eq!(view_strides(&[4, 3], &[0, 1], &[12]), None);
        // Size-1 dimensions come and go anywhere.
        assert_eq!(
            view_strides(&[3, 1, 4], &[8, 99, 2], &[3, 4, 1]),
            Some(vec![8, 2, 2])
        );
        assert_eq!(view_strides(&[0, 4], &[8, 2], &[4, 0]), Some(vec![0, 1]));
    }

    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shapes(&[3, 1], &[4]).unwrap().as_slice(), [3, 4]);
        assert!(broadcast_shapes(&[3], &[4]).is_err());
        let l = Layout::contiguous(&[3, 1])
            .broadcast_to(&[2, 3, 4])
            .unwrap();
        assert_eq!(l.strides.as_slice(), [0, 1, 0]);
    }

    #[test]
    fn views() {
        let l = Layout::contiguous(&[4, 6]);
        assert!(l.is_contiguous());
        let t = l.permute(&[1, 0]).unwrap();
        assert_eq!(
            (t.shape.as_slice(), t.strides.as_slice()),
            (&[6, 4][..], &[1, 6][..])
        );
        assert!(!t.is_contiguous());
        let s = l.slice(1, 1, 5, 2).unwrap();
        assert_eq!(
            (s.shape.as_slice(), s.strides.as_slice(), s.offset),
            (&[4, 2][..], &[6, 2][..], 1)
        );
        assert_eq!(s.span(), 1 + 3 * 6 + 2 + 1);
        assert_eq!(infer_shape(&[-1, 3], 12).unwrap(), vec![4, 3]);
        assert!(infer_shape(&[-1, 5], 12).is_err());
    }
}
