"""PyTorch ops whose forward and backward run on Hologram kernels.

Each op is a ``torch.autograd.Function``. Both call forms of the seeds work::

    import hologram_torch.functional as F
    F.add(exec, x, y)     # an explicit executor
    F.add(x, y)           # the default executor (CUDA tensors use the CUDA backend)

Tensors stay on their device: CPU tensors are shared with the CPU backend and CUDA tensors with
the CUDA backend through DLPack, without host copies.
"""

from __future__ import annotations

import torch

import hologram as hg

from ._bridge import resolve, to_hg, to_torch


def _split(args):
    """(executor or None, remaining args) for the two call forms."""
    if args and isinstance(args[0], (hg.Executor, str)) and not isinstance(args[0], torch.Tensor):
        return args[0], args[1:]
    return None, args


def _sum_to(g: hg.Tensor, shape) -> hg.Tensor:
    """Sums a broadcast gradient back to ``shape``."""
    shape = tuple(shape)
    gs = g.shape
    lead = len(gs) - len(shape)
    axes = list(range(lead)) + [lead + i for i, d in enumerate(shape) if d == 1 and gs[lead + i] != 1]
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape) if g.shape != shape else g


class _Binary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, ex, a, b):
        ha, hb = to_hg(a, ex), to_hg(b, ex)
        ctx.op, ctx.ex = op, ex
        ctx.save_for_backward(a, b)
        out = {"add": lambda: ha + hb, "sub": lambda: ha - hb, "mul": lambda: ha * hb, "div": lambda: ha / hb}[op]()
        return to_torch(out, a)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ex, op = ctx.ex, ctx.op
        hg_g, ha, hb = to_hg(g, ex), to_hg(a, ex), to_hg(b, ex)
        if op == "add":
            ga, gb = hg_g, hg_g
        elif op == "sub":
            ga, gb = hg_g, -hg_g
        elif op == "mul":
            ga, gb = hg_g * hb, hg_g * ha
        else:
            ga, gb = hg_g / hb, -(hg_g * ha) / (hb * hb)
        da = to_torch(_sum_to(ga, a.shape), a) if ctx.needs_input_grad[2] else None
        db = to_torch(_sum_to(gb, b.shape), b) if ctx.needs_input_grad[3] else None
        return None, None, da, db


def _binary(op):
    def f(*args):
        exec, (a, b) = _split(args)
        if not isinstance(b, torch.Tensor):
            b = torch.as_tensor(b, dtype=a.dtype, device=a.device)
        ex = resolve(exec, (a, b))
        return _Binary.apply(op, ex, a, b)

    f.__name__ = op
    f.__doc__ = f"``{op}(a, b)`` with broadcasting; forward and backward on Hologram."
    return f


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")


class _Activation(torch.autograd.Function):
    # For relu, gelu and silu the backward needs the input; for sigmoid and tanh the output.
    @staticmethod
    def forward(ctx, name, ex, x):
        y = getattr(to_hg(x, ex), name)()
        out = to_torch(y, x)
        ctx.name, ctx.ex = name, ex
        ctx.save_for_backward(out if name in ("sigmoid", "tanh") else x)
        return out

    @staticmethod
    def backward(ctx, g):
        (saved,) = ctx.saved_tensors
        hx = to_hg(saved, ctx.ex)
        dx = hg.autograd.activation_backward(ctx.name, to_hg(g, ctx.ex), hx)
        return None, None, to_torch(dx, g)


def _activation(name):
    def f(*args):
        exec, (x,) = _split(args)
        return _Activation.apply(name, resolve(exec, (x,)), x)

    f.__name__ = name
    f.__doc__ = f"``{name}(x)``; forward and backward on Hologram."
    return f


relu = _activation("relu")
sigmoid = _activation("sigmoid")
tanh = _activation("tanh")
gelu = _activation("gelu")
silu = _activation("silu")


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ex, x, dim, log):
        hx = to_hg(x, ex)
        y = hx.log_softmax(dim) if log else hx.softmax(dim)
        out = to_torch(y, x)
        ctx.ex, ctx.dim, ctx.log = ex, dim, log
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        dx = hg.autograd.softmax_backward(to_hg(g, ctx.ex), to_hg(y, ctx.ex), ctx.dim, ctx.log)
        return None, to_torch(dx, g), None, None


def softmax(*args, dim=-1):
    """Softmax along ``dim``."""
    exec, (x,) = _split(args)
    return _Softmax.apply(resolve(exec, (x,)), x, dim, False)


def log_softmax(*args, dim=-1):
    """Log-softmax along ``dim``."""
    exec, (x,) = _split(args)
    return _Softmax.apply(resolve(exec, (x,)), x, dim, True)


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ex, x, nd, weight, bias, eps):
        hx = to_hg(x, ex)
        hw = to_hg(weight, ex) if weight is not None else None
        hb = to_hg(bias, ex) if bias is not None else None
        y = hg.nn.layer_norm(hx, nd, hw, hb, eps)
        ctx.ex, ctx.nd, ctx.eps = ex, nd, eps
        ctx.has_w, ctx.has_b = weight is not None, bias is not None
        ctx.save_for_backward(x, weight if weight is not None else x)
        return to_torch(y, x)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        ex = ctx.ex
        hw = to_hg(w, ex) if ctx.has_w else None
        dx, dw, db = hg.autograd.layer_norm_backward(to_hg(g, ex), to_hg(x, ex), ctx.nd, hw, ctx.eps)
        dxt = to_torch(dx, g)
        dwt = to_torch(dw, g) if ctx.has_w and dw is not None else None
        if ctx.has_b:
            batch = list(range(x.dim() - ctx.nd))
            dbt = to_torch(to_hg(g, ex).sum(axis=batch) if batch else to_hg(g, ex), g)
        else:
            dbt = None
        return None, dxt, None, dwt, dbt, None


def layer_norm(*args, normalized_shape=None, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dimensions."""
    exec, rest = _split(args)
    x = rest[0]
    if len(rest) > 1:
        normalized_shape = rest[1]
    if len(rest) > 2:
        weight = rest[2]
    if len(rest) > 3:
        bias = rest[3]
    if normalized_shape is None:
        normalized_shape = x.shape[-1:]
    nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return _LayerNorm.apply(resolve(exec, (x,)), x, nd, weight, bias, eps)


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ex, a, b):
        ctx.ex = ex
        ctx.save_for_backward(a, b)
        return to_torch(to_hg(a, ex) @ to_hg(b, ex), a)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ex = ctx.ex
        ha, hb, hgr = to_hg(a, ex), to_hg(b, ex), to_hg(g, ex)
        if a.dim() == 1 or b.dim() == 1:
            # Vector cases: fall back to shapes torch understands for the outer products.
            ha2 = ha.reshape(1, -1) if a.dim() == 1 else ha
            hb2 = hb.reshape(-1, 1) if b.dim() == 1 else hb
            g2 = hgr.reshape(*ha2.shape[:-1], hb2.shape[-1])
        else:
            ha2, hb2, g2 = ha, hb, hgr
        da = db = None
        if ctx.needs_input_grad[1]:
            da = to_torch(_sum_to(g2 @ hb2.mT, ha2.shape).reshape(tuple(a.shape)), a)
        if ctx.needs_input_grad[2]:
            db = to_torch(_sum_to(ha2.mT @ g2, hb2.shape).reshape(tuple(b.shape)), b)
        return None, da, db


def matmul(*args):
    """Matrix product (NumPy semantics, batched); forward and backward through GEMM."""
    exec, (a, b) = _split(args)
    return _Matmul.apply(resolve(exec, (a, b)), a, b)


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ex, x, w, b):
        hx, hw = to_hg(x, ex), to_hg(w, ex)
        y = hx @ hw.T
        if b is not None:
            y = y + to_hg(b, ex)
        ctx.ex, ctx.has_b = ex, b is not None
        ctx.save_for_backward(x, w)
        return to_torch(y, x)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        ex = ctx.ex
        hx, hw, hgr = to_hg(x, ex), to_hg(w, ex), to_hg(g, ex)
        dx = to_torch(hgr @ hw, x) if ctx.needs_input_grad[1] else None
        g2 = hgr.reshape(-1, g.shape[-1])
        x2 = hx.reshape(-1, x.shape[-1])
        dw = to_torch(g2.T @ x2, w) if ctx.needs_input_grad[2] else None
        db = to_torch(g2.sum(axis=0), g) if ctx.has_b and ctx.needs_input_grad[3] else None
        return None, dx, dw, db


def linear(*args, bias=None):
    """``x @ weight.T + bias``."""
    exec, rest = _split(args)
    x, w = rest[0], rest[1]
    if len(rest) > 2:
        bias = rest[2]
    return _Linear.apply(resolve(exec, (x,)), x, w, bias)


class _Loss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, ex, pred, target):
        hp, ht = to_hg(pred, ex), to_hg(target, ex)
        loss = hg.nn.loss(name, hp, ht)
        ctx.name, ctx.ex = name, ex
        ctx.save_for_backward(pred, target)
        return to_torch(loss, pred)

    @staticmethod
    def backward(ctx, g):
        pred, target = ctx.saved_tensors
        ex, name = ctx.ex, ctx.name
        gv = float(g.item())
        hp, ht = to_hg(pred, ex), to_hg(target, ex)
        if name == "mse":
            d = (hp - ht) * (2.0 * gv / max(pred.numel(), 1))
            dp = to_torch(d, pred)
            dt = -dp if ctx.needs_input_grad[3] else None
            return None, None, dp, dt
        dp = to_torch(hg.autograd.loss_backward(name, gv, hp, ht), pred)
        return None, None, dp, None


def mse_loss(*args):
    """Mean squared error."""
    exec, (p, t) = _split(args)
    return _Loss.apply("mse", resolve(exec, (p, t)), p, t)


def cross_entropy(*args):
    """Mean cross-entropy of ``[N, C]`` logits against ``[N]`` class indexes."""
    exec, (p, t) = _split(args)
    return _Loss.apply("cross_entropy", resolve(exec, (p, t)), p, t)


def binary_cross_entropy(*args):
    """Mean binary cross-entropy of probabilities against targets in [0, 1]."""
    exec, (p, t) = _split(args)
    return _Loss.apply("binary_cross_entropy", resolve(exec, (p, t)), p, t)


__all__ = [
    "add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "gelu", "silu", "softmax",
    "log_softmax", "layer_norm", "linear", "matmul", "mse_loss", "cross_entropy",
    "binary_cross_entropy",
]
