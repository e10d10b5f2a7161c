"""The seed API: ``Executor``, ``Executor.allocate`` and ``Buffer``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

import numpy as np

from . import _native
from ._dtypes import DTypeLike, native_name, numpy_dtype, public_dtype
from .errors import ValidationError


if TYPE_CHECKING:
    from .program import Program
    from .tensor import Tensor


class Executor:
    """Runs kernels on one backend.

    ``backend`` is ``'auto'`` (``HOLOGRAM_BACKEND``, else CUDA, a hardware GPU, else the CPU),
    ``'cpu'``, ``'cuda'``, ``'cuda:N'`` (the N-th GPU), ``'metal'``, ``'vulkan'`` or ``'dx12'``. A backend that cannot run
    here raises :class:`hologram.BackendUnavailableError` saying why.

    >>> import hologram as hg, numpy as np
    >>> ex = hg.Executor(backend='cpu')
    >>> a = ex.allocate(4, dtype=np.float32); a.from_numpy(np.arange(4, dtype=np.float32))
    >>> a.to_numpy().tolist()
    [0.0, 1.0, 2.0, 3.0]
    """

    def __init__(self, backend: "str | _native.Executor" = "auto") -> None:
        self._e = backend if isinstance(backend, _native.Executor) else _native.Executor(str(backend))

    @property
    def backend(self) -> str:
        """The backend's name."""
        return self._e.backend

    @property
    def device(self) -> str:
        """The device: ``'cuda:1'``, ``'cpu:0'``, ..."""
        return self._e.device

    @property
    def device_index(self) -> int:
        """Which of the backend's devices (the CUDA GPU's index; 0 elsewhere)."""
        return self._e.device_index

    @property
    def backend_type(self) -> str:
        """Alias of :attr:`backend`."""
        return self._e.backend

    def info(self) -> dict:
        """The device: name, architecture, memory, compute units, driver."""
        return self._e.info()

    def stats(self) -> dict:
        """Counters: the allocator (``allocations``, ``cache_hits``, ``bytes_in_use``, ...), the
        kernel cache (``kernels_compiled``, ``kernel_cache_hits``; ``launch_cache_hits``: repeated
        element-wise launches that skipped building their kernel), the backend's compiler and
        disk cache (``backend_compiles``, ``disk_cache_hits``, ``disk_cache_writes``,
        ``code_bytes``), the launch paths (``library_launches`` for recognized patterns and
        vendor libraries, ``generic_launches``) and ``launches``."""
        return self._e.stats()

    def synchronize(self) -> None:
        """Waits for all submitted work."""
        self._e.synchronize()

    def order_after_stream(self, stream: int) -> None:
        """Makes the executor's later work wait for what is queued now on another CUDA stream
        (``stream``: a ``cudaStream_t`` handle, as ``torch.cuda.current_stream().cuda_stream``),
        without blocking the host (a no-op off CUDA). Call it before reading memory another library
        writes."""
        self._e.order_after_stream(int(stream))

    def order_before_stream(self, stream: int) -> None:
        """Makes another CUDA stream's later work wait for what the executor has queued now,
        without blocking the host (a no-op off CUDA). Call it before handing results to another
        library."""
        self._e.order_before_stream(int(stream))

    def empty_cache(self) -> None:
        """Returns cached free memory to the device."""
        self._e.empty_cache()

    def allocate(self, n: int, dtype: DTypeLike = np.float32) -> "Buffer":
        """A buffer of ``n`` elements of ``dtype`` (zero-filled)."""
        if not isinstance(n, (int, np.integer)) or n < 0:
            raise ValidationError(f"allocate needs a non-negative element count, got {n!r}")
        name = native_name(dtype)
        return Buffer(self._e.full([int(n)], 0.0, name), self)

    def run(self, program: "str | Program", grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]] = 256,
            args: Mapping[str, Any] | None = None, bounds_checks: bool = True) -> None:
        """Runs an Atlas ISA program (:func:`hologram.asm`) with ``args`` mapping every
        parameter name to a Buffer/Tensor or a number.

        ``bounds_checks=False`` skips the checks of buffer accesses on GPUs. Pass it only for
        programs known to index inside their buffers for these arguments: an out-of-bounds
        access is then undefined behaviour on CUDA (it may read or corrupt other memory of the
        process, as with ctypes)."""
        from .program import Program

        if isinstance(program, str):
            program = Program(program)

        def as_list(v: Union[int, Sequence[int]]) -> list[int]:
            items: list[Any] = list(v) if isinstance(v, (list, tuple)) else [v]
            return [int(x) for x in items]

        self._e.run(program._p, as_list(grid), as_list(block), dict(args or {}), bounds_checks)

    def __repr__(self) -> str:
        return repr(self._e)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Executor) and other._e.info() == self._e.info() and other.backend == self.backend

    __hash__ = object.__hash__


class _HostView:
    """Keeps a tensor alive while NumPy views its host memory."""

    def __init__(self, t: _native.Tensor, interface: dict) -> None:
        self._t = t
        self.__array_interface__ = interface


class Buffer:
    """``n`` elements of one dtype on an executor's device (the seed API's buffer)."""

    def __init__(self, t: _native.Tensor, executor: Executor) -> None:
        self._t = t
        self.executor = executor

    def __len__(self) -> int:
        return self._t.numel

    @property
    def size(self) -> int:
        """Number of elements."""
        return self._t.numel

    @property
    def dtype(self) -> "np.dtype | str":
        """The element type (a NumPy dtype, or ``'bfloat16'``)."""
        return public_dtype(self._t.dtype)

    def from_numpy(self, array: Any) -> None:
        """Copies a NumPy array (same dtype, same number of elements) into the buffer in one
        direct copy. A dtype or size mismatch raises :class:`ValidationError` (no silent cast)."""
        a = np.asarray(array)
        want = numpy_dtype(self._t.dtype)
        if want is None or a.dtype != want:
            raise ValidationError(f"from_numpy: the buffer holds {self._t.dtype}, the array is {a.dtype}; convert it first")
        if a.size != self._t.numel:
            raise ValidationError(f"from_numpy: the buffer has {self._t.numel} elements, the array {a.size}")
        a = np.ascontiguousarray(a)
        self._t.write_from_address(a.ctypes.data, a.nbytes, a)

    def to_numpy(self) -> np.ndarray:
        """The contents as a NumPy array: a zero-copy view when the buffer is in host memory
        (the CPU backend), else a copy."""
        return _to_numpy(self._t)

    def tensor(self) -> "Tensor":
        """A :class:`hologram.Tensor` view of the buffer (no copy)."""
        from .tensor import Tensor

        return Tensor._wrap(self._t)

    def __repr__(self) -> str:
        return f"Buffer({self._t.numel}, dtype={self._t.dtype}, backend={self.executor.backend})"


def share_openmp_threads() -> str:
    """Runs the CPU backend's parallel work on the OpenMP threads already in this process
    (PyTorch's), instead of its own pool, from now on: on a machine with few cores the two
    pools take the cores from each other (torch's threads spin after each of its ops). f32
    and f64 GEMMs then run through the BLAS torch runs on those threads (:func:`cpu_blas`).
    ``hologram_torch`` calls it on import. Loads nothing; ``HOLOGRAM_CPU_POOL=rayon`` keeps
    Hologram's own pool. Returns :func:`cpu_thread_pool`.

    >>> import hologram as hg
    >>> hg.share_openmp_threads().split(":")[0] in ("rayon", "openmp")
    True
    """
    return _native.share_openmp_threads()


def cpu_blas() -> str | None:
    """The BLAS library the CPU backend's f32 and f64 GEMMs run through: PyTorch's MKL (in
    ``libtorch_cpu``) once :func:`share_openmp_threads` found torch's OpenMP threads, else
    ``None`` (Hologram's own GEMM, the ``gemm`` crate)."""
    return _native.cpu_blas()


def cpu_thread_pool() -> str:
    """Where the CPU backend's parallel work runs: ``'rayon'`` (its own pool) or
    ``'openmp:<path of the runtime>'`` (see :func:`share_openmp_threads`)."""
    return _native.cpu_thread_pool()


def _to_numpy(t: _native.Tensor) -> np.ndarray:
    """A NumPy array of a native tensor: zero-copy on host memory, else a copy."""
    iface = t.host_array_interface()
    if iface is not None:
        return np.asarray(_HostView(t, iface))
    dt = numpy_dtype(t.dtype)
    if dt is None:  # bf16 without ml_dtypes: widen to float32
        bits = np.frombuffer(t.to_bytes(), dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(tuple(t.shape))
    # Page-locked memory lent by the backend (a CUDA device fills it in one DMA); the array
    # owns it and gives it back when freed.
    pinned = _native.read_pinned(t)
    if pinned is not None:
        return np.asarray(pinned)
    # One copy, from the device straight into the new array.
    out = np.empty(tuple(t.shape), dtype=dt)
    t.read_into_address(out.ctypes.data, out.nbytes, out)
    return out
