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
from .tensor import Tensor


class Plan:
    """A recorded function: call it with tensors of the recorded shapes and dtypes."""

    __slots__ = ("_p",)

    def __init__(self, native: "_native.Plan"):
        self._p = native

    def __call__(self, *inputs: Tensor) -> list[Tensor]:
        """Replays the plan on ``inputs``; returns fresh output tensors."""
        return [Tensor._wrap(t) for t in self._p.run([x._t for x in inputs])]

    def run(self, inputs: Sequence[Tensor], alias: Sequence[bool] | None = None) -> list[Tensor]:
        """Replays the plan; outputs whose ``alias[i]`` is true are views of the plan's own
        buffers (no copy), valid until the next replay, which is refused while one is held."""
        return [Tensor._wrap(t) for t in self._p.run([x._t for x in inputs], None if alias is None else list(alias))]

    def accepts(self, inputs: Sequence[Tensor]) -> bool:
        """True when ``inputs`` can be replayed (shapes, dtypes, and in-place inputs)."""
        return self._p.accepts([x._t for x in inputs])

    def outputs_free(self) -> bool:
        """True when no tensor outside the plan holds one of its output buffers."""
        return self._p.outputs_free()

    @property
    def stats(self) -> dict:
        """``steps``, ``launches``, ``gemms``, ``copies``, ``peak_bytes``, ``constant_bytes``,
        ``constants_in_place``, ``captured`` (a CUDA graph) and ``replays``."""
        return dict(self._p.stats())

    def profile(self) -> str | None:
        """With ``HOLOGRAM_PLAN_PROFILE=1`` set when the plan was recorded: time per kind of step
        over the replays so far (each step synchronized); else ``None``."""
        return self._p.profile()

    @property
    def input_specs(self) -> list[tuple[list[int], str]]:
        """``(shape, dtype)`` of each input."""
        return list(self._p.input_specs())

    def __repr__(self) -> str:
        return repr(self._p)


def record(fn: Callable[..., Sequence[Tensor]], *inputs: Tensor) -> tuple[Plan, list[Tensor]]:
    """Records ``fn(*inputs)`` (which returns a sequence of tensors) as a :class:`Plan`; returns
    the plan and the results of the recording run. Everything the function computes must stay on
    the device: reading a value on the host while recording (``.item()``, ``.numpy()``) raises
    :class:`hologram.ValidationError`."""
    if not inputs:
        raise TypeError("record() needs at least one input tensor")
    rec = _native.Recording(inputs[0]._t.executor, [x._t for x in inputs])
    try:
        outs = fn(*[Tensor._wrap(t) for t in rec.inputs()])
        if isinstance(outs, Tensor):
            outs = [outs]
        native, first = rec.finish([o._t for o in outs])
    except BaseException:
        rec.abort()
        raise
    return Plan(native), [Tensor._wrap(t) for t in first]
