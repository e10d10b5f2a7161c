//! How a plan's inputs and outputs meet the caller's tensors: input buffers the caller's values
//! are copied into, inputs read where the caller keeps them, and output buffers.

use std::sync::Arc;

use super::TensorSpec;
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::tensor::{Layout, Source, Tensor};

/// A stored, contiguous buffer of a plan: an input slot or an output.
pub(crate) struct Slot {
    pub storage: Arc<Storage>,
    /// Byte offset of the first element.
    pub offset: usize,
    pub spec: TensorSpec,
}

impl Slot {
    /// Copies `x` (of the slot's shape and dtype) into the slot: one device copy when `x` is
    /// stored contiguously (no tensor made for the slot), else through [`bind`].
    pub fn fill(&self, x: &Tensor, exec: &crate::executor::Executor) -> Result<()> {
        match &x.src {
            Source::Stored(s)
                if x.is_contiguous()
                    && x.dtype() == self.spec.dtype
                    && x.shape() == self.spec.shape.as_slice() =>
            {
                let size = x.dtype().size();
                x.exec.copy_device(
                    s.memory(),
                    x.layout.offset * size,
                    self.storage.memory(),
                    self.offset,
                    self.bytes(),
                )
            }
            _ => bind(x, &self.tensor(exec)),
        }
    }

    /// Where a replay may read `x` in place of this slot's bytes: `x` stored contiguously with
    /// the slot's shape and dtype.
    pub fn place_of(&self, x: &Tensor) -> Option<super::edges::Move> {
        match &x.src {
            Source::Stored(s)
                if x.is_contiguous()
                    && x.dtype() == self.spec.dtype
                    && x.shape() == self.spec.shape.as_slice() =>
            {
                Some(super::edges::Move {
                    from: self.storage.memory().clone(),
                    range: self.offset..self.offset + self.bytes(),
                    to: s.memory().clone(),
                    to_offset: x.layout.offset * x.dtype().size(),
                })
            }
            _ => None,
        }
    }

    pub fn bytes(&self) -> usize {
        self.spec.shape.iter().product::<usize>() * self.spec.dtype.size()
    }

    /// The slot as a tensor.
    pub fn tensor(&self, exec: &crate::executor::Executor) -> Tensor {
        let mut layout = Layout::contiguous(&self.spec.shape);
        layout.offset = self.offset / self.spec.dtype.size();
        Tensor::stored(exec, self.spec.dtype, layout, self.storage.clone())
    }
}

/// Where a stored tensor's elements are: the buffer's address (device or host pointer, or the
/// allocation's identity on backends with neither), its layout and dtype.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Place {
    /// Address of the element at offset 0 of the view.
    pub address: u64,
    strides: Vec<usize>,
    spec: TensorSpec,
}

/// The address of a buffer (device or host pointer, or the allocation's identity).
pub(crate) fn address_of(m: &hologram_backends::Memory) -> u64 {
    m.device_ptr()
        .or_else(|| m.host_ptr().map(|p| p as u64))
        .unwrap_or(Arc::as_ptr(m) as *const u8 as u64)
}

impl Place {
    /// True when `t` is stored at this place: `Place::of(t) == Some(self)`, without building
    /// the place.
    pub fn holds(&self, t: &Tensor) -> bool {
        let Source::Stored(s) = &t.src else {
            return false;
        };
        t.dtype == self.spec.dtype
            && t.layout.shape.as_slice() == self.spec.shape.as_slice()
            && t.layout.strides.as_slice() == self.strides.as_slice()
            && address_of(s.memory()) + (t.layout.offset * t.dtype.size()) as u64 == self.address
    }

    /// The place of a stored tensor; `None` for a pending expression.
    pub fn of(t: &Tensor) -> Option<Place> {
        let Source::Stored(s) = &t.src else {
            return None;
        };
        let address = address_of(s.memory()) + (t.layout.offset * t.dtype.size()) as u64;
        Some(Place {
            address,
            strides: t.layout.strides.to_vec(),
            spec: TensorSpec::of(t),
        })
    }
}

/// A plan input.
pub(crate) enum Input {
    /// Copied into the plan's own buffer before every replay.
    Slot(Slot),
    /// Read where the caller keeps it: every replay must be given the tensor at this place
    /// (parameters, or another plan's outputs, whose buffers do not move). The recorded steps
    /// keep the buffer alive.
    Direct { place: Place },
}

impl Input {
    pub fn spec(&self) -> &TensorSpec {
        match self {
            Input::Slot(s) => &s.spec,
            Input::Direct { place, .. } => &place.spec,
        }
    }

    /// True when `x` can be this input of a replay (checked without allocating: this runs for
    /// every input of every replay).
    pub fn accepts(&self, x: &Tensor) -> bool {
        match self {
            Input::Slot(s) => x.dtype() == s.spec.dtype && x.shape() == s.spec.shape.as_slice(),
            Input::Direct { place, .. } => place.holds(x),
        }
    }
}

/// Copies `x` into the contiguous stored tensor `slot` (same shape and dtype): one device copy
/// when `x` is stored contiguously, else a copy kernel.
pub(crate) fn bind(x: &Tensor, slot: &Tensor) -> Result<()> {
    if x.shape() != slot.shape() || x.dtype() != slot.dtype() {
        return Err(Error::ShapeMismatch(format!(
            "a plan input of {} {:?} was given a {} {:?} tensor",
            slot.dtype(),
            slot.shape(),
            x.dtype(),
            x.shape()
        )));
    }
    match &x.src {
        Source::Stored(s) if x.is_contiguous() => {
            let (dst, layout) = slot.storage()?;
            let size = x.dtype().size();
            x.exec.copy_device(
                s.memory(),
                x.layout.offset * size,
                dst.memory(),
                layout.offset * size,
                x.numel() * size,
            )
        }
        _ => x.copy_into(slot),
    }
}
