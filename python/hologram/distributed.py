"""Several GPUs of one host: NCCL collectives on Hologram tensors.

Two ways to run, as NCCL offers:

* one process per GPU (the usual one, like ``torch.distributed``): rank 0 makes
  :func:`unique_id`, hands the bytes to the other processes (a pipe, a queue, a file), and each
  process makes ``Communicator(executor, uid, rank, size)`` on ``Executor(f'cuda:{rank}')``;
* one process driving every GPU: :func:`init_all` returns one communicator per executor, and
  the calls of all ranks go inside one ``with group():`` block.

Collectives run on each executor's stream, in order with its other work, without blocking the
host; ``executor.synchronize()`` waits for them.

>>> import hologram as hg
>>> hg.distributed.device_count() >= 0
True
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence, Union

from . import _native
from .errors import BackendUnavailableError
from .executor import Executor
from .tensor import Tensor

_OPS = ("sum", "mean", "prod", "max", "min")


def device_count() -> int:
    """The number of CUDA GPUs on this host (0 without a driver or GPU)."""
    return _native.cuda_device_count()


def _need_nccl() -> None:
    if not hasattr(_native, "Communicator"):
        raise BackendUnavailableError(
            "the nccl backend is not available: this build of Hologram has no CUDA support")


def nccl_version() -> str:
    """The NCCL library's version (``'2.21.5'``); raises BackendUnavailableError without NCCL."""
    _need_nccl()
    return _native.nccl_version()


def is_available() -> bool:
    """Whether NCCL loads here (a GPU is needed as well to make a communicator)."""
    try:
        nccl_version()
        return True
    except BackendUnavailableError:
        return False


def unique_id() -> bytes:
    """A new NCCL unique id (128 bytes). Make it once, on rank 0, and pass it to every rank."""
    _need_nccl()
    return _native.nccl_unique_id()


@contextlib.contextmanager
def group() -> Iterator[None]:
    """Groups the collectives issued inside (needed when one thread issues the calls of several
    ranks; also fuses small collectives)."""
    _need_nccl()
    _native.nccl_group_start()
    try:
        yield
    finally:
        _native.nccl_group_end()


def _executor(device: Union[str, Executor]) -> Executor:
    """An executor given as such, or the shared executor of a device name (``'cuda:1'``): the
    one ``hg.from_dlpack`` and ``device=`` arguments use, so their tensors can take part."""
    from .tensor import executor_for

    return executor_for(device)


class Communicator:
    """One rank of an NCCL communicator, on one CUDA executor.

    ``Communicator(executor, uid, rank, size)`` joins a communicator of ``size`` ranks made
    with the same ``uid`` (from :func:`unique_id`); it blocks until every rank has joined.
    """

    __slots__ = ("_c",)

    def __init__(self, executor: Union[str, Executor], uid: bytes, rank: int, size: int) -> None:
        _need_nccl()
        self._c = _native.Communicator(_executor(executor)._e, bytes(uid), int(rank), int(size))

    @classmethod
    def _wrap(cls, c: "_native.Communicator") -> "Communicator":
        obj = cls.__new__(cls)
        obj._c = c
        return obj

    @property
    def rank(self) -> int:
        return self._c.rank

    @property
    def size(self) -> int:
        return self._c.size

    @property
    def executor(self) -> Executor:
        return Executor(self._c.executor)

    @staticmethod
    def _check_op(op: str) -> str:
        if op not in _OPS:
            raise ValueError(f"unknown reduction {op!r}: expected one of {', '.join(_OPS)}")
        return op

    def all_reduce(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """Combines every rank's ``tensor`` with ``op`` into it (in place); returns it."""
        self._c.all_reduce(tensor._t, self._check_op(op))
        return tensor

    def broadcast(self, tensor: Tensor, root: int = 0) -> Tensor:
        """Overwrites every rank's ``tensor`` with rank ``root``'s (in place); returns it."""
        self._c.broadcast(tensor._t, int(root))
        return tensor

    def all_gather(self, tensor: Tensor) -> Tensor:
        """Every rank's ``tensor`` stacked along the first axis, in rank order."""
        return Tensor._wrap(self._c.all_gather(tensor._t))

    def reduce_scatter(self, tensor: Tensor, op: str = "sum") -> Tensor:
        """This rank's block of every rank's ``tensor`` combined with ``op`` (the first axis is
        split in ``size`` equal blocks)."""
        return Tensor._wrap(self._c.reduce_scatter(tensor._t, self._check_op(op)))

    def check_async_error(self) -> None:
        """Raises the error an earlier collective ran into asynchronously (a peer died)."""
        self._c.check_async_error()

    def __repr__(self) -> str:
        return repr(self._c)


def init_all(devices: Sequence[Union[str, Executor]] | None = None) -> list[Communicator]:
    """One communicator per GPU (``devices``: executors or names such as ``'cuda:1'``; default
    every GPU of the host), all driven by this process. Issue their calls inside ``group()``."""
    _need_nccl()
    if devices is None:
        devices = [f"cuda:{i}" for i in range(device_count())]
    execs = [_executor(d) for d in devices]
    return [Communicator._wrap(c) for c in _native.Communicator.init_all([e._e for e in execs])]


__all__ = [
    "Communicator", "device_count", "group", "init_all", "is_available", "nccl_version",
    "unique_id",
]
