"""The seed API's hg.ops.sum(ex, buf) against a.sum().item() and torch on the GPU, 16 elements read back
as a number: does the op path or the buffer (allocate() against asarray(), zeros against ones) cost more?
Each sample is 100 calls and one synchronize, interleaved (bench/run.py's measure_interleaved); two rounds.

    PYTHONPATH=<wheel site> python3 bench/sum_paths.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import hologram as hg

sys.path.insert(0, str(Path(__file__).parent))
from run import measure_interleaved  # noqa: E402

ex = hg.executor_for("cuda")
n = 16
x = np.ones(n, dtype=np.float32)
zeros_buf = ex.allocate(n)
ones_buf = ex.allocate(n)
ones_buf.from_numpy(x)
ones = hg.asarray(x, device="cuda").realize()
zeros = hg.asarray(np.zeros(n, dtype=np.float32), device="cuda").realize()
t = torch.ones(n, device="cuda")
cases = {
    "ops.sum(buf zeros)": (lambda: hg.ops.sum(ex, zeros_buf), ex.synchronize),
    "ops.sum(buf ones)": (lambda: hg.ops.sum(ex, ones_buf), ex.synchronize),
    "ops.sum(tensor ones)": (lambda: hg.ops.sum(ex, ones), ex.synchronize),
    "tensor ones .sum().item()": (lambda: ones.sum().item(), ex.synchronize),
    "tensor zeros .sum().item()": (lambda: zeros.sum().item(), ex.synchronize),
    "torch .sum().item()": (lambda: t.sum().item(), torch.cuda.synchronize),
}
for rnd in range(2):
    r = measure_interleaved(cases, reps=201, budget_s=3.0, calls=100)
    for k, (med, mn) in r.items():
        print(f"round {rnd} {k:<28} {med * 1e6:7.1f} us  (min {mn * 1e6:.1f})")
