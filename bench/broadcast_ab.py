"""Per-call time of broadcast operands on the CPU backend against NumPy, in one process: `x + b`
with `b` of shape [1024] and `x - m` with `m` of shape [rows, 1], for `x` of [n / 1024, 1024] f32
at n = 2^14, 2^18, 2^20, 2^22 (best of 7 timeit repeats, microseconds). Used to compare two
wheels side by side (run each with its own PYTHONPATH, alternately):

    python bench/broadcast_ab.py
"""

import timeit

import numpy as np

import hologram as hg


def main() -> None:
    rng = np.random.default_rng(0)
    out = []
    for k in (14, 18, 20, 22):
        n = 1 << k
        rows = n // 1024
        x = rng.standard_normal((rows, 1024), dtype=np.float32)
        b = rng.standard_normal(1024, dtype=np.float32)
        m = rng.standard_normal((rows, 1), dtype=np.float32)
        hx, hb, hm = (hg.asarray(a, device="cpu").realize() for a in (x, b, m))
        calls = max(2000 >> max(k - 14, 0), 5)
        cases = {
            "x+b": lambda: (hx + hb).realize(),
            "numpy x+b": lambda: x + b,
            "x-m": lambda: (hx - hm).realize(),
            "numpy x-m": lambda: x - m,
        }
        for name, f in cases.items():
            for _ in range(20):
                f()
            best = min(timeit.repeat(f, number=calls, repeat=7)) / calls * 1e6
            out.append(f"{name}@2^{k} {best:.1f}")
    print(" ".join(out))


if __name__ == "__main__":
    main()
