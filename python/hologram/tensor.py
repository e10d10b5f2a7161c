"""``hologram.Tensor``: an array with NumPy/array-API naming, lazy fused element-wise ops,
device placement and DLPack."""

from __future__ import annotations

import threading
from typing import Any, Sequence, Union

import numpy as np

from . import _native
from ._dtypes import DTypeLike, native_name, public_dtype
from .errors import ValidationError
from .executor import Executor, _to_numpy

#: A device: ``None``/``'auto'``, a name (``'cpu'``, ``'cuda:1'``, ...) or an :class:`Executor`.
Device = Union[str, Executor, None]
#: The other operand of an element-wise op: a tensor or a number.
Operand = Union["Tensor", float, int, bool]
#: Reduction axes: all (``None``), one, or several.
Axis = Union[int, Sequence[int], None]

_executors: dict[str, Executor] = {}
_lock = threading.Lock()


def executor_for(device: Device = None) -> Executor:
    """The shared executor of a device (``None``/``'auto'``: the best available; ``'cpu'``,
    ``'cuda'``, ``'vulkan'``, ...; or an :class:`Executor`)."""
    if isinstance(device, Executor):
        return device
    key = "auto" if device is None else str(device).strip()
    if key in ("cuda:0", "cpu:0"):
        key = key[:-2]
    with _lock:
        ex = _executors.get(key)
        if ex is None:
            ex = Executor(key)
            _executors[key] = ex
            if ":" not in key:
                _executors.setdefault(ex.backend, ex)
        return ex


def _as_tensor_like(x: Operand, like: Tensor) -> Tensor:
    """``x`` as a tensor on ``like``'s device (numbers become 0-d tensors of its dtype)."""
    if isinstance(x, Tensor):
        return x
    return full((), x, dtype=like.dtype, device=like.executor)


class Tensor(_native.TensorBase):
    """An n-dimensional array on a device. Element-wise operations are recorded lazily and run
    as one fused kernel when the result is needed (printing, ``.numpy()``, a reduction, ...).

    ``Tensor(data, dtype=None, device=None)`` makes one from what :func:`asarray` takes. The
    operators, comparisons, unary math (``exp``, ``relu``, ...), ``realize``, ``sum`` and
    ``item`` are methods of the native base class: each is one native call.

    >>> import hologram as hg
    >>> a = hg.asarray([1.0, -2.0, 3.0], device='cpu')
    >>> (a.relu() * 2).tolist()
    [2.0, 0.0, 6.0]
    """

    __slots__ = ()
    __array_priority__ = 100

    @classmethod
    def _wrap(cls, t: _native.Tensor) -> Tensor:
        return cls(t)

    def __copy__(self) -> Tensor:
        """Another Tensor over the same native tensor (a tensor's elements change only through
        explicit writes: ``x[...] = v``, ``copy_into``)."""
        return Tensor(self._t)

    # ----- metadata -----
    @property
    def shape(self) -> tuple:
        return tuple(self._t.shape)

    @property
    def dtype(self) -> np.dtype | str:
        """A NumPy dtype (or ``'bfloat16'``)."""
        return public_dtype(self._t.dtype)

    @property
    def ndim(self) -> int:
        return len(self._t.shape)

    @property
    def size(self) -> int:
        return self._t.numel

    @property
    def device(self) -> str:
        """The device the tensor lives on: the backend (``'cpu'``, ``'cuda'``, ...), with the
        GPU's index past the first (``'cuda:1'``)."""
        e = self._t.executor
        return e.backend if e.device_index == 0 else e.device

    @property
    def executor(self) -> Executor:
        return executor_for(self.device)

    def __len__(self) -> int:
        if not self._t.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._t.shape[0]

    # ----- conversion -----
    def numpy(self) -> np.ndarray:
        """A NumPy array: zero-copy on host memory, else a copy."""
        return _to_numpy(self._t)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def tolist(self) -> Any:
        """The contents as (nested) Python lists of numbers."""
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self._t.item())

    def __int__(self) -> int:
        return int(self._t.item())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("the truth value of a tensor with more than one element is ambiguous")
        return bool(self._t.item())

    def to(self, device: Device) -> Tensor:
        """A copy on another device (itself if already there)."""
        ex = executor_for(device)
        if ex.device == self._t.executor.device:
            return self
        return Tensor._wrap(self._t.to_executor(ex._e))

    def astype(self, dtype: DTypeLike) -> Tensor:
        """A copy converted to ``dtype``."""
        return Tensor._wrap(self._t.cast(native_name(dtype)))

    @property
    def is_lazy(self) -> bool:
        """True while the tensor is a pending element-wise expression (nothing has run yet; it
        runs when its elements are needed, fused with what reads it)."""
        return bool(self._t.is_lazy)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._t.__dlpack__(stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._t.__dlpack_device__()

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", threshold=20)
        return f"Tensor({body}, dtype={self._t.dtype}, device='{self.device}')"

    # ----- element-wise -----
    # `+ - * % & | ^`, the comparisons, `-x`, `abs(x)`, `~x` and the unary math methods are the
    # native base's (one native call each); the ones with dtype rules of their own are here.
    def _bin(self, name: str, other: Operand, reverse: bool = False) -> Tensor:
        return _wrap(self._t.binary(name, other, reverse))

    def __pow__(self, o: Operand) -> Tensor: return self._as_float()._bin("pow", o)
    def __rpow__(self, o: Operand) -> Tensor: return self._as_float()._bin("pow", o, True)

    def _as_float(self) -> "Tensor":
        return self if self._t.dtype.startswith(("f", "b")) and self._t.dtype != "bool" else self.astype("float32")

    def __truediv__(self, o: Operand) -> Tensor:
        """True division (integers divide as float32, like NumPy's ``/`` gives floats)."""
        return self._as_float()._bin("div", o)

    def __rtruediv__(self, o: Operand) -> Tensor:
        return self._as_float()._bin("div", o, True)

    def __floordiv__(self, o: Operand) -> Tensor:
        if self._t.dtype.startswith(("f", "b")) and self._t.dtype != "bool":
            return (self / o).floor()
        return self._bin("div", o)

    def __pos__(self) -> Tensor: return self

    def __matmul__(self, o: Operand) -> Tensor: return matmul(self, o)
    def __rmatmul__(self, o: Operand) -> Tensor: return matmul(asarray(o, device=self.executor), self)

    # The native base compares element-wise (``==`` gives a tensor); tensors hash by identity.
    __hash__ = object.__hash__

    def clip(self, min: float | None = None, max: float | None = None) -> Tensor:
        """Each element limited to ``[min, max]`` (either bound may be left out)."""
        return Tensor._wrap(self._t.clip(None if min is None else float(min), None if max is None else float(max)))

    clamp = clip

    # ----- reductions -----
    # `axis`: None, an int or a sequence of ints, handed to the native side as it is.
    def mean(self, axis: Axis = None, keepdims: bool = False) -> Tensor: return _wrap(self._t.reduce("mean", axis, keepdims))
    def prod(self, axis: Axis = None, keepdims: bool = False) -> Tensor: return _wrap(self._t.reduce("prod", axis, keepdims))
    def max(self, axis: Axis = None, keepdims: bool = False) -> Tensor: return _wrap(self._t.reduce("max", axis, keepdims))
    def min(self, axis: Axis = None, keepdims: bool = False) -> Tensor: return _wrap(self._t.reduce("min", axis, keepdims))
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor: return Tensor._wrap(self._t.argmax(axis, keepdims, False))
    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor: return Tensor._wrap(self._t.argmax(axis, keepdims, True))

    # ----- indexing by tensors -----
    def gather(self, axis: int, index: "Tensor") -> "Tensor":
        """``out[c] = self[c with c[axis] = index[c]]`` (PyTorch's ``gather``)."""
        return Tensor._wrap(self._t.gather(int(axis), index._t))

    def index_select(self, axis: int, index: "Tensor") -> "Tensor":
        """Slices along ``axis`` picked by a 1-D integer index (an embedding lookup)."""
        return Tensor._wrap(self._t.index_select(int(axis), index._t))

    def scatter(self, axis: int, index: Tensor, src: Operand) -> Tensor:
        """A copy with ``src`` stored where ``index`` points along ``axis``."""
        return Tensor._wrap(self._t.scatter(int(axis), index._t, _as_tensor_like(src, self)._t, False))

    def scatter_add(self, axis: int, index: Tensor, src: Operand) -> Tensor:
        """A copy with ``src`` added where ``index`` points along ``axis``."""
        return Tensor._wrap(self._t.scatter(int(axis), index._t, _as_tensor_like(src, self)._t, True))

    def softmax(self, axis: int = -1) -> Tensor: return Tensor._wrap(self._t.softmax(int(axis)))
    def log_softmax(self, axis: int = -1) -> Tensor: return Tensor._wrap(self._t.log_softmax(int(axis)))

    # ----- shape -----
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """The same elements in ``shape`` (one dimension may be ``-1``); a view when possible."""
        return Tensor._wrap(self._t.reshape(_ints(shape)))

    view = reshape

    def flatten(self) -> Tensor:
        """A 1-D tensor of the elements."""
        return self.reshape(-1)

    def permute(self, *dims: int | Sequence[int]) -> Tensor:
        """A view with the axes in the order ``dims``."""
        return Tensor._wrap(self._t.permute([d % max(self.ndim, 1) for d in _ints(dims)]))

    def transpose(self, a: int = -2, b: int = -1) -> Tensor:
        """A view with axes ``a`` and ``b`` swapped."""
        return Tensor._wrap(self._t.transpose(int(a), int(b)))

    @property
    def T(self) -> Tensor:
        """All dimensions reversed (the transpose of a matrix)."""
        return self.permute(list(range(self.ndim))[::-1]) if self.ndim > 1 else self

    @property
    def mT(self) -> Tensor:
        """The last two axes swapped (a batch of matrices transposed)."""
        return self.transpose(-2, -1)

    def unsqueeze(self, dim: int) -> Tensor: return Tensor._wrap(self._t.unsqueeze(int(dim)))
    def squeeze(self, dim: int) -> Tensor: return Tensor._wrap(self._t.squeeze(int(dim)))
    def expand(self, *shape: int | Sequence[int]) -> Tensor:
        """A view broadcast to ``shape`` (size-1 axes repeated without copying)."""
        return Tensor._wrap(self._t.expand(_ints(shape)))

    def contiguous(self) -> Tensor: return Tensor._wrap(self._t.contiguous())

    def slice(self, axis: int, start: int, stop: int, step: int = 1) -> "Tensor":
        """A view of ``start:stop:step`` along ``axis`` (no copy; ``step`` positive)."""
        return _wrap(self._t.slice(int(axis), int(start), int(stop), int(step)))

    def maximum(self, other: "Tensor | float") -> "Tensor":
        """The element-wise maximum with a tensor or a number (broadcast)."""
        return _wrap(self._t.binary("maximum", other))

    def minimum(self, other: "Tensor | float") -> "Tensor":
        """The element-wise minimum with a tensor or a number (broadcast)."""
        return _wrap(self._t.binary("minimum", other))

    def copy_into(self, out: "Tensor") -> None:
        """Writes this tensor (broadcast and converted to ``out``'s dtype) into ``out``, which
        may be any view (a slice of a larger tensor, a plan's input): ``out[...] = self``."""
        self._t.copy_into(out._t)

    @staticmethod
    def realize_all(values: "Sequence[Tensor]") -> None:
        """Runs the pending expressions of ``values``: those of one shape computed from shared
        inputs (a pre-activation and its activation) as one kernel with an output each. Each
        then stands for its stored result, as after :meth:`realize`."""
        _native.Tensor.realize_all([v._t for v in values])
        for v in values:
            v.realize()

    @staticmethod
    def assign_all(values: "Sequence[Tensor]", destinations: "Sequence[Tensor]") -> None:
        """Overwrites each of ``destinations`` with the matching one of ``values``, every value
        computed from the old contents of all destinations (a parallel assignment, as
        ``a, b = f(a, b), g(a, b)``): an optimizer's update of parameters and state. Values
        that read their destination only at the element they write run straight into it."""
        _native.Tensor.assign_all([v._t for v in values], [d._t for d in destinations])

    def rand_seeded(self, shape: "Sequence[int]", normal: bool = False, dtype: object = "float32") -> "Tensor":
        """Random numbers of ``shape`` (uniform in [0, 1), or standard normal with ``normal``)
        seeded by the value of this one-element integer tensor: unlike :func:`rand`, the seed
        is device data, so a recorded :class:`hologram.Plan` draws new numbers when it is
        replayed with a new seed."""
        return _wrap(self._t.rand_seeded([int(s) for s in shape], bool(normal), native_name(dtype)))

    def __getitem__(self, key: Any) -> Tensor:
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            fill = self.ndim - (len(key) - 1 - sum(1 for k in key if k is None))
            key = key[:i] + (slice(None),) * (fill - sum(1 for k in key[:i] if k is not None)) + key[i + 1:]
        t = self._t
        dim = 0
        for k in key:
            if k is None:
                t = t.unsqueeze(dim)
                dim += 1
            elif isinstance(k, (int, np.integer)):
                n = t.shape[dim]
                i = int(k) + n if k < 0 else int(k)
                if not 0 <= i < n:
                    raise IndexError(f"index {k} is out of range for dimension {dim} of size {n}")
                t = t.slice(dim, i, i + 1, 1).squeeze(dim)
            elif isinstance(k, slice):
                start, stop, step = k.indices(t.shape[dim])
                if step <= 0:
                    raise ValidationError("negative slice steps are not supported")
                t = t.slice(dim, start, max(start, stop), step)
                dim += 1
            else:
                raise TypeError(f"unsupported index {k!r}")
        return Tensor._wrap(t)

    def __setitem__(self, key: Any, value: Any) -> None:
        target = self[key]
        src = value if isinstance(value, Tensor) else asarray(value, dtype=self.dtype, device=self.executor)
        src._t.copy_into(target._t)


def _ints(args: tuple[Any, ...]) -> list[int]:
    """The integers of ``f(2, 3)`` and of ``f([2, 3])`` alike."""
    items = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
    return [int(s) for s in items]


#: A Tensor around a native tensor (``Tensor._wrap`` without the method lookup).
_wrap = Tensor


def asarray(obj: Any, dtype: DTypeLike = None, device: Device = None, copy: bool | None = None) -> Tensor:
    """A tensor from a Tensor, a NumPy array, a (nested) list or a scalar. Arrays are copied to
    the device in one transfer; use :func:`from_dlpack` for zero-copy import."""
    if isinstance(obj, Tensor):
        t = obj.to(device) if device is not None else obj
        return t.astype(dtype) if dtype is not None and native_name(dtype) != t._t.dtype else t
    ex = executor_for(device)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray) and type(obj).__module__.startswith("torch"):
        obj = obj.detach().cpu().numpy()
    a = np.asarray(obj)
    if dtype is None and a.dtype == np.float64 and not isinstance(obj, np.ndarray):
        a = a.astype(np.float32)  # Python floats become float32, as in PyTorch
    if dtype is not None:
        name = native_name(dtype)
        if name != "bf16":
            from ._dtypes import numpy_dtype

            a = a.astype(numpy_dtype(name), copy=False)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)  # (not for every array: it makes a 0-d array 1-d)
    name = native_name(a.dtype)
    native = ex._e.tensor_from_address(a.ctypes.data, a.nbytes, list(a.shape), name, a)
    if dtype is not None and native_name(dtype) != name:
        native = native.cast(native_name(dtype))
    return Tensor._wrap(native)


tensor = asarray


def zeros(shape: int | Sequence[int], dtype: DTypeLike = "float32", device: Device = None) -> Tensor:
    """A tensor of zeros."""
    return full(shape, 0, dtype, device)


def ones(shape: int | Sequence[int], dtype: DTypeLike = "float32", device: Device = None) -> Tensor:
    """A tensor of ones."""
    return full(shape, 1, dtype, device)


def full(shape: int | Sequence[int], value: float, dtype: DTypeLike = "float32", device: Device = None) -> Tensor:
    """A tensor of ``shape`` with every element ``value``."""
    dims = [int(shape)] if isinstance(shape, (int, np.integer)) else [int(s) for s in shape]
    return Tensor._wrap(executor_for(device)._e.full(dims, float(value), native_name(dtype)))


def arange(start: float, stop: float | None = None, step: float = 1, dtype: DTypeLike = None,
           device: Device = None) -> Tensor:
    """``start, start + step, ...`` below ``stop`` (``arange(n)``: ``0 .. n-1``); int64 when
    every argument is a whole number, else float32, unless ``dtype`` says."""
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = "int64" if all(float(x).is_integer() for x in (start, stop, step)) else "float32"
    return Tensor._wrap(executor_for(device)._e.arange(float(start), float(stop), float(step), native_name(dtype)))


def rand(*shape: int | Sequence[int], seed: int = 0, dtype: DTypeLike = "float32", device: Device = None) -> Tensor:
    """Uniform [0, 1) numbers, identical for a seed on every backend."""
    return Tensor._wrap(executor_for(device)._e.random(_ints(shape), int(seed), native_name(dtype), False))


def randn(*shape: int | Sequence[int], seed: int = 0, dtype: DTypeLike = "float32", device: Device = None) -> Tensor:
    """Standard normal numbers, identical for a seed on every backend."""
    return Tensor._wrap(executor_for(device)._e.random(_ints(shape), int(seed), native_name(dtype), True))


def matmul(a: Any, b: Any, tf32: bool = False) -> Tensor:
    """The matrix product (batched over leading axes, as NumPy's ``matmul``); ``tf32`` lets
    CUDA multiply float32 in TF32."""
    ta = asarray(a)
    tb = asarray(b, device=ta.executor)
    return Tensor._wrap(ta._t.matmul(tb._t, tf32))


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``cond`` is true, else ``b`` (broadcast; numbers take the other's dtype)."""
    c = asarray(cond)
    ex = c.executor
    ta = a if isinstance(a, Tensor) else asarray(a, device=ex)
    tb = b if isinstance(b, Tensor) else asarray(b, dtype=ta.dtype, device=ex)
    return Tensor._wrap(_native.Tensor.where_(c._t, ta._t, tb._t))


def concat(tensors: Sequence[Any], axis: int = 0, *, view_if_adjacent: bool = False) -> Tensor:
    """The tensors joined along ``axis``, as a new tensor. With ``view_if_adjacent``, when the
    tensors are views of one buffer lying next to each other along ``axis`` in order (the parts
    of a split), the result is the view covering them instead, sharing their memory: for code
    that never writes into the parts afterwards.

    >>> import hologram as hg
    >>> x = hg.arange(6).reshape(2, 3)
    >>> hg.concat([x[:, :1], x[:, 1:]], axis=1, view_if_adjacent=True).tolist()
    [[0, 1, 2], [3, 4, 5]]
    """
    return Tensor._wrap(_native.Tensor.cat([asarray(t)._t for t in tensors], int(axis), bool(view_if_adjacent)))


cat = concat


def from_dlpack(x: Any, device: Device = None) -> Tensor:
    """Imports a tensor from NumPy, PyTorch or CuPy through DLPack, without copying: host
    memory onto the CPU executor, CUDA memory onto the CUDA executor."""
    cpu = executor_for("cpu")
    dev = getattr(x, "__dlpack_device__", lambda: (1, 0))()[0]
    cuda = None
    if dev == 2:
        index = x.__dlpack_device__()[1]
        cuda = executor_for("cuda" if index == 0 else f"cuda:{index}")._e
    return Tensor._wrap(_native.from_dlpack(x, cpu._e, cuda))


_cpu_native: list[_native.Executor] = []  # the CPU executor's native handle, looked up once


def from_dlpack_capsule(capsule: Any, executor: Executor) -> Tensor:
    """Imports a DLPack capsule (what ``torch.utils.dlpack.to_dlpack`` returns; it is consumed)
    without copying: CUDA memory onto a CUDA ``executor``, host memory onto any other. Cheaper
    than :func:`from_dlpack` (no ``__dlpack__`` protocol calls); the caller orders the
    producer's stream (see :meth:`Executor.order_after_stream`)."""
    if not _cpu_native:
        _cpu_native.append(executor_for("cpu")._e)
    if executor.backend == "cuda":
        return _wrap(_native.from_dlpack(capsule, _cpu_native[0], executor._e))
    return _wrap(_native.from_dlpack(capsule, executor._e, None))
