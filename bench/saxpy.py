"""saxpy over 2^24 floats: `hologram run` (CPU interpreter) next to NumPy's a*x+y, same run.

Usage: bench/saxpy.sh  (builds the CLI, makes a venv with NumPy, runs this)
"""
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLOGRAM = os.path.join(ROOT, "target", "release", "hologram")
KERNEL = os.path.join(ROOT, "examples", "kernels", "saxpy.hasm")
N = 1 << 24
REPEAT = 11


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hologram_ms(tmp, block):
    out = subprocess.run(
        [HOLOGRAM, "run", KERNEL, "--backend", "cpu", "--grid", str(N // block), "--block", str(block),
         "--arg", "a=2.0", "--arg", f"x=@{tmp}/x.npy", "--arg", f"y=@{tmp}/y.npy", "--arg", f"n={N}",
         "--out", f"y={tmp}/out.npy", "--repeat", str(REPEAT)],
        check=True, capture_output=True, text=True).stdout
    return float(re.search(r"launch ([0-9.]+) ms", out).group(1)), out.strip()


def numpy_ms(a, x, y):
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        r = a * x + y
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2], r


def main():
    rng = np.random.default_rng(0)
    x = rng.random(N, dtype=np.float32)
    y = rng.random(N, dtype=np.float32)
    a = np.float32(2.0)
    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/x.npy", x)
        np.save(f"{tmp}/y.npy", y)
        rows = []
        for block in (256, 1024):
            h, line = hologram_ms(tmp, block)
            n, ref = numpy_ms(a, x, y)
            got = np.load(f"{tmp}/out.npy")
            # fma rounds once, NumPy's a*x+y twice: allow one ulp.
            ok = np.allclose(got, ref, rtol=2**-22, atol=0)
            rows.append((block, h, n, ok))
            print(line, file=sys.stderr)
    print(f"# saxpy, n = 2^24 float32, CPU: {cpu_model()} ({os.cpu_count()} cores), median of {REPEAT}\n")
    print("| block | hologram run (CPU interpreter) | NumPy a*x+y | hologram / NumPy | matches NumPy |")
    print("|---:|---:|---:|---:|:---:|")
    for block, h, n, ok in rows:
        print(f"| {block} | {h:.1f} ms | {n:.1f} ms | {h / n:.2f}x | {'yes' if ok else 'NO'} |")


if __name__ == "__main__":
    main()
