"""hologram_torch: gradcheck of every functional op, modules against torch.nn, the seeds'
PyTorch examples, torch.compile, and training."""

import pathlib
import runpy

import pytest

torch = pytest.importorskip("torch")

import hologram as hg  # noqa: E402
import hologram_torch as hg_torch  # noqa: E402
from hologram_torch import functional as F  # noqa: E402

f64 = dict(dtype=torch.float64)


def r(*shape, grad=True, low=None):
    t = torch.randn(*shape, **f64)
    if low is not None:
        t = t.abs() + low
    return t.requires_grad_(grad)


GRADCHECKS = {
    "add": (lambda a, b: F.add(a, b), lambda: (r(3, 4), r(4))),
    "sub": (lambda a, b: F.sub(a, b), lambda: (r(3, 4), r(3, 1))),
    "mul": (lambda a, b: F.mul(a, b), lambda: (r(3, 4), r(4))),
    "div": (lambda a, b: F.div(a, b), lambda: (r(3, 4), r(4, low=0.5))),
    "relu": (F.relu, lambda: (r(3, 5),)),
    "sigmoid": (F.sigmoid, lambda: (r(3, 5),)),
    "tanh": (F.tanh, lambda: (r(3, 5),)),
    "gelu": (F.gelu, lambda: (r(3, 5),)),
    "silu": (F.silu, lambda: (r(3, 5),)),
    "softmax": (lambda x: F.softmax(x, dim=1), lambda: (r(3, 5),)),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1), lambda: (r(3, 5),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b), lambda: (r(3, 5), r(5), r(5))),
    "linear": (lambda x, w, b: F.linear(x, w, b), lambda: (r(2, 3, 5), r(4, 5), r(4))),
    "matmul": (lambda a, b: F.matmul(a, b), lambda: (r(2, 3, 4), r(4, 5))),
    "mse_loss": (lambda a, b: F.mse_loss(a, b), lambda: (r(4, 3), r(4, 3))),
    "cross_entropy": (lambda a: F.cross_entropy(a, torch.tensor([1, 0, 4, 2])), lambda: (r(4, 5),)),
    "binary_cross_entropy": (lambda p: F.binary_cross_entropy(p, torch.tensor([1.0, 0.0, 1.0], **f64)), lambda: (torch.tensor([0.3, 0.6, 0.8], **f64, requires_grad=True),)),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck_float64(name):
    fn, inputs = GRADCHECKS[name]
    torch.manual_seed(0)
    assert torch.autograd.gradcheck(fn, inputs(), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_both_call_forms_and_executor():
    ex = hg.Executor("cpu")
    x, y = torch.randn(5), torch.randn(5)
    assert torch.allclose(F.add(ex, x, y), x + y)
    assert torch.allclose(F.add(x, y), x + y)
    assert torch.allclose(F.relu(ex, x), torch.relu(x))


def test_outputs_share_memory_with_torch():
    x = torch.randn(1000)
    y = F.relu(x)
    hy = hg.from_dlpack(y)
    assert hy.numpy().ctypes.data == y.data_ptr(), "results come back without copies"


def _pair(seed=0):
    torch.manual_seed(seed)
    ours = torch.nn.Sequential(hg_torch.nn.Linear(6, 8), hg_torch.nn.GELU(), hg_torch.nn.LayerNorm(8), hg_torch.nn.Linear(8, 4), hg_torch.nn.Tanh())
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 4), torch.nn.Tanh())
    return ours, ref


def test_modules_match_torch_nn_outputs_and_grads():
    ours, ref = _pair()
    for a, b in zip(ours.state_dict().values(), ref.state_dict().values()):
        assert torch.equal(a, b), "same initialization for the same seed"
    x = torch.randn(10, 6)
    yo, yr = ours(x), ref(x)
    assert torch.allclose(yo, yr, atol=1e-5)
    yo.pow(2).sum().backward()
    yr.pow(2).sum().backward()
    for (n, po), pr in zip(ours.named_parameters(), ref.parameters()):
        assert torch.allclose(po.grad, pr.grad, atol=1e-4, rtol=1e-4), n
    for mod, ref_mod in [(hg_torch.nn.ReLU(), torch.nn.ReLU()), (hg_torch.nn.Sigmoid(), torch.nn.Sigmoid()), (hg_torch.nn.SiLU(), torch.nn.SiLU()), (hg_torch.nn.Softmax(dim=1), torch.nn.Softmax(dim=1))]:
        assert torch.allclose(mod(x), ref_mod(x), atol=1e-6)
    t = torch.randint(0, 6, (10,))
    assert torch.allclose(hg_torch.nn.CrossEntropyLoss()(x, t), torch.nn.CrossEntropyLoss()(x, t), atol=1e-6)
    assert torch.allclose(hg_torch.nn.MSELoss()(x, x * 2), torch.nn.MSELoss()(x, x * 2), atol=1e-6)


def test_modules_are_real_modules():
    ours, _ = _pair()
    sd = ours.state_dict()
    fresh, _ = _pair(seed=1)
    fresh.load_state_dict(sd)
    x = torch.randn(3, 6)
    assert torch.equal(fresh(x), ours(x))
    opt = torch.optim.SGD(ours.parameters(), lr=0.1)
    before = [p.detach().clone() for p in ours.parameters()]
    ours(x).sum().backward()
    opt.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, ours.parameters()))


def test_seed_pytorch_integration_example():
    # Seed: "PyTorch Integration (hologram-torch)". Adapted: the seed asks for
    # hg.Executor(backend='metal'), which exists only on macOS; this uses 'auto' (the seed's own
    # MyModel does).
    import hologram as hg
    import hologram_torch as hg_torch

    # Create executor
    exec = hg.Executor(backend='auto')

    # Functional API
    x = torch.randn(1024)
    y = torch.randn(1024)
    z = hg_torch.functional.add(exec, x, y)
    assert torch.allclose(z, x + y)

    # nn.Module API
    class MyModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.executor = hg.Executor(backend='auto')
            self.linear = hg_torch.nn.Linear(self.executor, 512, 256)
            self.relu = hg_torch.nn.ReLU()

        def forward(self, x):
            x = self.linear(x)
            x = hg_torch.functional.relu(self.executor, x)
            return x

    model = MyModel()
    output = model(torch.randn(32, 512))
    assert output.shape == (32, 256) and (output >= 0).all()


def test_seed_backend_keyword_module():
    # Seed: `hg_torch.nn.Linear(512, 256, backend='metal')`. On machines without Metal this
    # raises BackendUnavailableError saying why; with backend='cpu' it builds the layer.
    try:
        hg_torch.nn.Linear(512, 256, backend='metal')
    except hg.BackendUnavailableError as e:
        assert "metal" in str(e).lower()
    layer = hg_torch.nn.Linear(512, 256, backend='cpu')
    assert layer(torch.randn(2, 512)).shape == (2, 256)


def test_compile_mlp_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8), torch.nn.Sigmoid())
    x = torch.randn(20, 16)
    compiled = torch.compile(model, backend="hologram")
    with torch.no_grad():
        assert torch.allclose(compiled(x), model(x), atol=1e-5)


def test_compile_fuses_an_elementwise_chain():
    f = torch.compile(lambda a, b: torch.relu(a + b) * b - a, backend="hologram")
    a, b = torch.randn(4096), torch.randn(4096)
    f(a, b)  # compile
    ex = hg.executor_for("cpu")
    n0 = ex.stats()["launches"]
    out = f(a, b)
    assert ex.stats()["launches"] - n0 == 1, "the chain ran as one kernel"
    assert torch.allclose(out, torch.relu(a + b) * b - a)


def test_compile_training_step_has_gradients():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="hologram")
    x, y = torch.randn(5, 8), torch.randn(5, 1)
    torch.nn.functional.mse_loss(compiled(x), y).backward()
    torch.nn.functional.mse_loss(ref(x), y).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5)


def test_train_digits_reaches_95_percent():
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"
    mod = runpy.run_path(str(path))
    ours, ref = mod["main"]([])
    assert ours >= 95.0, ours
    assert abs(ours - ref) <= 1.0, (ours, ref)


def test_compile_training_lowers_gelu_layer_norm_softmax():
    """With gradients needed, GELU, LayerNorm and softmax and their backward run in Hologram
    plans (no eager fallback), and outputs and gradients match eager PyTorch."""
    import copy

    torch._dynamo.reset()
    hg_torch.reset_compile_stats()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4), torch.nn.Softmax(dim=-1)
    )
    ref = copy.deepcopy(model)
    x = torch.randn(6, 8)
    out = torch.compile(model, backend="hologram")(x)
    want = ref(x)
    assert torch.allclose(out, want, atol=1e-5)
    (out * torch.arange(4.0)).sum().backward()
    (want * torch.arange(4.0)).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5)
    stats = hg_torch.compile_stats()
    assert stats["fallback_nodes"] == 0 and stats["graphs"] == 2, stats


def test_compile_softmax_with_dtype_keeps_the_dtype():
    """softmax(x, dtype=...) computes in the requested dtype, in the plan."""
    torch._dynamo.reset()
    hg_torch.reset_compile_stats()
    f = torch.compile(lambda x: torch.softmax(x * 2, dim=-1, dtype=torch.float64), backend="hologram")
    x = torch.randn(3, 5)
    with torch.no_grad():
        out = f(x)
    assert out.dtype == torch.float64
    assert torch.allclose(out, torch.softmax(x * 2, dim=-1, dtype=torch.float64))
    assert hg_torch.compile_stats()["fallback_nodes"] == 0


def test_compile_falls_back_with_the_reason_counted(caplog):
    """A graph with an op Hologram cannot lower runs in eager PyTorch; the log says which op
    and why, and compile_stats() counts it."""
    torch._dynamo.reset()
    hg_torch.reset_compile_stats()
    f = torch.compile(lambda x: torch.special.zeta(x, 2.0) + 1, backend="hologram")
    x = torch.rand(4) + 1.5
    with caplog.at_level("WARNING"):
        out = f(x)
    assert torch.allclose(out, torch.special.zeta(x, 2.0) + 1)
    stats = hg_torch.compile_stats()
    assert stats["eager_graphs"] == 1 and stats["fallback_nodes"] >= 1
    assert any("zeta" in op for op in stats["fallback_ops"]), stats
    assert any("zeta" in r.getMessage() and "no Hologram lowering" in r.getMessage() for r in caplog.records)
