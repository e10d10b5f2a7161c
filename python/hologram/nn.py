"""``hologram.nn``: the neural-network ops of the tensor library (convolution, pooling, layer
norm, losses, attention), as functions of :class:`hologram.Tensor`. Their gradients are in
:mod:`hologram.autograd`.

>>> import hologram as hg
>>> x = hg.asarray([[1.0, 2.0, 3.0]], device='cpu')
>>> [round(v, 4) for v in hg.nn.layer_norm(x, 1).tolist()[0]]
[-1.2247, 0.0, 1.2247]
"""

from __future__ import annotations

from typing import Sequence

from . import _native
from .tensor import Tensor, _wrap


def _native_or_none(t: Tensor | None) -> _native.Tensor | None:
    return None if t is None else t._t


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Sequence[int] = (1, 1),
           padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1), groups: int = 1,
           tf32: bool = False) -> Tensor:
    """2-D convolution of ``x`` ``[N, C, H, W]`` with ``weight`` ``[Cout, C/groups, kh, kw]`` and
    an optional ``bias`` ``[Cout]`` (PyTorch's ``conv2d``; ``stride``, ``padding`` and
    ``dilation`` are ``(height, width)`` pairs). ``tf32`` lets CUDA multiply float32 in TF32."""
    return _wrap(x._t.conv2d(weight._t, _native_or_none(bias), list(stride), list(padding), list(dilation),
                             int(groups), bool(tf32)))


def max_pool2d(x: Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int] = (0, 0),
               dilation: Sequence[int] = (1, 1), ceil_mode: bool = False,
               indices: bool = False) -> tuple[Tensor, Tensor | None]:
    """``(values, indices)`` of a 2-D max pooling over the last two axes of a 3-D or 4-D ``x``
    (PyTorch's ``max_pool2d_with_indices``: the first maximum wins, NaN propagates). The
    indices (int64 flat positions in each input plane, what :func:`hologram.autograd.max_pool2d_backward`
    needs) are computed only with ``indices``; else ``None``."""
    y, idx = x._t.max_pool2d(list(kernel), list(stride), list(padding), list(dilation), bool(ceil_mode),
                             bool(indices))
    return _wrap(y), None if idx is None else _wrap(idx)


def layer_norm(x: Tensor, normalized_dims: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Layer normalization over the last ``normalized_dims`` axes, with optional ``weight`` and
    ``bias`` of those axes' shape."""
    return _wrap(x._t.layer_norm(int(normalized_dims), _native_or_none(weight), _native_or_none(bias), float(eps)))


def layer_norm_stats(x: Tensor, normalized_dims: int, weight: Tensor | None = None, bias: Tensor | None = None,
                     eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """``(y, mean, rstd)``: :func:`layer_norm` with the statistics its backward pass
    (:func:`hologram.autograd.layer_norm_backward_stats`) reuses (one fused kernel on GPUs)."""
    y, mean, rstd = x._t.layer_norm_stats(int(normalized_dims), _native_or_none(weight), _native_or_none(bias),
                                          float(eps))
    return _wrap(y), _wrap(mean), _wrap(rstd)


def loss(name: str, prediction: Tensor, target: Tensor) -> Tensor:
    """The mean loss ``name`` of ``prediction`` against ``target``, a 0-d tensor: ``'mse'``,
    ``'cross_entropy'`` (logits ``[N, C]``, integer class targets ``[N]``) or
    ``'binary_cross_entropy'`` (probabilities)."""
    return _wrap(prediction._t.loss(name, target._t))


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, tf32: bool = False,
              save_probs: bool = False) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention of ``[B, H, L, D]`` queries, keys and values (any strides,
    read in place): ``(output, probabilities)``. The probabilities (what
    :func:`hologram.autograd.attention_backward` needs) are kept only with ``save_probs``;
    else ``None``. ``causal`` masks keys after each query; ``scale`` multiplies the scores."""
    out, probs = q._t.attention(k._t, v._t, bool(causal), float(scale), bool(tf32), bool(save_probs))
    return _wrap(out), None if probs is None else _wrap(probs)


__all__ = ["attention", "conv2d", "layer_norm", "layer_norm_stats", "loss", "max_pool2d"]
