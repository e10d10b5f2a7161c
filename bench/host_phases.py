"""Where a host-bound training step spends its host time: each phase of the step (zero_grad,
forward, loss, backward, optimizer) timed on the host without synchronizing in between, per
implementation of bench/models.py, in one process; then the Python functions that cost the most
in one implementation's step (cProfile).

    python bench/host_phases.py --only mlp --device cuda --impls eager,hologram
    python bench/host_phases.py --only mlp --device cpu --small --cprofile hologram

When the GPU is not the bottleneck (small models), a phase's host time is what the step costs.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PHASES = ("zero_grad", "forward", "loss", "backward", "optimizer", "sync")


def wrap_timer(name: str) -> list:
    """Wraps ``module:Class.method`` (or ``module:function``) so that each call's inclusive host
    time is appended to the list returned."""
    import importlib

    module, _, attr = name.partition(":")
    owner = importlib.import_module(module)
    parts = attr.split(".")
    for p in parts[:-1]:
        owner = getattr(owner, p)
    inner = getattr(owner, parts[-1])
    spans: list = []

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spans.append(time.perf_counter() - t)

    setattr(owner, parts[-1], timed)
    return spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="mlp", help="one case of bench/models.py")
    ap.add_argument("--impls", default="eager,hologram")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--cprofile", default="", help="implementation to profile with cProfile")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--time", default="", help="comma-separated module:Class.method to time inclusively")
    ap.add_argument("--driver", default="", help="implementation whose CUDA API calls to list (torch profiler)")
    args = ap.parse_args()

    import torch

    import models

    base, x, y, loss_fn, opt_fn = models.make_case(args.only, args.device, args.small)
    x, y = x.to(args.device), y.to(args.device)
    impls = models.implementations(args.device)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    steps = {}
    for impl in args.impls.split(","):
        model = copy.deepcopy(base).to(args.device)
        fn = impls[impl](model)
        opt = opt_fn(model.parameters())
        steps[impl] = (fn, opt)

    def timed_step(fn, opt, acc):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        out = fn(x)
        t2 = time.perf_counter()
        loss = loss_fn(out, y)
        t3 = time.perf_counter()
        loss.backward()
        t4 = time.perf_counter()
        opt.step()
        t5 = time.perf_counter()
        sync()
        t6 = time.perf_counter()
        for name, a, b in zip(PHASES, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
            acc[name].append(b - a)

    spans = {name: wrap_timer(name) for name in args.time.split(",") if name}
    for fn, opt in steps.values():
        warm = {p: [] for p in PHASES}
        for _ in range(5):
            timed_step(fn, opt, warm)
    # Interleaved blocks, so drift of the machine hits every implementation alike.
    acc = {impl: {p: [] for p in PHASES} for impl in steps}
    for _ in range(args.steps // 10):
        for impl, (fn, opt) in steps.items():
            for _ in range(10):
                timed_step(fn, opt, acc[impl])
    print(f"{args.only} train on {args.device}: median host time per phase (us), {args.steps} steps")
    print("| impl | " + " | ".join(PHASES) + " | total |")
    print("|---" * (len(PHASES) + 2) + "|")
    for impl in steps:
        med = [statistics.median(acc[impl][p]) * 1e6 for p in PHASES]
        totals = [sum(acc[impl][p][i] for p in PHASES) for i in range(len(acc[impl]["forward"]))]
        print(f"| {impl} | " + " | ".join(f"{m:.1f}" for m in med) + f" | {statistics.median(totals) * 1e6:.1f} |")

    if spans:
        for name, v in spans.items():
            if v:
                print(f"{name}: {len(v)} calls, median {statistics.median(v) * 1e6:.1f} us "
                      f"(even calls {statistics.median(v[0::2]) * 1e6:.1f}, odd calls "
                      f"{statistics.median(v[1::2]) * 1e6:.1f}: forward and backward where both run)")

    if os.environ.get("HOLOGRAM_EXCHANGE_PROFILE") == "1" or os.environ.get("HOLOGRAM_PLAN_HOST_PROFILE") == "1":
        from hologram_torch import compile as hc

        for graph in list(hc._GRAPHS):
            for sig in graph.plans.values():
                prof = sig.exchange.profile() if sig.exchange is not None else None
                if prof:
                    n = max(c for c, _ in prof.values())
                    print(f"{graph.kind} run_first phases (us per call over {n} calls): "
                          + ", ".join(f"{k} {t / max(c, 1) * 1e6:.1f}" for k, (c, t) in prof.items()))
                for plan in sig.instances:
                    host = plan.host_profile()
                    if host and max(c for c, _ in host.values()):
                        n = max(c for c, _ in host.values())
                        print(f"{graph.kind} plan replay phases (us per replay over {n} replays): "
                              + ", ".join(f"{k} {t / n * 1e6:.1f}" for k, (c, t) in host.items()))

    if args.driver:
        from torch.profiler import ProfilerActivity, profile

        fn, opt = steps[args.driver]
        scratch = {p: [] for p in PHASES}
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                timed_step(fn, opt, scratch)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))

    if args.cprofile:
        fn, opt = steps[args.cprofile]
        scratch = {p: [] for p in PHASES}
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            timed_step(fn, opt, scratch)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    main()
