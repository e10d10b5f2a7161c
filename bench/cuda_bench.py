"""Hologram's CUDA backend next to PyTorch, in one run on one GPU.

Runs `hologram bench-cuda --json` (vector add bandwidth with and without bounds checks, tiny-kernel
launch-to-completion latency, sgemm through cuBLAS) and the same measurements with PyTorch, then
writes a Markdown report and the raw numbers.

Usage (on the GPU machine, from the repository root; scripts/gpu-run.sh does this):
    python3 bench/cuda_bench.py --hologram target/gpu-bundle/hologram --out-dir bench/results/<gpu>

Methodology, the same on both sides: bandwidth and sgemm time REPEAT back-to-back launches after
warm-up and synchronize once (vector add moves 12 bytes per element: two reads, one write);
latency times LATENCY_ITERS single launches, each followed by a synchronize, and reports the
median. PyTorch float32 matmul runs with TF32 off (its default) for the exact comparison.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time


def torch_bench(log2n, gemm_n, repeat, latency_iters):
    import torch

    dev = torch.device("cuda")
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
    n = 1 << log2n
    x = torch.rand(n, device=dev)
    y = torch.rand(n, device=dev)
    z = torch.empty(n, device=dev)
    for _ in range(3):
        torch.add(x, y, out=z)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(repeat):
        torch.add(x, y, out=z)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3 / repeat
    out["vadd"] = {"n": n, "ms": ms, "gbps": 12.0 * n / (ms * 1e6)}
    del x, y, z

    one = torch.zeros(1, device=dev)
    for _ in range(100):
        one.add_(1.0)
        torch.cuda.synchronize()
    samples = []
    for _ in range(latency_iters):
        t = time.perf_counter()
        one.add_(1.0)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t) * 1e6)
    out["latency"] = {"median_us": statistics.median(samples), "mean_us": statistics.fmean(samples),
                      "min_us": min(samples)}

    a = torch.rand(gemm_n, gemm_n, device=dev) - 0.5
    b = torch.rand(gemm_n, gemm_n, device=dev) - 0.5
    c = torch.empty(gemm_n, gemm_n, device=dev)
    flops = 2.0 * gemm_n ** 3
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(repeat):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t) * 1e3 / repeat
        out["sgemm_tf32" if tf32 else "sgemm"] = {"n": gemm_n, "ms": ms, "tflops": flops / (ms * 1e9)}
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hologram", default="target/release/hologram")
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--gemm", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--latency-iters", type=int, default=2000)
    ap.add_argument("--backend", default="cuda", help="Hologram backend to measure (cuda)")
    args = ap.parse_args()

    cmd = [args.hologram, "bench-cuda", "--json", "--backend", args.backend, "--log2n", str(args.log2n), "--gemm", str(args.gemm),
           "--repeat", str(args.repeat), "--latency-iters", str(args.latency_iters)]
    print("+", " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        print(proc.stdout)
        sys.exit(f"hologram bench-cuda failed with {proc.returncode}")
    h = json.loads(proc.stdout.strip().splitlines()[-1])
    t = torch_bench(args.log2n, args.gemm, args.repeat, args.latency_iters)

    hv, tv = h["vadd"], t["vadd"]
    h_best_gbps = hv["checked"]["gbps"]
    bw_ratio = h_best_gbps / tv["gbps"]
    cost = hv["check_cost"]
    lat_h, lat_t = h["latency"]["median_us"], t["latency"]["median_us"]
    g_h, g_t = h["sgemm"]["ms"], t["sgemm"]["ms"]
    g32_h, g32_t = h["sgemm"]["tf32_ms"], t["sgemm_tf32"]["ms"]
    rows = [
        ("vector add f32 2^%d, bandwidth (bounds-checked)" % args.log2n,
         "%.0f GB/s (%s, block %d)" % (h_best_gbps, hv["checked"]["kernel"], hv["checked"]["block"]),
         "%.0f GB/s" % tv["gbps"],
         "%.3fx" % bw_ratio, ">= 0.97x", bw_ratio >= 0.97),
        ("vector add, bounds checks off",
         "%.0f GB/s (%s, block %d)" % (hv["unchecked"]["gbps"], hv["unchecked"]["kernel"], hv["unchecked"]["block"]),
         "", "", "", None),
        ("bounds-check cost on vector add (same kernel, best block)",
         "%+.2f%% time (vadd4: %+.2f%%)" % (cost["vadd"] * 100, cost["vadd4"] * 100), "", "", "reported", None),
        ("tiny kernel, launch to completion (median)", "%.2f us" % lat_h, "%.2f us" % lat_t,
         "%.2fx" % (lat_h / lat_t), "<= 1.00x", lat_h <= lat_t),
        ("sgemm %d, f32 exact (cuBLAS)" % args.gemm, "%.3f ms, %.1f TFLOP/s" % (g_h, h["sgemm"]["tflops"]),
         "%.3f ms, %.1f TFLOP/s" % (g_t, t["sgemm"]["tflops"]), "%.3fx time" % (g_h / g_t), "<= 1.03x",
         g_h <= 1.03 * g_t),
        ("sgemm %d, TF32" % args.gemm, "%.3f ms" % g32_h, "%.3f ms" % g32_t, "%.3fx time" % (g32_h / g32_t),
         "", None),
    ]
    lines = [
        "# Hologram CUDA backend vs PyTorch, one run",
        "",
        "GPU: %s (%s, %s). PyTorch %s (CUDA %s). Command: `python3 bench/cuda_bench.py --hologram %s`"
        " (repeat %d, latency iterations %d). Raw numbers: `cuda.json`." % (
            h["device"], h["arch"], h["driver"], t["torch"], t["cuda"], args.hologram, args.repeat,
            args.latency_iters),
        "",
        "| Benchmark | Hologram | PyTorch | Ratio | Target | Met |",
        "|---|---:|---:|---:|:---:|:---:|",
    ]
    for name, hs, ts, ratio, target, ok in rows:
        met = "" if ok is None else ("yes" if ok else "**no**")
        lines.append(f"| {name} | {hs} | {ts} | {ratio} | {target} | {met} |")
    lines += ["", "Vector add per kernel and block size (Hologram; `vadd` is one element per lane, `vadd4` four):",
              "", "| kernel | block | bounds checks | ms | GB/s |", "|---|---:|:---:|---:|---:|"]
    for r in hv["per_block"]:
        lines.append("| %s | %d | %s | %.4f | %.1f |" % (r["kernel"], r["block"], "on" if r["checked"] else "off",
                                                       r["ms"], r["gbps"]))
    lines += ["", "Latency detail: Hologram mean %.2f us, min %.2f us, enqueue %.2f us; PyTorch mean %.2f us, min %.2f us."
              % (h["latency"]["mean_us"], h["latency"]["min_us"], h["latency"]["enqueue_us"],
                 t["latency"]["mean_us"], t["latency"]["min_us"]),
              "Hologram's kernel cache during the run: `%s`." % h["cache"], ""]
    report = "\n".join(lines)
    print(report)
    out_dir = args.out_dir or os.path.join("bench", "results", slug(h["device"]))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "cuda.md"), "w") as f:
        f.write(report)
    with open(os.path.join(out_dir, "cuda.json"), "w") as f:
        json.dump({"hologram": h, "torch": t}, f, indent=2)
    print("wrote %s/cuda.md and cuda.json" % out_dir, file=sys.stderr)
    ok = all(r[5] is not False for r in rows)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
