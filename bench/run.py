"""Hologram against NumPy, PyTorch (eager and torch.compile) and CuPy, in one process run.

Every workload is timed for every implementation in the same run, taking turns in short blocks,
as the median of repeated runs after warm-up (each timed run waits for its device). Results go to
a JSON file that bench/report.py turns into the Markdown report and plots.

    python bench/run.py --device cpu  --out bench/results/cpu-2core-epyc/results.json
    python bench/run.py --device cuda --out $OUT/results.json      # on a GPU machine
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

# Idle worker threads must not spin on the cores the next library needs (on a 2-core machine
# OpenBLAS's and OpenMP's busy-waiting after a call halves whoever runs next). Set before the
# libraries load; recorded with the machine.
THREAD_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}
for _k, _v in THREAD_ENV.items():
    os.environ.setdefault(_k, _v)

import numpy as np  # noqa: E402

import hologram as hg  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
try:
    import cupy
except ImportError:  # pragma: no cover
    cupy = None


def now():
    return time.perf_counter()


def measure(fn, sync=lambda: None, warmup=3, reps=11, budget_s=3.0):
    """Median and minimum seconds of `fn` (synchronized), after warm-up."""
    return measure_interleaved({"_": (fn, sync)}, warmup, reps, budget_s)["_"]


def measure_interleaved(cases, warmup=3, reps=11, budget_s=3.0, block=3, calls=1):
    """Median and minimum seconds of each case. Implementations take turns in blocks of `block`
    back-to-back runs, so every one sees the same machine state (frequency, other load) over the
    run; the first run of a block is not counted, because on a small machine it pays for the
    previous library's threads still spinning and its data leaving the caches.

    `cases` maps a name to `(fn, sync)`; a case whose warm-up raises is reported as the error
    string instead of timings, so one failing implementation does not lose the others. A run is
    `calls` calls of `fn` and one `sync`, reported per call (for sub-microsecond calls, where the
    clock and the loop would otherwise be a visible part of one call).
    """
    live, out = {}, {}
    for name, (fn, sync) in cases.items():
        try:
            for _ in range(warmup):
                fn()
            sync()
            live[name] = (fn, sync)
        except Exception as e:  # noqa: BLE001 - reported in the results
            out[name] = f"{type(e).__name__}: {e}"
    times = {name: [] for name in live}
    start = now()
    counted = max(1, block - 1)
    for r in range(max(1, reps // counted)):
        for name, (fn, sync) in live.items():
            fn()
            sync()
            for _ in range(counted):
                t = now()
                for _ in range(calls):
                    fn()
                sync()
                times[name].append((now() - t) / calls)
        if now() - start > budget_s and r >= 1:
            break
    for name, ts in times.items():
        out[name] = (statistics.median(ts), min(ts))
    return out


def machine(device):
    info = {"platform": platform.platform(), "python": platform.python_version(), "cores": os.cpu_count(),
            "numpy": np.__version__, "hologram": hg.__version__,
            "thread_env": {k: os.environ.get(k) for k in THREAD_ENV}}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if torch is not None:
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    if cupy is not None:
        info["cupy"] = cupy.__version__
    if device == "cuda":
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
            info["gpu"] = q
        except (OSError, subprocess.SubprocessError):
            pass
    info["hologram_device"] = hg.Executor(device).info()
    return info


class Bench:
    def __init__(self, device, quick):
        self.device = device
        self.quick = quick
        self.ex = hg.executor_for(device)
        self.rows = []
        self.gpu = device == "cuda"
        self.tdev = "cuda" if self.gpu else "cpu"
        self.hsync = self.ex.synchronize
        self.tsync = (lambda: torch.cuda.synchronize()) if self.gpu and torch is not None else (lambda: None)
        self.csync = cupy.cuda.Device().synchronize if self.gpu and cupy is not None else None
        self.budget_s = 1.5 if quick else 3.0

    def add(self, workload, size, impl, secs, work=None, unit=None, note=""):
        if isinstance(secs, str):
            self.rows.append({"workload": workload, "size": size, "impl": impl, "error": secs})
            print(f"{workload:<22} {size:>12} {impl:<16} failed: {secs}", flush=True)
            return
        med, mn = secs
        row = {"workload": workload, "size": size, "impl": impl, "median_us": med * 1e6, "min_us": mn * 1e6, "note": note}
        if work is not None:
            row["rate"] = work / med / 1e9
            row["unit"] = unit
        self.rows.append(row)
        rate = f"{row['rate']:.1f} {unit}" if work is not None else ""
        print(f"{workload:<22} {size:>12} {impl:<16} {med * 1e6:>12.1f} us  {rate}", flush=True)

    def compare(self, workload, size, cases, work=None, unit=None, reps=11, notes=None, calls=1):
        """Times every implementation in `cases` ({impl: (fn, sync)}) interleaved; adds the rows."""
        cases = {k: v for k, v in cases.items() if v is not None}
        results = measure_interleaved(cases, reps=reps, budget_s=self.budget_s, calls=calls)
        for impl in cases:
            self.add(workload, size, impl, results[impl], work, unit, (notes or {}).get(impl, ""))

    def sizes(self, lo, hi_cpu, hi_gpu):
        hi = hi_gpu if self.gpu else hi_cpu
        step = 4 if not self.quick else 7
        ks = set(range(lo, hi + 1, step)) | {hi}
        if not self.quick and lo <= 20 <= hi:
            ks.add(20)  # the op-suite issue's reference sizes are 2^20 and 2^24
        return [1 << k for k in sorted(ks)]

    def free(self):
        self.ex.empty_cache()
        if self.gpu and torch is not None:
            torch.cuda.empty_cache()
        if self.gpu and cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()

    # ---- the ceiling: plain copies ----
    def ceiling(self):
        """Device memory copy bandwidth (read + write), the ceiling of memory-bound kernels."""
        n = 1 << (28 if self.gpu else 24)
        x = np.random.default_rng(9).standard_normal(n, dtype=np.float32)
        cases = {}
        if self.gpu:
            if torch is not None:
                tx, ty = torch.from_numpy(x).cuda(), torch.empty(n, device="cuda")
                cases["torch"] = (lambda: ty.copy_(tx), self.tsync)
            if cupy is not None:
                cx, cy = cupy.asarray(x), cupy.empty(n, dtype=cupy.float32)
                cases["cupy"] = (lambda: cy.__setitem__(slice(None), cx), self.csync)
        else:
            y = np.empty_like(x)
            cases["numpy"] = (lambda: np.copyto(y, x), lambda: None)
            if torch is not None:
                tx, ty = torch.from_numpy(x), torch.empty(n)
                cases["torch"] = (lambda: ty.copy_(tx), self.tsync)
        self.compare("copy (ceiling)", n, cases, 8 * n, "GB/s")
        self.free()

    def peers(self, h, npf, tf, cf, cupy_ready):
        """The implementations of one element-wise case: Hologram, NumPy (CPU runs only),
        PyTorch when installed, CuPy when its inputs were made."""
        impls = {"hologram": (h, self.hsync)}
        if not self.gpu:
            impls["numpy"] = (npf, lambda: None)
        if torch is not None:
            impls["torch"] = (tf, self.tsync)
        if cupy_ready:
            impls["cupy"] = (cf, self.csync)
        return impls

    # ---- element-wise and reductions ----
    def elementwise(self):
        rng = np.random.default_rng(0)
        # Compiled once: torch recompiles for a new size once, then treats sizes as dynamic.
        compiled = {}
        if torch is not None and self.gpu:
            compiled["relu(a+b)*b"] = torch.compile(lambda a, b: torch.relu(a + b) * b)
            compiled["add"] = torch.compile(lambda a, b: a + b)
        for n in self.sizes(10, 24, 28):
            x = rng.standard_normal(n, dtype=np.float32)
            y = rng.standard_normal(n, dtype=np.float32)
            hx = hg.asarray(x, device=self.device).realize()
            hy = hg.asarray(y, device=self.device).realize()
            tx = ty = cx = cy = None
            if torch is not None:
                tx, ty = torch.from_numpy(x).to(self.tdev), torch.from_numpy(y).to(self.tdev)
            if self.gpu and cupy is not None:
                cx, cy = cupy.asarray(x), cupy.asarray(y)
            bytes_moved = {"add": 12 * n, "sigmoid": 8 * n, "relu(a+b)*b": 12 * n, "sum": 4 * n}
            cases = {
                "add": (lambda: (hx + hy).realize(), lambda: x + y, lambda: tx + ty, lambda: cx + cy),
                "sigmoid": (lambda: hx.sigmoid().realize(), lambda: 1 / (1 + np.exp(-x)), lambda: torch.sigmoid(tx),
                            lambda: 1 / (1 + cupy.exp(-cx))),
                "relu(a+b)*b": (lambda: ((hx + hy).relu() * hy).realize(), lambda: np.maximum(x + y, 0) * y,
                                lambda: torch.relu(tx + ty) * ty, lambda: cupy.maximum(cx + cy, 0) * cy),
                "sum": (lambda: hx.sum().realize(), lambda: x.sum(), lambda: tx.sum(), lambda: cx.sum()),
            }
            for name, fns in cases.items():
                impls = self.peers(*fns, cupy_ready=cx is not None)
                if torch is not None and name in compiled:
                    c = compiled[name]
                    impls["torch.compile"] = (lambda: c(tx, ty), self.tsync)
                self.compare(name, n, impls, bytes_moved[name], "GB/s")
            # Released before the next size (the timed closures share these variables).
            hx = hy = tx = ty = cx = cy = None
            self.free()

    def broadcast(self):
        """Binary ops whose second operand is broadcast: a bias over rows, a per-row value."""
        rng = np.random.default_rng(2)
        for n in self.sizes(14, 24, 28):
            rows = n // 1024
            x = rng.standard_normal((rows, 1024), dtype=np.float32)
            b = rng.standard_normal(1024, dtype=np.float32)
            m = rng.standard_normal((rows, 1), dtype=np.float32)
            hx, hb, hm = (hg.asarray(a, device=self.device).realize() for a in (x, b, m))
            tx = tb = tm = cx = cb = cm = None
            if torch is not None:
                tx, tb, tm = (torch.from_numpy(a).to(self.tdev) for a in (x, b, m))
            if self.gpu and cupy is not None:
                cx, cb, cm = (cupy.asarray(a) for a in (x, b, m))
            cases = {
                "x + b[1024]": (lambda: (hx + hb).realize(), lambda: x + b, lambda: tx + tb, lambda: cx + cb),
                "x - m[rows,1]": (lambda: (hx - hm).realize(), lambda: x - m, lambda: tx - tm, lambda: cx - cm),
            }
            for name, fns in cases.items():
                self.compare(name, n, self.peers(*fns, cupy_ready=cx is not None), 8 * n, "GB/s")
            hx = hb = hm = tx = tb = tm = cx = cb = cm = None
            self.free()

    def softmax(self):
        rng = np.random.default_rng(1)
        for n in self.sizes(14, 24, 28):
            rows = n // 1024
            x = rng.standard_normal((rows, 1024), dtype=np.float32)
            hx = hg.asarray(x, device=self.device).realize()
            impls = {"hologram": (lambda: hx.softmax(-1).realize(), self.hsync)}
            if not self.gpu:
                def np_softmax():
                    e = np.exp(x - x.max(-1, keepdims=True))
                    return e / e.sum(-1, keepdims=True)
                impls["numpy"] = (np_softmax, lambda: None)
            tx = None
            if torch is not None:
                tx = torch.from_numpy(x).to(self.tdev)
                impls["torch"] = (lambda: torch.softmax(tx, -1), self.tsync)
            self.compare("softmax rows", n, impls, 8 * n, "GB/s")
            hx = tx = None
            self.free()

    def matmul(self):
        sizes = [1024, 4096] if self.gpu else [256, 1024]
        dts = ["float32", "tf32", "float16", "bfloat16"] if self.gpu else ["float32"]
        rng = np.random.default_rng(2)
        for n in sizes:
            a = rng.standard_normal((n, n), dtype=np.float32)
            b = rng.standard_normal((n, n), dtype=np.float32)
            flops = 2 * n ** 3
            for dt in dts:
                storage = "float32" if dt == "tf32" else dt
                ha = hg.asarray(a, device=self.device).astype(storage).realize()
                hb = hg.asarray(b, device=self.device).astype(storage).realize()
                tf32 = dt == "tf32"
                impls = {"hologram": (lambda: hg.matmul(ha, hb, tf32=tf32).realize(), self.hsync)}
                if torch is not None:
                    tdt = {"float32": torch.float32, "tf32": torch.float32, "float16": torch.float16,
                           "bfloat16": torch.bfloat16}[dt]
                    ta, tb = torch.from_numpy(a).to(self.tdev, tdt), torch.from_numpy(b).to(self.tdev, tdt)
                    if self.gpu:
                        # Set inside the timed call: the interleaved cases must not see each other's mode.
                        def torch_mm(ta=ta, tb=tb, tf32=tf32):
                            torch.backends.cuda.matmul.allow_tf32 = tf32
                            return ta @ tb
                        impls["torch"] = (torch_mm, self.tsync)
                    else:
                        impls["torch"] = (lambda ta=ta, tb=tb: ta @ tb, self.tsync)
                if not self.gpu and dt == "float32":
                    impls["numpy"] = (lambda: a @ b, lambda: None)
                if self.gpu and cupy is not None and dt in ("float32", "float16"):
                    ca, cb = cupy.asarray(a.astype(dt)), cupy.asarray(b.astype(dt))
                    impls["cupy"] = (lambda ca=ca, cb=cb: ca @ cb, self.csync)
                self.compare(f"matmul {dt}", n, impls, flops, "GFLOP/s")
                if self.gpu and torch is not None:
                    torch.backends.cuda.matmul.allow_tf32 = False
            self.free()

    def latency(self):
        """A tiny kernel from launch to completion (one element)."""
        hx = hg.asarray(np.ones(1, dtype=np.float32), device=self.device).realize()
        impls = {"hologram": (lambda: (hx + 1).realize(), self.hsync)}
        if torch is not None:
            tx = torch.ones(1, device=self.tdev)
            impls["torch"] = (lambda: tx + 1, self.tsync)
        if not self.gpu:
            x = np.ones(1, dtype=np.float32)
            impls["numpy"] = (lambda: x + 1, lambda: None)
        if self.gpu and cupy is not None:
            cx = cupy.ones(1, dtype=cupy.float32)
            impls["cupy"] = (lambda: cx + 1, self.csync)
        self.compare("tiny kernel latency", 1, impls, reps=201)

    def python_overhead(self):
        """Per-call cost of tiny ops through the Python API (16 elements) against NumPy and torch
        in the same run, each sample 100 calls: the seed API's hg.ops.vector_add, tensor `a + b`
        (run with .realize(); also just recorded, as a lazy op is until its result is needed), and
        a sum read back as a Python number."""
        ex, n, calls = self.ex, 16, 100
        nosync = lambda: None  # noqa: E731
        a, b, c = (ex.allocate(n) for _ in range(3))
        x = np.ones(n, dtype=np.float32)
        out = np.empty_like(x)
        ha = hg.asarray(x, device=self.device).realize()
        hb = hg.asarray(x, device=self.device).realize()
        add = {"hologram": (lambda: hg.ops.vector_add(ex, a, b, c), self.hsync),
               "numpy": (lambda: np.add(x, x, out=out), nosync)}
        plus = {"hologram": (lambda: (ha + hb).realize(), self.hsync),
                "hologram (recorded)": (lambda: ha + hb, nosync),
                "numpy": (lambda: x + x, nosync)}
        total = {"hologram": (lambda: hg.ops.sum(ex, a), self.hsync),
                 "hologram tensor": (lambda: ha.sum().item(), self.hsync),
                 "numpy": (lambda: float(x.sum()), nosync)}
        if torch is not None:
            t, o = torch.ones(n, device=self.tdev), torch.empty(n, device=self.tdev)
            add["torch"] = (lambda: torch.add(t, t, out=o), self.tsync)
            plus["torch"] = (lambda: t + t, self.tsync)
            total["torch"] = (lambda: t.sum().item(), self.tsync)
        self.compare("ops.vector_add(16)", n, add, reps=201, calls=calls)
        self.compare("tensor a + b (16)", n, plus, reps=201, calls=calls,
                     notes={"hologram (recorded)": "lazy: records the op, runs nothing"})
        self.compare("sum(16) as a number", n, total, reps=201, calls=calls,
                     notes={"hologram": "hg.ops.sum", "hologram tensor": "a.sum().item()"})

    def transfers(self):
        """Host<->device bandwidth through Buffer.from_numpy / to_numpy, against a JSON round trip
        (CPU) or torch's .cuda() / .cpu() (GPU)."""
        for n in [1 << 10, 100_000, 10_000_000] if not self.gpu else [1 << 20, 1 << 26]:
            x = np.random.default_rng(3).standard_normal(n, dtype=np.float32)
            buf = self.ex.allocate(n)
            h2d = {"hologram": (lambda: buf.from_numpy(x), self.hsync),
                   "numpy copy": (lambda: x.copy(), lambda: None)}
            # On a GPU to_numpy already returns a new array (like torch's .cpu()); only the CPU
            # backend's zero-copy view needs the extra copy to compare like with like.
            d2h = {"hologram (copy)": ((lambda: buf.to_numpy()) if self.gpu
                                       else (lambda: np.array(buf.to_numpy(), copy=True)), self.hsync)}
            notes = {}
            if not self.gpu:
                d2h["hologram (view)"] = (lambda: buf.to_numpy(), lambda: None)
                notes["hologram (view)"] = "zero-copy view"
                def json_round_trip():
                    return np.asarray(json.loads(json.dumps(x.tolist())), dtype=np.float32)
                if n <= 100_000:
                    h2d["JSON round trip"] = (json_round_trip, lambda: None)
                else:
                    # Seconds per call: timed alone, three times.
                    self.add("host->device", n, "JSON round trip", measure(json_round_trip, reps=3, warmup=0), 4 * n, "GB/s")
            if self.gpu and torch is not None:
                t = torch.from_numpy(x)
                tc = t.cuda()
                h2d["torch .cuda()"] = (lambda: t.cuda(), self.tsync)
                d2h["torch .cpu()"] = (lambda: tc.cpu(), self.tsync)
            self.compare("host->device", n, h2d, 4 * n, "GB/s")
            self.compare("device->host", n, d2h, 4 * n, "GB/s", notes=notes)
            buf = None
            self.free()

    def compile_time(self):
        """First compile of a new kernel (a program text never seen before) against a warm cache."""
        text = (".kernel k{}\n.param .buf.f32 y .rw\n.param .u32 n\n    setp.ge.u32 %p, %gid, n;\n@%p exit;\n"
                "    ld.f32 %v, y[%gid];\n    mul.f32 %v, %v, {}.5;\n    st.f32 y[%gid], %v;\n")
        y = self.ex.allocate(1024)
        cold = []
        for i in range(5):
            p = hg.asm(text.format(int(time.time() * 1e6) % 10 ** 9 + i, time.time_ns() % 10 ** 6 + i))
            t = now()
            self.ex.run(p, grid=4, block=256, args={"y": y, "n": 1024})
            self.ex.synchronize()
            cold.append(now() - t)
        self.add("first run (compile)", 1024, "hologram", (statistics.median(cold), min(cold)))
        warm = hg.asm(text.format(0, 3))
        self.ex.run(warm, grid=4, block=256, args={"y": y, "n": 1024})
        self.add("warm run (cached)", 1024, "hologram",
                 measure(lambda: self.ex.run(warm, grid=4, block=256, args={"y": y, "n": 1024}), self.hsync, reps=51))

    def mlp_step(self):
        """One training step of a 512-256-10 MLP (forward, loss, backward, SGD)."""
        if torch is None:
            return
        import hologram_torch as hgt

        batch = 4096 if self.gpu else 1024
        impls = {}
        for impl in ("hologram_torch", "torch"):
            torch.manual_seed(0)
            nn = hgt.nn if impl == "hologram_torch" else torch.nn
            model = torch.nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10)).to(self.tdev)
            loss_fn = nn.CrossEntropyLoss()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            x = torch.randn(batch, 512, device=self.tdev)
            t = torch.randint(0, 10, (batch,), device=self.tdev)

            def step(opt=opt, model=model, loss_fn=loss_fn, x=x, t=t):
                opt.zero_grad(set_to_none=True)
                loss_fn(model(x), t).backward()
                opt.step()

            impls[impl] = (step, self.tsync)
        self.compare(f"MLP train step {batch}x512-256-10", batch, impls, reps=21)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true", help="fewer sizes")
    p.add_argument("--only", default="", help="comma-separated workload groups")
    a = p.parse_args(argv)
    if torch is not None and a.device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    b = Bench(a.device, a.quick)
    groups = ["ceiling", "elementwise", "broadcast", "softmax", "matmul", "latency", "python_overhead", "transfers", "compile_time", "mlp_step"]
    if a.only:
        groups = [g for g in groups if g in a.only.split(",")]
    t0 = now()
    for g in groups:
        print(f"\n== {g}", flush=True)
        try:
            getattr(b, g)()
        except Exception as e:  # noqa: BLE001 - one failing group must not lose the others
            print(f"{g} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            b.rows.append({"workload": g, "error": f"{type(e).__name__}: {e}"})
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"device": a.device, "machine": machine(a.device), "seconds": now() - t0, "rows": b.rows}, f, indent=1)
    print(f"\nwrote {a.out} in {now() - t0:.0f} s")


if __name__ == "__main__":
    main()
