"""``hologram.record``: a function of tensors recorded once and replayed by one call.

Recording runs the function once on real inputs (element-wise chains fuse as always) and keeps
the device work it queues; a replay copies new inputs in, queues the same work again without
running any Python, and returns fresh outputs. On CUDA a replay is one CUDA graph launch.

>>> import hologram as hg
>>> x = hg.asarray([1.0, -2.0, 3.0], device='cpu')
>>> plan, (y,) = hg.record(lambda t: [(t * 2).relu().sum()], x)
>>> y.item()
8.0
>>> plan(hg.asarray([-1.0, 5.0, 0.5], device='cpu'))[0].item()
11.0
"""

from __future__ import annotations

from typing import Callable, Sequence

from . import _native
from .executor import Executor
from .tensor import Tensor, _wrap


class Plan:
    """A recorded function: call it with tensors of the recorded shapes and dtypes."""

    __slots__ = ("_p", "__weakref__")

    def __init__(self, native: "_native.Plan"):
        self._p = native

    def __call__(self, *inputs: Tensor) -> list[Tensor]:
        """Replays the plan on ``inputs``; returns fresh output tensors."""
        return [Tensor._wrap(t) for t in self._p.run([x._t for x in inputs])]

    def run(self, inputs: Sequence[Tensor], alias: Sequence[bool] | None = None) -> list[Tensor]:
        """Replays the plan; outputs whose ``alias[i]`` is true are views of the plan's own
        buffers (no copy), valid until the next replay, which is refused while one is held."""
        return [Tensor._wrap(t) for t in self._p.run([x._t for x in inputs], None if alias is None else list(alias))]

    def try_run(self, inputs: Sequence[Tensor], alias: Sequence[bool] | None = None) -> list[Tensor] | None:
        """:meth:`run` when :meth:`accepts` ``inputs`` and :meth:`outputs_free`, else ``None``:
        the three in one native call (the per-call path of a cache of plans)."""
        outs = self._p.try_run([x._t for x in inputs], None if alias is None else list(alias))
        return None if outs is None else [_wrap(t) for t in outs]

    def accepts(self, inputs: Sequence[Tensor]) -> bool:
        """True when ``inputs`` can be replayed (shapes, dtypes, and in-place inputs)."""
        return self._p.accepts([x._t for x in inputs])

    def outputs_free(self) -> bool:
        """True when no tensor outside the plan holds one of its output buffers."""
        return self._p.outputs_free()

    @property
    def stats(self) -> dict:
        """``steps``, ``launches``, ``gemms``, ``copies``, ``peak_bytes``, ``constant_bytes``,
        ``constants_in_place``, ``captured`` (a CUDA graph), ``edge_steps`` (steps run outside
        the graph on a large input or output in place of a copy), ``replays``, ``bound_graphs``
        (graphs captured for the memory of a caller that passed the same inputs and got its
        outputs in the same place twice in a row) and ``bound_replays`` (replays that ran one:
        no input or output copies)."""
        return dict(self._p.stats())

    def profile(self) -> str | None:
        """With ``HOLOGRAM_PLAN_PROFILE=1`` set when the plan was recorded: time per kind of step
        over the replays so far (each step synchronized); else ``None``."""
        return self._p.profile()

    def host_profile(self) -> dict | None:
        """With ``HOLOGRAM_PLAN_HOST_PROFILE=1`` set when the plan was recorded: ``{phase:
        (calls, seconds)}`` of the host time of each phase of the replays so far (``inputs``,
        ``fresh``, ``head``, ``graph``, ``tail``, ``outputs``); else ``None``."""
        return self._p.host_profile()

    @property
    def input_specs(self) -> list[tuple[list[int], str]]:
        """``(shape, dtype)`` of each input."""
        return list(self._p.input_specs())

    def __repr__(self) -> str:
        return repr(self._p)


class Recording:
    """A plan being recorded, for callers that drive the recording themselves (:func:`record`
    is the usual way): compute with :meth:`inputs`, then :meth:`finish` with the results, or
    :meth:`abort`. Every device op this thread queues on the executor until then becomes part
    of the plan.

    ``direct[i]`` true reads input ``i`` where it is (no copy into a plan buffer on replay):
    every replay must then pass the same tensor (parameters, optimizer state); the recording
    may write it in place (:meth:`Tensor.assign_all`)."""

    __slots__ = ("_r",)

    def __init__(self, executor: Executor, inputs: Sequence[Tensor], direct: Sequence[bool] | None = None):
        self._r = _native.Recording(executor._e, [x._t for x in inputs], None if direct is None else list(direct))

    def inputs(self) -> list[Tensor]:
        """The tensors to compute with (the plan's input buffers, or the direct inputs)."""
        return [_wrap(t) for t in self._r.inputs()]

    def finish(self, outputs: Sequence[Tensor], alias: Sequence[bool] | None = None) -> tuple[Plan, list[Tensor]]:
        """Ends the recording with ``outputs``; returns the plan and the results of the recording
        run: copies, or views of the plan's buffers where ``alias[i]`` (valid until the next
        replay, as in :meth:`Plan.run`)."""
        native, first = self._r.finish([o._t for o in outputs], None if alias is None else list(alias))
        return Plan(native), [_wrap(t) for t in first]

    def abort(self) -> None:
        """Stops recording without making a plan (after an error in the recorded function)."""
        self._r.abort()


def record(fn: Callable[..., Sequence[Tensor]], *inputs: Tensor) -> tuple[Plan, list[Tensor]]:
    """Records ``fn(*inputs)`` (which returns a sequence of tensors) as a :class:`Plan`; returns
    the plan and the results of the recording run. Everything the function computes must stay on
    the device: reading a value on the host while recording (``.item()``, ``.numpy()``) raises
    :class:`hologram.ValidationError`."""
    if not inputs:
        raise TypeError("record() needs at least one input tensor")
    # The inputs' own executor (not the shared one of their device): the work it queues is what
    # gets recorded.
    rec = Recording(Executor(inputs[0]._t.executor), inputs)
    try:
        outs = fn(*rec.inputs())
        if isinstance(outs, Tensor):
            outs = [outs]
        return rec.finish(outs)
    except BaseException:
        rec.abort()
        raise
