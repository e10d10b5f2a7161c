"""Scaled dot-product attention as two torch custom ops, so AOTAutograd keeps it one node
forward (``hologram::sdpa``) and one backward (``hologram::sdpa_backward``) instead of tracing
it into matrix products, a mask and a softmax; the ``hologram`` backend lowers each node to the
core attention op (strided batched GEMMs around one fused row kernel).

Each op has a torch-math eager implementation (what runs when a graph falls back to eager) and
a fake one. Outputs are ``[B, H, L, D]`` views of ``[B, L, H, D]``-contiguous storage, as the
core op writes them, so merging the heads back (``transpose(1, 2).reshape(B, L, C)``) is a free
view in the traced graph.
"""

from __future__ import annotations

import operator

import torch

aten = torch.ops.aten


def _heads_last(b, h, length, d, like):
    """An uninitialized ``[B, H, L, D]`` tensor stored ``[B, L, H, D]``-contiguous."""
    return like.new_empty((b, length, h, d)).permute(0, 2, 1, 3)


def _scores(q, k, is_causal, scale):
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        lq, lk = q.shape[-2], k.shape[-2]
        keep = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s


@torch.library.custom_op("hologram::sdpa", mutates_args=())
def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, scale: float,
         save_probs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(softmax(scale · q·kᵀ [causal]) · v, probabilities)`` of ``[B, H, L, D]`` inputs; the
    probabilities are an empty tensor unless ``save_probs`` (the backward op needs them)."""
    p = torch.softmax(_scores(q, k, is_causal, scale).float(), dim=-1).to(q.dtype)
    b, h, lq, _ = q.shape
    out = _heads_last(b, h, lq, v.shape[-1], q)
    out.copy_(torch.matmul(p, v))
    return out, (p if save_probs else q.new_empty((0,)))


@sdpa.register_fake
def _sdpa_fake(q, k, v, is_causal, scale, save_probs):
    b, h, lq, _ = q.shape
    probs = q.new_empty((b, h, lq, k.shape[-2])) if save_probs else q.new_empty((0,))
    return _heads_last(b, h, lq, v.shape[-1], q), probs


@torch.library.custom_op("hologram::sdpa_backward", mutates_args=())
def sdpa_backward(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  probs: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv)`` of :func:`sdpa` from its saved probabilities and the output's gradient:
    ``dV = Pᵀ·dO``, ``dS = scale · P ⊙ (dP − rowsum(dP ⊙ P))`` with ``dP = dO·Vᵀ``,
    ``dQ = dS·K``, ``dK = dSᵀ·Q``."""
    dp = torch.matmul(grad, v.transpose(-2, -1))
    ds = probs * (dp - (dp * probs).sum(-1, keepdim=True)) * scale
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    dq, dk, dv = _heads_last(b, h, lq, d, q), _heads_last(b, h, lk, d, q), _heads_last(b, h, lk, v.shape[-1], q)
    dq.copy_(torch.matmul(ds, k))
    dk.copy_(torch.matmul(ds.transpose(-2, -1), q))
    dv.copy_(torch.matmul(probs.transpose(-2, -1), grad))
    return dq, dk, dv


@sdpa_backward.register_fake
def _sdpa_backward_fake(grad, q, k, v, probs, scale):
    b, h, lq, d = q.shape
    lk = k.shape[-2]
    return _heads_last(b, h, lq, d, q), _heads_last(b, h, lk, d, q), _heads_last(b, h, lk, v.shape[-1], q)


def _setup_context(ctx, inputs, output):
    q, k, v, _is_causal, scale, _save = inputs
    ctx.save_for_backward(q, k, v, output[1])
    ctx.scale = scale


def _backward(ctx, grad_out, _grad_probs):
    q, k, v, probs = ctx.saved_tensors
    if probs.numel() == 0 and q.numel() and k.numel():
        raise RuntimeError("hologram::sdpa ran without saving its probabilities, so it has no backward")
    dq, dk, dv = sdpa_backward(grad_out, q, k, v, probs, ctx.scale)
    return dq, dk, dv, None, None, None


sdpa.register_autograd(_backward, setup_context=_setup_context)

# The overloads FX graphs call.
sdpa_op = torch.ops.hologram.sdpa.default
sdpa_backward_op = torch.ops.hologram.sdpa_backward.default


def decomposition(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``aten.scaled_dot_product_attention`` as :func:`sdpa` where it applies (4-D inputs of one
    float dtype, no mask, no dropout, no grouped-query heads), else as :func:`composed`."""
    fits = (attn_mask is None and not dropout_p and not enable_gqa and q.dim() == k.dim() == v.dim() == 4
            and q.dtype == k.dtype == v.dtype and q.dtype.is_floating_point
            and q.shape[:2] == k.shape[:2] == v.shape[:2] and k.shape[2] == v.shape[2])
    if not fits:
        return composed(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    scale = float(scale) if scale is not None else 1.0 / (q.shape[-1] ** 0.5)
    # The probabilities are kept; graphs that never read them (inference) drop them after
    # tracing (drop_unused_probabilities): grad mode here does not tell.
    return sdpa(q, k, v, bool(is_causal), scale, True)[0]


def composed(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``aten.scaled_dot_product_attention`` as matrix products, a mask and a softmax (without
    the checks for fully masked rows of torch's math path)."""
    if dropout_p:
        raise RuntimeError("hologram: attention dropout is not supported")
    if enable_gqa and k.shape[-3] != q.shape[-3]:
        repeat = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(repeat, dim=-3), v.repeat_interleave(repeat, dim=-3)
    scale = float(scale) if scale is not None else 1.0 / (q.shape[-1] ** 0.5)
    s = _scores(q, k, is_causal, scale)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.matmul(torch.softmax(s, dim=-1), v)


def drop_unused_probabilities(gm: torch.fx.GraphModule) -> None:
    """Tells every :func:`sdpa` node of ``gm`` whose probabilities nothing reads (an inference
    graph: AOTAutograd traces with grad mode on, so the decomposition cannot tell) not to keep
    them."""
    changed = False
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is not sdpa_op or n.args[5] is False:
            continue
        if not any(u.target is operator.getitem and u.args[1] == 1 and u.users for u in n.users):
            n.args = n.args[:5] + (False,)
            changed = True
    if changed:
        gm.recompile()


class OneOp(torch.overrides.TorchFunctionMode):
    """While active, ``F.scaled_dot_product_attention`` calls go to :func:`decomposition`.
    AOTAutograd and ``make_fx`` trace under it: the attention op reaches them as a composite op
    that autograd would expand (and torch's math path would build its mask and fully-masked-row
    checks from element-wise ops and reductions) before any decomposition table is consulted.

    ``compile_step`` traces under it too, with autograd's engine (``torch.autograd.grad``), not
    functorch's ``grad`` transform: functorch would not run :func:`sdpa`'s registered autograd
    under ``torch.func.functionalize``, and attention would come out as matrix products, a mask
    and a softmax (a copy of each head-strided operand, and the mask as passes of its own)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch._C._nn.scaled_dot_product_attention:
            return decomposition(*args, **kwargs)
        return func(*args, **kwargs)
