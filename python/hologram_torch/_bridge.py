"""Moving tensors between PyTorch and Hologram without copies (DLPack)."""

from __future__ import annotations

import logging
import os
import threading

import torch
from torch.utils.dlpack import from_dlpack as _from_dlpack
from torch.utils.dlpack import to_dlpack as _to_dlpack

import hologram as hg

# A capsule straight to torch (torch.utils.dlpack.from_dlpack first probes for __dlpack__).
_capsule_to_torch = getattr(torch._C, "_from_dlpack", _from_dlpack)
# DLPack's C exchange table (PyTorch 2.10 and later), used by compiled graphs' per-call path;
# HOLOGRAM_TORCH_EXCHANGE=0 keeps the Python __dlpack__ path (for comparisons).
_EXCHANGE_TABLE = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) \
    if os.environ.get("HOLOGRAM_TORCH_EXCHANGE", "1") != "0" else None

_default = threading.local()


def default_executor(device: torch.device | None = None) -> hg.Executor:
    """The executor for tensors on ``device``: CUDA tensors run on the CUDA backend, everything
    else on the executor set by :func:`set_default_executor` (the CPU by default)."""
    if device is not None and device.type == "cuda":
        return hg.executor_for("cuda")
    ex = getattr(_default, "executor", None)
    return ex if ex is not None else hg.executor_for("cpu")


def set_default_executor(executor) -> None:
    """Sets the executor used when an op is called without one (``None`` resets to the CPU)."""
    _default.executor = None if executor is None else hg.executor_for(executor)


def resolve(executor, tensors) -> hg.Executor:
    """The executor an op runs on: the one given, else the one for the tensors' device."""
    if executor is not None:
        return hg.executor_for(executor)
    dev = next((t.device for t in tensors if isinstance(t, torch.Tensor)), None)
    return default_executor(dev)


def to_hg(x: torch.Tensor, executor: hg.Executor) -> hg.Tensor:
    """A Hologram view of a torch tensor (zero-copy when the executor can see its memory)."""
    x = x.detach()
    if x.device.type == "cpu" and executor.backend == "cpu":
        # Host memory needs no stream handshake: hand torch's capsule over directly, which skips
        # the Python-level __dlpack__/__dlpack_device__ protocol (about 12 µs of each op).
        try:
            return hg.from_dlpack_capsule(_to_dlpack(x), executor)
        except (RuntimeError, hg.HologramError):
            pass  # e.g. a conjugated view or a dtype DLPack lacks: the protocol path says why
    if x.device.type == "cuda" and executor.backend != "cuda":
        x = x.cpu()
    t = hg.from_dlpack(x)
    if t.device != executor.backend:
        t = t.to(executor)
    return t


def to_torch(t: hg.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A torch tensor of a Hologram result, on ``like``'s device (zero-copy when possible)."""
    t = t.realize()
    if like.device.type == "cpu" and t.device == "cpu":
        return _from_dlpack(t.__dlpack__(None))
    if like.device.type == "cuda" and t.device != "cuda":
        return torch.from_dlpack(t.to("cpu")).to(like.device)
    if like.device.type == "cpu" and t.device not in ("cpu",):
        t = t.to("cpu")
    return torch.from_dlpack(t)


def _current_stream(device: torch.device) -> int:
    """The handle of torch's current CUDA stream on ``device`` (the raw query: the public
    ``torch.cuda.current_stream`` costs more than a whole replay of a small plan)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _import_one(x: torch.Tensor, executor: hg.Executor, cuda: bool) -> hg.Tensor:
    """A Hologram view of one torch tensor (no stream handshake: the caller's)."""
    if x.requires_grad:  # DLPack exports no tensor that requires grad (detaching costs ~0.3 µs)
        x = x.detach()
    if (x.device.type == "cuda") if cuda else (x.device.type == "cpu"):
        return hg.from_dlpack_capsule(_to_dlpack(x), executor)
    return to_hg(x, executor)


def _order_after_torch(xs, executor: hg.Executor) -> None:
    """Orders the executor's later work after torch's current stream (CUDA only)."""
    if executor.backend == "cuda":
        dev = next((x.device for x in xs if x.device.type == "cuda"), None)
        if dev is not None:
            executor.order_after_stream(_current_stream(dev))


def import_batch(xs, executor: hg.Executor) -> list:
    """Hologram views of several torch tensors with one stream handshake for all of them (the
    executor's later work waits for torch's current stream once), not one per tensor."""
    _order_after_torch(xs, executor)
    cuda = executor.backend == "cuda"
    return [_import_one(x, executor, cuda) for x in xs]


def exchange_for(executor: hg.Executor, params=None) -> hg.Exchange | None:
    """A :class:`hologram.Exchange` with torch for ``executor`` (``params[i]``: input ``i`` is
    parameter memory, its view kept), or ``None`` where torch has no C exchange table or the
    backend is neither the CPU nor CUDA."""
    if _EXCHANGE_TABLE is None or executor.backend not in ("cpu", "cuda"):
        return None
    try:
        return hg.Exchange(executor, _EXCHANGE_TABLE, params)
    except hg.HologramError as e:
        logging.getLogger("hologram_torch").debug("no DLPack exchange table: %s", e)
        return None


def parameter_memory(x) -> bool:
    """True for a parameter or a view of one (a transposed weight a forward graph saved for its
    backward graph): memory that stays where it is from step to step."""
    return isinstance(x, torch.nn.Parameter) or isinstance(getattr(x, "_base", None), torch.nn.Parameter)


class ParameterViews:
    """Hologram views of a call's inputs, one stream handshake for all of them, where
    the views of parameters are kept from call to call: a parameter whose memory, shape,
    strides and dtype are unchanged is the same view (importing it again through DLPack costs
    a few µs per tensor and call); views of parameters likewise. The kept view holds the
    parameter's memory, so no other tensor can have the same address and layout while it is
    kept; a parameter given new memory (``p.data = ...``) is imported again. Which positions hold parameters is read on the first
    call (a compiled graph's inputs keep their roles)."""

    __slots__ = ("executor", "cuda", "kept", "params", "device")

    def __init__(self, executor: hg.Executor, device: torch.device | None = None):
        self.executor = executor
        self.cuda = executor.backend == "cuda"
        # The CUDA device whose current stream the views wait for (else found from the inputs).
        self.device = device if device is not None and device.type == "cuda" else None
        self.kept: list = []
        self.params: list[bool] | None = None

    def __call__(self, xs) -> list:
        """Hologram views of ``xs`` (torch tensors, as many at every call)."""
        if self.cuda:
            # Parameters too: the optimizer step that changed them was queued on torch's stream.
            if self.device is not None:
                self.executor.order_after_stream(_current_stream(self.device))
            else:
                _order_after_torch(xs, self.executor)
        ex, cuda = self.executor, self.cuda
        if self.params is None:
            self.params = [parameter_memory(x) for x in xs]
            self.kept = [None] * len(xs)
        out = []
        kept = self.kept
        for k, (x, param) in enumerate(zip(xs, self.params)):
            if not param:
                out.append(_import_one(x, ex, cuda))
                continue
            c = kept[k]
            if c is not None and x.data_ptr() == c[0] and x.shape == c[1] and x.stride() == c[2] \
                    and x.dtype == c[3]:
                out.append(c[4])
                continue
            t = _import_one(x, ex, cuda)
            kept[k] = (x.data_ptr(), x.shape, x.stride(), x.dtype, t)
            out.append(t)
        return out


def export_batch(ts, device: torch.device, executor: hg.Executor) -> list:
    """Torch tensors of several Hologram results with one stream handshake (torch's current
    stream waits for the executor's work once)."""
    if device.type == "cuda" and executor.backend == "cuda":
        executor.order_before_stream(_current_stream(device))
        return [_capsule_to_torch(t.__dlpack__(None)) for t in ts]
    if device.type == "cpu" and executor.backend == "cpu":
        return [_capsule_to_torch(t.__dlpack__(None)) for t in ts]
    return [to_torch(t, torch.empty(0, device=device)) for t in ts]
