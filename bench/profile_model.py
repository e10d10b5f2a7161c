"""Where a model's step spends its GPU time: the kernels of one implementation, from torch's
profiler (CUPTI sees every kernel of the process, Hologram's NVRTC kernels and cuBLAS calls
included), grouped by name, with launches per step and the host time per step.

    python bench/profile_model.py --only gpt --impls eager,hologram-step --mode train
    python bench/profile_model.py --only resnet18 --impls eager,hologram --mode infer

With `--plan-profile`, Hologram plans are recorded without a CUDA graph and time each kind of
step (HOLOGRAM_PLAN_PROFILE=1); the report is printed after the kernels.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="gpt", help="comma-separated cases of bench/models.py")
    ap.add_argument("--impls", default="eager,hologram-step")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--plan-profile", action="store_true")
    args = ap.parse_args()
    if args.plan_profile:
        os.environ["HOLOGRAM_PLAN_PROFILE"] = "1"

    import torch
    from torch.profiler import ProfilerActivity, profile

    import hologram_torch
    import models

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    sort_key = "self_cuda_time_total" if args.device == "cuda" else "self_cpu_time_total"
    for case in args.only.split(","):
        for impl in args.impls.split(","):
            step = make_step(models, hologram_torch, torch, case, impl, args)
            for _ in range(3):
                step()
            models.sync(args.device)
            t = time.perf_counter()
            for _ in range(args.steps):
                step()
            models.sync(args.device)
            wall_ms = (time.perf_counter() - t) / args.steps * 1e3
            with profile(activities=activities) as prof:
                for _ in range(args.steps):
                    step()
                models.sync(args.device)
            print(f"\n===== {case}/{args.mode} {impl}: {wall_ms:.3f} ms per step (wall, unprofiled) =====")
            averages = prof.key_averages()
            kernels = [e for e in averages if getattr(e, "self_device_time_total", 0) > 0]
            gpu_total = sum(e.self_device_time_total for e in kernels) / args.steps / 1e3
            launches = sum(e.count for e in kernels) / args.steps
            print(f"GPU busy {gpu_total:.3f} ms per step, {launches:.0f} device events per step")
            if args.device == "cuda":
                busy, span, count = device_timeline(prof)
                print(f"device timeline: {busy / args.steps:.3f} ms busy of {span / args.steps:.3f} ms "
                      f"per step ({count / args.steps:.0f} kernels and copies per step; the rest is "
                      "the device waiting for the host)")
            print(averages.table(sort_by=sort_key, row_limit=args.top, max_name_column_width=70))
            if args.plan_profile:
                reports = list(hologram_torch.plan_profiles())
                for whole in TRAIN_STEPS:
                    reports += [("train step", entry[0].profile()) for entry in whole.plans.values()]
                TRAIN_STEPS.clear()
                for kind, report in reports:
                    print(f"--- plan profile ({kind}) ---\n{report}")


def device_timeline(prof) -> tuple[float, float, int]:
    """(busy ms, first start to last end ms, events) of the device's own events (kernels,
    copies, memsets): unlike the table's totals, operator rows and annotations that enclose
    kernels are not counted again."""
    from torch.autograd import DeviceType

    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start
        and not e.name.startswith(("Compiled", "Optimizer", "Activity", "ProfilerStep"))
    )
    busy, cursor = 0.0, float("-inf")
    for start, end in spans:
        if end > cursor:
            busy += end - max(start, cursor)
            cursor = end
    if not spans:
        return 0.0, 0.0, 0
    return busy / 1e3, (cursor - spans[0][0]) / 1e3, len(spans)


# compile_step objects made here (their plans' profiles are printed with --plan-profile).
TRAIN_STEPS: list = []


def make_step(models, hologram_torch, torch, case, impl, args):
    import copy

    base, x, y, loss_fn, opt_fn = models.make_case(case, args.device, args.small)
    train = args.mode == "train" and loss_fn is not None
    x, y = x.to(args.device), (y.to(args.device) if y is not None else None)
    model = copy.deepcopy(base).to(args.device)
    model.train(train)
    if impl == "hologram-step":
        whole = hologram_torch.compile_step(model, loss_fn, opt_fn(model.parameters()))
        TRAIN_STEPS.append(whole)
        return lambda: whole(x, y)
    fn = models.implementations(args.device)[impl](model)
    if not train:
        def infer():
            with torch.no_grad():
                return fn(x)
        return infer
    opt = opt_fn(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(fn(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


if __name__ == "__main__":
    main()
