"""The per-call path of torch.compile(backend="hologram"): what it keeps between calls (views of
parameters, how outputs are made from the plan's results, inference graphs handed to Dynamo
without AOTAutograd's runtime wrappers) must not change results: a parameter given new memory,
an output that aliases an input, a buffer mutated under no_grad, views of computed values."""

import pytest

torch = pytest.importorskip("torch")

import hologram_torch  # noqa: E402


@pytest.fixture(autouse=True, params=["exchange", "dlpack"])
def fresh(request, monkeypatch):
    """Every test twice: through DLPack's C exchange table (where torch has one) and through
    the Python ``__dlpack__`` path."""
    from hologram_torch import _bridge

    if request.param == "dlpack":
        monkeypatch.setattr(_bridge, "_EXCHANGE_TABLE", None)
    elif _bridge._EXCHANGE_TABLE is None:
        pytest.skip("this torch has no DLPack C exchange table")
    torch._dynamo.reset()
    hologram_torch.reset_compile_stats()
    yield
    torch._dynamo.reset()


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))


def test_plain_inference_graph_runs_without_aot_wrappers_and_matches_eager():
    model = mlp()
    compiled = torch.compile(model, backend="hologram")
    x = torch.randn(3, 8)
    with torch.no_grad():
        for _ in range(3):
            out = compiled(x)
            torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    stats = hologram_torch.compile_stats()
    assert stats["direct_inference"] == 1 and stats["plans"] == 1 and stats["replays"] == 2
    assert not out.requires_grad
    from hologram_torch import _bridge

    # The replays crossed through the C exchange table where torch has one (else through Python).
    assert stats["exchange_replays"] == (2 if _bridge._EXCHANGE_TABLE is not None else 0)


def test_inference_output_aliasing_its_input_keeps_the_alias():
    f = torch.compile(lambda x: (x.view(-1), torch.relu(x) * 2), backend="hologram")
    x = torch.randn(4, 4)
    with torch.no_grad():
        for _ in range(3):
            flat, y = f(x)
            assert flat.data_ptr() == x.data_ptr() and flat.shape == (16,)
            torch.testing.assert_close(y, torch.relu(x) * 2)
    # AOTAutograd regenerates the alias; this graph keeps its wrappers.
    assert hologram_torch.compile_stats()["direct_inference"] == 0


def test_inference_mutating_a_buffer_updates_it_as_eager_does():
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)).train()
    mine = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)).train()
    mine.load_state_dict(eager.state_dict())
    compiled = torch.compile(mine, backend="hologram")
    x = torch.randn(6, 8)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), eager(x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mine[1].running_mean, eager[1].running_mean, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(mine[1].running_var, eager[1].running_var, rtol=1e-4, atol=1e-6)
    assert hologram_torch.compile_stats()["direct_inference"] == 0


@pytest.mark.parametrize("grad", [False, True])
def test_parameter_given_new_memory_or_changed_in_place_is_read_anew(grad):
    model = mlp()
    compiled = torch.compile(model, backend="hologram")
    x = torch.randn(3, 8)

    def run():
        if grad:
            return compiled(x)
        with torch.no_grad():
            return compiled(x)

    for _ in range(2):
        run()
    with torch.no_grad():
        model[0].weight.mul_(2.0)  # same memory
    torch.testing.assert_close(run().detach(), model(x).detach(), rtol=1e-5, atol=1e-6)
    model[2].weight.data = torch.randn(4, 8)  # new memory, same shape
    torch.testing.assert_close(run().detach(), model(x).detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(run().detach(), model(x).detach(), rtol=1e-5, atol=1e-6)


def test_views_of_computed_values_and_of_inputs_across_calls():
    def f(x, w):
        y = torch.relu(x @ w)
        return y.t(), y.t().t(), w.t(), y.reshape(-1)

    g = torch.compile(f, backend="hologram")
    w = torch.randn(5, 3)
    with torch.no_grad():
        for i in range(4):
            x = torch.randn(2, 5) + i
            got, want = g(x, w), f(x, w)
            for a, b in zip(got, want):
                assert a.shape == b.shape and a.stride() == b.stride()
                torch.testing.assert_close(a, b)
            assert got[2].data_ptr() == w.data_ptr()
            assert got[0].data_ptr() == got[1].data_ptr() == got[3].data_ptr()


def test_training_views_and_gradients_over_several_steps():
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    mine = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    mine.load_state_dict(eager.state_dict())
    compiled = torch.compile(mine, backend="hologram")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_m = torch.optim.SGD(mine.parameters(), lr=0.1)
    for _ in range(4):
        x, y = torch.randn(5, 8), torch.randn(5, 4)
        for _model, fn, opt in ((eager, eager, opt_e), (mine, compiled, opt_m)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(fn(x), y).backward()
            opt.step()
        for p, q in zip(eager.parameters(), mine.parameters()):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
    stats = hologram_torch.compile_stats()
    assert stats["eager_graphs"] == 0 and stats["replays"] >= 6


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_compile_step_follows_changed_hyper_parameters_and_optimizer_state(kind):
    """compile_step keeps its scalars tensor while the scalars are unchanged and remembers each
    parameter's step count: a new learning rate, a step count set from outside and a reloaded
    optimizer state must all reach the plan."""
    eager, mine = mlp(), mlp()
    make = (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)) if kind == "sgd" \
        else (lambda p: torch.optim.Adam(p, lr=1e-2))
    opt_e, opt_m = make(eager.parameters()), make(mine.parameters())
    loss_fn = torch.nn.functional.mse_loss
    step = hologram_torch.compile_step(mine, loss_fn, opt_m)
    x, y = torch.randn(5, 8), torch.randn(5, 4)

    def both():
        opt_e.zero_grad()
        loss_fn(eager(x), y).backward()
        opt_e.step()
        step(x, y)
        for p, q in zip(eager.parameters(), mine.parameters()):
            torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)

    for _ in range(3):
        both()
    for opt in (opt_e, opt_m):
        opt.param_groups[0]["lr"] *= 0.3
    both()
    if kind == "adam":
        for opt in (opt_e, opt_m):
            for st in opt.state.values():
                st["step"].fill_(40.0)  # same tensor, new value
        both()
    for opt in (opt_e, opt_m):
        opt.load_state_dict(opt.state_dict())  # new state tensors
    both()
    both()


def test_gradients_kept_across_backward_passes_are_never_overwritten():
    """Gradients are views of the backward plan's buffers: accumulating them without
    zero_grad, or keeping the gradients of many passes, must leave each value intact (a busy
    plan is not replayed; past four busy instances the graph copies its gradients)."""
    eager, mine = mlp(), mlp()
    compiled = torch.compile(mine, backend="hologram")
    xs = [torch.randn(3, 8) for _ in range(7)]
    for x in xs[:3]:  # accumulation in .grad
        eager(x).square().sum().backward()
        compiled(x).square().sum().backward()
    for p, q in zip(eager.parameters(), mine.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)
    mine.zero_grad()
    kept_e, kept_m = [], []
    for x in xs:  # gradients of every pass kept
        kept_e.append(torch.autograd.grad(eager(x).square().sum(), list(eager.parameters())))
        kept_m.append(torch.autograd.grad(compiled(x).square().sum(), list(mine.parameters())))
    for ge, gm in zip(kept_e, kept_m):
        for a, b in zip(gm, ge):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    # From then on the graph copies its gradients, in an instance that took the place of a busy
    # one: more passes whose gradients are kept plan nothing (no recording per pass).
    plans = hologram_torch.compile_stats()["plans"]
    for x in xs[:3]:
        kept_m.append(torch.autograd.grad(compiled(x).square().sum(), list(mine.parameters())))
        kept_e.append(torch.autograd.grad(eager(x).square().sum(), list(eager.parameters())))
    assert hologram_torch.compile_stats()["plans"] == plans
    for ge, gm in zip(kept_e, kept_m):
        for a, b in zip(gm, ge):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


class TwoHeads(torch.nn.Module):
    """Outputs with and without gradients, one of them unused by the loss."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body, self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4), torch.nn.Linear(8, 2)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        a = self.a(h)
        return a, self.b(h), a.argmax(dim=1)


@pytest.mark.parametrize("loss", ["sum", "first_head", "both"])
def test_forward_backward_pair_without_aot_wrappers_matches_eager(loss):
    """A plain forward/backward pair runs as one autograd Function: a broadcast (stride 0)
    tangent, an output the loss does not use (its tangent is zeros), an integer output that
    has no gradient; inputs that require grad and inputs that do not."""
    eager, mine = TwoHeads(), TwoHeads()
    compiled = torch.compile(mine, backend="hologram")
    for i in range(3):
        x = torch.randn(5, 8) + i
        xe, xm = x.clone().requires_grad_(), x.clone().requires_grad_()
        results = []
        for model, fn, xx in ((eager, eager, xe), (mine, compiled, xm)):
            model.zero_grad()
            a, b, idx = fn(xx)
            assert not idx.requires_grad and idx.dtype == torch.int64
            value = {"sum": a.sum(), "first_head": (a * a).mean(), "both": (a * a).mean() + b.sum()}[loss]
            value.backward()
            results.append((a.detach(), b.detach(), idx, xx.grad))
        for got, want in zip(results[1], results[0]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
        for p, q in zip(eager.parameters(), mine.parameters()):
            # A head the loss does not use: no gradient in eager, zeros under torch.compile
            # (AOTAutograd's own wrappers give zeros as well).
            want = p.grad if p.grad is not None else torch.zeros_like(p)
            torch.testing.assert_close(q.grad, want, rtol=1e-4, atol=1e-6)
    assert hologram_torch.compile_stats()["direct_training"] == 1


def test_direct_paths_can_be_turned_off_and_agree():
    from hologram_torch import compile as hc

    outs = []
    for direct in (True, False):
        torch._dynamo.reset()
        hologram_torch.reset_compile_stats()
        hc.DIRECT = direct
        try:
            model = mlp()
            compiled = torch.compile(model, backend="hologram")
            x = torch.randn(3, 8)
            compiled(x).square().sum().backward()
            with torch.no_grad():
                y = compiled(x)
            outs.append((y, [p.grad for p in model.parameters()]))
            stats = hologram_torch.compile_stats()
            assert stats["direct_training"] == stats["direct_inference"] == int(direct)
        finally:
            hc.DIRECT = True
    torch.testing.assert_close(outs[0][0], outs[1][0])
    for a, b in zip(outs[0][1], outs[1][1]):
        torch.testing.assert_close(a, b)


def test_models_of_one_architecture_share_graphs_without_recording_at_every_call():
    """Dynamo shares a compiled frame between models of one architecture (their parameters
    are graph inputs); each model's parameters are read in place, so each gets plans of its
    own. Alternating between more models than a graph keeps instances of gives up the least
    recently used instance, and calls that alternate between a few models replay."""
    models_ = [mlp() for _ in range(6)]
    with torch.no_grad():
        for i, m in enumerate(models_):
            m[0].weight.add_(0.1 * i)
    compiled = [torch.compile(m, backend="hologram") for m in models_]
    x = torch.randn(3, 8)

    def round_trip(which):
        for i in which:
            out = compiled[i](x)
            out.square().sum().backward()
            torch.testing.assert_close(out.detach(), models_[i](x).detach(), rtol=1e-5, atol=1e-6)
            models_[i].zero_grad()

    round_trip(range(6))  # more models than instances: some are given up
    assert hologram_torch.compile_stats()["plans_dropped"] > 0
    round_trip([0, 1, 0, 1])
    plans = hologram_torch.compile_stats()["plans"]
    round_trip([0, 1] * 4)
    assert hologram_torch.compile_stats()["plans"] == plans


def test_backward_reads_saved_weight_views_in_place_and_follows_moved_weights():
    """The transposed weights the forward graph saves are views of parameters, read in place by
    the backward plan; a weight given new memory must reach the backward pass too."""
    eager, mine = mlp(), mlp()
    compiled = torch.compile(mine, backend="hologram")
    x = torch.randn(3, 8)

    def check():
        for model, fn in ((eager, eager), (mine, compiled)):
            model.zero_grad()
            fn(x).square().sum().backward()
        for p, q in zip(eager.parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)

    check()
    check()
    new = torch.randn(4, 8)
    eager[2].weight.data = new.clone()
    mine[2].weight.data = new.clone()
    check()
    with torch.no_grad():
        eager[2].weight.mul_(3.0)
        mine[2].weight.mul_(3.0)
    check()


def test_a_gone_plan_no_longer_claims_its_output_addresses():
    """A tensor at an address that a plan's output buffer had is read in place only while that
    plan lives: memory reused after the plan is gone (a new gradient, a new batch) is copied in,
    so the next call with the tensor elsewhere replays instead of planning again."""
    import gc

    import hologram_torch.compile as compile_module

    class Owner:  # stands in for a plan (weakly referenced, like one)
        pass

    x = torch.zeros(8)
    owner = Owner()
    compile_module._register_plan_buffers([x.untyped_storage().data_ptr()], owner)
    assert compile_module._in_place(x)
    assert compile_module._in_place(x[2:])  # a view into the buffer, as torch slices one
    del owner
    gc.collect()
    assert not compile_module._in_place(x)


def test_a_call_the_exchange_table_cannot_take_falls_back_to_the_python_path(request, monkeypatch):
    """An input the C exchange table refuses (another device, in practice) makes that graph's
    signature use the Python DLPack path from then on, with the same results."""
    import hologram as hg

    if request.node.callspec.params["fresh"] != "exchange":
        pytest.skip("the exchange table's own fallback")

    def refuse(self, *args, **kwargs):
        raise hg.ValidationError("refused for the test")

    model = mlp()
    compiled = torch.compile(model, backend="hologram")
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled(x)
        monkeypatch.setattr(hg.Exchange, "run_first", refuse)
        for k in range(3):
            torch.testing.assert_close(compiled(x + k), model(x + k), rtol=1e-5, atol=1e-6)
    stats = hologram_torch.compile_stats()
    assert stats["plans"] == 1 and stats["replays"] == 3 and stats["exchange_replays"] == 0


def test_reshaped_gradients_and_values_saved_twice_come_straight_from_the_plan():
    """A bias gradient (summed to ``[1, n]``, viewed as ``[n]``) is returned by the backward
    plan in its final shape, and a value the forward graph saves under two names is one tensor:
    a training step makes no torch view of a plan result per call (only views of parameters),
    and gradients still match eager's over several steps."""
    from hologram_torch import compile as hc

    before = set(hc._GRAPHS)
    eager, mine = mlp(), mlp()
    compiled = torch.compile(mine, backend="hologram")
    for i in range(3):
        x = torch.randn(6, 8) + i
        for model, fn in ((eager, eager), (mine, compiled)):
            model.zero_grad(set_to_none=True)
            fn(x).square().sum().backward()
        for p, q in zip(eager.parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6)
            assert q.grad.shape == p.shape
    kinds = {}
    for graph in set(hc._GRAPHS) - before:
        for sig in graph.plans.values():
            kinds[graph.kind] = {how[0] for how in sig.recipe}
    assert set(kinds) == {"forward", "backward"}, kinds
    assert "strided" not in kinds["forward"] | kinds["backward"], kinds
