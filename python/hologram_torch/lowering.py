"""Core ATen ops as Hologram tensor ops: the table the ``torch.compile`` backend lowers forward
and backward graphs with (after torch's own decompositions to core ATen).

Each entry takes the node's arguments with tensors already converted to :class:`hologram.Tensor`
and returns Hologram tensors (or tuples of them). An op variant Hologram cannot run raises
:class:`NoLowering` with the reason; the graph then runs in eager PyTorch and the reason is
counted (``hologram_torch.compile_stats()``).
"""

from __future__ import annotations

import math
import operator

import torch

import hologram as hg

from . import attention

aten = torch.ops.aten


class NoLowering(Exception):
    """An op (or an argument of it) Hologram cannot run; the message says why."""


DTYPES = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32", torch.int16: "int16",
    torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
}

TABLE: dict = {}


def _reg(*ops):
    def deco(fn):
        for op in ops:
            TABLE[op] = fn
        return fn

    return deco


def lookup(target):
    """The lowering of an FX call target, or ``None``."""
    return TABLE.get(target)


def _dtype(d):
    if d is None:
        return None
    try:
        return DTYPES[d]
    except KeyError:
        raise NoLowering(f"dtype {d}") from None


class Ctx:
    """What lowerings need besides their arguments: the executor the graph runs on, and the
    graph's random seed (a one-element tensor, new at every call) with a counter that gives each
    random op its own stream."""

    executor: hg.Executor | None = None
    seed: hg.Tensor | None = None
    # The FX node being lowered (multi-output lowerings skip outputs nothing reads).
    node = None
    draws: int = 0

    def salt(self) -> hg.Tensor:
        if self.seed is None:
            raise NoLowering("a random op without a seed input")
        self.draws += 1
        return self.seed + (self.draws * 0x9E3779B9) % (1 << 32)


CTX = Ctx()


def _full(shape, value, dtype):
    return hg.full(tuple(int(s) for s in shape), value, dtype=dtype, device=CTX.executor)


def _default_dtype(value, dtype):
    if dtype is not None:
        return _dtype(dtype)
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    return "float32"


def _is_t(x):
    return isinstance(x, hg.Tensor)


def _scalar_tensor(v, like=None):
    """A number as a 0-d tensor (of ``like``'s dtype when given)."""
    if _is_t(v):
        return v
    dt = like.dtype if like is not None else _default_dtype(v, None)
    return hg.full((), v, dtype=dt, device=CTX.executor)


# ----- element-wise -----------------------------------------------------------------------------

def _scaled(b, alpha):
    return b if alpha is None or alpha == 1 else b * alpha


@_reg(aten.add.Tensor, aten.add.Scalar)
def _add(a, b, alpha=None):
    b = _scaled(b, alpha)
    return a + b if _is_t(a) else b + a


@_reg(aten.sub.Tensor, aten.sub.Scalar)
def _sub(a, b, alpha=None):
    b = _scaled(b, alpha)
    return a - b if _is_t(a) else _scalar_tensor(a, b) - b


@_reg(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(a, b, alpha=None):
    return _sub(b, a * alpha if alpha not in (None, 1) else a)


@_reg(aten.mul.Tensor, aten.mul.Scalar)
def _mul(a, b):
    return a * b if _is_t(a) else b * a


@_reg(aten.div.Tensor, aten.div.Scalar)
def _div(a, b):
    return a / b if _is_t(a) else _scalar_tensor(a, b) / b


@_reg(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(a, b, rounding_mode=None):
    q = _div(a, b)
    if rounding_mode is None:
        return q
    q = q.floor() if rounding_mode == "floor" else q.trunc()
    if _is_t(a) and a.dtype != q.dtype and rounding_mode in ("floor", "trunc"):
        q = q.astype(a.dtype)
    return q


def _unary(name):
    return lambda x: getattr(x, name)()


for _op, _name in [
    (aten.exp.default, "exp"), (aten.log.default, "log"), (aten.sqrt.default, "sqrt"),
    (aten.rsqrt.default, "rsqrt"), (aten.relu.default, "relu"), (aten.sigmoid.default, "sigmoid"),
    (aten.tanh.default, "tanh"), (aten.erf.default, "erf"), (aten.abs.default, "abs"),
    (aten.reciprocal.default, "reciprocal"), (aten.sin.default, "sin"), (aten.cos.default, "cos"),
    (aten.floor.default, "floor"), (aten.ceil.default, "ceil"), (aten.round.default, "round"),
    (aten.trunc.default, "trunc"), (aten.silu.default, "silu"),
]:
    TABLE[_op] = _unary(_name)

TABLE[aten.neg.default] = lambda x: -x
TABLE[aten.log1p.default] = lambda x: (x + 1.0).log()
TABLE[aten.expm1.default] = lambda x: x.exp() - 1.0
TABLE[aten.sign.default] = lambda x: hg.where(x > 0, _scalar_tensor(1, x), hg.where(x < 0, _scalar_tensor(-1, x), _scalar_tensor(0, x)))


@_reg(aten.gelu.default)
def _gelu(x, approximate="none"):
    if approximate == "none":
        return x.gelu()
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())


@_reg(aten.pow.Tensor_Scalar)
def _pow(x, e):
    if e == 2:
        return x * x
    if e == 1:
        return x
    if e == 0.5:
        return x.sqrt()
    if e == -1:
        return x.reciprocal()
    return x ** e


@_reg(aten.pow.Tensor_Tensor)
def _pow_tt(x, e):
    return x ** e


@_reg(aten.pow.Scalar)
def _pow_st(s, e):
    return _scalar_tensor(float(s), e) ** e


@_reg(aten.clamp.default, aten.clamp.Tensor)
def _clamp(x, min=None, max=None):
    if _is_t(min) or _is_t(max):
        if min is not None:
            x = x.maximum(min)
        if max is not None:
            x = x.minimum(max)
        return x
    return x.clip(min, max)


TABLE[aten.clamp_min.default] = lambda x, m: _clamp(x, min=m)
TABLE[aten.clamp_max.default] = lambda x, m: _clamp(x, max=m)
TABLE[aten.maximum.default] = lambda a, b: a.maximum(b)
TABLE[aten.minimum.default] = lambda a, b: a.minimum(b)
def _remainder(a, b):
    """Python's (and PyTorch's) modulo: the sign of the divisor."""
    if _is_float(a) or _is_float(b):
        return a - (a / b).floor() * b
    r = a % b
    bt = _scalar_tensor(b, a) if not _is_t(b) else b
    fix = (r != 0) & ((r < 0) ^ (bt < 0))
    return hg.where(fix, r + bt, r)


TABLE[aten.remainder.Scalar] = _remainder
TABLE[aten.remainder.Tensor] = _remainder
TABLE[aten.floor_divide.default] = lambda a, b: _div_mode(a, b, "floor")

for _ops, _fn in [
    ((aten.eq.Scalar, aten.eq.Tensor), operator.eq), ((aten.ne.Scalar, aten.ne.Tensor), operator.ne),
    ((aten.lt.Scalar, aten.lt.Tensor), operator.lt), ((aten.le.Scalar, aten.le.Tensor), operator.le),
    ((aten.gt.Scalar, aten.gt.Tensor), operator.gt), ((aten.ge.Scalar, aten.ge.Tensor), operator.ge),
]:
    for _op in _ops:
        TABLE[_op] = _fn


def _as_bool(x):
    return x if x.dtype == hg.bool_ else x != 0


TABLE[aten.logical_and.default] = lambda a, b: _as_bool(a) & _as_bool(b)
TABLE[aten.logical_or.default] = lambda a, b: _as_bool(a) | _as_bool(b)
TABLE[aten.logical_xor.default] = lambda a, b: _as_bool(a) ^ _as_bool(b)
TABLE[aten.logical_not.default] = lambda a: ~_as_bool(a)
TABLE[aten.bitwise_and.Tensor] = lambda a, b: a & b
TABLE[aten.bitwise_or.Tensor] = lambda a, b: a | b
TABLE[aten.bitwise_xor.Tensor] = lambda a, b: a ^ b
TABLE[aten.bitwise_not.default] = lambda a: ~a


@_reg(aten.where.self)
def _where(c, a, b):
    like = a if _is_t(a) else b if _is_t(b) else None
    return hg.where(c, _scalar_tensor(a, like), _scalar_tensor(b, like))


@_reg(aten._to_copy.default)
def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    if device is not None and torch.device(device).type not in ("cpu", "cuda"):
        raise NoLowering(f"a copy to {device}")
    d = _dtype(dtype)
    return x if d is None or x.dtype == d else x.astype(d)


TABLE[torch.ops.prims.convert_element_type.default] = lambda x, dtype: _to_copy(x, dtype=dtype)


@_reg(aten.copy_.default)
def _copy_(dst, src, non_blocking=False):
    # In a functionalized graph copy_ only writes a new value back into a graph input (batch
    # norm's running statistics); the caller writes the value it returns into the input.
    src = src if _is_t(src) else _full(dst.shape, src, dst.dtype)
    src = src if src.dtype == dst.dtype else src.astype(dst.dtype)
    return src if tuple(src.shape) == tuple(dst.shape) else _expand(src, list(dst.shape))


def _identity(x, *args, **kwargs):
    return x


for _op in (aten.alias.default, aten.detach.default, aten.clone.default, aten.lift_fresh_copy.default,
            aten.contiguous.default):
    TABLE[_op] = _identity


# ----- creation ---------------------------------------------------------------------------------

@_reg(aten.scalar_tensor.default)
def _scalar(v, dtype=None, layout=None, device=None, pin_memory=None):
    return _full((), v, _dtype(dtype) or "float32")


@_reg(aten.full.default)
def _full_op(size, v, dtype=None, layout=None, device=None, pin_memory=None):
    return _full(size, v, _default_dtype(v, dtype))


@_reg(aten.full_like.default)
def _full_like(x, v, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _full(x.shape, v, _dtype(dtype) or x.dtype)


TABLE[aten.zeros_like.default] = lambda x, dtype=None, **k: _full(x.shape, 0, _dtype(dtype) or x.dtype)
TABLE[aten.ones_like.default] = lambda x, dtype=None, **k: _full(x.shape, 1, _dtype(dtype) or x.dtype)
# Uninitialized memory may hold anything; zeros are one such thing.
TABLE[aten.empty_like.default] = TABLE[aten.zeros_like.default]
TABLE[aten.zeros.default] = lambda size, dtype=None, **k: _full(size, 0, _dtype(dtype) or "float32")
TABLE[aten.ones.default] = lambda size, dtype=None, **k: _full(size, 1, _dtype(dtype) or "float32")
TABLE[aten.empty.memory_format] = lambda size, dtype=None, **k: _full(size, 0, _dtype(dtype) or "float32")
TABLE[aten.empty_permuted.default] = lambda size, perm, dtype=None, **k: _full(size, 0, _dtype(dtype) or "float32")
TABLE[aten.new_zeros.default] = lambda x, size, dtype=None, **k: _full(size, 0, _dtype(dtype) or x.dtype)
TABLE[aten.new_ones.default] = lambda x, size, dtype=None, **k: _full(size, 1, _dtype(dtype) or x.dtype)
TABLE[aten.new_full.default] = lambda x, size, v, dtype=None, **k: _full(size, v, _dtype(dtype) or x.dtype)
TABLE[aten.new_empty.default] = TABLE[aten.new_zeros.default]


@_reg(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args + (1,))[:3]
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.float32
    return hg.arange(start, end, step, dtype=_dtype(dtype), device=CTX.executor)


# ----- views and shape ops ----------------------------------------------------------------------

def _shape(size, x):
    return tuple(int(s) for s in size)


TABLE[aten.view.default] = lambda x, size: x.reshape(*_shape(size, x))
TABLE[aten._unsafe_view.default] = TABLE[aten.view.default]
TABLE[aten.reshape.default] = TABLE[aten.view.default]
TABLE[aten.permute.default] = lambda x, dims: x.permute(*[int(d) for d in dims])
TABLE[aten.t.default] = lambda x: x.transpose(0, 1) if x.ndim == 2 else x
TABLE[aten.transpose.int] = lambda x, a, b: x.transpose(int(a), int(b))
TABLE[aten.unsqueeze.default] = lambda x, d: x.unsqueeze(int(d))


def _squeeze(x, dims=None):
    if dims is None:
        dims = [i for i, s in enumerate(x.shape) if s == 1]
    elif isinstance(dims, int):
        dims = [dims]
    dims = sorted((d % x.ndim for d in dims if x.shape[d % x.ndim] == 1), reverse=True) if x.ndim else []
    for d in dims:
        x = x.squeeze(d)
    return x


TABLE[aten.squeeze.dims] = _squeeze
TABLE[aten.squeeze.dim] = _squeeze
TABLE[aten.squeeze.default] = _squeeze


@_reg(aten.expand.default)
def _expand(x, size, implicit=False):
    size = list(size)
    lead = len(size) - x.ndim
    out = [x.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(size)]
    return x.expand(out)


@_reg(aten.slice.Tensor)
def _slice(x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim]
    start = 0 if start is None else start
    end = n if end is None or end > n else end
    start = max(start + n, 0) if start < 0 else min(start, n)
    end = max(end + n, 0) if end < 0 else min(end, n)
    if end <= start:
        raise NoLowering("an empty slice")
    return x.slice(int(dim), int(start), int(end), int(step))


@_reg(aten.select.int)
def _select(x, dim, index):
    n = x.shape[dim]
    index = index + n if index < 0 else index
    return _squeeze(_slice(x, dim, index, index + 1), [dim])


@_reg(aten.split_with_sizes.default)
def _split_sizes(x, sizes, dim=0):
    out, at = [], 0
    for s in sizes:
        out.append(_slice(x, dim, at, at + s))
        at += s
    return out


@_reg(aten.split.Tensor)
def _split(x, size, dim=0):
    n = x.shape[dim]
    return [_slice(x, dim, i, min(i + size, n)) for i in range(0, n, size)]


@_reg(aten.cat.default)
def _cat(tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if len(tensors) == 1:
        return tensors[0]
    # The graph never writes into a value, so parts already side by side in one buffer (the
    # attention gradients flowing into a fused q/k/v projection) are joined without a copy.
    return hg.cat(tensors, axis=dim, view_if_adjacent=True)


@_reg(aten.stack.default)
def _stack(tensors, dim=0):
    return _cat([t.unsqueeze(int(dim)) for t in tensors], dim)


# ----- reductions -------------------------------------------------------------------------------

def _dims(x, dims):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    if isinstance(dims, int):
        return [dims]
    return [int(d) for d in dims]


def _sum_like(name):
    def f(x, dims=None, keepdim=False, dtype=None):
        if dtype is not None:
            x = x.astype(_dtype(dtype))
        return getattr(x, name)(axis=_dims(x, dims), keepdims=keepdim)

    return f


TABLE[aten.sum.dim_IntList] = _sum_like("sum")
TABLE[aten.sum.default] = lambda x, dtype=None: _sum_like("sum")(x, None, False, dtype)
TABLE[aten.mean.dim] = _sum_like("mean")
TABLE[aten.mean.default] = lambda x, dtype=None: _sum_like("mean")(x, None, False, dtype)
TABLE[aten.prod.dim_int] = lambda x, d, keepdim=False, dtype=None: _sum_like("prod")(x, [d], keepdim, dtype)
TABLE[aten.amax.default] = lambda x, dims=(), keepdim=False: x.max(axis=_dims(x, dims), keepdims=keepdim)
TABLE[aten.amin.default] = lambda x, dims=(), keepdim=False: x.min(axis=_dims(x, dims), keepdims=keepdim)
TABLE[aten.max.dim] = lambda x, d, keepdim=False: (x.max(axis=[d], keepdims=keepdim), x.argmax(axis=d, keepdims=keepdim))
TABLE[aten.min.dim] = lambda x, d, keepdim=False: (x.min(axis=[d], keepdims=keepdim), x.argmin(axis=d, keepdims=keepdim))
TABLE[aten.max.default] = lambda x: x.max()
TABLE[aten.min.default] = lambda x: x.min()
TABLE[aten.argmax.default] = lambda x, dim=None, keepdim=False: x.argmax(axis=dim, keepdims=keepdim)
TABLE[aten.argmin.default] = lambda x, dim=None, keepdim=False: x.argmin(axis=dim, keepdims=keepdim)


@_reg(aten.any.dim, aten.any.dims, aten.any.default)
def _any(x, dim=None, keepdim=False):
    return _as_bool(x).astype("int32").max(axis=_dims(x, dim), keepdims=keepdim) != 0


@_reg(aten.all.dim, aten.all.default)
def _all(x, dim=None, keepdim=False):
    return _as_bool(x).astype("int32").min(axis=_dims(x, dim), keepdims=keepdim) != 0


# ----- matrix products --------------------------------------------------------------------------

def _tf32(flag: bool) -> bool:
    """TF32 where PyTorch would use it: on CUDA, as its flag for the op's kind says
    (``torch.backends.cuda.matmul.allow_tf32`` for matrix products, default off;
    ``torch.backends.cudnn.allow_tf32`` for convolutions, default on)."""
    return flag and CTX.executor is not None and CTX.executor.backend == "cuda"


def _matmul(a, b):
    return hg.matmul(a, b, tf32=_tf32(torch.backends.cuda.matmul.allow_tf32))


TABLE[aten.mm.default] = _matmul
TABLE[aten.bmm.default] = _matmul


@_reg(aten.addmm.default)
def _addmm(bias, a, b, beta=1, alpha=1):
    p = _matmul(a, b)
    if alpha != 1:
        p = p * alpha
    return p + (bias if beta == 1 else bias * beta)


# ----- nn ops -----------------------------------------------------------------------------------

@_reg(aten._softmax.default)
def _softmax(x, dim, half_to_float=False):
    return x.softmax(dim)


@_reg(aten._log_softmax.default)
def _log_softmax(x, dim, half_to_float=False):
    return x.log_softmax(dim)


@_reg(aten._softmax_backward_data.default)
def _softmax_backward(grad, out, dim, input_dtype):
    return hg.autograd.softmax_backward(grad, out, int(dim), False)


@_reg(aten._log_softmax_backward_data.default)
def _log_softmax_backward(grad, out, dim, input_dtype):
    return hg.autograd.softmax_backward(grad, out, int(dim), True)


@_reg(attention.sdpa_op)
def _sdpa(q, k, v, is_causal, scale, save_probs):
    """``hologram::sdpa``: the core attention op (q, k, v read in place whatever their strides;
    the output a ``[B, H, L, D]`` view of ``[B, L, H, D]`` storage)."""
    tf32 = _tf32(torch.backends.cuda.matmul.allow_tf32)
    out, probs = hg.nn.attention(q, k, v, bool(is_causal), float(scale), tf32, bool(save_probs))
    # Without save_probs nothing reads the probabilities (attention.drop_unused_probabilities).
    return out, probs


@_reg(attention.sdpa_backward_op)
def _sdpa_backward(grad, q, k, v, probs, scale):
    tf32 = _tf32(torch.backends.cuda.matmul.allow_tf32)
    dq, dk, dv = hg.autograd.attention_backward(grad, q, k, v, probs, float(scale), tf32)
    return dq, dk, dv


@_reg(aten.gelu_backward.default)
def _gelu_backward(grad, x, approximate="none"):
    if approximate != "none":
        raise NoLowering("the backward of tanh-approximated GELU")
    return hg.autograd.activation_backward("gelu", grad, x)


@_reg(aten.native_layer_norm.default)
def _layer_norm(x, normalized_shape, weight, bias, eps):
    y, mean, rstd = hg.nn.layer_norm_stats(x, len(normalized_shape), weight, bias, float(eps))
    return y, mean, rstd


@_reg(aten.native_layer_norm_backward.default)
def _layer_norm_backward(grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    dx, dw, db = hg.autograd.layer_norm_backward_stats(grad, x, len(normalized_shape), mean, rstd, weight)
    wrap = lambda t, keep: t if keep and t is not None else None  # noqa: E731
    if output_mask[2] and db is None and bias is not None:
        db = grad.sum(axis=list(range(grad.ndim - len(normalized_shape))))
    return wrap(dx, output_mask[0]), wrap(dw, output_mask[1]), wrap(db, output_mask[2])


# ----- indexing ---------------------------------------------------------------------------------

TABLE[aten.gather.default] = lambda x, dim, index, sparse_grad=False: x.gather(dim, index)
TABLE[aten.scatter.value] = lambda x, dim, index, value: x.scatter(dim, index, value)
TABLE[aten.scatter.src] = lambda x, dim, index, src: x.scatter(dim, index, src)
TABLE[aten.scatter_add.default] = lambda x, dim, index, src: x.scatter_add(dim, index, src)
TABLE[aten.index_select.default] = lambda x, dim, index: x.index_select(dim, index)


@_reg(aten.embedding.default)
def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    rows = weight.index_select(0, indices.reshape(-1))
    return rows.reshape(*indices.shape, weight.shape[1])


def _single_index(indices):
    live = [(i, t) for i, t in enumerate(indices) if t is not None]
    if len(live) != 1 or live[0][0] != 0:
        raise NoLowering("indexing with several index tensors, or not on the first axis")
    idx = live[0][1]
    if idx.dtype == hg.bool_:
        raise NoLowering("boolean-mask indexing (data-dependent shape)")
    return idx


@_reg(aten.index.Tensor)
def _index(x, indices):
    live = [i for i, t in enumerate(indices) if t is not None]
    if any(indices[i].dtype == hg.bool_ for i in live):
        raise NoLowering("boolean-mask indexing (data-dependent shape)")
    if live == [0]:
        idx = indices[0]
        rows = x.index_select(0, idx.reshape(-1))
        return rows.reshape(*idx.shape, *x.shape[1:])
    if live != list(range(live[0], live[-1] + 1)):
        raise NoLowering("advanced indexing with index tensors separated by slices")
    # Adjacent index tensors: broadcast them, turn them into one index into the indexed
    # dimensions taken together, pick rows of x with those dimensions moved to the front, and put
    # the result's dimensions where the first indexed one was.
    idx = [indices[i] for i in live]
    bshape = list(torch.broadcast_shapes(*[tuple(t.shape) for t in idx]))
    linear = None
    for i, t in zip(live, idx):
        t = _expand(t.astype("int64"), bshape) if list(t.shape) != bshape else t.astype("int64")
        n = x.shape[i]
        t = hg.where(t < 0, t + n, t)
        linear = t if linear is None else linear * n + t
    rest = [d for d in range(x.ndim) if d not in live]
    moved = x.permute(*live, *rest)
    rows = 1
    for i in live:
        rows *= x.shape[i]
    rest_shape = [x.shape[d] for d in rest]
    flat = moved.reshape(rows, -1) if rest else moved.reshape(rows, 1)
    picked = flat.index_select(0, linear.reshape(-1)).reshape(*bshape, *rest_shape)
    # Result dimensions: rest[:live[0]] + bshape + rest[live[0]:]
    nb, lead = len(bshape), live[0]
    order = list(range(nb, nb + lead)) + list(range(nb)) + list(range(nb + lead, nb + len(rest)))
    return picked.permute(*order) if order != list(range(len(order))) else picked


@_reg(aten.index_put.default)
def _index_put(x, indices, values, accumulate=False):
    idx = _single_index(indices).reshape(-1)
    rest = tuple(x.shape[1:])
    vals = values.reshape(idx.shape[0], *rest) if values.size == idx.shape[0] * math.prod(rest) else values
    full_idx = idx.reshape(idx.shape[0], *([1] * len(rest))).expand([idx.shape[0], *rest])
    if vals.shape != full_idx.shape:
        vals = vals.expand(list(full_idx.shape))
    return x.scatter_add(0, full_idx, vals) if accumulate else x.scatter(0, full_idx, vals)


# ----- convolution and pooling ------------------------------------------------------------------

def _pair(v):
    return [int(v[0]), int(v[-1])] if isinstance(v, (list, tuple)) else [int(v), int(v)]


@_reg(aten.convolution.default)
def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        raise NoLowering("transposed convolution")
    if x.ndim != 4:
        raise NoLowering(f"a {x.ndim - 2}-D convolution (2-D is supported)")
    return hg.nn.conv2d(x, w, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups),
                        _tf32(torch.backends.cudnn.allow_tf32))


@_reg(aten.convolution_backward.default)
def _convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                          groups, output_mask):
    if transposed or x.ndim != 4:
        raise NoLowering("the backward of a transposed or non-2-D convolution")
    dx, dw, db = hg.autograd.conv2d_backward(grad, x, w, _pair(stride), _pair(padding), _pair(dilation), int(groups),
                                             [bool(m) for m in output_mask], _tf32(torch.backends.cudnn.allow_tf32))
    return dx, dw, db


def _pool_weight(x, kernel):
    kh, kw = kernel
    return hg.full((x.shape[1], 1, kh, kw), 1.0 / (kh * kw), dtype=x.dtype, device=CTX.executor)


@_reg(aten.avg_pool2d.default)
def _avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    kernel = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel
    pad = _pair(padding)
    if ceil_mode or divisor_override or (any(pad) and not count_include_pad):
        raise NoLowering("avg_pool2d with ceil_mode, a divisor override, or padding not counted")
    return hg.nn.conv2d(x, _pool_weight(x, kernel), None, stride, pad, [1, 1], x.shape[1])


@_reg(aten.avg_pool2d_backward.default)
def _avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kernel = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel
    pad = _pair(padding)
    if ceil_mode or divisor_override or (any(pad) and not count_include_pad):
        raise NoLowering("avg_pool2d backward with ceil_mode, a divisor override, or padding not counted")
    dx, _, _ = hg.autograd.conv2d_backward(grad, x, _pool_weight(x, kernel), stride, pad, [1, 1], x.shape[1],
                                           [True, False, False])
    return dx


def _pool_out(n, k, pad, stride, dil, ceil_mode):
    """PyTorch's pooling output size."""
    span = dil * (k - 1) + 1
    out = (n + 2 * pad - span + ((stride - 1) if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= n + pad:
        out -= 1
    return out


def _pool_args(kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _pair(kernel_size)
    return kernel, _pair(stride) if stride else kernel, _pair(padding), _pair(dilation), bool(ceil_mode)


def _output_used(i):
    """True unless the node being lowered is known to have no user of its output ``i`` (a
    multi-output op then need not compute it)."""
    node = CTX.node
    if node is None:
        return True
    return any(u.target is not operator.getitem or u.args[1] == i for u in node.users)


@_reg(aten.max_pool2d_with_indices.default)
def _max_pool2d(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """(values, flat indices into each input plane) from one pooling kernel that reads each
    window straight from the input (the first maximum winning and NaN propagating, as in
    PyTorch); the indices only when the graph reads them (a training graph saves them for the
    backward, an inference graph drops them)."""
    if not _is_float(x):
        raise NoLowering("max_pool2d of an integer tensor")
    if x.ndim not in (3, 4):
        raise NoLowering(f"max_pool2d of a {x.ndim}-D tensor")
    y, idx = hg.nn.max_pool2d(x, *_pool_args(kernel_size, stride, padding, dilation, ceil_mode), _output_used(1))
    return y, idx


@_reg(aten.max_pool2d_with_indices_backward.default)
def _max_pool2d_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each input element's gradient: the sum of the output gradients whose index names it."""
    if grad.ndim not in (3, 4):
        raise NoLowering(f"max_pool2d backward of a {grad.ndim}-D tensor")
    return hg.autograd.max_pool2d_backward(
        grad, indices, list(x.shape), *_pool_args(kernel_size, stride, padding, dilation, ceil_mode))


@_reg(aten.constant_pad_nd.default)
def _pad(x, pad, value=0.0):
    # pad lists (before, after) pairs from the last dimension backwards.
    shape = list(x.shape)
    src = x
    starts = [0] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        if before < 0:
            src = _slice(src, d, -before, None)
            before = 0
        if after < 0:
            src = _slice(src, d, 0, src.shape[d] + after)
            after = 0
        starts[d] = before
        shape[d] = src.shape[d] + before + after
    out = hg.full(tuple(shape), value, dtype=x.dtype, device=CTX.executor).realize()
    view = out
    for d in range(x.ndim):
        if starts[d] or view.shape[d] != src.shape[d]:
            view = view.slice(d, starts[d], starts[d] + src.shape[d], 1)
    src.copy_into(view)
    return out


# ----- recurrent cells (CUDA's LSTM without cuDNN runs these) ------------------------------------

def _gates(g):
    """The four gate blocks of an LSTM's [B, 4H] pre-activations: input, forget, cell, output."""
    h = g.shape[1] // 4
    return [_slice(g, 1, k * h, (k + 1) * h) for k in range(4)]


@_reg(aten._thnn_fused_lstm_cell.default)
def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    for b in (input_bias, hidden_bias):
        if b is not None:
            gates = gates + b
    i, f, g, o = _gates(gates)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    # The workspace the backward reads: the activated gates.
    return hy, cy, hg.concat([i, f, g, o], axis=1)


@_reg(aten._thnn_fused_lstm_cell_backward_impl.default)
def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = _gates(workspace)
    tanh_cy = cy.tanh()
    grad_c = grad_cy if grad_cy is not None else hg.zeros(tuple(cy.shape), dtype=cy.dtype, device=CTX.executor)
    if grad_hy is not None:
        grad_o = grad_hy * tanh_cy * o * (1.0 - o)
        grad_c = grad_c + grad_hy * o * (1.0 - tanh_cy * tanh_cy)
    else:
        grad_o = hg.zeros(tuple(o.shape), dtype=o.dtype, device=CTX.executor)
    grad_i = grad_c * g * i * (1.0 - i)
    grad_f = grad_c * cx * f * (1.0 - f)
    grad_g = grad_c * i * (1.0 - g * g)
    grad_gates = hg.concat([grad_i, grad_f, grad_g, grad_o], axis=1)
    return grad_gates, grad_c * f, grad_gates.sum(axis=0) if has_bias else None


# ----- prims (from torch's decompositions) -------------------------------------------------------

prims = torch.ops.prims
TABLE[prims.sum.default] = lambda x, dims, output_dtype=None: _sum_like("sum")(x, list(dims), False, output_dtype)
TABLE[prims.div.default] = lambda a, b: _div_mode(a, b, None if _is_float(a) or _is_float(b) else "trunc")


def _is_float(v):
    return isinstance(v, float) or (_is_t(v) and v.dtype in (hg.float16, hg.float32, hg.float64, hg.bfloat16))


@_reg(prims.var.default)
def _var(x, dims, correction, output_dtype=None):
    dims = list(dims) if dims else list(range(x.ndim))
    mean = x.mean(axis=dims, keepdims=True)
    d = x - mean
    n = 1
    for a in dims:
        n *= x.shape[a]
    return (d * d).sum(axis=dims) / max(n - correction, 0)


@_reg(prims.broadcast_in_dim.default)
def _broadcast_in_dim(x, shape, broadcast_dimensions):
    view = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        view[d] = x.shape[i]
    return _expand(x.reshape(*view), list(shape))


# ----- random numbers (seeded by the plan's seed input, new at every call) -----------------------

# Ops that draw random numbers: a graph with one gets a seed input.
RANDOM_OPS = {aten.bernoulli.p, aten.bernoulli.default, aten.rand.default, aten.randn.default,
              aten.rand_like.default, aten.randn_like.default}


def _rand(shape, normal, dtype):
    return CTX.salt().rand_seeded([int(s) for s in shape], normal, str(dtype))


@_reg(aten.bernoulli.p)
def _bernoulli(x, p=0.5, generator=None):
    if generator is not None:
        raise NoLowering("bernoulli with an explicit generator")
    return (_rand(x.shape, False, "float32") < p).astype(x.dtype)


@_reg(aten.bernoulli.default)
def _bernoulli_t(x, generator=None):
    if generator is not None:
        raise NoLowering("bernoulli with an explicit generator")
    return (_rand(x.shape, False, "float32") < x).astype(x.dtype)


TABLE[aten.rand.default] = lambda size, dtype=None, **k: _rand(size, False, _dtype(dtype) or "float32")
TABLE[aten.randn.default] = lambda size, dtype=None, **k: _rand(size, True, _dtype(dtype) or "float32")
TABLE[aten.rand_like.default] = lambda x, dtype=None, **k: _rand(x.shape, False, _dtype(dtype) or x.dtype)
TABLE[aten.randn_like.default] = lambda x, dtype=None, **k: _rand(x.shape, True, _dtype(dtype) or x.dtype)


# ----- sizes (static shapes: plain ints) ---------------------------------------------------------

TABLE[aten.sym_size.int] = lambda x, d: x.shape[d]
TABLE[operator.getitem] = lambda x, i: x[i]
TABLE[aten.sym_numel.default] = lambda x: x.size

