"""Data-parallel training across the GPUs of one host, with Hologram's NCCL collectives.

:class:`DistributedDataParallel` wraps a model replica (one per process and GPU, like
``torch.nn.parallel.DistributedDataParallel``): parameters start equal (broadcast from rank 0),
and during ``backward()`` each gradient is copied into a flat bucket (about 25 MiB) as soon as
it is accumulated (a post-accumulate-grad hook); a full bucket is all-reduced (mean) at once on
the Hologram executor's stream, which runs beside torch's stream, so communication overlaps the
rest of the backward pass. Buckets are launched in the same order on every rank (NCCL requires
it). When backward ends, torch's stream waits for the all-reduces and the averaged gradients are
copied back into ``param.grad``; the optimizer step then sees the same gradients on every rank.

    comm = hg.distributed.Communicator(f"cuda:{rank}", uid, rank, world)
    model = hg_torch.DistributedDataParallel(model.cuda(rank), comm)
    loss_fn(model(x), y).backward()      # gradients averaged across ranks here
    opt.step()

:func:`assign_buckets` is the bucketing rule, usable (and tested) without a GPU.
"""

from __future__ import annotations

import torch
from torch.utils.dlpack import to_dlpack as _to_dlpack

import hologram as hg

#: Bucket size, as torch's DDP (``bucket_cap_mb``).
DEFAULT_BUCKET_MB = 25


def assign_buckets(params, cap_bytes: int) -> list:
    """Groups parameters into buckets of at most ``cap_bytes`` bytes: ``params`` is a list of
    ``(numel, dtype)`` in registration order; the result lists parameter indices per bucket.

    Gradients become ready roughly in reverse registration order (the last layer's first), so
    buckets are filled from the last parameter backwards; a bucket holds one dtype (it is one
    flat tensor); a parameter larger than the cap gets a bucket of its own."""
    if cap_bytes <= 0:
        raise ValueError(f"bucket size must be positive, got {cap_bytes} bytes")
    buckets: list[list[int]] = []
    current: list[int] = []
    current_bytes, current_dtype = 0, None
    for i in reversed(range(len(params))):
        numel, dtype = params[i]
        nbytes = numel * _itemsize(dtype)
        if current and (current_dtype != dtype or current_bytes + nbytes > cap_bytes):
            buckets.append(current)
            current, current_bytes = [], 0
        current.append(i)
        current_bytes += nbytes
        current_dtype = dtype
    if current:
        buckets.append(current)
    return buckets


def _itemsize(dtype) -> int:
    if isinstance(dtype, torch.dtype):
        return torch.empty((), dtype=dtype).element_size()
    return int(dtype)  # tests may pass the size itself


class _Bucket:
    __slots__ = ("params", "offsets", "flat", "view", "ready", "seen")

    def __init__(self, params, device):
        self.params = params
        self.offsets, total = [], 0
        for p in params:
            self.offsets.append(total)
            total += p.numel()
        self.flat = torch.zeros(total, dtype=params[0].dtype, device=device)
        self.view = None  # the Hologram view of `flat`, made once
        self.ready = 0  # gradients copied in during this backward
        self.seen = [False] * len(params)


class DistributedDataParallel(torch.nn.Module):
    """A model replica whose gradients are averaged across the ranks of ``communicator`` (a
    :class:`hologram.distributed.Communicator` on this replica's GPU) during ``backward()``.

    ``bucket_cap_mb``: bucket size; ``broadcast_parameters``: start from rank 0's parameters and
    buffers (off when every rank already initialized them identically)."""

    def __init__(self, module: torch.nn.Module, communicator, bucket_cap_mb: float = DEFAULT_BUCKET_MB,
                 broadcast_parameters: bool = True):
        super().__init__()
        self.module = module
        self._comm = communicator
        self._executor = communicator.executor
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the module has no parameters that require gradients")
        self._device = params[0].device
        if self._device.type != "cuda" or self._device.index != self._executor.device_index:
            raise ValueError(
                f"the module's parameters are on {self._device}, the communicator's executor on "
                f"{self._executor.device}: move the module to cuda:{self._executor.device_index}")
        layout = assign_buckets([(p.numel(), p.dtype) for p in params], int(bucket_cap_mb * (1 << 20)))
        self._buckets = [_Bucket([params[i] for i in b], self._device) for b in layout]
        self._where = {}
        for bi, b in enumerate(self._buckets):
            for j, p in enumerate(b.params):
                self._where[p] = (bi, j)
        self._next = 0  # the next bucket to launch (they go in order on every rank)
        self._callback_queued = False
        if broadcast_parameters:
            self._broadcast_state()
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in params]

    # ----- Hologram views of torch memory ---------------------------------------------------

    def _hg(self, x: torch.Tensor) -> hg.Tensor:
        """A zero-copy Hologram tensor of ``x`` (contiguous, on this GPU)."""
        return hg.from_dlpack_capsule(_to_dlpack(x.detach()), self._executor)

    def _torch_stream(self) -> int:
        return torch.cuda.current_stream(self._device).cuda_stream

    @torch.no_grad()
    def _broadcast_state(self):
        tensors = [t for t in list(self.module.parameters()) + list(self.module.buffers())
                   if t.is_cuda and t.is_contiguous() and t.numel() > 0]
        self._executor.order_after_stream(self._torch_stream())
        for t in tensors:
            self._comm.broadcast(self._hg(t), 0)
        self._executor.order_before_stream(self._torch_stream())

    # ----- backward ---------------------------------------------------------------------------

    def _on_grad(self, p: torch.Tensor):
        bi, j = self._where[p]
        b = self._buckets[bi]
        off = b.offsets[j]
        grad = p.grad
        assert grad is not None  # the hook runs once the gradient is accumulated
        b.flat[off:off + p.numel()].copy_(grad.reshape(-1))
        if not b.seen[j]:
            b.seen[j] = True
            b.ready += 1
        if not self._callback_queued:
            self._callback_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)
        if b.ready == len(b.params):
            self._launch_ready()

    def _launch_ready(self):
        while self._next < len(self._buckets) and self._buckets[self._next].ready == len(
                self._buckets[self._next].params):
            self._launch(self._buckets[self._next])
            self._next += 1

    def _launch(self, b: _Bucket):
        if b.view is None:
            b.view = self._hg(b.flat)
        # The all-reduce waits for the copies torch queued into the bucket, then runs on the
        # executor's stream while torch's stream goes on with the backward pass.
        self._executor.order_after_stream(self._torch_stream())
        self._comm.all_reduce(b.view, "mean")

    def _finish(self):
        """End of backward: parameters that got no gradient count as zeros (every rank must
        launch every bucket), torch waits for the all-reduces, and the gradients come back."""
        self._callback_queued = False
        for b in self._buckets[self._next:]:
            for j, p in enumerate(b.params):
                if not b.seen[j]:
                    off = b.offsets[j]
                    b.flat[off:off + p.numel()].zero_()
            b.ready = len(b.params)
        self._launch_ready()
        self._executor.order_before_stream(self._torch_stream())
        for b in self._buckets:
            for p, off in zip(b.params, b.offsets):
                g = b.flat[off:off + p.numel()].view_as(p)
                if p.grad is None:
                    p.grad = g.clone()
                else:
                    p.grad.copy_(g)
            b.ready = 0
            b.seen = [False] * len(b.params)
        self._next = 0

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


__all__ = ["DistributedDataParallel", "assign_buckets", "DEFAULT_BUCKET_MB"]
