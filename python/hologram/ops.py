"""The seed API's operations on buffers: ``hologram.ops.vector_add(exec, a, b, c)`` and friends.

Each call runs one fused kernel on the executor's device and writes its result into the output
buffer; ``n`` (optional) limits the work to the first ``n`` elements.
"""

from __future__ import annotations

import builtins

from .errors import ValidationError
from .executor import Buffer, Executor


def _n(n, *bufs):
    size = builtins.min(len(b) for b in bufs)
    if n is None:
        return size
    if n < 0 or n > size:
        raise ValidationError(f"n = {n} exceeds the buffers ({size} elements)")
    return int(n)


def _head(b: Buffer, n: int):
    return b._t.slice(0, 0, n, 1)


def _check(exec: Executor, *bufs):
    for b in bufs:
        if not isinstance(b, Buffer):
            raise ValidationError(f"expected a Buffer, got {type(b).__name__}")
        if b.executor.backend != exec.backend:
            raise ValidationError("the buffer belongs to another executor")


def _binary(name):
    def op(exec: Executor, a: Buffer, b: Buffer, c: Buffer, n: int | None = None) -> None:
        _check(exec, a, b, c)
        k = _n(n, a, b, c)
        _head(a, k).binary(name, _head(b, k)).copy_into(_head(c, k))

    op.__name__ = name
    op.__doc__ = f"``c = {name}(a, b)`` element-wise."
    return op


vector_add = _binary("add")
vector_sub = _binary("sub")
vector_mul = _binary("mul")
vector_div = _binary("div")
min = _binary("minimum")  # noqa: A001 - the seed API's name
max = _binary("maximum")  # noqa: A001


def _unary(name):
    def op(exec: Executor, a: Buffer, c: Buffer, n: int | None = None) -> None:
        _check(exec, a, c)
        k = _n(n, a, c)
        _head(a, k).unary(name).copy_into(_head(c, k))

    op.__name__ = name
    op.__doc__ = f"``c = {name}(a)`` element-wise."
    return op


abs = _unary("abs")  # noqa: A001
neg = _unary("neg")
relu = _unary("relu")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
gelu = _unary("gelu")
silu = _unary("silu")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")


def clip(exec: Executor, a: Buffer, c: Buffer, lo: float, hi: float, n: int | None = None) -> None:
    """``c = clamp(a, lo, hi)``."""
    _check(exec, a, c)
    k = _n(n, a, c)
    _head(a, k).clip(float(lo), float(hi)).copy_into(_head(c, k))


def scalar_add(exec: Executor, a: Buffer, scalar: float, c: Buffer, n: int | None = None) -> None:
    """``c = a + scalar``."""
    _check(exec, a, c)
    k = _n(n, a, c)
    _head(a, k).binary("add", float(scalar)).copy_into(_head(c, k))


def scalar_mul(exec: Executor, a: Buffer, scalar: float, c: Buffer, n: int | None = None) -> None:
    """``c = a * scalar``."""
    _check(exec, a, c)
    k = _n(n, a, c)
    _head(a, k).binary("mul", float(scalar)).copy_into(_head(c, k))


def _reduction(name):
    def op(exec: Executor, a: Buffer, out: Buffer | None = None, n: int | None = None) -> float:
        bufs = (a,) if out is None else (a, out)
        _check(exec, *bufs)
        k = _n(n, a)
        r = _head(a, k).reduce(name, [], False)
        if out is not None:
            r.reshape([1]).copy_into(_head(out, 1))
        return r.item()

    op.__name__ = name
    op.__doc__ = f"The {name} of the first ``n`` elements (also written to ``out[0]`` if given)."
    return op


sum = _reduction("sum")  # noqa: A001
reduce_sum = sum
reduce_min = _reduction("min")
reduce_max = _reduction("max")
mean = _reduction("mean")


def softmax(exec: Executor, a: Buffer, c: Buffer, n: int | None = None) -> None:
    """``c = softmax(a)`` over the first ``n`` elements."""
    _check(exec, a, c)
    k = _n(n, a, c)
    _head(a, k).softmax(-1).copy_into(_head(c, k))


def gemm(exec: Executor, a: Buffer, b: Buffer, c: Buffer, m: int, n: int, k: int) -> None:
    """``c[m×n] = a[m×k] · b[k×n]`` on row-major buffers (cuBLAS on CUDA)."""
    _check(exec, a, b, c)
    if len(a) < m * k or len(b) < k * n or len(c) < m * n:
        raise ValidationError(f"gemm {m}x{k} @ {k}x{n} does not fit the buffers ({len(a)}, {len(b)}, {len(c)})")
    at = _head(a, m * k).reshape([m, k])
    bt = _head(b, k * n).reshape([k, n])
    at.matmul(bt, False).reshape([-1]).copy_into(_head(c, m * n))


def matvec(exec: Executor, a: Buffer, x: Buffer, y: Buffer, m: int, n: int) -> None:
    """``y[m] = a[m×n] · x[n]``."""
    _check(exec, a, x, y)
    at = _head(a, m * n).reshape([m, n])
    at.matmul(_head(x, n), False).copy_into(_head(y, m))


def _loss(name):
    def op(exec: Executor, pred: Buffer, target: Buffer, out: Buffer | None = None, n: int | None = None) -> float:
        bufs = (pred, target) if out is None else (pred, target, out)
        _check(exec, *bufs)
        k = _n(n, pred, target)
        r = _head(pred, k).loss(name, _head(target, k))
        if out is not None:
            r.reshape([1]).copy_into(_head(out, 1))
        return r.item()

    op.__name__ = name
    return op


mse = _loss("mse")
mse.__doc__ = "Mean squared error of the first ``n`` elements (also written to ``out[0]``)."
binary_cross_entropy = _loss("binary_cross_entropy")
binary_cross_entropy.__doc__ = "Mean binary cross-entropy of probabilities against 0/1 targets."


def cross_entropy(exec: Executor, logits: Buffer, targets: Buffer, out: Buffer | None = None, batch: int | None = None, classes: int | None = None) -> float:
    """Mean cross-entropy of ``batch`` rows of ``classes`` logits against class indexes."""
    bufs = (logits, targets) if out is None else (logits, targets, out)
    _check(exec, *bufs)
    batch = len(targets) if batch is None else batch
    classes = len(logits) // max(batch, 1) if classes is None else classes
    lt = _head(logits, batch * classes).reshape([batch, classes])
    r = lt.loss("cross_entropy", _head(targets, batch).cast("i64"))
    if out is not None:
        r.reshape([1]).copy_into(_head(out, 1))
    return r.item()


def copy(exec: Executor, src: Buffer, dst: Buffer, n: int | None = None) -> None:
    """``dst[:n] = src[:n]``."""
    _check(exec, src, dst)
    k = _n(n, src, dst)
    _head(src, k).copy_into(_head(dst, k))


def fill(exec: Executor, buf: Buffer, value: float, n: int | None = None) -> None:
    """``buf[:n] = value``."""
    _check(exec, buf)
    k = _n(n, buf)
    exec._e.full([k], float(value), buf._t.dtype).copy_into(_head(buf, k))


class _Namespace:
    def __init__(self, **kw):
        self.__dict__.update(kw)


math = _Namespace(vector_add=vector_add, vector_sub=vector_sub, vector_mul=vector_mul, vector_div=vector_div,
                  min=min, max=max, abs=abs, neg=neg, relu=relu, clip=clip, scalar_add=scalar_add, scalar_mul=scalar_mul)
reduce = _Namespace(sum=sum, min=reduce_min, max=reduce_max)
activation = _Namespace(sigmoid=sigmoid, tanh=tanh, gelu=gelu, softmax=softmax)
loss = _Namespace(mse=mse, cross_entropy=cross_entropy, binary_cross_entropy=binary_cross_entropy)
linalg = _Namespace(gemm=gemm, matvec=matvec)
memory = _Namespace(copy=copy, fill=fill)
