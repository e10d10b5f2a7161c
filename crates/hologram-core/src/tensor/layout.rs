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
    let mut strides: Dims = smallvec::smallvec![0; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d);
    }
    strides
}

/// The shape two shapes broadcast to (NumPy rules), or an error naming both.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
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

    /// A contiguous view with a new shape of the same size (`None` when the view is not
    /// contiguous; the caller copies first).
    pub fn reshape(&self, shape: &[usize]) -> Option<Layout> {
        if !self.is_contiguous() {
            return None;
        }
        Some(Layout {
            shape: Dims::from_slice(shape),
            strides: contiguous_strides(shape),
            offset: self.offset,
        })
    }
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
    use super::*;

    #[test]
    fn broadcasting() {
        assert_eq!(broadcast_shapes(&[3, 1], &[4]).unwrap(), vec![3, 4]);
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
