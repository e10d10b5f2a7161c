"""Whole models, in one process: torch eager, torch.compile (inductor, default and
reduce-overhead) and torch.compile(backend="hologram"), each model's training step and
inference, with the ratios.

    python bench/models.py --device cuda            # the sizes of the graph-compiler issue
    python bench/models.py --device cpu --small     # small sizes (CI runs this as a smoke test)
    python bench/models.py --only mlp,gpt --json out.json

Each implementation gets its own copy of the model (same initial weights). Steps are timed in
blocks, implementations taking turns (the first step of a block is not counted); the median of
the block times per step is reported. On CUDA every timed block ends with a synchronize.
Correctness is checked here too: the first step's loss (training) or output (inference) of
every implementation against eager's.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time

# Idle OpenMP workers must not spin on the cores Hologram's threads need next (on a 2-core
# machine torch's busy-waiting after each op halves whoever runs next). Set before torch loads;
# recorded in the report.
THREAD_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
for _k, _v in THREAD_ENV.items():
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import hologram_torch  # noqa: E402


# ----- models --------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self, d_in=512, hidden=256, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=8192, d=512, heads=8, layers=4, ctx=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


class LSTMModel(nn.Module):
    def __init__(self, d_in=64, hidden=256, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def make_case(name, device, small):
    """(model, inputs, targets, loss fn, optimizer class) of one benchmark case."""
    g = torch.Generator().manual_seed(0)
    # The weights too come from a fixed seed: a case is the same model in every process. (Tests
    # compare gradients with eager; in resnet18 a max-pool window whose two largest inputs differ
    # in the last bits routes its gradient by rounding, so some random weights flip a route.)
    torch.manual_seed(0)
    if name == "mlp":
        batch = 64 if small else (4096 if device == "cuda" else 1024)
        model = MLP()
        x = torch.randn(batch, 512, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        return model, x, y, F.cross_entropy, lambda p: torch.optim.SGD(p, lr=0.05)
    if name == "mlp_infer64":
        model = MLP()
        return model, torch.randn(64, 512, generator=g), None, None, None
    if name == "gpt":
        if small:
            model, batch, t, vocab = GPT(vocab=256, d=64, heads=4, layers=2, ctx=32), 4, 32, 256
        else:
            model, batch, t, vocab = GPT(), 16, 256, 8192
        idx = torch.randint(0, vocab, (batch, t), generator=g)
        tgt = torch.randint(0, vocab, (batch, t), generator=g)
        loss = lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))  # noqa: E731
        return model, idx, tgt, loss, lambda p: torch.optim.AdamW(p, lr=3e-4)
    if name in ("resnet18", "mobilenet_v3_small"):
        import torchvision

        model = getattr(torchvision.models, name)(num_classes=10)
        batch, hw = (4, 32) if small else (32, 224)
        x = torch.randn(batch, 3, hw, hw, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        return model, x, y, F.cross_entropy, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)
    if name == "lstm":
        model = LSTMModel()
        batch, t = (4, 8) if small else (64, 32)
        x = torch.randn(batch, t, 64, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        return model, x, y, F.cross_entropy, lambda p: torch.optim.Adam(p, lr=1e-3)
    raise ValueError(name)


# ----- implementations ---------------------------------------------------------------------------

def implementations(device):
    # hologram: torch.compile(backend="hologram"); hologram-step: the whole training step
    # (forward, backward, optimizer) as one plan (hologram_torch.compile_step).
    impls = {"eager": lambda m: m, "hologram": lambda m: torch.compile(m, backend="hologram"),
             "hologram-step": None}
    if device == "cuda":
        impls["inductor"] = lambda m: torch.compile(m)
        impls["inductor-ro"] = lambda m: torch.compile(m, mode="reduce-overhead")
    else:
        impls["inductor"] = lambda m: torch.compile(m)
    return impls


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def bench_case(name, mode, device, small, only_impls, blocks, per_block):
    base, x, y, loss_fn, opt_fn = make_case(name, device, small)
    train = mode == "train" and loss_fn is not None
    x, y = x.to(device), (y.to(device) if y is not None else None)
    runs = {}
    for impl, wrap in implementations(device).items():
        if only_impls and impl not in only_impls:
            continue
        model = copy.deepcopy(base).to(device)
        model.train(train)
        if impl == "hologram-step":
            if not train:
                continue
            opt = opt_fn(model.parameters())
            whole = hologram_torch.compile_step(model, loss_fn, opt)
            runs[impl] = lambda whole=whole: whole(x, y)
            continue
        fn = wrap(model)
        if train:
            opt = opt_fn(model.parameters())

            def step(fn=fn, opt=opt):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(fn(x), y)
                loss.backward()
                opt.step()
                return loss
        else:
            def step(fn=fn):
                with torch.no_grad():
                    return fn(x)
        runs[impl] = step
    results = {impl: {"times": []} for impl in runs}
    first = {}
    for impl, step in runs.items():
        try:
            out = step()
            sync(device)
            first[impl] = out.detach().float().cpu()
            for _ in range(2):
                step()
            sync(device)
        except Exception as e:  # noqa: BLE001 - report and go on with the other implementations
            results[impl]["error"] = f"{type(e).__name__}: {e}"[:300]
    live = [i for i in runs if "error" not in results[i]]
    for _ in range(blocks):
        for impl in live:
            step = runs[impl]
            step()
            sync(device)
            t = time.perf_counter()
            for _ in range(per_block):
                step()
            sync(device)
            results[impl]["times"].append((time.perf_counter() - t) / per_block)
    # Dropout in training draws other masks than eager's: the first losses differ by design.
    random = train and any(isinstance(m, nn.Dropout) and m.p > 0 for m in base.modules())
    for impl in live:
        results[impl]["median_s"] = statistics.median(results[impl]["times"])
        if "eager" in first and impl in first and not random:
            ref = first["eager"]
            err = (first[impl] - ref).abs().max().item() / max(ref.abs().max().item(), 1e-12)
            results[impl]["first_step_rel_diff"] = err
    return results


def markdown(report, argv) -> str:
    """The report as a Markdown table: median ms per step and the ratio to eager (>1: faster)."""
    impls = ["eager", "hologram", "hologram-step", "inductor", "inductor-ro"]
    seen = [i for i in impls if any(i in c["results"] for c in report["cases"].values())]
    machine = report["gpu"] or "CPU"
    lines = [f"# Whole models: {machine}", "",
             f"`python bench/models.py {argv}` (torch {report['torch']}, {report['device']}; "
             f"{'small sizes' if report['small'] else 'the graph-compiler issue sizes'}). Median ms per "
             "step; in brackets eager / that (above 1: faster than eager).", "",
             "| case | " + " | ".join(seen) + " | fallbacks |", "|---" * (len(seen) + 2) + "|"]
    for case, c in report["cases"].items():
        res, eager = c["results"], c["results"].get("eager", {}).get("median_s")
        cells = []
        for i in seen:
            r = res.get(i)
            if r is None:
                cells.append("—")
            elif "median_s" not in r:
                cells.append("error")
            else:
                ratio = f" ({eager / r['median_s']:.2f}x)" if eager and i != "eager" else ""
                cells.append(f"{r['median_s'] * 1e3:.3f}{ratio}")
        lines.append(f"| {case} | " + " | ".join(cells) + f" | {c['hologram_stats']['fallback_nodes']} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--only", default="", help="comma-separated cases: mlp,mlp_infer64,gpt,resnet18,mobilenet_v3_small,lstm")
    ap.add_argument("--impls", default="", help="comma-separated implementations (eager, hologram, hologram-step, inductor, inductor-ro)")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--per-block", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--md", default="", help="also write the table as Markdown to this file")
    args = ap.parse_args()
    torch._dynamo.config.cache_size_limit = 64
    cases = [("mlp", "train"), ("mlp_infer64", "infer"), ("gpt", "train"), ("gpt", "infer"),
             ("resnet18", "infer"), ("resnet18", "train"), ("mobilenet_v3_small", "train"),
             ("mobilenet_v3_small", "infer"), ("lstm", "train"), ("lstm", "infer")]
    only = set(filter(None, args.only.split(",")))
    impls = set(filter(None, args.impls.split(",")))
    report = {"device": args.device, "small": args.small, "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
              "thread_env": {k: os.environ.get(k) for k in THREAD_ENV}, "cases": {}}
    failed = []
    for name, mode in cases:
        if only and name not in only:
            continue
        hologram_torch.reset_compile_stats()
        torch._dynamo.reset()
        res = bench_case(name, mode, args.device, args.small, impls, args.blocks, args.per_block)
        stats = hologram_torch.compile_stats()
        plans = [st for _, st in hologram_torch.plan_stats()]
        stats["plans_captured"] = sum(1 for st in plans if st["captured"])
        stats["plans_live"] = len(plans)
        stats["bound_replays"] = sum(st.get("bound_replays", 0) for st in plans)
        stats["replays"] = sum(st.get("replays", 0) for st in plans)
        report["cases"][f"{name}/{mode}"] = {"results": res, "hologram_stats": stats}
        eager = res.get("eager", {}).get("median_s")
        line = [f"{name:20s} {mode:5s}"]
        for impl, r in res.items():
            if "median_s" in r:
                ratio = f" ({eager / r['median_s']:.2f}x eager)" if eager and impl != "eager" else ""
                line.append(f"{impl} {r['median_s'] * 1e3:8.3f} ms{ratio}")
            else:
                line.append(f"{impl} ERROR {r.get('error', '')[:80]}")
                failed.append(f"{name}/{mode}/{impl}")
            if r.get("first_step_rel_diff", 0) > 1e-3:  # the first loss/output, against eager's
                line.append(f"{impl} MISMATCH {r['first_step_rel_diff']:.1e}")
                failed.append(f"{name}/{mode}/{impl}")
        line.append(f"fallbacks {stats['fallback_nodes']}")
        if args.device == "cuda":
            line.append(f"CUDA graphs {stats['plans_captured']}/{stats['plans_live']}, "
                        f"bound {stats['bound_replays']}/{stats['replays']} replays")
        print(" | ".join(line), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(markdown(report, " ".join(sys.argv[1:])))
    if failed:
        print(f"failed or mismatched: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
