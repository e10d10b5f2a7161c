"""Compiled graphs that Dynamo calls without AOTAutograd's runtime wrappers.

AOTAutograd wraps the graphs a backend compiles in runtime code that handles every case a graph
may need: inputs it mutates, outputs that alias inputs or each other, effect tokens,
functionalized random numbers, tensor subclasses, merged arguments. That code runs at every call
and, for a small model, costs more than the whole replay of its Hologram plan. Where
AOTAutograd's metadata says a graph needs none of it ("plain"), the ``hologram`` backend hands
Dynamo a leaner callable:

* an inference graph is called as it is;
* a forward and backward pair becomes one ``torch.autograd.Function``: its forward runs the
  forward graph and saves what the backward graph reads, its backward runs the backward graph.

Anything this module does not recognise keeps AOTAutograd's wrappers: the metadata is read
defensively (another PyTorch release may lack a field), and the graphs' inputs and outputs are
matched by shape and by name before a direct callable is made.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


def read_metadata():
    """What the direct paths need from AOTAutograd's metadata of the graph being compiled:
    ``{"plain": bool, "outputs": int, "requires_grad": [bool per output]}``, or ``None``."""
    try:
        from torch._functorch._aot_autograd.schemas import OutputType, PlainTensorMeta

        md = torch._guards.TracingContext.try_get().fw_metadata
        plain = (
            not md.mutated_inp_runtime_indices
            and not any(i.mutates_data or i.mutates_metadata or i.mutates_storage_metadata
                        for i in md.input_info)
            and all(o.output_type == OutputType.non_alias for o in md.output_info)
            and md.num_intermediate_bases == 0
            and not md.tokens
            and not md.is_rng_op_functionalized
            and all(isinstance(m, PlainTensorMeta) for m in md.subclass_inp_meta)
            and md.num_forward_returns == md.num_outputs
        )
        return {"plain": bool(plain), "outputs": int(md.num_outputs),
                "requires_grad": [bool(o.requires_grad) for o in md.output_info]}
    except Exception:  # noqa: BLE001 - another torch release: keep AOTAutograd's wrappers
        return None


def eager_backward_lowering():
    """A context in which AOTAutograd compiles the backward graph with the forward graph (not
    at the first backward pass), so the backend sees both before it answers Dynamo."""
    import contextlib

    config = torch._functorch.config
    if hasattr(config, "force_non_lazy_backward_lowering"):
        return config.patch(force_non_lazy_backward_lowering=True)
    return contextlib.nullcontext()


def _same_inputs(dynamo_gm: torch.fx.GraphModule, graph) -> bool:
    """True when ``graph``'s inputs are Dynamo's, in order (same count, shapes and dtypes)."""
    if not graph.static:
        return False
    ours = [p.meta.get("val") for p in graph.placeholders]
    theirs = [p.meta.get("example_value", p.meta.get("val")) for p in dynamo_gm.graph.nodes
              if p.op == "placeholder"]
    if len(ours) != len(theirs):
        return False
    for a, b in zip(ours, theirs):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return False
        if isinstance(a, torch.Tensor) and (tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype):
            return False
    return True


def _unboxed(dynamo_gm, fn):
    """``fn`` (called with the argument list) in the convention Dynamo calls a backend's
    result with: boxed for a GmWrapper (AOTAutograd does the same), else with the arguments."""
    if isinstance(dynamo_gm, torch._dynamo.utils.GmWrapper):
        fn._boxed_call = True
        return fn

    def forward(*args):
        return fn(args)

    return forward


def choose(dynamo_gm: torch.fx.GraphModule, example_inputs, made: list):
    """A direct callable for the graphs AOTAutograd compiled (``made``: ``(graph, metadata)``
    per compiled graph), or ``None`` to keep AOTAutograd's."""
    kinds = [g.kind for g, _ in made]
    if kinds == ["inference"]:
        graph, meta = made[0]
        if meta and meta["plain"] and len(graph.placeholders) == len(example_inputs) \
                and _same_inputs(dynamo_gm, graph):
            return "inference", _unboxed(dynamo_gm, graph)
        return None
    if sorted(kinds) == ["backward", "forward"]:
        fw, meta = next(m for m in made if m[0].kind == "forward")
        bw = next(g for g, _ in made if g.kind == "backward")
        if meta and meta["plain"] and len(fw.placeholders) == len(example_inputs) \
                and _same_inputs(dynamo_gm, fw) and bw.static:
            fn = _training(fw, bw, meta)
            if fn is not None:
                return "training", _unboxed(dynamo_gm, fn)
    return None


def _training(fw, bw, meta):
    """The forward and backward graphs as one autograd Function, when the backward graph takes
    what the forward graph saves (by name, in order) and then one tangent per output that
    requires grad, and returns one gradient per forward input."""
    n_user = meta["outputs"]
    requires_grad = meta["requires_grad"]
    if len(requires_grad) != n_user or len(fw.outs) < n_user:
        return None
    saved = fw.outs[n_user:]
    if not all(isinstance(s, torch.fx.Node) and isinstance(s.meta.get("val"), torch.Tensor)
               for s in saved):
        return None  # saved symbolic sizes or opaque objects: AOTAutograd's wrappers
    if not all(isinstance(o, torch.fx.Node) for o in fw.outs[:n_user]):
        return None
    bw_in = [p.name for p in bw.placeholders]
    n_saved, n_tangents = len(saved), sum(requires_grad)
    if bw_in[:n_saved] != [s.name for s in saved] or len(bw_in) != n_saved + n_tangents \
            or not all(name.startswith("tangents") for name in bw_in[n_saved:]):
        return None
    if len(bw.outs) != len(fw.placeholders):
        return None
    differentiable = list(requires_grad)

    class Compiled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            outs = fw(args)
            user = outs[:n_user]
            ctx.save_for_backward(*outs[n_user:])
            fixed = [u for u, d in zip(user, differentiable) if not d]
            if fixed:
                ctx.mark_non_differentiable(*fixed)
            return tuple(user)

        @staticmethod
        @once_differentiable
        def backward(ctx, *grads):
            tangents = [g for g, d in zip(grads, differentiable) if d]
            return tuple(bw([*ctx.saved_tensors, *tangents]))

    def run(args):
        return list(Compiled.apply(*args))

    return run
