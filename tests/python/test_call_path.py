"""The native call path: hg.ops functions validate and run in one native call, tensor operators
take their operands as they come, and repeated element-wise launches come from the launch cache
(no kernel building per call)."""

import numpy as np
import pytest

import hologram as hg
from hologram import _native


def buffers(ex, *arrays):
    out = []
    for x in arrays:
        b = ex.allocate(x.size, dtype=x.dtype)
        b.from_numpy(x)
        out.append(b)
    return out


def test_ops_are_native_functions():
    # No Python frame per call: the module's functions are the native ones.
    assert hg.ops.vector_add is _native.seed_ops.vector_add
    assert hg.ops.reduce.sum is _native.seed_ops.sum
    assert "element-wise" in hg.ops.vector_add.__doc__


BINARY = [("vector_add", np.add), ("vector_sub", np.subtract), ("vector_mul", np.multiply),
          ("vector_div", np.divide), ("min", np.minimum), ("max", np.maximum)]
UNARY = [("abs", np.abs), ("neg", np.negative), ("relu", lambda x: np.maximum(x, 0)),
         ("exp", np.exp), ("sqrt", lambda x: np.sqrt(np.abs(x))), ("tanh", np.tanh)]


@pytest.mark.parametrize("name,ref", BINARY)
@pytest.mark.parametrize("n", [None, 5, 0])
def test_binary_ops_match_numpy_on_a_prefix(ex, rng, name, ref, n):
    x = rng.standard_normal(16).astype(np.float32)
    y = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    a, b, c = buffers(ex, x, y, np.full(16, 9.0, np.float32))
    getattr(hg.ops, name)(ex, a, b, c, n)
    k = 16 if n is None else n
    want = np.concatenate([ref(x[:k], y[:k]), np.full(16 - k, 9.0, np.float32)])
    np.testing.assert_allclose(c.to_numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("name,ref", UNARY)
def test_unary_ops_match_numpy(ex, rng, name, ref):
    x = rng.standard_normal(33).astype(np.float32)
    if name == "sqrt":
        x = np.abs(x)
    a, c = buffers(ex, x, np.zeros(33, np.float32))
    getattr(hg.ops, name)(ex, a, c)
    np.testing.assert_allclose(c.to_numpy(), ref(x), rtol=2e-6, atol=1e-7)


def test_reductions_return_floats_and_fill_out(ex, rng):
    x = rng.standard_normal(40).astype(np.float32)
    a, out = buffers(ex, x, np.zeros(2, np.float32))
    got = hg.ops.sum(ex, a, out, n=10)
    assert isinstance(got, float)
    assert got == pytest.approx(float(x[:10].sum()), rel=1e-5)
    assert out.to_numpy()[0] == pytest.approx(got) and out.to_numpy()[1] == 0.0
    assert hg.ops.mean(ex, a) == pytest.approx(float(x.mean()), rel=1e-5, abs=1e-6)
    assert hg.ops.reduce_max(ex, a) == float(x.max())
    assert hg.ops.reduce_min(ex, a, n=3) == float(x[:3].min())


def test_ops_accept_native_objects_and_tensors(ex):
    x = np.arange(8, dtype=np.float32)
    a, b, c = buffers(ex, x, x, np.zeros(8, np.float32))
    hg.ops.vector_add(ex._e, a._t, b.tensor(), c)
    np.testing.assert_array_equal(c.to_numpy(), 2 * x)


def test_arguments_are_validated_before_any_work(ex):
    a, b, c = buffers(ex, *(np.ones(8, np.float32) for _ in range(3)))
    with pytest.raises(hg.ValidationError, match="expected a Buffer, got ndarray"):
        hg.ops.vector_add(ex, a, np.ones(8, np.float32), c)
    with pytest.raises(hg.ValidationError, match="expected an Executor, got str"):
        hg.ops.vector_add("cpu", a, b, c)
    with pytest.raises(hg.ValidationError, match="n = 9 exceeds the buffers"):
        hg.ops.vector_add(ex, a, b, c, 9)
    with pytest.raises(hg.ValidationError, match="n = -1 exceeds"):
        hg.ops.relu(ex, a, c, -1)
    with pytest.raises(hg.ValidationError, match="does not fit"):
        hg.ops.gemm(ex, a, b, c, 3, 3, 3)
    with pytest.raises(hg.ValidationError, match="does not fit"):
        hg.ops.matvec(ex, a, b, c, 3, 3)
    with pytest.raises(TypeError):
        hg.ops.vector_add(ex, a, b)
    np.testing.assert_array_equal(c.to_numpy(), np.ones(8, np.float32))


def test_cross_entropy_infers_the_class_count():
    ex = hg.Executor("cpu")
    logits = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    targets = np.array([0, 2, 1, 2], np.int64)
    lb, tb = buffers(ex, logits.ravel(), targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    want = -logp[np.arange(4), targets].mean()
    assert hg.ops.cross_entropy(ex, lb, tb) == pytest.approx(float(want), rel=1e-5)


def test_tensor_operands_numbers_and_rejections():
    t = hg.asarray(np.array([1.0, 2.0, 3.0], np.float32), device="cpu")
    np.testing.assert_array_equal((t + np.float32(1.5)).numpy(), [2.5, 3.5, 4.5])
    np.testing.assert_array_equal((t * True).numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal((2 - t).numpy(), [1.0, 0.0, -1.0])
    np.testing.assert_array_equal((t + t._t).numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal((t < 2.5).numpy(), [True, True, False])
    with pytest.raises(TypeError, match="unsupported operand str"):
        t + "1"
    with pytest.raises(TypeError, match="unsupported operand ndarray"):
        t._t.binary("add", np.ones(3, np.float32))


HOT = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__mod__", "__and__",
       "__or__", "__xor__", "__eq__", "__lt__", "__neg__", "__abs__", "__invert__", "realize", "sum",
       "item", "exp", "relu", "sigmoid"]


@pytest.mark.parametrize("name", HOT)
def test_hot_tensor_methods_are_the_native_base_class_methods(name):
    # No Python frame between the operator and the native call: hologram.Tensor does not
    # define them, its native base does.
    assert name not in hg.Tensor.__dict__
    assert name in _native.TensorBase.__dict__


def test_native_results_are_public_tensors_of_the_right_values():
    t = hg.asarray(np.array([1.0, -2.0, 3.0], np.float32), device="cpu")
    n = hg.asarray(np.array([1, 6, 3], np.int32), device="cpu")
    cases = {
        "t + 1": (t + 1, [2.0, -1.0, 4.0]), "1 - t": (1 - t, [0.0, 3.0, -2.0]),
        "-t": (-t, [-1.0, 2.0, -3.0]), "abs(t)": (abs(t), [1.0, 2.0, 3.0]),
        "t.relu()": (t.relu(), [1.0, 0.0, 3.0]), "t == t": (t == t, [True, True, True]),
        "t != 1": (t != 1, [False, True, True]), "n % 4": (n % 4, [1, 2, 3]),
        "n & 2": (n & 2, [0, 2, 2]), "~(t > 0)": (~(t > 0), [False, True, False]),
        "t.realize()": ((t * 2).realize(), [2.0, -4.0, 6.0]), "t.sum(0, True)": (t.sum(0, True), [2.0]),
    }
    for what, (got, want) in cases.items():
        assert type(got) is hg.Tensor, what
        np.testing.assert_array_equal(got.numpy(), want, err_msg=what)
    assert t.sum().item() == 2.0 and isinstance(n.sum().item(), int)
    # Tensors hash by identity (== is element-wise), and copy.copy shares the native tensor.
    import copy

    assert len({t, t, n}) == 2
    c = copy.copy(t)
    assert type(c) is hg.Tensor and c._t is t._t
    # The constructor takes what asarray takes, a native tensor as it is.
    assert hg.Tensor(t._t)._t is t._t
    assert hg.Tensor([1.5, 2.5]).tolist() == [1.5, 2.5]
    assert hg.Tensor(n, dtype="float32").dtype == np.float32


def test_results_hold_one_reference_to_their_class_each():
    # Each result is made as the native base class and switched to hg.Tensor (after the first,
    # without Python's checks): the switch must move the instance's reference from one class to
    # the other, or the counts drift with every op.
    import sys

    t = hg.asarray(np.ones(4, np.float32), device="cpu")
    (t + 1).realize()
    public, base = sys.getrefcount(hg.Tensor), sys.getrefcount(_native.TensorBase)
    kept = [(t + k).realize() for k in range(1000)]
    assert all(type(r) is hg.Tensor for r in kept)
    assert sys.getrefcount(hg.Tensor) - public >= 1000
    assert sys.getrefcount(_native.TensorBase) - base < 10
    del kept
    assert abs(sys.getrefcount(hg.Tensor) - public) < 10
    assert abs(sys.getrefcount(_native.TensorBase) - base) < 10


def test_repeated_launches_come_from_the_launch_cache():
    ex = hg.Executor("cpu")
    a, b, c = buffers(ex, *(np.full(64, 2.0, np.float32) for _ in range(3)))
    hg.ops.relu(ex, a, c)
    before = ex.stats()
    for _ in range(5):
        hg.ops.relu(ex, a, c)
    after = ex.stats()
    assert after["launch_cache_hits"] - before["launch_cache_hits"] == 5
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["launches"] - before["launches"] == 5
    # Another expression, dtype or layout is another kernel, not a wrong hit.
    hg.ops.vector_add(ex, a, b, c)
    hg.ops.vector_mul(ex, a, b, c, 33)
    d = ex.allocate(64, dtype=np.float64)
    hg.ops.vector_mul(ex, a, b, d)
    np.testing.assert_array_equal(c.to_numpy(), np.full(64, 4.0, np.float32))
    np.testing.assert_array_equal(d.to_numpy(), np.full(64, 4.0))


def test_small_binary_ops_run_on_the_cpu_without_a_kernel():
    # One operation on dense operands of one dtype: the CPU backend's library runs it at once,
    # still counted as a launch, with no kernel built or looked up.
    ex = hg.Executor("cpu")
    a, b, c = buffers(ex, *(np.full(64, 3.0, np.float32) for _ in range(3)))
    before = ex.stats()
    for _ in range(5):
        hg.ops.vector_mul(ex, a, b, c)
    after = ex.stats()
    assert after["launches"] - before["launches"] == 5
    assert after["launch_cache_hits"] == before["launch_cache_hits"]
    assert after["kernels_compiled"] == before["kernels_compiled"]
    np.testing.assert_array_equal(c.to_numpy(), np.full(64, 9.0, np.float32))
    x = hg.asarray(np.arange(5, dtype=np.float32), device="cpu").realize()
    np.testing.assert_array_equal((2 - x).realize().numpy(), 2 - np.arange(5, dtype=np.float32))


def test_large_work_runs_with_the_gil_released_and_gives_the_same_results():
    # Above the size the GIL is kept for, the op runs the same code without the GIL.
    n = 1 << 16
    ex = hg.Executor("cpu")
    x = np.linspace(-1, 1, n, dtype=np.float32)
    a, c = buffers(ex, x, np.zeros(n, np.float32))
    hg.ops.relu(ex, a, c)
    np.testing.assert_array_equal(c.to_numpy(), np.maximum(x, 0))
    assert hg.ops.sum(ex, c) == pytest.approx(float(np.maximum(x, 0).sum()), rel=1e-4)


def test_item_gives_a_python_number_of_the_dtype_exactly():
    big = 2**62 + 1  # not a float64: item() reads the integer itself
    t = hg.asarray(np.array([big], np.int64), device="cpu")
    assert t.item() == big and type(t.item()) is int
    assert hg.asarray(np.array([True]), device="cpu").item() is True
    assert hg.asarray(np.array([2**63 + 5], np.uint64), device="cpu").item() == 2**63 + 5
    half = hg.asarray(np.array([1.5], np.float16), device="cpu").item()
    assert type(half) is float and half == 1.5
    assert hg.asarray(np.array([200, 100], np.uint8), device="cpu").sum().item() == 300
    with pytest.raises(hg.ValidationError, match="one element"):
        hg.asarray([1.0, 2.0], device="cpu").item()


def test_reduction_axes_may_be_none_an_int_or_a_sequence():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = hg.asarray(x, device="cpu")
    np.testing.assert_array_equal(t.sum().numpy(), x.sum())
    np.testing.assert_array_equal(t.sum(axis=1).numpy(), x.sum(axis=1))
    np.testing.assert_array_equal(t.sum(axis=np.int64(-1)).numpy(), x.sum(axis=-1))
    np.testing.assert_array_equal(t.max(axis=(0, 2)).numpy(), x.max(axis=(0, 2)))
    np.testing.assert_array_equal(t.mean(axis=[2], keepdims=True).numpy(), x.mean(axis=2, keepdims=True))
    with pytest.raises(TypeError):
        t.sum(axis="1")


def test_native_object_of_a_tensor_is_made_once_and_kept():
    """A result holds its core tensor directly; the native object (``_t``) that Python-level
    functions take is made on first use, then the same object every time; a tensor made from a
    native object keeps that object."""
    a = hg.asarray(np.arange(6, dtype=np.float32))
    r = (a + 1).realize()
    first = r._t
    assert r._t is first
    again = hg.Tensor(first)
    assert again._t is first
    assert np.array_equal(again.numpy(), np.arange(6, dtype=np.float32) + 1)
    copied = hg.Tensor(r)
    assert copied._t is first and copied is not r


def test_realize_returns_the_tensor_itself_stored_and_frees_its_inputs():
    """``realize`` runs a pending expression and returns the same object, which stands for the
    stored result from then on (writes and its native object see a stored tensor); the tensors
    it was computed from are freed when the caller drops them."""
    n = 1 << 16
    a = hg.arange(n, dtype=np.float32, device="cpu").realize()
    b = hg.arange(n, dtype=np.float32, device="cpu").realize()
    stats = a.executor.stats
    y = (a - b * 2).relu() + b
    pending_native = y._t
    assert y.realize() is y and y.realize() is y
    assert y._t is not pending_native and y._t is y._t
    held = stats()["bytes_in_use"]
    del a, b
    assert held - stats()["bytes_in_use"] == 2 * 4 * n
    want = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(y.numpy(), want)
    y[0:2] = 5
    np.testing.assert_array_equal(y.numpy()[:3], [5, 5, 2])
    # A stored tensor's realize is itself too.
    s = hg.asarray(want, device="cpu")
    assert s.realize() is s
    # Values realized together stand for their stored results the same way.
    p = hg.arange(8, dtype=np.float32, device="cpu") + 1
    q = p.relu()
    native = q._t
    hg.Tensor.realize_all([p, q])
    assert not p._t.is_lazy and q._t is not native
    np.testing.assert_array_equal(q.numpy(), np.arange(8) + 1)
