"""Scaled dot-product attention through torch.compile(backend="hologram") on the CPU: SDPA stays
one node forward (``hologram::sdpa``) and one backward (``hologram::sdpa_backward``), each
lowered to the core attention op (no mask, copy or separate softmax kernels), and results match
eager: a small GPT's outputs and gradients, and attention alone over causal and non-causal,
odd lengths and head dimensions, masks (which keep the composed form) and inference."""

import copy
import operator
import os
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import hologram_torch  # noqa: E402
from hologram_torch import attention as hg_attention  # noqa: E402
from hologram_torch import compile as hg_compile  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import models  # noqa: E402  (bench/models.py)

aten = torch.ops.aten

# What torch's math decomposition of causal SDPA left in the forward graph: the mask (and its
# check for fully masked rows), copies for the batched products, a separate softmax.
_MASK_AND_SOFTMAX = {aten.tril.default, aten.masked_fill.Scalar, aten.where.self, aten.ones.default,
                     aten.any.dim, aten.logical_and.default, aten.le.Scalar, aten.clone.default,
                     aten.bmm.default, aten._softmax.default}
_SOFTMAX_BACKWARD = {aten._softmax_backward_data.default, aten.bmm.default, aten.clone.default}

_OLD_GRAPHS: set = set()


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    hologram_torch.reset_compile_stats()
    _OLD_GRAPHS.clear()
    _OLD_GRAPHS.update(id(g) for g in hg_compile._GRAPHS)
    yield
    torch._dynamo.reset()


def graphs():
    """The hologram backend's graphs made by this test."""
    return [g for g in list(hg_compile._GRAPHS) if id(g) not in _OLD_GRAPHS]


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()


def graph_targets():
    """``{kind: set of call targets}`` of the live graphs of the hologram backend."""
    out = {}
    for g in graphs():
        out.setdefault(g.kind, set()).update(n.target for n in g.nodes if n.op == "call_function")
    return out


def assert_no_fallbacks():
    stats = hologram_torch.compile_stats()
    assert stats["fallback_nodes"] == 0 and stats["eager_graphs"] == 0, stats["fallback_ops"]


def test_gpt_training_lowers_attention_to_one_op_and_matches_eager():
    base, x, y, loss_fn, _ = models.make_case("gpt", "cpu", small=True)
    eager, mine = copy.deepcopy(base).train(), copy.deepcopy(base).train()
    compiled = torch.compile(mine, backend="hologram")
    ref = eager(x)
    loss_fn(ref, y).backward()
    out = compiled(x)
    loss_fn(out, y).backward()
    assert rel(out.detach(), ref.detach()) < 1e-4
    for (pname, p), q in zip(eager.named_parameters(), mine.parameters()):
        assert q.grad is not None, pname
        assert (q.grad - p.grad).abs().max().item() <= 1e-3 * p.grad.abs().max().item() + 1e-9, pname
    assert_no_fallbacks()
    targets = graph_targets()
    layers = len(base.blocks)
    fwd = [n for g in graphs() if g.kind == "forward" for n in g.nodes
           if n.op == "call_function" and n.target == hg_attention.sdpa_op]
    bwd = [n for g in graphs() if g.kind == "backward" for n in g.nodes
           if n.op == "call_function" and n.target == hg_attention.sdpa_backward_op]
    assert len(fwd) == layers and len(bwd) == layers
    assert all(n.args[3] is True and n.args[5] is True for n in fwd)  # causal, probabilities kept
    assert not targets["forward"] & _MASK_AND_SOFTMAX, targets["forward"] & _MASK_AND_SOFTMAX
    assert not targets["backward"] & _SOFTMAX_BACKWARD, targets["backward"] & _SOFTMAX_BACKWARD
    # q, k and v are read in place and the output written where the projection reads it: the
    # forward plan copies nothing (torch's math form copied q, k, v and the output per layer).
    fwd_plans = [p.stats for g in graphs() if g.kind == "forward" for sig in g.plans.values()
                 for p in sig.instances]
    assert fwd_plans and all(st["copies"] == 0 for st in fwd_plans), fwd_plans
    # The heads merge back as views: no copy of the attention output in the forward graph
    # between the op and the output projection.
    for n in fwd:
        out_users = [u for u in n.users if u.target is operator.getitem and u.args[1] == 0]
        for u in out_users:
            chain = list(u.users)
            assert all(c.target in (aten.permute.default, aten.transpose.int, aten.view.default,
                                    aten._unsafe_view.default) for c in chain), [c.target for c in chain]


def test_gpt_inference_keeps_no_probabilities():
    base, x, _, _, _ = models.make_case("gpt", "cpu", small=True)
    base.eval()
    compiled = torch.compile(copy.deepcopy(base), backend="hologram")
    with torch.no_grad():
        ref, out = base(x), compiled(x)
    assert rel(out, ref) < 1e-4
    assert_no_fallbacks()
    nodes = [n for g in graphs() for n in g.nodes
             if n.op == "call_function" and n.target == hg_attention.sdpa_op]
    assert nodes and all(n.args[5] is False for n in nodes)


def _qkv(b, length, h, d, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, length, 3 * h * d, generator=g, requires_grad=True)


def _attend(qkv, h, **kw):
    b, length, c3 = qkv.shape
    c = c3 // 3
    q, k, v = qkv.split(c, dim=2)
    q, k, v = (z.view(b, length, h, c // h).transpose(1, 2) for z in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, **kw)
    return o.transpose(1, 2).reshape(b, length, c)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("b,length,h,d", [(2, 37, 3, 64), (1, 45, 2, 7), (3, 5, 1, 3)])
def test_attention_matches_eager(causal, b, length, h, d):
    x = _qkv(b, length, h, d, 1)
    xe = x.detach().clone().requires_grad_(True)
    fn = torch.compile(lambda t: _attend(t, h, is_causal=causal, scale=0.37), backend="hologram")
    out = fn(x)
    ref = _attend(xe, h, is_causal=causal, scale=0.37)
    assert rel(out.detach(), ref.detach()) < 1e-4
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(2))
    (out * w).sum().backward()
    (ref * w).sum().backward()
    assert rel(x.grad, xe.grad) < 1e-3
    assert_no_fallbacks()
    targets = graph_targets()
    assert hg_attention.sdpa_op in targets["forward"]
    assert hg_attention.sdpa_backward_op in targets["backward"]


def test_attention_with_a_mask_keeps_the_composed_form():
    x = _qkv(2, 9, 2, 4, 3)
    mask = torch.rand(9, 9, generator=torch.Generator().manual_seed(4)) > 0.3
    mask |= torch.eye(9, dtype=torch.bool)
    fn = torch.compile(lambda t: _attend(t, 2, attn_mask=mask), backend="hologram")
    with torch.no_grad():
        out, ref = fn(x), _attend(x, 2, attn_mask=mask)
    assert rel(out, ref) < 1e-4
    assert_no_fallbacks()
    targets = set().union(*graph_targets().values())
    assert hg_attention.sdpa_op not in targets and aten._softmax.default in targets


def test_custom_ops_run_in_eager_and_match_torch():
    """The ops' eager implementations (what a graph that falls back runs) against torch's SDPA."""
    x = _qkv(2, 11, 2, 5, 5)
    xe = x.detach().clone().requires_grad_(True)
    for causal in (True, False):
        b, length, _ = x.shape
        q, k, v = (z.view(b, length, 2, 5).transpose(1, 2) for z in x.split(10, dim=2))
        out, probs = hg_attention.sdpa(q, k, v, causal, 0.5, True)
        qe, ke, ve = (z.view(b, length, 2, 5).transpose(1, 2) for z in xe.split(10, dim=2))
        ref = F.scaled_dot_product_attention(qe, ke, ve, is_causal=causal, scale=0.5)
        assert rel(out.detach(), ref.detach()) < 1e-5
        assert out.transpose(1, 2).is_contiguous()
        assert probs.shape == (b, 2, length, length)
        g = torch.randn(ref.shape)
        (gq,) = torch.autograd.grad((out * g).sum(), x)
        (ge,) = torch.autograd.grad((ref * g).sum(), xe)
        assert rel(gq, ge) < 1e-4
