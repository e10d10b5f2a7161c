"""Zero-copy batches of tensors to and from another framework through DLPack's C exchange table.

A framework that implements DLPack 1.2's exchange API (PyTorch 2.10 and later:
``torch.Tensor.__dlpack_c_exchange_api__``) hands over a table of C functions that import,
export and describe its tensors and name its current CUDA stream. :class:`Exchange` calls them
from native code: a batch of tensors costs one native call and one stream handshake, where the
``__dlpack__`` protocol costs several Python calls per tensor. :meth:`Exchange.run_first`
replays a recorded plan on framework tensors and returns framework tensors in one call.

>>> import torch, hologram as hg
>>> ex = hg.Exchange(hg.executor_for("cpu"), torch.Tensor.__dlpack_c_exchange_api__)
>>> (t,) = ex.import_all([torch.arange(4.0)])
>>> ex.export_all([t * 2])[0].tolist()
[0.0, 2.0, 4.0, 6.0]
"""

from __future__ import annotations

from typing import Any, Sequence

from . import _native
from .executor import Executor
from .plan import Plan
from .tensor import Tensor, _wrap


class Exchange:
    """DLPack exchange with one framework for one executor (CPU or CUDA).

    ``table``: the framework's exchange capsule (``torch.Tensor.__dlpack_c_exchange_api__``).
    ``params[i]``: input ``i`` of :meth:`import_all` and :meth:`run_first` is memory that stays
    where it is from call to call (a model parameter); its view is kept while its address,
    shape, strides and dtype are unchanged, instead of being imported again. On CUDA, imports
    wait for the framework's current stream and exports make it wait for the executor's work
    (no host synchronization)."""

    __slots__ = ("_x", "executor")

    def __init__(self, executor: Executor, table: Any, params: Sequence[bool] | None = None):
        self.executor = executor
        self._x = _native.TorchExchange(executor._e, table, None if params is None else list(params))

    def import_all(self, xs: Sequence[Any]) -> list[Tensor]:
        """Hologram views of the framework tensors ``xs`` (no copy)."""
        return [_wrap(t) for t in self._x.import_all(list(xs))]

    def export_all(self, ts: Sequence[Tensor]) -> list[Any]:
        """Framework tensors of Hologram tensors ``ts`` (no copy; each keeps its memory alive)."""
        return self._x.export_all([t._t for t in ts])

    def run_first(self, plans: Sequence[Plan], xs: Sequence[Any], alias: Sequence[bool],
                  extra: Sequence[Tensor] = ()) -> tuple[int, list[Any]] | None:
        """Imports ``xs`` (then appends ``extra``), replays the first of ``plans`` that accepts
        them and whose outputs are free (see :meth:`Plan.run` for ``alias``) and exports its
        outputs: ``(index of that plan, framework tensors)``, or ``None`` when none can."""
        return self._x.run_first([p._p for p in plans], list(xs), list(alias), [t._t for t in extra])

    def profile(self) -> dict | None:
        """With ``HOLOGRAM_EXCHANGE_PROFILE=1`` set when this exchange was made: ``{phase:
        (calls, seconds)}`` of :meth:`run_first` so far (``import``, ``find``, ``replay``,
        ``release``, ``export``); else ``None``."""
        return self._x.profile()
