"""Turns the JSON of bench/run.py (and of `hologram bench --json`) into a Markdown report with
PNG plots.

    python bench/report.py bench/results/cpu-2core-epyc/results.json [rust.json ...] \
        --out bench/results/cpu-2core-epyc

Every figure in the report is a median of the run that produced the JSON. Ratios are
"peer time / Hologram time": above 1 Hologram is faster, below 1 it is slower, and the
"Where Hologram is slower" section lists every such case with the factor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict

HOLOGRAM = ("hologram", "hologram_torch")
# A peer this much faster counts as "Hologram is slower" (below this, run-to-run noise).
SLOWER_THRESHOLD = 1.10
CEILING_WORKLOAD = "copy (ceiling)"


def load(paths):
    """Rows of every file, the Rust bench's impl renamed so both can share one table."""
    runs, rows = [], []
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        runs.append((p, data))
        for r in data.get("rows", []):
            r = dict(r)
            if r.get("impl") == "hologram-rust":
                r["impl"] = "hologram (Rust)"
            rows.append(r)
    return runs, rows


def fmt_time(us):
    if us is None:
        return "–"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def fmt_size(n):
    if n >= 1024 and n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return f"{n:,}"


def fmt_rate(r, unit):
    if r is None:
        return ""
    if unit == "GFLOP/s" and r >= 1000:
        return f"{r / 1000:.1f} TFLOP/s"
    return f"{r:.1f} {unit}"


def is_hologram(impl):
    return impl.startswith("hologram")


def ordered_impls(rows):
    seen = []
    for r in rows:
        if r["impl"] not in seen:
            seen.append(r["impl"])
    return sorted(seen, key=lambda i: (not is_hologram(i), seen.index(i)))


def primary_hologram(impls):
    """The Hologram implementation the ratios are computed for."""
    for name in ("hologram", "hologram_torch", "hologram (Rust)"):
        if name in impls:
            return name
    return next((i for i in impls if is_hologram(i)), None)


def ceilings(rows):
    """Copy bandwidth (GB/s) measured in the run, and the best GEMM rate per (workload, size)."""
    copy = max((r["rate"] for r in rows if r["workload"] == CEILING_WORKLOAD and "rate" in r), default=None)
    gemm = {}
    for r in rows:
        if r.get("unit") == "GFLOP/s" and "rate" in r:
            key = (r["workload"], r["size"])
            gemm[key] = max(gemm.get(key, 0.0), r["rate"])
    return copy, gemm


def workload_table(name, rows, copy_ceiling, gemm_ceiling):
    impls = ordered_impls(rows)
    hg_impl = primary_hologram(impls)
    peers = [i for i in impls if not is_hologram(i)]
    unit = next((r.get("unit") for r in rows if r.get("unit")), None)
    by = {(r["size"], r["impl"]): r for r in rows}
    sizes = sorted({r["size"] for r in rows})
    head = ["size"] + impls
    if hg_impl:
        head += [f"{p} / {hg_impl}" for p in peers]
        if unit == "GB/s" and copy_ceiling and name != CEILING_WORKLOAD:
            head.append("of copy ceiling")
        if unit == "GFLOP/s":
            head.append("of best GEMM")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in sizes:
        cells = [fmt_size(n)]
        for i in impls:
            r = by.get((n, i))
            if r is None:
                cells.append("–")
            elif "error" in r:
                cells.append("failed")
            else:
                rate = fmt_rate(r.get("rate"), r.get("unit"))
                cells.append(fmt_time(r["median_us"]) + (f" ({rate})" if rate else ""))
        h = by.get((n, hg_impl)) if hg_impl else None
        if hg_impl:
            for p in peers:
                pr = by.get((n, p))
                if h and pr and "median_us" in h and "median_us" in pr:
                    cells.append(f"{pr['median_us'] / h['median_us']:.2f}x")
                else:
                    cells.append("–")
            if unit == "GB/s" and copy_ceiling and name != CEILING_WORKLOAD:
                cells.append(f"{h['rate'] / copy_ceiling:.0%}" if h and "rate" in h else "–")
            if unit == "GFLOP/s":
                best = gemm_ceiling.get((name, n))
                cells.append(f"{h['rate'] / best:.0%}" if h and "rate" in h and best else "–")
        lines.append("| " + " | ".join(cells) + " |")
    errors = [r for r in rows if "error" in r]
    for r in errors:
        lines.append(f"\n{r['impl']} at {fmt_size(r['size'])} failed: `{r['error']}`")
    return "\n".join(lines)


def slower_cases(groups):
    """Every (workload, size, peer) where the peer beats Hologram by more than the threshold."""
    out = []
    for name, rows in groups.items():
        impls = ordered_impls(rows)
        hg_impl = primary_hologram(impls)
        if hg_impl is None:
            continue
        by = {(r["size"], r["impl"]): r for r in rows if "median_us" in r}
        for (n, impl), r in by.items():
            h = by.get((n, hg_impl))
            if is_hologram(impl) or h is None:
                continue
            factor = h["median_us"] / r["median_us"]
            if factor > SLOWER_THRESHOLD:
                out.append((factor, name, n, impl, h["median_us"], r["median_us"]))
    return sorted(out, reverse=True)


def plot(name, rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for impl in ordered_impls(rows):
        pts = sorted((r["size"], r["median_us"]) for r in rows if r["impl"] == impl and "median_us" in r)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl,
                    linewidth=2.4 if is_hologram(impl) else 1.4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("elements" if "matmul" not in name else "n (n×n×n)")
    ax.set_ylabel("median time (µs)")
    ax.set_title(name)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def slug(name):
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def machine_section(runs):
    lines = []
    for path, data in runs:
        m = data.get("machine", {})
        lines.append(f"- `{os.path.basename(path)}` (device `{data.get('device', '?')}`, "
                     f"{data.get('seconds', 0):.0f} s run):")
        for key in ("cpu", "cores", "gpu", "hologram_device", "platform", "python", "numpy", "torch",
                    "torch_threads", "cupy", "hologram"):
            if key in m:
                lines.append(f"  - {key}: {m[key]}")
        for key, v in m.items():
            if key not in ("cpu", "cores", "gpu", "hologram_device", "platform", "python", "numpy", "torch",
                           "torch_threads", "cupy", "hologram"):
                lines.append(f"  - {key}: {v}")
    return "\n".join(lines)


def report(paths, out_dir, title, command):
    runs, rows = load(paths)
    groups = defaultdict(list)
    for r in rows:
        if "impl" in r:
            groups[r["workload"]].append(r)
    failed_groups = [r for r in rows if "impl" not in r and "error" in r]
    copy_ceiling, gemm_ceiling = ceilings(rows)
    os.makedirs(out_dir, exist_ok=True)

    md = [f"# {title}", ""]
    # Runs that record thread_env took turns in blocks; earlier ones alternated run by run.
    blocks = any("thread_env" in data.get("machine", {}) for _, data in runs)
    turns = ("taking turns in short blocks of back-to-back runs (the first run of each block uncounted)"
             if blocks else "interleaved (round-robin)")
    md.append("Medians of repeated runs after warm-up, every implementation timed in the same process, "
              f"{turns} so each sees the same machine state. Ratios are peer time / "
              "Hologram time: **above 1 Hologram is faster, below 1 it is slower**. Rates count the bytes "
              "each op must read and write (GB/s) or 2n³ flops (matmul).")
    if copy_ceiling:
        md.append(f"\nCopy ceiling (best measured device copy, read + write): **{copy_ceiling:.1f} GB/s**. "
                  "\"of copy ceiling\" is Hologram's rate over it; \"of best GEMM\" is Hologram's GEMM rate "
                  "over the fastest GEMM measured for that size and type.")
    md += ["", "Reproduce:", "", "```", command, "```", "", "## Machine", "", machine_section(runs), ""]

    slow = slower_cases(groups)
    md += ["## Where Hologram is slower", ""]
    if slow:
        md.append(f"Every case where a peer's median beats Hologram's by more than {SLOWER_THRESHOLD:.2f}x:")
        md += ["", "| workload | size | peer | Hologram | peer | Hologram slower by |", "|---|---|---|---|---|---|"]
        for factor, name, n, impl, h_us, p_us in slow:
            md.append(f"| {name} | {fmt_size(n)} | {impl} | {fmt_time(h_us)} | {fmt_time(p_us)} | {factor:.2f}x |")
    else:
        md.append("No peer beat Hologram by more than the noise threshold in this run.")
    md.append("")
    if failed_groups:
        md += ["Groups that failed in this run:", ""]
        md += [f"- {r['workload']}: `{r['error']}`" for r in failed_groups]
        md.append("")

    md += ["## Results", ""]
    for name, g in groups.items():
        md += [f"### {name}", "", workload_table(name, g, copy_ceiling, gemm_ceiling), ""]
        if len({r["size"] for r in g}) > 1:
            png = f"{slug(name)}.png"
            try:
                plot(name, g, os.path.join(out_dir, png))
                md += [f"![{name}]({png})", ""]
            except ImportError:
                print("matplotlib is not installed: plots skipped (pip install matplotlib)", file=sys.stderr)
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="JSON files of bench/run.py or `hologram bench --json`")
    p.add_argument("--out", required=True, help="folder for report.md and the plots")
    p.add_argument("--title", default="Hologram benchmarks")
    p.add_argument("--command", default="", help="the command that reproduces the results (shown in the report)")
    a = p.parse_args(argv)
    command = a.command or "python bench/run.py --out results.json && python bench/report.py results.json --out ."
    print(report(a.results, a.out, a.title, command))


if __name__ == "__main__":
    main()
