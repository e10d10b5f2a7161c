"""The Python SDK and hologram_torch on a CUDA GPU: buffers, zero-copy DLPack with PyTorch and
CuPy in both directions (stream-ordered, no host synchronization), autograd ops, modules,
torch.compile and training on CUDA tensors. Skipped without a CUDA device (scripts/gpu-run.sh
runs them on the GPU machine)."""

import numpy as np
import pytest

import hologram as hg

pytestmark = pytest.mark.skipif(not hg.is_cuda_available(), reason="no CUDA device")

torch = pytest.importorskip("torch")
import hologram_torch as hg_torch  # noqa: E402


@pytest.fixture
def cuda():
    return hg.executor_for("cuda")


def test_buffers_round_trip(cuda, rng):
    for dtype in (np.float32, np.float64, np.int32, np.uint8, np.float16):
        x = (rng.standard_normal(100_003) * 50).astype(dtype)
        b = cuda.allocate(x.size, dtype=dtype)
        b.from_numpy(x)
        np.testing.assert_array_equal(b.to_numpy(), x)


def test_reads_into_new_arrays_use_lent_page_locked_memory(cuda, rng):
    """A read of 256 KiB or more lands in page-locked memory from the backend's pool (one DMA);
    the array owns it, is writable, and gives it back when freed (the next read of that size
    reuses the block)."""
    from hologram import _native

    x = rng.standard_normal((512, 1024), dtype=np.float32)  # 2 MiB
    t = hg.asarray(x, device="cuda")
    first = t.numpy()
    assert isinstance(first.base, _native.PinnedHostArray)
    np.testing.assert_array_equal(first, x)
    first[0, 0] = 7.0  # the caller's own memory
    assert t.numpy()[0, 0] == x[0, 0]
    address = first.ctypes.data
    del first
    again = (t * 2).numpy()
    assert again.ctypes.data == address, "the freed block is lent again"
    np.testing.assert_array_equal(again, x * 2)
    # Small reads and bf16 (no NumPy type) take the ordinary path.
    assert _native.read_pinned(hg.asarray(x[:4], device="cuda")._t) is None
    del again
    cuda.empty_cache()  # frees the idle blocks; later reads allocate again
    np.testing.assert_array_equal(t.numpy(), x)


def test_seed_vector_add_on_cuda(cuda, rng):
    n = 1 << 20
    a, b, c = (cuda.allocate(n) for _ in range(3))
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    a.from_numpy(x)
    b.from_numpy(y)
    hg.ops.vector_add(cuda, a, b, c)
    np.testing.assert_array_equal(c.to_numpy(), x + y)


def test_torch_cuda_tensors_are_shared_without_copies():
    t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    h = hg.from_dlpack(t)
    assert h.device == "cuda"
    back = torch.from_dlpack(h)
    assert back.data_ptr() == t.data_ptr(), "one allocation seen by both"
    out = torch.from_dlpack((h * 2).realize())
    assert out.device.type == "cuda"
    assert torch.equal(out, t * 2)


def test_exchanges_are_stream_ordered():
    """Torch's queued work is visible to Hologram and Hologram's to torch, with no explicit
    synchronize: DLPack's stream argument orders the two streams on the device."""
    n = 1 << 26
    for i in range(5):
        t = torch.empty(n, device="cuda")
        t.fill_(float(i + 1))  # queued on torch's stream
        t.mul_(3.0)
        h = hg.from_dlpack(t)
        assert h.sum().item() == pytest.approx(3.0 * (i + 1) * n, rel=1e-6)
        g = (h + 1).realize()  # queued on Hologram's stream
        assert torch.from_dlpack(g).sum().item() == pytest.approx((3.0 * (i + 1) + 1) * n, rel=1e-6)


def test_cupy_interop():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(4096, dtype=cupy.float32)
    h = hg.from_dlpack(x)
    y = cupy.from_dlpack((h * h).realize())
    assert bool(cupy.all(y == x * x))


def test_out_of_bounds_raises_on_cuda(cuda):
    p = hg.asm(".kernel spill\n.param .buf.f32 y .rw\n    add.u32 %j, %gid, 8;\n    st.f32 y[%j], 1.0;\n")
    y = cuda.allocate(8)
    y.from_numpy(np.zeros(8, dtype=np.float32))
    with pytest.raises(hg.OutOfBoundsError):
        cuda.run(p, grid=1, block=8, args={"y": y})
        cuda.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), np.zeros(8, dtype=np.float32))


def test_functional_ops_and_grads_match_torch_on_cuda():
    from hologram_torch import functional as F

    torch.manual_seed(0)
    x = torch.randn(64, 32, device="cuda", requires_grad=True)
    w = torch.randn(16, 32, device="cuda", requires_grad=True)
    b = torch.randn(16, device="cuda", requires_grad=True)
    ours = F.softmax(F.gelu(F.linear(x, w, b)), dim=-1).sum(0).pow(2).sum()
    ours.backward()
    g_ours = [p.grad.clone() for p in (x, w, b)]
    for p in (x, w, b):
        p.grad = None
    ref = torch.softmax(torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b)), dim=-1).sum(0).pow(2).sum()
    ref.backward()
    assert torch.allclose(ours, ref, rtol=1e-4)
    for g, p in zip(g_ours, (x, w, b)):
        assert g.device.type == "cuda"
        assert torch.allclose(g, p.grad, rtol=1e-3, atol=1e-4)


def test_compile_fuses_a_chain_on_cuda():
    """A chain of element-wise ops runs as one kernel: replayed as a CUDA graph when its tensors
    are small, launched on the caller's tensors (no copy in or out) when they are 16 MiB or more
    (plan/edges.rs)."""
    for n, large in [(1 << 14, False), (1 << 22, True)]:
        torch._dynamo.reset()
        hg_torch.reset_compile_stats()
        f = torch.compile(lambda a, b: torch.relu(a + b) * b - a, backend="hologram")
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        f(a, b)
        out = f(a, b)
        counts = hg_torch.compile_stats()
        assert counts["plans"] == 1 and counts["replays"] == 1
        # (plan_stats also lists plans of earlier tests that are still alive.)
        ran = [s for _, s in hg_torch.plan_stats() if s["launches"] == 1 and s["replays"] == 1]
        if large:
            assert any(s["edge_steps"] == 1 and not s["captured"] for s in ran), ran
        else:
            assert any(s["captured"] and s["edge_steps"] == 0 for s in ran), ran
        assert out.device.type == "cuda"
        assert torch.allclose(out, torch.relu(a + b) * b - a)


def test_mlp_training_on_cuda_matches_torch_nn():
    """The same MLP, initialized alike, trained with hologram_torch modules and with torch.nn
    on CUDA tensors: the losses agree step by step and fall."""
    import hologram_torch as hgt

    def train(nn):
        torch.manual_seed(0)
        model = torch.nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        gen = torch.Generator(device="cuda").manual_seed(1)
        x = torch.randn(512, 32, device="cuda", generator=gen)
        t = x[:, :4].argmax(1)
        loss_fn = nn.CrossEntropyLoss()
        losses = []
        for _ in range(30):
            opt.zero_grad()
            loss = loss_fn(model(x), t)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert next(model.parameters()).device.type == "cuda"
        return losses

    ours, ref = train(hgt.nn), train(torch.nn)
    np.testing.assert_allclose(ours, ref, rtol=2e-3, atol=1e-4)
    assert ours[-1] < 0.5 * ours[0], ours


@pytest.mark.parametrize("name", ["mlp", "gpt", "resnet18", "mobilenet_v3_small", "lstm"])
def test_models_train_on_cuda_with_zero_fallbacks(name):
    """The graph-compiler models on CUDA tensors (small sizes): one forward and one backward
    plan, replayed as CUDA graphs, outputs and gradients as eager's. TF32 is off on both sides
    (with it, batch norm over 4 samples amplifies the two sides' different roundings past any
    useful bound)."""
    pytest.importorskip("torchvision")
    from test_compile_models import case, close

    torch._dynamo.reset()
    hg_torch.reset_compile_stats()
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        _train_on_cuda(name, case, close)
    finally:
        torch.backends.cudnn.allow_tf32 = tf32


def _train_on_cuda(name, case, close):
    import copy

    base, x, y, loss_fn, _ = case(name)
    base, x, y = base.cuda(), x.cuda(), y.cuda()
    eager, mine = copy.deepcopy(base).train(), copy.deepcopy(base).train()
    compiled = torch.compile(mine, backend="hologram")
    ref = eager(x)
    loss_fn(ref, y).backward()
    for _ in range(2):  # the second step replays both plans
        mine.zero_grad()
        out = compiled(x)
        loss_fn(out, y).backward()
    tol = 1e-3
    assert close(out.detach(), ref.detach(), tol)
    floor = 1e-6 * max(p.grad.abs().max().item() for p in eager.parameters())
    for (pname, p), q in zip(eager.named_parameters(), mine.parameters()):
        assert close(q.grad, p.grad, tol, floor), pname
    stats = hg_torch.compile_stats()
    assert stats["fallback_nodes"] == 0 and stats["graphs"] == 2, stats
    assert stats["plans"] == 2 and stats["replays"] == 2, stats
    # (plan_stats also lists live plans of earlier tests, CPU ones among them.)
    assert sum(s["captured"] for _, s in hg_torch.plan_stats()) >= 2
