"""Host cost per call of the compiled paths, where kernels cost nothing: a tiny MLP
(Linear(16,16) - ReLU - Linear(16,16), batch 1) on the CPU, one torch thread.

    python bench/compile_overhead.py                 # every path, 7 repetitions
    python bench/compile_overhead.py --reps 9 --calls 3000

Paths: torch eager; torch.compile with the ``aot_eager`` backend (Dynamo and AOTAutograd running
the same graphs in eager PyTorch: the floor any backend pays that keeps AOTAutograd's runtime
wrappers); torch.compile with ``backend="hologram"``, as it is (plain graphs without those
wrappers, see hologram_torch/direct.py) and with ``hologram_torch.compile.DIRECT`` off
(``hologram-aot``); ``hologram_torch.compile_step``. Against code that predates ``DIRECT``, the
``hologram-aot`` rows are the same as the ``hologram`` rows. Modes: inference under no_grad,
forward+backward (MSE loss), and a whole training step (zero_grad, forward, backward, SGD).
Each repetition times ``--calls`` calls after a warm-up; the table gives the median over the
repetitions and the spread (min-max) as the noise figure. Paths take turns within a repetition so
that load from other processes on the machine spreads over all of them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import hologram_torch  # noqa: E402


def tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))


def hologram(direct: bool):
    """A backend of its own for one case: Dynamo shares a compiled frame between models of one
    architecture compiled with the same backend (their parameters are graph inputs), and the
    cases must not share plans."""
    from hologram_torch import compile as hologram_compile

    def backend(gm, example_inputs):
        hologram_compile.DIRECT = direct
        try:
            return hologram_compile.hologram_backend(gm, example_inputs)
        finally:
            hologram_compile.DIRECT = True

    return backend


def cases(x, y):
    """name -> zero-argument callable, one per (path, mode)."""
    out = {}
    wraps = {
        "eager": lambda m: m,
        "aot_eager": lambda m: torch.compile(m, backend="aot_eager"),
        "hologram": lambda m: torch.compile(m, backend=hologram(direct=True)),
        # The same backend keeping AOTAutograd's runtime wrappers.
        "hologram-aot": lambda m: torch.compile(m, backend=hologram(direct=False)),
    }
    for path, wrap in wraps.items():
        m = wrap(tiny())

        def infer(m=m):
            with torch.no_grad():
                return m(x)

        out[f"{path} infer"] = infer
    for path, wrap in wraps.items():
        m = wrap(tiny())

        def fwd_bwd(m=m):
            loss = F.mse_loss(m(x), y)
            loss.backward()
            return loss

        out[f"{path} fwd+bwd"] = fwd_bwd
    for path, wrap in wraps.items():
        model = tiny()
        m, opt = wrap(model), torch.optim.SGD(model.parameters(), lr=1e-3)

        def step(m=m, opt=opt):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        out[f"{path} train step"] = step
    model = tiny()
    whole = hologram_torch.compile_step(model, F.mse_loss, torch.optim.SGD(model.parameters(), lr=1e-3))
    out["hologram-step train step"] = lambda: whole(x, y)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    x, y = torch.randn(1, 16), torch.randn(1, 16)
    runs = cases(x, y)
    if args.only:
        keep = args.only.split(",")
        runs = {k: v for k, v in runs.items() if any(s in k for s in keep)}
    for f in runs.values():
        for _ in range(50):
            f()
    times = {k: [] for k in runs}
    for _ in range(args.reps):
        for k, f in runs.items():
            t = time.perf_counter()
            for _ in range(args.calls):
                f()
            times[k].append((time.perf_counter() - t) / args.calls * 1e6)
    print(f"torch {torch.__version__}, {args.reps} repetitions of {args.calls} calls; µs per call")
    print("| path | median µs | min-max µs |")
    print("|---|---|---|")
    for k, ts in times.items():
        print(f"| {k} | {statistics.median(ts):.1f} | {min(ts):.1f}-{max(ts):.1f} |")
    print(hologram_torch.compile_stats())


if __name__ == "__main__":
    main()
