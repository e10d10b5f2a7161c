"""All-reduce bandwidth across the GPUs of this host: Hologram's NCCL collectives against
torch.distributed's NCCL all-reduce, same sizes, same processes, same libnccl.

    python bench/allreduce.py                    # 256 MiB of f32 on every GPU
    python bench/allreduce.py --gpus 2 --mib 64 --iters 50 --json out.json

One process per GPU (spawned with torch.multiprocessing; no torchrun). In each process both
libraries run the same all-reduce (sum, in place): Hologram through
``hologram.distributed.Communicator`` on an ``Executor('cuda:<rank>')``, torch through
``dist.all_reduce`` with the NCCL backend. Each does ``--warmup`` calls, then ``--iters`` timed
calls (host clock around the loop, the stream synchronized after it), in ``--rounds`` rounds,
alternating the two; the best round counts. Reported as nccl-tests does: algbw = bytes / time,
busbw = algbw * 2 (n - 1) / n. The result is checked: every element equals the sum over ranks.

Set NCCL_NVLS_ENABLE=0 (NVLink multicast off) as the GPU scripts do; it is set here by default.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _time_loop(call, sync, iters: int) -> float:
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    return (time.perf_counter() - start) / iters


def _worker(rank: int, world: int, port: int, args, uid_queue, results):
    torch.cuda.set_device(rank)
    import hologram as hg  # after torch: the same libnccl.so.2 serves both

    if rank == 0:
        uid = hg.distributed.unique_id()
        for _ in range(world - 1):
            uid_queue.put(uid)
    else:
        uid = uid_queue.get()
    ex = hg.Executor(f"cuda:{rank}")
    comm = hg.distributed.Communicator(ex, uid, rank, world)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=torch.device("cuda", rank))

    n = args.mib * (1 << 20) // 4
    value = float(rank + 1)
    expected = world * (world + 1) / 2

    # Hologram: check once, then time.
    h = hg.full((n,), value, dtype=hg.float32, device=ex).realize()
    comm.all_reduce(h, "sum")
    got = h[:4].numpy()
    if not (got == expected).all():
        raise SystemExit(f"rank {rank}: Hologram all-reduce gave {got[:4]}, expected {expected}")
    t = torch.full((n,), value, dtype=torch.float32, device=f"cuda:{rank}")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    if not bool((t[:4] == expected).all()):
        raise SystemExit(f"rank {rank}: torch all-reduce gave {t[:4].tolist()}")

    best = {"hologram": float("inf"), "torch": float("inf")}
    for _ in range(args.rounds):
        for _ in range(args.warmup):
            comm.all_reduce(h, "sum")
        best["hologram"] = min(best["hologram"],
                               _time_loop(lambda: comm.all_reduce(h, "sum"), ex.synchronize, args.iters))
        for _ in range(args.warmup):
            dist.all_reduce(t)
        best["torch"] = min(best["torch"],
                            _time_loop(lambda: dist.all_reduce(t), torch.cuda.synchronize, args.iters))
    # The slowest rank decides (a collective ends when every rank is done).
    times = torch.tensor([best["hologram"], best["torch"]], device=f"cuda:{rank}", dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    if rank == 0:
        results.put({"hologram": times[0].item(), "torch": times[1].item(),
                     "nccl": hg.distributed.nccl_version(), "gpu": torch.cuda.get_device_name(0)})
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=0, help="GPUs to use (default: all)")
    ap.add_argument("--mib", type=int, default=256, help="MiB of f32 per all-reduce")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="", help="write the results here too")
    args = ap.parse_args()
    available = torch.cuda.device_count()
    world = args.gpus or available
    if world < 1 or world > available:
        print(f"skipped: {world} GPUs asked for, this host has {available}")
        return 0
    if world == 1:
        print("note: one GPU: an all-reduce of one rank moves nothing between GPUs (busbw is 0)")
    ctx = mp.get_context("spawn")
    uid_queue, results = ctx.Queue(), ctx.Queue()
    mp.spawn(_worker, args=(world, _free_port(), args, uid_queue, results), nprocs=world, join=True)
    r = results.get(timeout=60)
    nbytes = args.mib * (1 << 20)
    factor = 2 * (world - 1) / world
    rows = []
    for name in ("hologram", "torch"):
        secs = r[name]
        algbw = nbytes / secs / 1e9
        rows.append({"impl": name, "ms": secs * 1e3, "algbw_GBps": algbw, "busbw_GBps": algbw * factor})
    ratio = rows[0]["busbw_GBps"] / rows[1]["busbw_GBps"] if rows[1]["busbw_GBps"] > 0 else float("nan")
    print(f"\nall-reduce (sum, in place) of {args.mib} MiB f32 on {world} x {r['gpu']}, NCCL {r['nccl']}, "
          f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
    print(f"{'impl':<10} {'time (ms)':>10} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
    for row in rows:
        print(f"{row['impl']:<10} {row['ms']:>10.3f} {row['algbw_GBps']:>13.1f} {row['busbw_GBps']:>13.1f}")
    if world > 1:
        verdict = "within 10%" if ratio >= 0.9 else "MORE THAN 10% BELOW"
        print(f"hologram / torch busbw = {ratio:.3f} ({verdict} of torch.distributed)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"world": world, "mib": args.mib, "nccl": r["nccl"], "gpu": r["gpu"], "rows": rows,
                       "busbw_ratio": ratio}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
