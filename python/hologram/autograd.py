"""``hologram.autograd``: the backward ops of the tensor library, for frameworks that run their
own differentiation (``hologram_torch`` maps PyTorch's backward graphs onto them).

Each function takes the output's gradient ``grad`` first, then what the forward pass saved,
and returns the gradients of the forward op's inputs (``None`` where one was not asked for or
does not exist).

>>> import hologram as hg
>>> x = hg.asarray([-1.0, 2.0], device='cpu')
>>> hg.autograd.activation_backward('relu', hg.asarray([5.0, 5.0], device='cpu'), x).tolist()
[0.0, 5.0]
"""

from __future__ import annotations

from typing import Sequence

from . import _native
from .tensor import Tensor, _wrap


def _maybe(t: _native.Tensor | None) -> Tensor | None:
    return None if t is None else _wrap(t)


def activation_backward(name: str, grad: Tensor, saved: Tensor) -> Tensor:
    """The input gradient of the activation ``name``: ``'relu'``, ``'gelu'`` (exact, erf) and
    ``'silu'`` from their input (``saved``), ``'sigmoid'`` and ``'tanh'`` from their output."""
    return _wrap(saved._t.activation_backward(name, grad._t))


def softmax_backward(grad: Tensor, output: Tensor, axis: int, log: bool = False) -> Tensor:
    """The input gradient of ``softmax`` along ``axis`` (``log_softmax`` with ``log``) from its
    ``output``."""
    return _wrap(output._t.softmax_backward(grad._t, int(axis), bool(log)))


def layer_norm_backward(grad: Tensor, x: Tensor, normalized_dims: int, weight: Tensor | None = None,
                        eps: float = 1e-5) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """``(dx, dweight, dbias)`` of :func:`hologram.nn.layer_norm` over the last
    ``normalized_dims`` axes of its input ``x`` (``dweight`` and ``dbias`` ``None`` without a
    weight)."""
    dx, dw, db = x._t.layer_norm_backward(grad._t, int(normalized_dims), None if weight is None else weight._t,
                                          float(eps))
    return _wrap(dx), _maybe(dw), _maybe(db)


def layer_norm_backward_stats(grad: Tensor, x: Tensor, normalized_dims: int, mean: Tensor, rstd: Tensor,
                              weight: Tensor | None = None) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """``(dx, dweight, dbias)`` of :func:`hologram.nn.layer_norm_stats` from the ``mean`` and
    ``rstd`` it returned (``dweight`` and ``dbias`` ``None`` without a weight)."""
    dx, dw, db = x._t.layer_norm_backward_stats(grad._t, int(normalized_dims), mean._t, rstd._t,
                                                None if weight is None else weight._t)
    return _wrap(dx), _maybe(dw), _maybe(db)


def loss_backward(name: str, grad: float, prediction: Tensor, target: Tensor) -> Tensor:
    """The prediction's gradient of the mean loss :func:`hologram.nn.loss` ``name``
    (``'cross_entropy'`` of logits or ``'binary_cross_entropy'`` of probabilities), the loss's
    gradient being the number ``grad``."""
    return _wrap(prediction._t.loss_backward(name, target._t, float(grad)))


def reduce_backward(grad: Tensor, input_shape: Sequence[int], axes: Sequence[int], keepdims: bool,
                    mean: bool = False) -> Tensor:
    """The input gradient of a sum (a mean with ``mean``) over ``axes`` of an input of
    ``input_shape``: ``grad`` broadcast back (and divided by the count for a mean)."""
    return _wrap(_native.Tensor.reduce_backward(grad._t, [int(s) for s in input_shape], [int(a) for a in axes],
                                                bool(keepdims), bool(mean)))


def conv2d_backward(grad: Tensor, x: Tensor, weight: Tensor, stride: Sequence[int], padding: Sequence[int],
                    dilation: Sequence[int], groups: int, want: Sequence[bool] = (True, True, True),
                    tf32: bool = False) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """``(dx, dweight, dbias)`` of :func:`hologram.nn.conv2d`, each computed only where ``want``
    asks (else ``None``)."""
    dx, dw, db = x._t.conv2d_backward(grad._t, weight._t, list(stride), list(padding), list(dilation), int(groups),
                                      [bool(w) for w in want], bool(tf32))
    return _maybe(dx), _maybe(dw), _maybe(db)


def max_pool2d_backward(grad: Tensor, indices: Tensor, input_shape: Sequence[int], kernel: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1),
                        ceil_mode: bool = False) -> Tensor:
    """The input gradient of :func:`hologram.nn.max_pool2d` for an input of ``input_shape``:
    each input element gets the sum of the output gradients whose index names it."""
    return _wrap(grad._t.max_pool2d_backward(indices._t, [int(s) for s in input_shape], list(kernel), list(stride),
                                             list(padding), list(dilation), bool(ceil_mode)))


def attention_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, probs: Tensor, scale: float,
                       tf32: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """``(dq, dk, dv)`` of :func:`hologram.nn.attention` from the probabilities it saved."""
    dq, dk, dv = q._t.attention_backward(k._t, v._t, probs._t, grad._t, float(scale), bool(tf32))
    return _wrap(dq), _wrap(dk), _wrap(dv)


__all__ = [
    "activation_backward", "attention_backward", "conv2d_backward", "layer_norm_backward",
    "layer_norm_backward_stats", "loss_backward", "max_pool2d_backward", "reduce_backward",
    "softmax_backward",
]
