"""A whole training step (forward, backward and the optimizer's update of every parameter) as
one Hologram plan, replayed by one call per step.

    step = hologram_torch.compile_step(model, torch.nn.functional.cross_entropy, optimizer)
    for x, y in batches:
        loss = step(x, y)          # parameters and optimizer state updated in place

The step is traced once per input signature (through autograd's engine, then
``torch.func.functionalize``) into one graph of core ATen ops (the same decompositions as the
``torch.compile`` backend), lowered to Hologram tensor ops and recorded as a plan. Parameters
and optimizer state are read and written where they are (no copies); only the batch is copied in
and the loss out. On CUDA a step is one CUDA graph launch.

Optimizers: ``torch.optim.SGD`` (momentum, dampening, Nesterov, weight decay, maximize) and
``torch.optim.Adam`` / ``AdamW`` (weight decay, maximize; not amsgrad), with their hyper-parameters
read from ``param_groups`` at every step (learning-rate schedulers work). The optimizer's state
lives in ``optimizer.state`` as torch's own does. Gradients are not stored in ``param.grad``.
"""

from __future__ import annotations

import math

import torch
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

import hologram as hg

from . import compile as _compile
from . import attention, lowering
from ._bridge import default_executor, export_batch, import_batch


class _Optimizer:
    """The update rule of a torch optimizer as traceable torch ops over (params, grads, state)."""

    def __init__(self, opt: torch.optim.Optimizer):
        self.opt = opt
        if isinstance(opt, torch.optim.AdamW):
            self.kind = "adamw"
        elif isinstance(opt, torch.optim.Adam):
            self.kind = "adam"
        elif isinstance(opt, torch.optim.SGD):
            self.kind = "sgd"
        else:
            raise TypeError(f"compile_step supports SGD, Adam and AdamW, not {type(opt).__name__}")
        for g in opt.param_groups:
            if g.get("amsgrad"):
                raise TypeError("compile_step does not support amsgrad")
            if g.get("differentiable"):
                raise TypeError("compile_step does not support differentiable optimizers")
        # id(step tensor) -> (the tensor, its version, its value): see _step_count.
        self._steps: dict = {}

    def group_of(self, p):
        for g in self.opt.param_groups:
            if any(q is p for q in g["params"]):
                return g
        raise ValueError("a trained parameter is not in the optimizer")

    def groups_of(self, params) -> list:
        """The param group of each of ``params`` (one pass over the groups, not one per
        parameter: the groups are read anew at every step, as the user may add one)."""
        by_id = {id(q): g for g in self.opt.param_groups for q in g["params"]}
        out = []
        for p in params:
            g = by_id.get(id(p))
            if g is None:
                raise ValueError("a trained parameter is not in the optimizer")
            out.append(g)
        return out

    def state_names(self, group) -> list:
        if self.kind == "sgd":
            return ["momentum_buffer"] if group["momentum"] else []
        return ["exp_avg", "exp_avg_sq"]

    def init_state(self, p, group=None) -> list:
        """The state tensors of ``p`` (created as torch would, zeroed, on first use)."""
        st = self.opt.state[p]
        names = self.state_names(group if group is not None else self.group_of(p))
        for n in names:
            if n not in st:
                st[n] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if self.kind != "sgd" and "step" not in st:
            st["step"] = torch.tensor(0.0)
        return [st[n] for n in names]

    def scalars(self, params, groups=None) -> list:
        """Per-parameter scalars of this step (learning rates, bias corrections, first-step
        flags), as floats; they are inputs of the plan, so they may change every step."""
        groups = groups if groups is not None else self.groups_of(params)
        out = []
        for p, g in zip(params, groups):
            st = self.opt.state[p]
            if self.kind == "sgd":
                first = 1.0 if not st.get("_hologram_started") else 0.0
                out.append([g["lr"], first])
            else:
                t = self._step_count(st["step"]) + 1.0
                b1, b2 = g["betas"]
                out.append([g["lr"], 1.0 - b1 ** t, math.sqrt(1.0 - b2 ** t)])
        return out

    def _step_count(self, step: torch.Tensor) -> float:
        """The value of a parameter's ``step`` tensor: remembered from the last time it was read
        or advanced here while the tensor is the same object at the same version (reading it
        is one host read per parameter and step); read again when anyone else changed it."""
        seen = self._steps.get(id(step))
        if seen is not None and seen[0] is step and seen[1] == step._version:
            return seen[2]
        value = float(step)
        self._steps[id(step)] = (step, step._version, value)
        return value

    def advance(self, params):
        if self.kind == "sgd":
            for p in params:
                self.opt.state[p]["_hologram_started"] = True
            return
        steps = [self.opt.state[p]["step"] for p in params]
        values = [self._step_count(t) for t in steps]
        # One call for every parameter's step tensor (not one in-place add per parameter).
        torch._foreach_add_(steps, 1.0)
        for t, v in zip(steps, values):
            self._steps[id(t)] = (t, t._version, v + 1.0)

    def update(self, p, g, state, sc, group):
        """New (param, state) after one step, as torch ops."""
        if group.get("maximize"):
            g = -g
        wd = group["weight_decay"]
        if self.kind == "sgd":
            lr, first = sc[0], sc[1]
            if wd:
                g = g + wd * p
            new_state = []
            if group["momentum"]:
                m, damp = group["momentum"], group["dampening"]
                buf = first * g + (1.0 - first) * (m * state[0] + (1.0 - damp) * g)
                new_state = [buf]
                g = g + m * buf if group["nesterov"] else buf
            return p - lr * g, new_state
        lr, bc1, bc2_sqrt = sc[0], sc[1], sc[2]
        b1, b2 = group["betas"]
        if self.kind == "adamw":
            p = p * (1.0 - lr * wd)
        elif wd:
            g = g + wd * p
        m = b1 * state[0] + (1.0 - b1) * g
        v = b2 * state[1] + (1.0 - b2) * g * g
        denom = v.sqrt() / bc2_sqrt + group["eps"]
        return p - (lr / bc1) * m / denom, [m, v]


def _to_device(values: tuple, device: torch.device) -> torch.Tensor:
    """``values`` as an f32 tensor on ``device``. On CUDA through pinned memory without waiting:
    a copy from pageable memory synchronizes torch's stream, so the host would wait for the
    previous step's replay before it could queue this one (Adam's bias corrections change every
    step). Torch's pinned-memory cache keeps the block until the copy that reads it has run."""
    if device.type != "cuda":
        return torch.tensor(values, dtype=torch.float32, device=device)
    return torch.tensor(values, dtype=torch.float32, pin_memory=True).to(device, non_blocking=True)


class TrainStep:
    """One training step as a Hologram plan; see :func:`compile_step`."""

    def __init__(self, model: torch.nn.Module, loss_fn, optimizer: torch.optim.Optimizer):
        self.model, self.loss_fn = model, loss_fn
        self.opt = _Optimizer(optimizer)
        self.plans: dict = {}
        # (the scalars of the last step, their tensor): reused while they do not change.
        self._scalars = None

    def _params(self):
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def __call__(self, *batch):
        named = self._params()
        params = [p for _, p in named]
        groups = self.opt.groups_of(params)
        state = [self.opt.init_state(p, g) for p, g in zip(params, groups)]
        scalars = self.opt.scalars(params, groups)
        device = params[0].device
        ex = default_executor(device)
        flat_sc = tuple(v for row in scalars for v in row)
        # SGD's scalars stay the same from the second step on: the same tensor, not a new one
        # (on CUDA a copy from the host) at every step.
        if self._scalars is None or self._scalars[0] != flat_sc or self._scalars[1].device != device:
            self._scalars = (flat_sc, _to_device(flat_sc, device))
        sc = self._scalars[1]
        flat_state = [s for ss in state for s in ss]
        buffers = [b for _, b in self.model.named_buffers()]
        # Parameters, optimizer state and buffers are read and written in place: a plan is for
        # the memory they are in.
        key = tuple((tuple(b.shape), b.dtype) for b in batch) + tuple(
            (t.data_ptr(), tuple(t.shape)) for t in params + flat_state + buffers) + (self.model.training,)
        entry = self.plans.get(key)
        if entry is None:
            entry = self.plans[key] = self._record(named, state, scalars, sc, batch, ex)
            _compile._STATS["plans"] += 1
            loss = entry[1]
        else:
            plan, _, hg_direct, random = entry
            xs = hg_direct + import_batch([sc, *batch], ex)
            if random:
                xs.append(_compile.random_seed(ex))
            (loss,) = plan.run(xs)
            _compile._STATS["replays"] += 1
        self.opt.advance(params)
        (out,) = export_batch([loss], device, ex)
        return out

    def _record(self, named, state, scalars, sc, batch, ex):
        names = [n for n, _ in named]
        params = [p for _, p in named]
        bnames = [n for n, _ in self.model.named_buffers()]
        buffers = [b for _, b in self.model.named_buffers()]
        groups = self.opt.groups_of(params)
        widths = [len(r) for r in scalars]
        model, loss_fn, opt = self.model, self.loss_fn, self.opt

        def step(plist, blist, slist, sc, batch):
            # Buffers (batch norm's running statistics) are an argument, not differentiated:
            # their in-place updates come out of functionalization as new values.
            bdict = dict(zip(bnames, blist))
            # Autograd's own engine (not functorch's grad transform), so a custom op's registered
            # backward runs: attention stays one fused op forward and one backward.
            with torch.enable_grad():
                out = functional_call(model, {**dict(zip(names, plist)), **bdict}, (batch[0],))
                loss = loss_fn(out, *batch[1:])
                grads = torch.autograd.grad(loss, plist, allow_unused=True, materialize_grads=True)
            new_p, new_s, at = [], [], 0
            with torch.no_grad():
                for i, p in enumerate(plist):
                    row = [sc[at + k] for k in range(widths[i])]
                    at += widths[i]
                    np_, ns = opt.update(p, grads[i], slist[i], row, groups[i])
                    new_p.append(np_)
                    new_s.append(ns)
            return loss.detach(), new_p, new_s, [bdict[n] for n in bnames]

        detached = [p.detach() for p in params]
        leaves = [p.detach().requires_grad_() for p in params]
        from torch.nn.attention import SDPBackend, sdpa_kernel

        decompositions = _compile._decompositions()
        # Tracing runs the ops: on copies of the buffers, not the real ones.
        with sdpa_kernel(SDPBackend.MATH), torch.backends.mkldnn.flags(enabled=False), \
                torch.backends.cudnn.flags(enabled=False), attention.OneOp():
            # The step with autograd traced through (attention as the fused op and its
            # backward; RNNs as their cells, not oneDNN's kernels), then functionalized and
            # decomposed to core ATen: autograd's in-place accumulations and the buffers'
            # updates become plain ops (functionalization before the decompositions, whose
            # prims it cannot take).
            joint = make_fx(step)(
                leaves, [b.detach().clone() for b in buffers], state, sc, list(batch))
            gm = make_fx(torch.func.functionalize(joint, remove="mutations"), decomposition_table=decompositions)(
                detached, [b.detach().clone() for b in buffers], state, sc, list(batch))
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        flat_outs = torch.utils._pytree.tree_leaves(outs)
        flat_state = [s for ss in state for s in ss]
        # The graph's inputs: parameters, buffers, optimizer state, scalars, batch.
        torch_inputs = detached + [b.detach() for b in buffers] + flat_state + [sc, *batch]
        n_direct = len(detached) + len(buffers) + len(flat_state)
        hx = import_batch(torch_inputs, ex)
        random = any(n.op == "call_function" and n.target in lowering.RANDOM_OPS for n in gm.graph.nodes)
        if random:
            hx.append(_compile.random_seed(ex))
        lowering.CTX.executor = ex
        rec = hg.Recording(ex, hx, [True] * n_direct + [False] * (len(hx) - n_direct))
        try:
            ins = rec.inputs()
            if random:
                lowering.CTX.seed, lowering.CTX.draws = ins[-1], 0
                ins = ins[:-1]
            env = _compile.interpret(gm.graph.nodes, dict(zip(placeholders, ins)))
            values = [env[o] if isinstance(o, torch.fx.Node) else o for o in flat_outs]
            # The outputs' order is (loss, params, state, buffers); the inputs' is (params,
            # buffers, state).
            loss, n_p, n_s = values[0], len(detached), len(flat_state)
            updates = values[1:1 + n_p] + values[1 + n_p + n_s:] + values[1 + n_p:1 + n_p + n_s]
            # Every new value is computed from the old ones (an update must not see another's
            # new parameter); values that read their destination only at the element they write
            # run straight into it, once no other update still reads it (no temporaries, no
            # copies).
            pairs = [(new, dst) for dst, new in zip(ins[:n_direct], updates) if new is not dst]
            hg.Tensor.assign_all([n for n, _ in pairs], [d for _, d in pairs])
            plan, first = rec.finish([loss])
        except BaseException:
            rec.abort()
            raise
        finally:
            lowering.CTX.seed = None
        return plan, first[0], hx[:n_direct], random


def compile_step(model: torch.nn.Module, loss_fn, optimizer: torch.optim.Optimizer) -> TrainStep:
    """A training step of ``model`` under ``loss_fn(model(x), *targets)`` with ``optimizer``, run
    as one Hologram plan per input signature: ``step(x, *targets)`` returns the loss and updates
    the parameters and the optimizer's state in place."""
    return TrainStep(model, loss_fn, optimizer)
