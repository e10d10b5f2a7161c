"""Host cost of each piece of the torch <-> Hologram call path, one at a time, beside the cost of
one small torch op on the same machine (the unit a host-bound eager step is made of).

    python bench/interop_costs.py --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time


def per_call(fn, n=2000) -> float:
    """Median µs per call of ``fn`` over blocks of 100 calls."""
    for _ in range(100):
        fn()
    blocks = []
    for _ in range(n // 100):
        t = time.perf_counter()
        for _ in range(100):
            fn()
        blocks.append((time.perf_counter() - t) / 100)
    return statistics.median(blocks) * 1e6


def per_call_idle(fn, sync, n=300) -> float:
    """Median µs of the host time of one call of ``fn`` started on an idle device (the device
    is synchronized between calls, outside the timed region): the regime of a host-bound
    step, where the GPU finishes each piece before the host queues the next."""
    times = []
    for i in range(n + 20):
        sync()
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        if i >= 20:
            times.append(dt)
    sync()
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="", help="also split the per-call path of this bench/models.py case's compiled graphs")
    args = ap.parse_args()

    import torch

    import hologram as hg
    from hologram_torch import _bridge
    from hologram_torch._bridge import default_executor

    dev = torch.device(args.device)
    ex = default_executor(dev)
    x = torch.randn(64, 512, device=dev)
    w = torch.nn.Parameter(torch.randn(256, 512, device=dev))
    h = _bridge._import_one(x, ex, ex.backend == "cuda")
    stream = _bridge._current_stream(dev) if dev.type == "cuda" else 0

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    plan, _ = hg.record(lambda a: [(a * 2.0 + 1.0).relu()], h)
    del _
    views = _bridge.ParameterViews(ex, dev)
    rows = {
        "torch.relu(x) (one small op)": lambda: torch.relu(x),
        "torch.addmm (one linear layer)": lambda: torch.addmm(w[:, 0], x, w.t()),
        "x.data_ptr(); x.shape; x.stride()": lambda: (x.data_ptr(), x.shape, x.stride()),
        "x.as_strided(...)": lambda: x.as_strided((64, 512), (512, 1), 0),
        "_current_stream(dev)": (lambda: _bridge._current_stream(dev)) if dev.type == "cuda" else None,
        "executor.order_after_stream": lambda: ex.order_after_stream(stream),
        "executor.order_before_stream": lambda: ex.order_before_stream(stream),
        "_import_one(x) (DLPack in)": lambda: _bridge._import_one(x, ex, ex.backend == "cuda"),
        "ParameterViews([x, w, w, w, w])": lambda: views([x, w, w, w, w]),
        "t.__dlpack__ + torch from_dlpack (out)": lambda: _bridge._capsule_to_torch(h.__dlpack__(None)),
        "export_batch([h, h])": lambda: _bridge.export_batch([h, h], dev, ex),
        "plan.try_run([h]) (one fused kernel)": lambda: plan.try_run([h], [True]),
        "plan.try_run([h]) copy out": lambda: plan.try_run([h], [False]),
    }
    print(f"host cost per call on {args.device} (us, median)")
    print("| piece | us |")
    print("|---|---|")
    for name, fn in rows.items():
        if fn is None:
            continue
        sync()
        print(f"| {name} | {per_call(fn):.2f} |")
        sync()
    if args.model:
        split_model(args.model, args.device)


def time_signature(sig, a, sync) -> str:
    """A table row: the per-call pieces of one compiled graph's signature ``sig`` on its
    arguments ``a``, timed alone."""
    fast = sig.exchange
    if fast is None:
        return f"| {sig.graph.kind} | no exchange table |"
    xs = [a[i] for i in sig.inputs]
    plan = sig.instances[0]
    hx = fast.import_all(xs)
    imp = per_call_idle(lambda: fast.import_all(xs), sync)
    run = per_call_idle(lambda: plan.try_run(hx, sig.alias), sync)
    held = plan.try_run(hx, sig.alias)
    exp = per_call_idle(lambda: fast.export_all(held), sync)
    held = None
    both = per_call_idle(lambda: fast.run_first([plan], xs, sig.alias), sync)
    torch_outs = fast.run_first([plan], xs, sig.alias)[1]
    res = per_call_idle(lambda: sig._results(a, torch_outs, plan), sync)
    stats = plan.stats
    return (f"| {sig.graph.kind} ({len(xs)} in, {len(sig.alias)} out, {stats['launches']} launches, "
            f"{stats['gemms']} gemms, captured {stats['captured']}) | {imp:.1f} | {run:.1f} | {exp:.1f} "
            f"| {both:.1f} | {res:.1f} |")


def split_model(case: str, device: str) -> None:
    """The per-call pieces of each compiled graph of ``case`` (a training step), timed alone."""
    import copy
    import os
    import sys

    import torch

    from hologram_torch import compile as hc

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models

    base, x, y, loss_fn, opt_fn = models.make_case(case, device, False)
    x, y = x.to(device), y.to(device)
    model = torch.compile(copy.deepcopy(base).to(device), backend="hologram")
    opt = opt_fn(model.parameters())
    keep = {}

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    # Capture each signature's arguments on a call, to replay its pieces alone afterwards.
    original = hc._Signature.__call__

    def capture(self, a):
        keep[id(self)] = (self, list(a))
        return original(self, a)

    hc._Signature.__call__ = capture
    for _ in range(3):
        step()
    hc._Signature.__call__ = original
    opt.zero_grad(set_to_none=True)
    sync()
    print(f"\n{case}: the per-call pieces of each compiled graph (us of host time, median; each call on an idle device)")
    print("| graph | import_all | try_run | export_all | run_first (all three) | _results |")
    print("|---|---|---|---|---|---|")
    # The backward graph first: its arguments hold the forward graph's saved outputs.
    order = sorted(keep, key=lambda k: keep[k][0].graph.kind != "backward")
    for key in order:
        sig, a = keep.pop(key)
        print(time_signature(sig, a, sync))
        del sig, a


if __name__ == "__main__":
    main()
