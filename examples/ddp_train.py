"""Data-parallel training of the GPT of bench/models.py on every GPU of this host, gradients
averaged with Hologram's NCCL all-reduce (hologram_torch.DistributedDataParallel), against the
same training on one GPU at the same global batch.

    python examples/ddp_train.py                       # all GPUs, 40 steps, global batch 64
    python examples/ddp_train.py --gpus 2 --steps 20 --batch 32 --json out.json

Process model: one process per GPU, spawned with torch.multiprocessing (no torchrun), each
driving its own replica; rank 0 makes the NCCL unique id and hands it to the others through a
queue. Why not one process driving all GPUs: every replica's forward and backward is Python
(the autograd engine, module calls, the gradient hooks), and one interpreter would issue the
GPUs' work one after another under one GIL; separate processes issue it in parallel, which is
also how torch's own DDP is meant to run. NCCL supports both; ``hologram.distributed.init_all``
is the one-process form.

Both runs start from the same weights (seed 0) and see the same data in the same order: each
step's global batch is split evenly across the ranks, each rank's loss is the mean over its
share, and the gradients are averaged, so the N-GPU run computes the one-GPU run's gradient.
The reported loss of the N-GPU run is the mean over ranks (an all-reduce). Printed: samples/s
of both runs after ``--warmup`` steps, the speedup, both loss curves and their largest relative
difference (must stay within 1%).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def make_model(small: bool):
    from models import GPT

    torch.manual_seed(0)
    if small:
        return GPT(vocab=256, d=64, heads=4, layers=2, ctx=32), 256, 32
    return GPT(), 8192, 256


def global_batch(step: int, batch: int, vocab: int, ctx: int):
    """Step ``step``'s global batch: learnable sequences (each row counts up from a random start
    by a random stride), the same on every rank."""
    g = torch.Generator().manual_seed(1000 + step)
    start = torch.randint(0, vocab, (batch, 1), generator=g)
    stride = torch.randint(1, 8, (batch, 1), generator=g)
    seq = (start + stride * torch.arange(ctx + 1)) % vocab
    return seq[:, :-1], seq[:, 1:]


def _train(rank: int, world: int, args, uid_queue, results):
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    import hologram as hg
    import hologram_torch as hg_torch

    model, vocab, ctx = make_model(args.small)
    model = model.to(dev)
    comm = None
    if world > 1:
        if rank == 0:
            uid = hg.distributed.unique_id()
            for _ in range(world - 1):
                uid_queue.put(uid)
        else:
            uid = uid_queue.get()
        # The shared executor of this GPU: hg.from_dlpack imports onto it too.
        comm = hg.distributed.Communicator(f"cuda:{rank}", uid, rank, world)
        model = hg_torch.DistributedDataParallel(model, comm, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    share = args.batch // world
    losses, timed_from = [], None
    loss_sum = torch.zeros(1, device=dev)
    loss_view = hg.from_dlpack(loss_sum) if comm is not None else None
    for step in range(args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            timed_from = time.perf_counter()
        x, y = global_batch(step, args.batch, vocab, ctx)
        x = x[rank * share:(rank + 1) * share].to(dev, non_blocking=True)
        y = y[rank * share:(rank + 1) * share].to(dev, non_blocking=True)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if comm is not None:
            loss_sum.copy_(loss.detach().reshape(1))
            ex = comm.executor
            ex._e.order_after_stream(torch.cuda.current_stream(dev).cuda_stream)
            comm.all_reduce(loss_view, "mean")
            ex._e.order_before_stream(torch.cuda.current_stream(dev).cuda_stream)
            losses.append(loss_sum.clone())
        else:
            losses.append(loss.detach().reshape(1))
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - timed_from
    if rank == 0:
        timed_steps = args.steps - args.warmup
        results.put({"world": world, "samples_per_s": timed_steps * args.batch / elapsed,
                     "losses": [v.item() for v in losses]})


def run(world: int, args) -> dict:
    ctx = mp.get_context("spawn")
    uid_queue, results = ctx.Queue(), ctx.Queue()
    mp.spawn(_train, args=(world, args, uid_queue, results), nprocs=world, join=True)
    return results.get(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=0, help="GPUs of the data-parallel run (default: all)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5, help="steps not timed")
    ap.add_argument("--batch", type=int, default=64, help="global batch (sequences per step)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--small", action="store_true", help="a tiny GPT (a quick smoke run)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    available = torch.cuda.device_count()
    world = args.gpus or available
    if available < 2 or world < 2 or world > available:
        print(f"skipped: data-parallel training needs 2 or more GPUs; {world} asked for, this host has {available}")
        return 0
    if args.batch % world:
        print(f"error: the global batch ({args.batch}) must split evenly across {world} GPUs")
        return 2
    if args.steps <= args.warmup:
        print("error: --steps must exceed --warmup")
        return 2
    one = run(1, args)
    many = run(world, args)
    speedup = many["samples_per_s"] / one["samples_per_s"]
    rel = [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(one["losses"], many["losses"])]
    worst = max(rel)
    print(f"\nGPT data-parallel training, global batch {args.batch}, {args.steps} steps ({args.warmup} untimed)")
    print(f"{'GPUs':>4} {'samples/s':>10}")
    print(f"{1:>4} {one['samples_per_s']:>10.1f}")
    print(f"{world:>4} {many['samples_per_s']:>10.1f}   speedup {speedup:.2f}x (target >= {0.9 * world:.1f}x)")
    print(f"\n{'step':>4} {'loss 1 GPU':>11} {'loss ' + str(world) + ' GPUs':>12} {'rel diff':>9}")
    for i, (a, b) in enumerate(zip(one["losses"], many["losses"])):
        print(f"{i:>4} {a:>11.5f} {b:>12.5f} {rel[i]:>9.2e}")
    ok = worst <= 0.01
    print(f"\nlargest relative loss difference: {worst:.2e} ({'OK' if ok else 'FAIL'}: within 1% required)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"world": world, "batch": args.batch, "one": one, "many": many,
                       "speedup": speedup, "max_rel_loss_diff": worst}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
