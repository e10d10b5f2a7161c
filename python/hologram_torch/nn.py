"""``torch.nn.Module`` layers whose computation runs on Hologram kernels.

They are ordinary modules: parameters, ``state_dict``, ``.to()`` and optimizers work. The
constructor forms of the seeds work::

    nn.Linear(executor, 512, 256)
    nn.Linear(512, 256, backend='cpu')
    nn.ReLU()
"""

from __future__ import annotations

import math

import torch

import hologram as hg

from . import functional as F


def _executor_arg(args, kwargs):
    """Splits a leading executor (or a ``backend=``/``executor=`` keyword) from the args."""
    ex = kwargs.pop("executor", None)
    backend = kwargs.pop("backend", None)
    if args and isinstance(args[0], (hg.Executor, str)):
        ex, args = args[0], args[1:]
    if ex is None and backend is not None:
        ex = hg.executor_for(backend)
    elif isinstance(ex, str):
        ex = hg.executor_for(ex)
    return ex, args, kwargs


class _HologramModule(torch.nn.Module):
    def __init__(self, executor=None):
        super().__init__()
        self.executor = executor

    def _ex(self):
        return () if self.executor is None else (self.executor,)


class Linear(_HologramModule):
    """``y = x @ W.T + b`` with PyTorch's initialization (Kaiming-uniform weights)."""

    def __init__(self, *args, bias: bool = True, dtype=None, device=None, **kwargs):
        ex, args, kwargs = _executor_arg(args, kwargs)
        if len(args) != 2:
            raise TypeError("Linear(in_features, out_features) (optionally after an executor)")
        super().__init__(ex)
        self.in_features, self.out_features = int(args[0]), int(args[1])
        self.weight = torch.nn.Parameter(torch.empty(self.out_features, self.in_features, dtype=dtype, device=device))
        self.bias = torch.nn.Parameter(torch.empty(self.out_features, dtype=dtype, device=device)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(*self._ex(), x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _activation_module(name, fn, doc):
    class M(_HologramModule):
        __doc__ = doc

        def __init__(self, *args, **kwargs):
            ex, args, kwargs = _executor_arg(args, kwargs)
            kwargs.pop("inplace", None)
            super().__init__(ex)

        def forward(self, x):
            return fn(*self._ex(), x)

    M.__name__ = M.__qualname__ = name
    return M


ReLU = _activation_module("ReLU", F.relu, "ReLU on Hologram.")
Sigmoid = _activation_module("Sigmoid", F.sigmoid, "Logistic sigmoid on Hologram.")
Tanh = _activation_module("Tanh", F.tanh, "Hyperbolic tangent on Hologram.")
GELU = _activation_module("GELU", F.gelu, "Exact GELU on Hologram.")
SiLU = _activation_module("SiLU", F.silu, "SiLU (swish) on Hologram.")


class Softmax(_HologramModule):
    """Softmax along ``dim``."""

    def __init__(self, *args, dim: int = -1, **kwargs):
        ex, args, kwargs = _executor_arg(args, kwargs)
        super().__init__(ex)
        self.dim = args[0] if args else dim

    def forward(self, x):
        return F.softmax(*self._ex(), x, dim=self.dim)


class LayerNorm(_HologramModule):
    """Layer normalization over the trailing ``normalized_shape`` with an affine transform."""

    weight: torch.nn.Parameter | None
    bias: torch.nn.Parameter | None

    def __init__(self, *args, eps: float = 1e-5, elementwise_affine: bool = True, dtype=None, device=None, **kwargs):
        ex, args, kwargs = _executor_arg(args, kwargs)
        super().__init__(ex)
        shape = args[0]
        self.normalized_shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape, dtype=dtype, device=device))
            self.bias = torch.nn.Parameter(torch.zeros(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.weight = self.bias = None

    def forward(self, x):
        return F.layer_norm(*self._ex(), x, self.normalized_shape, self.weight, self.bias, eps=self.eps)


class MSELoss(_HologramModule):
    """Mean squared error."""

    def __init__(self, *args, **kwargs):
        ex, args, kwargs = _executor_arg(args, kwargs)
        super().__init__(ex)

    def forward(self, pred, target):
        return F.mse_loss(*self._ex(), pred, target)


class CrossEntropyLoss(_HologramModule):
    """Mean cross-entropy of logits against class indexes."""

    def __init__(self, *args, **kwargs):
        ex, args, kwargs = _executor_arg(args, kwargs)
        super().__init__(ex)

    def forward(self, logits, targets):
        return F.cross_entropy(*self._ex(), logits, targets)


__all__ = ["Linear", "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Softmax", "LayerNorm", "MSELoss", "CrossEntropyLoss"]
