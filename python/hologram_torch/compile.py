"""``torch.compile(model, backend="hologram")``.

The FX graph Dynamo captures is run node by node on Hologram: supported ops become Hologram
tensor ops, so chains of element-wise ops fuse into single kernels (nothing runs until a
non-element-wise op or the graph's output needs the values). Unsupported nodes run in eager
PyTorch, with the reason logged once per op. When gradients are needed, supported ops use the
autograd functions of :mod:`hologram_torch.functional` so that ``backward()`` works.
"""

from __future__ import annotations

import logging
import operator

import torch
import torch.nn.functional as TF

import hologram as hg

from . import functional as F
from ._bridge import default_executor, to_hg

log = logging.getLogger("hologram_torch.compile")
_warned: set = set()


class _NoLowering(Exception):
    """A node Hologram cannot run as asked (the message says why): it runs in eager PyTorch."""


def _reason_once(target, reason):
    key = (str(target), reason)
    if key not in _warned:
        _warned.add(key)
        log.warning("hologram backend: %s runs in eager PyTorch (%s)", getattr(target, "__name__", target), reason)


def _ew(op):
    return lambda a, b: getattr(a, op)(b) if isinstance(a, hg.Tensor) else getattr(b, op.replace("__", "__r", 1))(a)


# Ops on Hologram tensors (inference path). Each takes (args, kwargs) of converted values.
def _binary(name):
    def f(a, b, alpha=None):
        if alpha is not None and alpha != 1:
            b = b * alpha
        if isinstance(a, hg.Tensor):
            return {"add": a.__add__, "sub": a.__sub__, "mul": a.__mul__, "div": a.__truediv__}[name](b)
        return {"add": b.__radd__, "sub": b.__rsub__, "mul": b.__rmul__, "div": b.__rtruediv__}[name](a)

    return f


def _softmax(x, dim=-1, _stacklevel=3, dtype=None):
    return _no_dtype(x, dtype).softmax(dim)


def _log_softmax(x, dim=-1, _stacklevel=3, dtype=None):
    return _no_dtype(x, dtype).log_softmax(dim)


def _linear(x, w, b=None):
    y = x @ w.T
    return y + b if b is not None else y


def _gelu(x, approximate="none"):
    return _exact_gelu(x, approximate).gelu()


def _exact_gelu(x, approximate):
    """``x``, when the GELU asked for is the exact one (the tanh form falls back to eager)."""
    if approximate != "none":
        raise _NoLowering("tanh-approximated GELU")
    return x


def _no_dtype(x, dtype):
    if dtype is not None and dtype != x.dtype:
        raise _NoLowering(f"softmax with a dtype cast to {dtype}")
    return x


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    nd = len(normalized_shape) if not isinstance(normalized_shape, int) else 1
    w = weight._t if weight is not None else None
    b = bias._t if bias is not None else None
    return hg.Tensor._wrap(x._t.layer_norm(nd, w, b, eps))


_HG_FUNCTIONS = {
    operator.add: _binary("add"), torch.add: _binary("add"),
    operator.sub: _binary("sub"), torch.sub: _binary("sub"),
    operator.mul: _binary("mul"), torch.mul: _binary("mul"),
    operator.truediv: _binary("div"), torch.div: _binary("div"),
    operator.neg: lambda x: -x, torch.neg: lambda x: -x,
    operator.matmul: lambda a, b: a @ b, torch.matmul: lambda a, b: a @ b,
    torch.relu: lambda x: x.relu(), TF.relu: lambda x, inplace=False: x.relu(),
    torch.sigmoid: lambda x: x.sigmoid(), TF.sigmoid: lambda x: x.sigmoid(),
    torch.tanh: lambda x: x.tanh(), TF.tanh: lambda x: x.tanh(),
    TF.gelu: _gelu, TF.silu: lambda x, inplace=False: x.silu(),
    torch.exp: lambda x: x.exp(), torch.log: lambda x: x.log(), torch.sqrt: lambda x: x.sqrt(),
    torch.abs: lambda x: abs(x),
    torch.softmax: _softmax, TF.softmax: _softmax, TF.log_softmax: _log_softmax, torch.log_softmax: _log_softmax,
    TF.linear: _linear, TF.layer_norm: _layer_norm,
}

_HG_METHODS = {
    "relu": lambda x: x.relu(), "sigmoid": lambda x: x.sigmoid(), "tanh": lambda x: x.tanh(),
    "exp": lambda x: x.exp(), "log": lambda x: x.log(), "sqrt": lambda x: x.sqrt(),
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _binary("div"),
    "softmax": _softmax, "t": lambda x: x.T,
    "view": lambda x, *s: x.reshape(*s), "reshape": lambda x, *s: x.reshape(*s),
    "sum": lambda x, dim=None, keepdim=False: x.sum(axis=dim, keepdims=keepdim),
    "mean": lambda x, dim=None, keepdim=False: x.mean(axis=dim, keepdims=keepdim),
}

# Autograd path: the functional ops (torch tensors in, torch tensors out).
_AUTOGRAD_FUNCTIONS = {
    operator.add: F.add, torch.add: F.add, operator.sub: F.sub, torch.sub: F.sub,
    operator.mul: F.mul, torch.mul: F.mul, operator.truediv: F.div, torch.div: F.div,
    torch.relu: F.relu, TF.relu: lambda x, inplace=False: F.relu(x),
    torch.sigmoid: F.sigmoid, TF.sigmoid: F.sigmoid, torch.tanh: F.tanh, TF.tanh: F.tanh,
    TF.silu: lambda x, inplace=False: F.silu(x),
    TF.linear: lambda x, w, b=None: F.linear(x, w, b),
    operator.matmul: F.matmul, torch.matmul: F.matmul,
    TF.mse_loss: lambda a, b, *r, **k: F.mse_loss(a, b),
    TF.gelu: lambda x, approximate="none": F.gelu(_exact_gelu(x, approximate)),
    TF.softmax: lambda x, dim=-1, _stacklevel=3, dtype=None: F.softmax(_no_dtype(x, dtype), dim=dim),
    torch.softmax: lambda x, dim=-1, dtype=None: F.softmax(_no_dtype(x, dtype), dim=dim),
    TF.log_softmax: lambda x, dim=-1, _stacklevel=3, dtype=None: F.log_softmax(_no_dtype(x, dtype), dim=dim),
    torch.log_softmax: lambda x, dim=-1, dtype=None: F.log_softmax(_no_dtype(x, dtype), dim=dim),
    TF.layer_norm: lambda x, normalized_shape, weight=None, bias=None, eps=1e-5: F.layer_norm(
        x, normalized_shape=normalized_shape, weight=weight, bias=bias, eps=eps),
}


class _Runner:
    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.nodes = list(gm.graph.nodes)

    def __call__(self, *args):
        needs_grad = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        return self._run(args, autograd=needs_grad)

    def _run(self, args, autograd):
        env = {}
        it = iter(args)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        ex = default_executor(device)

        def as_torch(v):
            if isinstance(v, hg.Tensor):
                return torch.from_dlpack(v.realize()) if v.device == "cpu" or (device and device.type == "cuda") else torch.from_dlpack(v.to("cpu").realize())
            return v

        def as_hg(v):
            if isinstance(v, torch.Tensor):
                return to_hg(v, ex)
            return v

        def load(a, conv):
            return torch.fx.node.map_arg(a, lambda n: conv(env[n]))

        for node in self.nodes:
            if node.op == "placeholder":
                env[node] = next(it)
            elif node.op == "get_attr":
                obj = self.gm
                for part in node.target.split("."):
                    obj = getattr(obj, part)
                env[node] = obj
            elif node.op == "output":
                return load(node.args[0], as_torch)
            else:
                env[node] = self._node(node, load, as_hg, as_torch, autograd)
        return None

    def _node(self, node, load, as_hg, as_torch, autograd):
        target = node.target
        if node.op == "call_function":
            table = _AUTOGRAD_FUNCTIONS if autograd else _HG_FUNCTIONS
            fn = table.get(target)
            if fn is not None:
                try:
                    if autograd:
                        return fn(*load(node.args, as_torch), **load(node.kwargs, as_torch))
                    return fn(*load(node.args, as_hg), **load(node.kwargs, as_hg))
                except (_NoLowering, TypeError, hg.HologramError) as e:
                    _reason_once(target, str(e))
            else:
                _reason_once(target, "no Hologram lowering")
            return target(*load(node.args, as_torch), **load(node.kwargs, as_torch))
        if node.op == "call_method":
            fn = None if autograd else _HG_METHODS.get(target)
            if fn is not None:
                try:
                    return fn(*load(node.args, as_hg), **load(node.kwargs, as_hg))
                except (_NoLowering, TypeError, hg.HologramError) as e:
                    _reason_once(target, str(e))
            self_, *rest = load(node.args, as_torch)
            return getattr(self_, target)(*rest, **load(node.kwargs, as_torch))
        if node.op == "call_module":
            mod = self.gm.get_submodule(target)
            return mod(*load(node.args, as_torch), **load(node.kwargs, as_torch))
        raise RuntimeError(f"unexpected FX node {node.op}")


def hologram_backend(gm: torch.fx.GraphModule, example_inputs):
    """The ``torch.compile`` backend: returns a callable that runs ``gm`` on Hologram."""
    return _Runner(gm)


def register() -> None:
    """Registers ``backend="hologram"`` with ``torch.compile`` (done on import)."""
    try:
        from torch._dynamo import register_backend

        register_backend(name="hologram")(hologram_backend)
    except Exception as e:  # noqa: BLE001 - an older or newer torch without this hook
        log.debug("could not register the torch.compile backend: %s", e)
