"""``torch.compile(model, backend="hologram")``, on AOTAutograd.

Dynamo captures the model; AOTAutograd traces its forward and backward into two graphs of core
ATen ops (torch's decomposition tables turn composite ops into core ones). Each graph is lowered
whole to one Hologram plan per input signature: the first call with a signature runs the graph
once through Hologram tensor ops (element-wise chains fuse) while the plan records the device
work; every later call replays the plan with one native call (a CUDA graph launch on CUDA), no
Python per op. Outputs that are graph inputs or views of them are made by torch itself, so they
keep their aliasing.

A graph with an op Hologram cannot run runs in eager PyTorch as a whole; the log says which op
and why, and :func:`compile_stats` counts it.

    import torch, hologram_torch
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU()), backend="hologram")
    model(torch.randn(8, 64)).sum().backward()
    print(hologram_torch.compile_stats())
"""

from __future__ import annotations

import logging
import operator
import weakref
from collections import Counter

import torch

import hologram as hg

from . import attention, direct, lowering

from ._bridge import ParameterViews, default_executor, exchange_for, export_batch, parameter_memory

log = logging.getLogger("hologram_torch.compile")
aten = torch.ops.aten

# Counters behind compile_stats().
_STATS: Counter = Counter()
_FALLBACK_OPS: Counter = Counter()
_warned: set = set()
_GRAPHS: weakref.WeakSet = weakref.WeakSet()
# False: every graph keeps AOTAutograd's runtime wrappers (for comparisons; see .direct).
DIRECT = True

# View ops that keep a contiguous value's elements in order (a reshape of it).
_RESHAPE_OPS = {
    aten.alias.default, aten.detach.default, aten.view.default, aten._unsafe_view.default,
    aten.reshape.default, aten.unsqueeze.default, aten.squeeze.dims, aten.squeeze.dim,
    aten.squeeze.default,
}

# View ops torch replays itself on outputs that alias a graph input.
_VIEW_OPS = _RESHAPE_OPS | {
    aten.permute.default, aten.t.default, aten.transpose.int, aten.expand.default,
    aten.slice.Tensor, aten.select.int,
}


def compile_stats() -> dict:
    """What the ``hologram`` backend has done in this process: graphs compiled (``graphs``),
    graphs that run in eager PyTorch (``eager_graphs``) and the ops that sent them there
    (``fallback_ops``: op name -> count), plans recorded (``plans``), replays (``replays``),
    plans given up for others when a graph's inputs moved (``plans_dropped``),
    inference graphs and forward/backward pairs Dynamo calls without AOTAutograd's runtime
    wrappers (``direct_inference``, ``direct_training``), and replays whose inputs and outputs
    crossed through DLPack's C exchange table in one native call (``exchange_replays``)."""
    return {**{k: _STATS[k] for k in ("graphs", "eager_graphs", "plans", "replays", "fallback_nodes",
                                       "plans_dropped", "direct_inference", "direct_training",
                                       "exchange_replays")},
            "fallback_ops": dict(_FALLBACK_OPS)}


def plan_profiles() -> list:
    """With ``HOLOGRAM_PLAN_PROFILE=1``: ``(graph kind, report)`` of every live plan (time per
    kind of step per replay, each step synchronized)."""
    out = []
    for g in list(_GRAPHS):
        for sig in g.plans.values():
            for plan in sig.instances:
                report = plan.profile()
                if report:
                    out.append((g.kind, report))
    return out


def plan_stats() -> list:
    """``(graph kind, stats)`` of every live plan of the ``hologram`` backend: steps, launches,
    GEMMs, copies, peak memory, whether replays run as one CUDA graph (``captured``), replays,
    and replays that ran a graph bound to the caller's memory (``bound_replays``: no input or
    output copies; see :attr:`hologram.Plan.stats`)."""
    return [(g.kind, plan.stats) for g in list(_GRAPHS) for sig in g.plans.values() for plan in sig.instances]


def reset_compile_stats() -> None:
    """Zeroes the counters of :func:`compile_stats`."""
    _STATS.clear()
    _FALLBACK_OPS.clear()


def _decompositions():
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    table.update(get_decompositions([
        aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit,
        aten._native_batch_norm_legit_no_training, aten.native_batch_norm,
        aten.embedding, aten._adaptive_avg_pool2d, aten.mean.dim, aten.var_mean.correction,
        aten.native_dropout,
        aten.embedding_dense_backward, aten.hardswish, aten.hardswish_backward,
        aten.hardsigmoid, aten.hardsigmoid_backward,
    ]))
    # Attention where this table is consulted for it at all: as matrix products and a softmax.
    # (AOTAutograd and make_fx expand the composite op before any table; attention.OneOp,
    # active while they trace, gives it to them as the one op hologram::sdpa.)
    table[aten.scaled_dot_product_attention.default] = attention.composed
    # Ops Hologram runs as fused kernels rather than as their decompositions.
    for op in (aten.embedding.default, aten._softmax_backward_data.default,
               aten._log_softmax_backward_data.default, aten.gelu_backward.default,
               aten.native_layer_norm_backward.default):
        table.pop(op, None)
    return table


# Ops returning a tuple of views of their first argument (a part is ``getitem`` of the tuple).
_SPLIT_OPS = {aten.split_with_sizes.default, aten.split.Tensor}


def _view_parent(n):
    """The node view node ``n`` views (a part of a split views what was split), else None."""
    if not isinstance(n, torch.fx.Node) or n.op != "call_function":
        return None
    if n.target in _VIEW_OPS:
        return n.args[0]
    if n.target is operator.getitem:
        split = n.args[0]
        if isinstance(split, torch.fx.Node) and split.op == "call_function" and split.target in _SPLIT_OPS:
            return split.args[0]
    return None


def _view_base(n):
    """The node a chain of view ops starts from (``n`` itself when it is no view)."""
    while (parent := _view_parent(n)) is not None:
        n = parent
    return n


def _traced_contiguous(n) -> bool:
    """True unless the trace gave node ``n`` a non-contiguous tensor value."""
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return not isinstance(v, torch.Tensor) or v.is_contiguous()


def _plan_base(n):
    """The node whose value a plan returns for output ``n``: the base of its chain of view
    ops, or, where the trace gave that base strides of its own (an op that returns a permuted
    view, like ``hologram::sdpa``), the first view above it with contiguous strides, so the
    view ops torch replays on the result see the layout they were traced with."""
    chain = [n]
    while (parent := _view_parent(n)) is not None:
        n = parent
        chain.append(n)
    if not _traced_contiguous(chain[-1]):
        for c in reversed(chain[:-1]):
            if _traced_contiguous(c):
                return c
    return chain[-1]


def _dense_value(n) -> bool:
    """True when the trace gave node ``n`` a contiguous tensor of static shape from the start of
    its storage (a symbolic size is left alone: comparing it would add guards)."""
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    if not isinstance(v, torch.Tensor) or not all(isinstance(d, int) for d in v.shape):
        return False
    offset = v.storage_offset()
    return isinstance(offset, int) and offset == 0 and bool(v.is_contiguous())


def _reshape_of(n, base) -> bool:
    """True when output ``n`` is ``base`` reshaped: a chain of reshaping view ops from a dense
    ``base`` to a dense ``n`` with as many elements."""
    if n is base or not (_dense_value(n) and _dense_value(base)):
        return False
    if n.meta["val"].numel() != base.meta["val"].numel():
        return False
    while n is not base:
        if n.op != "call_function" or n.target not in _RESHAPE_OPS:
            return False
        n = _view_parent(n)
    return True


def _plan_nodes(outs) -> dict:
    """For each graph output node that is not a view of an input, the node whose value the plan
    returns for it: its plan base (see _plan_base), or the output itself where it is the only
    output over that base and just reshapes it (a bias gradient summed to ``[1, n]`` and viewed
    as ``[n]``): the plan then returns it in its final shape and torch makes no view per call."""
    nodes = [o for o in outs if isinstance(o, torch.fx.Node) and not _view_of_input(o)]
    bases = {o: _plan_base(o) for o in nodes}
    uses = Counter(bases.values())
    return {o: o if uses[b] == 1 and _reshape_of(o, b) else b for o, b in bases.items()}


def _view_of_input(n):
    """True when node ``n`` is a chain of view ops over a graph input."""
    b = _view_base(n)
    return isinstance(b, torch.fx.Node) and b.op == "placeholder"


def _stores(u, outputs: bool) -> bool:
    """True when user ``u`` of a value stores it (looking through views): an op that is not
    element-wise, or (with ``outputs``) the graph's output."""
    if u.op == "output":
        return outputs
    if u.op != "call_function":
        return False
    if u.target in _VIEW_OPS:
        return any(_stores(w, outputs) for w in u.users)
    return torch.Tag.pointwise not in getattr(u.target, "tags", ())


def _stored_once(n) -> bool:
    """True when node ``n``'s value is worth storing as soon as it is made: it has several users
    and one of them (looking through views) is not element-wise, so it is stored for that user
    anyway; the element-wise users then read it instead of inlining its expression again (a
    residual stream recomputed as a growing sum of every layer's branch at each layer)."""
    return len(n.users) >= 2 and any(_stores(u, False) for u in n.users)


def _stored_later(n) -> bool:
    """True when node ``n``'s value will be stored: it is a graph output, or a user (looking
    through views) is not element-wise."""
    return any(_stores(u, True) for u in n.users)


def _stored_with(n, env: dict) -> list:
    """The pending values that run in one kernel with element-wise node ``n``'s, which a later
    op (not the graph's output, whose values may be written in place) stores: its pending
    operands of the same shape that are stored later too (a linear layer's output plus bias,
    saved for the backward pass, and the activation of it that the next layer reads). Empty
    when ``n`` is not such a node."""
    if n.op != "call_function" or torch.Tag.pointwise not in getattr(n.target, "tags", ()):
        return []
    value = env[n]
    if not isinstance(value, hg.Tensor) or not value.is_lazy or not any(_stores(u, False) for u in n.users):
        return []
    return [env[a] for a in n.all_input_nodes
            if isinstance(env.get(a), hg.Tensor) and env[a].is_lazy and env[a].shape == value.shape
            and _stored_later(a)]


def interpret(nodes, values: dict) -> dict:
    """Runs FX ``nodes`` of core ATen ops on Hologram tensors; ``values`` maps the placeholders
    to their values. Returns every node's value."""
    env = dict(values)
    for n in nodes:
        if n.op == "call_function":
            fn = lowering.lookup(n.target)
            if fn is None:
                raise lowering.NoLowering(f"{n.target}: no Hologram lowering")
            a = torch.fx.node.map_arg(n.args, lambda m: env[m])
            k = torch.fx.node.map_arg(n.kwargs, lambda m: env[m])
            lowering.CTX.node = n
            try:
                env[n] = fn(*a, **k)
            finally:
                lowering.CTX.node = None
            partners = _stored_with(n, env)
            if partners:
                hg.Tensor.realize_all([env[n], *partners])
            elif isinstance(env[n], hg.Tensor) and _stored_once(n):
                env[n] = env[n].realize()
        elif n.op == "get_attr":
            raise lowering.NoLowering(f"a get_attr node ({n.target})")
    return env


class _Graph:
    """One FX graph of core ATen ops, run as Hologram plans (one per input signature)."""

    # Called with the argument list itself (AOTAutograd's and Dynamo's boxed convention).
    _boxed_call = True

    def __init__(self, gm: torch.fx.GraphModule, kind: str):
        self.gm = gm
        self.kind = kind
        attention.drop_unused_probabilities(gm)
        self.nodes = list(gm.graph.nodes)
        self.placeholders = [n for n in self.nodes if n.op == "placeholder"]
        self.output = next(n for n in self.nodes if n.op == "output")
        outs = self.output.args[0]
        self.outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        self.plans: dict = {}
        # Outputs the caller sees (the rest of a forward graph's outputs are saved for backward).
        self.user_outputs = len(self.outs) if kind != "forward" else _forward_returns(len(self.outs))
        missing = [n for n in self.nodes if n.op == "call_function" and lowering.lookup(n.target) is None]
        missing += [n for n in self.nodes if n.op in ("call_method", "call_module")]
        self.eager_reason = None
        # Dynamo guards a graph traced with static shapes on its inputs' shapes, dtypes and
        # devices, so such a graph has one signature: no key to build per call (the plan still
        # checks every input's shape and dtype natively before a replay).
        self.static = all(_static_placeholder(p) for p in self.placeholders)
        self.only = None
        if missing:
            self._fall_back(missing, "no Hologram lowering")
        _STATS["graphs"] += 1
        _GRAPHS.add(self)

    def _fall_back(self, nodes, why):
        names = sorted({str(n.target) for n in nodes})
        self.eager_reason = f"{', '.join(names)}: {why}"
        _STATS["eager_graphs"] += 1
        _STATS["fallback_nodes"] += len(nodes)
        for n in nodes:
            _FALLBACK_OPS[str(n.target)] += 1
        key = (self.kind, self.eager_reason)
        if key not in _warned:
            _warned.add(key)
            log.warning("hologram backend: the %s graph runs in eager PyTorch (%s)", self.kind, self.eager_reason)

    # ----- the call path -----

    def __call__(self, args):
        if self.eager_reason is not None:
            return self.gm(*args)
        if self.only is not None:
            try:
                return self.only(args)
            except lowering.NoLowering as e:
                self.only = None
                self.plans.clear()
                self._fall_back([self.output], str(e))
                return self.gm(*args)
        key = tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else ("v", a) for a in args)
        group = self.plans.get(key)
        if group is None:
            group = self.plans[key] = _Signature(self, args)
            if self.static:
                self.only = group
        try:
            return group(args)
        except lowering.NoLowering as e:
            del self.plans[key]
            self._fall_back([self.output], str(e))
            return self.gm(*args)


# Plan instances kept per input signature: a new one is recorded while the others' output
# buffers are still in use (two forward passes before one backward pass, gradients kept).
_MAX_INSTANCES = 4
# Device addresses of plan output buffers handed to torch as views, each with a weak reference
# to its plan: when such a tensor (or a view of it) comes back as an input of another plan (a
# saved activation of the forward graph, read by the backward graph), it is read in place.
_PLAN_BUFFERS: dict = {}


def _register_plan_buffers(addresses, plan) -> None:
    """Remembers ``addresses`` as output buffers of ``plan`` (a weak reference: a plan that is
    gone no longer claims them, even if nobody unregistered it, so memory reused at the same
    address by another tensor is not taken for a plan's buffer)."""
    for address, ref in list(_PLAN_BUFFERS.items()):
        if ref() is None:
            del _PLAN_BUFFERS[address]
    for address in addresses:
        _PLAN_BUFFERS[address] = weakref.ref(plan)


def random_seed(executor) -> hg.Tensor:
    """A new seed for a plan that draws random numbers, from torch's generator (so
    ``torch.manual_seed`` makes a compiled model's dropout reproducible)."""
    seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
    return hg.full((1,), seed, dtype="uint32", device=executor)


class _Signature:
    """The plans of one graph for one input signature, and how their outputs map back."""

    def __init__(self, graph: _Graph, args):
        self.graph = graph
        self.device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        self.executor = default_executor(self.device)
        pos = {n: i for i, n in enumerate(graph.placeholders)}
        self.pos = pos
        # Values the plan computes: every output that is not an input or a view of one. An
        # output that is a view of a computed value: the plan returns the value, torch makes the
        # view (no copy kernel for permuted outputs); the only output over a value that just
        # reshapes it comes from the plan in its shape (see _plan_nodes).
        self.plan_node = _plan_nodes(graph.outs)
        planned: dict = {}
        for o in graph.outs:
            if isinstance(o, torch.fx.Node) and not _view_of_input(o):
                planned.setdefault(self.plan_node[o], len(planned))
        self.planned = planned
        used = {p for p in graph.placeholders if p.users and any(u.op != "output" for u in p.users)}
        self.inputs = [pos[p] for p in graph.placeholders if p in used and isinstance(args[pos[p]], torch.Tensor)]
        # Outputs returned as views of the plan's buffers: what only the backward graph reads
        # (saved activations) and gradients; other values the user sees are copies.
        visible = set()
        for o in graph.outs[:graph.user_outputs]:
            if isinstance(o, torch.fx.Node) and self.plan_node.get(o) in planned:
                visible.add(self.plan_node[o])
        self.saved_only = [node not in visible for node in planned]
        # Gradients: autograd moves them into .grad (or adds them to it and lets them go), and
        # zero_grad() drops them before the next backward pass, so the plan's buffers are free
        # again by then; no allocation and copy per gradient and step. What a forward or
        # inference graph's caller sees is a copy: a caller that keeps it while calling again
        # (`out = model(x)` in a loop) would otherwise keep the instance, and all its buffers,
        # busy, and the next call would record another. A loop that keeps gradients of several
        # passes keeps instances busy: once every instance is, the signature goes back to
        # copies (see __call__).
        self.alias = [True] * len(planned) if graph.kind == "backward" else self.saved_only
        self.instances: list = []
        # A graph that draws random numbers gets a seed input, new at every call.
        self.random = any(n.op == "call_function" and n.target in lowering.RANDOM_OPS for n in graph.nodes)
        self.views = ParameterViews(self.executor, self.device)
        # DLPack's C exchange table where torch has one (a graph without tensor inputs keeps
        # the Python path: its plan's input is a placeholder).
        self.exchange = None if not self.inputs else exchange_for(
            self.executor, [parameter_memory(args[i]) for i in self.inputs])
        # A graph without tensor inputs still gives its plan one (a plan has at least one).
        self.placeholder_input = None if self.inputs else [hg.zeros((1,), device=self.executor)]
        # id(instance) -> the addresses of its aliased output buffers, in _PLAN_BUFFERS (they do
        # not change from replay to replay).
        self.registered: dict = {}
        # How each graph output is made from the plan's results and the arguments, worked out on
        # the first call (see _recipe).
        self.recipe = None

    def __call__(self, args):
        ex = self.executor
        seed = [random_seed(ex)] if self.random else []
        fast = self.exchange
        if fast is not None:
            # Import, replay and export in one native call (DLPack's C exchange table).
            try:
                got = fast.run_first(self.instances, [args[i] for i in self.inputs], self.alias, seed)
            except Exception as e:  # noqa: BLE001 - an input the table cannot take (another device)
                log.debug("hologram backend: the Python DLPack path from now on (%s)", e)
                self.exchange = None
                return self(args)
            if got is not None:
                k, torch_outs = got
                _STATS["replays"] += 1
                _STATS["exchange_replays"] += 1
                if k:  # most recently used first: the next call tries it first
                    self.instances.insert(0, self.instances.pop(k))
                return self._results(args, torch_outs, self.instances[0])
            xs = fast.import_all([args[i] for i in self.inputs]) + seed
        else:
            xs = (self.placeholder_input or self.views([args[i] for i in self.inputs])) + seed
            for k, plan in enumerate(self.instances):
                outs = plan.try_run(xs, self.alias)
                if outs is not None:
                    _STATS["replays"] += 1
                    if k:
                        self.instances.insert(0, self.instances.pop(k))
                    return self._results(args, self._export(outs), plan)
        if len(self.instances) >= _MAX_INSTANCES:
            # An instance whose outputs are free but which reads other memory in place (another
            # model of the same architecture sharing Dynamo's graph, parameters given new memory)
            # is given up for one recorded for these inputs: the least recently used one.
            stale = next((p for p in reversed(self.instances) if p.outputs_free()), None)
            if stale is not None:
                self._drop(stale)
        if len(self.instances) >= _MAX_INSTANCES:
            # Every instance is busy: the caller keeps results of several calls. From now on copy
            # what the caller sees, in an instance recorded so, which takes the place of the least
            # recently used one (its buffers stay with the tensors that hold them).
            self.alias = self.saved_only
            self._drop(self.instances[-1])
        plan, first = self._record(args, xs)
        self.instances.insert(0, plan)
        _STATS["plans"] += 1
        return self._results(args, self._export(first), plan)

    def _export(self, outs) -> list:
        """Torch tensors of plan results (Hologram tensors), one stream handshake for all."""
        if self.exchange is not None:
            return self.exchange.export_all(outs)
        return export_batch(outs, self.device, self.executor)

    def _drop(self, plan):
        """Gives up an instance; its output buffers stop counting as plan buffers."""
        self.instances.remove(plan)
        for address in self.registered.pop(id(plan), ()):
            _PLAN_BUFFERS.pop(address, None)
        _STATS["plans_dropped"] += 1

    def _record(self, args, xs):
        graph, pos, planned = self.graph, self.pos, self.planned
        lowering.CTX.executor = self.executor
        direct = [_in_place(args[i]) for i in self.inputs] if self.inputs else [False]
        if self.random:
            direct.append(False)

        def run(*hx):
            if self.random:
                lowering.CTX.seed, lowering.CTX.draws = hx[-1], 0
                hx = hx[:-1]
            feed = dict(zip(self.inputs, hx))
            env = interpret(graph.nodes, {n: feed.get(pos[n], args[pos[n]]) for n in graph.placeholders})
            out = [None] * len(planned)
            for node, i in planned.items():
                v = env[node]
                if not isinstance(v, hg.Tensor):
                    raise lowering.NoLowering(f"output {node} is not a tensor")
                out[i] = v
            return out

        rec = hg.Recording(self.executor, xs, direct)
        try:
            outs = run(*rec.inputs())
            plan, first = rec.finish(outs, self.alias)
        except hg.HologramError as e:
            rec.abort()
            raise lowering.NoLowering(f"{type(e).__name__}: {e}") from None
        except BaseException:
            rec.abort()
            raise
        return plan, first

    def _results(self, args, torch_outs, plan):
        """The graph's outputs: plan results (as torch tensors), inputs and views of them from
        torch. ``plan``: the instance whose buffers aliased results are."""
        if id(plan) not in self.registered:
            addresses = [t.untyped_storage().data_ptr() for t, aliased in zip(torch_outs, self.alias) if aliased]
            self.registered[id(plan)] = addresses
            _register_plan_buffers(addresses, plan)
        if self.recipe is None:
            results = self._generic_results(args, torch_outs)
            self.recipe = self._recipe(args, results, torch_outs)
            return results
        results = []
        env = None
        for how in self.recipe:
            kind = how[0]
            if kind == "plan":
                results.append(torch_outs[how[1]])
            elif kind == "strided":
                base = torch_outs[how[1]]
                if base.shape != how[5]:  # another shape than the geometry was learnt on
                    if env is None:
                        env = self._env(args, torch_outs)
                    results.append(_torch_view(how[6], env))
                    continue
                results.append(base.as_strided(how[2], how[3], base.storage_offset() + how[4]))
            elif kind == "arg":
                results.append(args[how[1]])
            elif kind == "input_view":
                _, p, node, geometry = how
                a = args[p]
                g = geometry.get((a.shape, a.stride(), a.storage_offset(), a.dtype))
                if g is not None:
                    results.append(a.as_strided(g[0], g[1], g[2]))
                    continue
                if env is None:
                    env = self._env(args, torch_outs)
                r = _torch_view(node, env)
                _learn_geometry(geometry, a, r)
                results.append(r)
            elif kind == "chain":
                if env is None:
                    env = self._env(args, torch_outs)
                results.append(_torch_view(how[1], env))
            else:
                results.append(how[1])
        return results

    def _generic_results(self, args, torch_outs):
        """The outputs made by replaying each output's chain of view ops in torch."""
        env = self._env(args, torch_outs)
        return [o if o is None or not isinstance(o, torch.fx.Node) else _torch_view(o, env)
                for o in self.graph.outs]

    def _env(self, args, torch_outs) -> dict:
        env = dict(zip(self.graph.placeholders, args))
        for node, i in self.planned.items():
            env[node] = torch_outs[i]
        return env

    def _recipe(self, args, results, torch_outs) -> list:
        """How to make each output on later calls without replaying view ops one by one: a plan
        result itself, a graph argument, a constant, or one ``as_strided`` view of a plan
        result with the geometry the chain of view ops gave on this call (the plan's buffers
        have the same shapes and layout at every call), or a view of a graph input: one
        ``as_strided`` with the geometry learnt for the input's layout (the chain of view ops
        for a layout not seen yet), or a chain of view ops replayed."""
        recipe: list = []
        handed_out = set()
        # A forward graph's outputs past the user's are only saved for the backward graph: one
        # tensor may stand for several of them (the same value saved under two names).
        saved_from = self.graph.user_outputs if self.graph.kind == "forward" else len(self.graph.outs)
        for k, (o, r) in enumerate(zip(self.graph.outs, results)):
            if o is None or not isinstance(o, torch.fx.Node):
                recipe.append(("const", o))
                continue
            if o.op == "placeholder":
                recipe.append(("arg", self.pos[o]))
                continue
            if _view_of_input(o):
                p = self.pos[_view_base(o)]
                geometry: dict = {}
                if isinstance(args[p], torch.Tensor):
                    _learn_geometry(geometry, args[p], r)
                recipe.append(("input_view", p, o, geometry))
                continue
            i = self.planned[self.plan_node[o]]
            base = torch_outs[i]
            if r is base:
                recipe.append(("plan", i))
                handed_out.add(i)
                continue
            if not isinstance(r, torch.Tensor) or r.device != base.device \
                    or r.untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
                recipe.append(("chain", o))  # a view op that copied (a reshape of a permutation)
                continue
            same = r.shape == base.shape and r.stride() == base.stride() \
                and r.storage_offset() == base.storage_offset() and r.dtype == base.dtype
            if same and (i not in handed_out or k >= saved_from):
                # A chain that ends where it began (a transpose of a transpose): the result itself.
                recipe.append(("plan", i))
                handed_out.add(i)
            elif r.dtype == base.dtype:
                recipe.append(("strided", i, tuple(r.shape), tuple(r.stride()),
                               r.storage_offset() - base.storage_offset(), base.shape, o))
            else:
                recipe.append(("chain", o))
        return recipe


def _learn_geometry(geometry: dict, a, r) -> None:
    """Keeps the geometry of view ``r`` of input ``a`` under ``a``'s layout (when ``r`` is a
    view of ``a``'s memory: a chain with a copying reshape is replayed at every call)."""
    if isinstance(r, torch.Tensor) and r.dtype == a.dtype and r.device == a.device \
            and r.untyped_storage().data_ptr() == a.untyped_storage().data_ptr():
        geometry[(a.shape, a.stride(), a.storage_offset(), a.dtype)] = (
            tuple(r.shape), tuple(r.stride()), r.storage_offset())


def _in_place(x) -> bool:
    """Inputs read where they are: parameters and views of them (the backward graph reads the
    transposed weights the forward graph saved), and plan outputs handed to torch as views, and
    torch's views of those (the key and value heads sliced out of one saved projection)."""
    if parameter_memory(x):
        return True
    owner = _PLAN_BUFFERS.get(x.untyped_storage().data_ptr())
    return owner is not None and owner() is not None


def _torch_view(n, env):
    if n in env:
        return env[n]
    base = _torch_view(n.args[0], env)
    rest = torch.fx.node.map_arg(n.args[1:], lambda m: env[m])
    env[n] = n.target(base, *rest, **n.kwargs)
    return env[n]


def _static_placeholder(p) -> bool:
    """True when graph input ``p`` was traced as a tensor of fixed shape (or as no value)."""
    val = p.meta.get("val")
    if val is None:
        return "val" in p.meta
    return isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape)


def _forward_returns(n_outs: int) -> int:
    """How many of the forward graph's outputs the caller sees (AOTAutograd's metadata)."""
    try:
        ctx = torch._guards.TracingContext.try_get()
        return int(ctx.fw_metadata.num_forward_returns)  # type: ignore[union-attr]  # None: see below
    except Exception:  # noqa: BLE001 - without the metadata, treat every output as visible
        return n_outs


def _compiler(kind, made: list):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        graph = _Graph(gm, kind)
        made.append((graph, direct.read_metadata()))
        # AOTAutograd calls boxed functions (_Graph._boxed_call) with the argument list itself.
        return graph

    return compile_graph


def hologram_backend(gm: torch.fx.GraphModule, example_inputs):
    """The ``torch.compile`` backend: AOTAutograd with Hologram plans for the forward, backward
    and inference graphs.

    Graphs that AOTAutograd's runtime wrappers would only call (see :mod:`.direct`) go to
    Dynamo without them: an inference graph as it is, a forward and backward pair as one
    autograd Function. Dynamo guards on the grad mode, so each runs only as what it was
    compiled as. ``compile_stats()`` counts them (``direct_inference``, ``direct_training``)."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch.nn.attention import SDPBackend, sdpa_kernel

    made: list = []
    # Attention as one op (hologram::sdpa, see .attention), or where that does not apply as
    # matrix products and a softmax; RNNs as their cells (not oneDNN's or cuDNN's fused
    # kernels, which Hologram cannot run).
    with sdpa_kernel(SDPBackend.MATH), torch.backends.mkldnn.flags(enabled=False), \
            torch.backends.cudnn.flags(enabled=False), direct.eager_backward_lowering(), \
            attention.OneOp():
        compiled = aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=_compiler("forward", made),
            bw_compiler=_compiler("backward", made),
            inference_compiler=_compiler("inference", made),
            decompositions=_decompositions(),
        )
    if not DIRECT:
        return compiled
    chosen = direct.choose(gm, example_inputs, made)
    if chosen is None:
        return compiled
    kind, fn = chosen
    _STATS[f"direct_{kind}"] += 1
    return fn


def register() -> None:
    """Registers ``backend="hologram"`` with ``torch.compile`` (done on import)."""
    try:
        from torch._dynamo import register_backend

        register_backend(name="hologram")(hologram_backend)
        # Older PyTorch releases (2.11) leave RNN modules to eager (a graph break) unless this
        # is set; the hologram backend lowers LSTM cells, so let Dynamo trace them.
        import torch._dynamo.config as dynamo_config

        if hasattr(dynamo_config, "allow_rnn"):
            dynamo_config.allow_rnn = True
    except Exception as e:  # noqa: BLE001 - an older or newer torch without this hook
        log.debug("could not register the torch.compile backend: %s", e)

