//! Views: new shapes and strides over the same storage, without copies.

use super::layout::{self, Layout};
use super::{Source, Tensor};
use crate::error::{Error, Result};

impl Tensor {
    fn view(&self, layout: Layout) -> Result<Tensor> {
        // Views address storage, so a pending expression is evaluated first.
        let t = self.realize()?;
        Ok(Tensor { layout, ..t })
    }

    /// The same elements with a new shape (one dimension may be -1). A copy is made only when
    /// the tensor is not contiguous.
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        let shape = layout::infer_shape(shape, self.numel())?;
        if let Source::Lazy(l) = &self.src {
            if self.is_lazy() {
                // A pending expression stays pending with its inputs reshaped, so it can fuse
                // with what reads the new shape (a linear layer's bias add, viewed back to
                // [batch, tokens, features], with the next element-wise op).
                if l.can_view_as(&shape) {
                    return Ok(Tensor {
                        layout: Layout::contiguous(&shape),
                        ..self.clone()
                    });
                }
                // Else its result is contiguous: reshape it after running.
                let t = self.realize()?;
                return t.reshape(&shape.iter().map(|&d| d as isize).collect::<Vec<_>>());
            }
        }
        match self.layout.reshape(&shape) {
            Some(l) => self.view(l),
            None => {
                let c = self.contiguous()?;
                let l = Layout {
                    shape: shape.into(),
                    strides: layout::contiguous_strides(&c.layout.shape),
                    offset: c.layout.offset,
                };
                let strides = layout::contiguous_strides(&l.shape);
                Ok(Tensor {
                    layout: Layout { strides, ..l },
                    ..c
                })
            }
        }
    }

    /// Dimensions reordered: dimension `i` of the result is dimension `dims[i]`.
    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        let l = self.layout.permute(dims)?;
        self.view(l)
    }

    /// Swaps two dimensions (negative indexes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let (a, b) = (layout::axis(a, self.rank())?, layout::axis(b, self.rank())?);
        let mut dims: Vec<usize> = (0..self.rank()).collect();
        dims.swap(a, b);
        self.permute(&dims)
    }

    /// The transpose of a matrix (the last two dimensions swapped).
    pub fn t(&self) -> Result<Tensor> {
        if self.rank() < 2 {
            return Ok(self.clone());
        }
        self.transpose(-2, -1)
    }

    /// Elements `start..end` with `step` along `dim`.
    pub fn slice(&self, dim: isize, start: usize, end: usize, step: usize) -> Result<Tensor> {
        let d = layout::axis(dim, self.rank())?;
        let l = self.layout.slice(d, start, end, step)?;
        self.view(l)
    }

    /// The tensor broadcast to a larger shape (stride 0 along new dimensions).
    pub fn expand(&self, shape: &[usize]) -> Result<Tensor> {
        let l = self.layout.broadcast_to(shape)?;
        self.view(l)
    }

    /// Like [`Tensor::expand`], but a pending expression stays pending.
    pub(crate) fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        self.expand(shape)
    }

    /// A new dimension of size 1 at `dim`.
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let d = layout::axis(dim, self.rank() + 1)?;
        let mut shape: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
        shape.insert(d, 1);
        self.reshape(&shape)
    }

    /// Removes dimension `dim`, which must have size 1.
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let d = layout::axis(dim, self.rank())?;
        if self.shape()[d] != 1 {
            return Err(Error::ShapeMismatch(format!(
                "cannot squeeze dimension {d} of size {}",
                self.shape()[d]
            )));
        }
        let mut l = self.layout.clone();
        l.shape.remove(d);
        l.strides.remove(d);
        self.view(l)
    }

    /// All elements as one dimension.
    pub fn flatten(&self) -> Result<Tensor> {
        self.reshape(&[-1])
    }
}
