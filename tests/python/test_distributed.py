"""Several GPUs: device names, NCCL collectives (hologram.distributed) and data-parallel training
(hologram_torch.DistributedDataParallel).

Without a GPU the device-name, error and bucketing tests run; the single-GPU tests (a
communicator of size 1) need CUDA and NCCL, the all-GPU tests two GPUs or more (each is skipped
with the reason otherwise). scripts/gpu-run.sh runs them with NCCL_NVLS_ENABLE=0."""

import numpy as np
import pytest

import hologram as hg

torch = pytest.importorskip("torch")  # loads libnccl.so.2 where torch has it
import hologram_torch as hg_torch  # noqa: E402
from hologram_torch.distributed import assign_buckets  # noqa: E402

needs_gpu = pytest.mark.skipif(not hg.is_cuda_available() or not hg.distributed.is_available(),
                               reason="needs a CUDA GPU and NCCL")
needs_gpus = pytest.mark.skipif(hg.cuda_device_count() < 2 or not hg.distributed.is_available(),
                                reason="needs two GPUs or more and NCCL")


# ----- no GPU needed -----------------------------------------------------------------------------

def test_device_names():
    ex = hg.Executor("cpu")
    assert ex.device == "cpu:0" and ex.device_index == 0
    assert hg.asarray([1.0], device="cpu").device == "cpu"
    with pytest.raises(hg.ValidationError, match="only CUDA has several devices"):
        hg.Executor("cpu:1")
    with pytest.raises(hg.ValidationError, match="must be a number"):
        hg.Executor("cuda:one")
    # No host has a thousand GPUs: a clear error everywhere, never a crash.
    with pytest.raises(hg.BackendUnavailableError, match="cuda:1000"):
        hg.Executor("cuda:1000")
    assert hg.cuda_device_count() >= 0


def test_collectives_refuse_what_they_cannot_run():
    with pytest.raises(hg.HologramError):
        hg.distributed.Communicator("cpu", b"\0" * 128, 0, 1)
    if hg.distributed.is_available():
        with pytest.raises(hg.ValidationError, match="128 bytes, 3 were given"):
            hg.distributed.Communicator("cpu", b"abc", 0, 1)
    else:
        with pytest.raises(hg.BackendUnavailableError, match="NCCL"):
            hg.distributed.nccl_version()


def test_buckets_fill_backwards_up_to_the_cap():
    f32 = torch.float32
    # 4-byte elements: sizes 100, 200, 300, 400 bytes (params 0..3); cap 500 bytes.
    params = [(25, f32), (50, f32), (75, f32), (100, f32)]
    assert assign_buckets(params, 500) == [[3], [2, 1], [0]]
    assert assign_buckets(params, 10_000) == [[3, 2, 1, 0]]
    # A parameter larger than the cap has a bucket of its own.
    assert assign_buckets([(10, f32), (1000, f32), (10, f32)], 100) == [[2], [1], [0]]
    # Dtypes never share a bucket (a bucket is one flat tensor).
    assert assign_buckets([(1, f32), (1, torch.float16), (1, torch.float16)], 1 << 20) == [[2, 1], [0]]
    every = sorted(i for b in assign_buckets(params, 300) for i in b)
    assert every == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        assign_buckets(params, 0)


# ----- one GPU: a communicator of size 1 ---------------------------------------------------------

@needs_gpu
def test_communicator_of_size_one():
    ex = hg.executor_for("cuda")
    comm = hg.distributed.Communicator(ex, hg.distributed.unique_id(), 0, 1)
    assert (comm.rank, comm.size) == (0, 1)
    x = np.arange(1000, dtype=np.float32)
    t = hg.asarray(x, device=ex).realize()
    comm.all_reduce(t, "sum")
    comm.all_reduce(t, "mean")
    comm.broadcast(t, 0)
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal(comm.all_gather(t).numpy(), x)
    np.testing.assert_array_equal(comm.reduce_scatter(t, "sum").numpy(), x)
    with pytest.raises(ValueError, match="unknown reduction"):
        comm.all_reduce(t, "median")
    with pytest.raises(hg.ValidationError, match="realize"):
        comm.all_reduce(t + 1, "sum")
    comm.check_async_error()


@needs_gpu
def test_ddp_on_one_gpu_keeps_the_gradients():
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    ref = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(32, 64, device=dev), torch.randint(0, 10, (32,), device=dev)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    comm = hg.distributed.Communicator("cuda", hg.distributed.unique_id(), 0, 1)
    # A tiny bucket cap: several buckets, launched in order.
    ddp = hg_torch.DistributedDataParallel(model, comm, bucket_cap_mb=16 / 1024)
    assert len(ddp._buckets) > 1
    for p, r in zip(model.parameters(), ref):
        torch.testing.assert_close(p, r, rtol=0, atol=0)
    for _ in range(2):  # the second backward reuses the buckets
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        for p, g in zip(model.parameters(), want):
            torch.testing.assert_close(p.grad, g)


# ----- every GPU of the host ---------------------------------------------------------------------

@needs_gpus
def test_collectives_across_all_gpus_from_one_process():
    n = hg.cuda_device_count()
    comms = hg.distributed.init_all()
    assert [c.rank for c in comms] == list(range(n))
    ts = [hg.full((4096,), r + 1, device=c.executor).realize() for r, c in enumerate(comms)]
    with hg.distributed.group():
        for c, t in zip(comms, ts):
            c.all_reduce(t, "sum")
    for t in ts:
        assert (t.numpy() == n * (n + 1) / 2).all()
    with hg.distributed.group():
        gathered = [c.all_gather(hg.full((3,), c.rank, device=c.executor).realize()) for c in comms]
    for g in gathered:
        np.testing.assert_array_equal(g.numpy(), np.repeat(np.arange(n, dtype=np.float32), 3))


@needs_gpus
def test_tensors_move_between_gpus():
    a = hg.asarray(np.arange(10_000, dtype=np.float32), device="cuda:0")
    b = a.to("cuda:1")
    assert b.device == "cuda:1"
    c = (b * 2).to("cuda")
    assert c.device == "cuda"
    np.testing.assert_array_equal(c.numpy(), np.arange(10_000, dtype=np.float32) * 2)
