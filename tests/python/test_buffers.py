"""Buffers: allocation of every dtype, NumPy round trips, zero-copy views, errors."""

import numpy as np
import pytest

import hologram as hg

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(ex, dtype, rng):
    data = (rng.standard_normal(100) * 50).astype(dtype)
    buf = ex.allocate(100, dtype=dtype)
    assert len(buf) == 100 and buf.dtype == np.dtype(dtype)
    buf.from_numpy(data)
    np.testing.assert_array_equal(buf.to_numpy(), data)


def test_to_numpy_is_a_zero_copy_view_on_the_cpu():
    ex = hg.Executor("cpu")
    buf = ex.allocate(8, dtype=np.float32)
    buf.from_numpy(np.arange(8, dtype=np.float32))
    v1, v2 = buf.to_numpy(), buf.to_numpy()
    assert v1.ctypes.data == v2.ctypes.data, "both views see the same memory"
    buf.from_numpy(np.ones(8, dtype=np.float32))
    assert v1.tolist() == [1.0] * 8, "the view sees later writes"
    del buf
    assert v1.sum() == 8.0, "the view keeps the memory alive"


def test_wrong_dtype_or_size_is_an_error(ex):
    buf = ex.allocate(16, dtype=np.float32)
    with pytest.raises(hg.ValidationError, match="float64"):
        buf.from_numpy(np.zeros(16))
    with pytest.raises(hg.ValidationError, match="16 elements"):
        buf.from_numpy(np.zeros(15, dtype=np.float32))
    with pytest.raises(hg.ValidationError):
        ex.allocate(-1)


def test_seed_op_names(ex, rng):
    n = 257
    x = rng.standard_normal(n).astype(np.float32)
    y = (rng.random(n).astype(np.float32) + 0.5)
    a, b, c = (ex.allocate(n, dtype=np.float32) for _ in range(3))
    a.from_numpy(x)
    b.from_numpy(y)
    for name, ref in [("vector_add", x + y), ("vector_sub", x - y), ("vector_mul", x * y), ("vector_div", x / y), ("min", np.minimum(x, y)), ("max", np.maximum(x, y))]:
        getattr(hg.ops, name)(ex, a, b, c)
        np.testing.assert_allclose(c.to_numpy(), ref, rtol=1e-6, err_msg=name)
    for name, ref in [("relu", np.maximum(x, 0)), ("sigmoid", 1 / (1 + np.exp(-x))), ("tanh", np.tanh(x)), ("abs", np.abs(x)), ("neg", -x)]:
        getattr(hg.ops, name)(ex, a, c)
        np.testing.assert_allclose(c.to_numpy(), ref, rtol=1e-5, atol=1e-6, err_msg=name)
    hg.ops.gelu(ex, a, c)
    from math import erf, sqrt

    np.testing.assert_allclose(c.to_numpy(), [0.5 * v * (1 + erf(v / sqrt(2))) for v in x], rtol=1e-5, atol=1e-6)
    hg.ops.clip(ex, a, c, -0.5, 0.5)
    np.testing.assert_allclose(c.to_numpy(), np.clip(x, -0.5, 0.5))
    hg.ops.scalar_add(ex, a, 2.0, c)
    np.testing.assert_allclose(c.to_numpy(), x + 2)
    hg.ops.scalar_mul(ex, a, 3.0, c)
    np.testing.assert_allclose(c.to_numpy(), x * 3, rtol=1e-6)
    hg.ops.softmax(ex, a, c)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(c.to_numpy(), e / e.sum(), rtol=1e-5)
    assert abs(hg.ops.sum(ex, a) - x.sum()) < 1e-3
    assert hg.ops.reduce.max(ex, a) == x.max() and hg.ops.reduce.min(ex, a) == x.min()
    assert abs(hg.ops.mse(ex, a, b) - np.mean((x - y) ** 2)) < 1e-4
    # The n argument limits the work.
    c.from_numpy(np.zeros(n, dtype=np.float32))
    hg.ops.vector_add(ex, a, b, c, 10)
    np.testing.assert_allclose(c.to_numpy()[:10], (x + y)[:10])
    assert not c.to_numpy()[10:].any()
    # Namespaced forms from the Rust seeds.
    hg.ops.math.vector_add(ex, a, b, c)
    hg.ops.memory.fill(ex, c, 7.0)
    assert (c.to_numpy() == 7).all()
    hg.ops.memory.copy(ex, a, c)
    np.testing.assert_array_equal(c.to_numpy(), x)


def test_gemm_and_matvec(ex, rng):
    m, k, n = 7, 5, 3
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    a, b, c = ex.allocate(m * k), ex.allocate(k * n), ex.allocate(m * n)
    a.from_numpy(A.ravel())
    b.from_numpy(B.ravel())
    hg.ops.gemm(ex, a, b, c, m, n, k)
    np.testing.assert_allclose(c.to_numpy().reshape(m, n), A @ B, rtol=1e-5, atol=1e-5)
    x, y = ex.allocate(k), ex.allocate(m)
    x.from_numpy(B[:, 0].copy())
    hg.ops.matvec(ex, a, x, y, m, k)
    np.testing.assert_allclose(y.to_numpy(), A @ B[:, 0], rtol=1e-5, atol=1e-5)


def test_losses(ex, rng):
    logits = rng.standard_normal((4, 5)).astype(np.float32)
    targets = np.array([1, 0, 4, 2], dtype=np.float32)
    lb, tb = ex.allocate(20), ex.allocate(4)
    lb.from_numpy(logits.ravel())
    tb.from_numpy(targets)
    got = hg.ops.cross_entropy(ex, lb, tb, batch=4, classes=5)
    z = logits - logits.max(axis=1, keepdims=True)
    ls = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    assert abs(got - (-ls[np.arange(4), targets.astype(int)].mean())) < 1e-5
    p = rng.random(10).astype(np.float32) * 0.9 + 0.05
    t = (rng.random(10) > 0.5).astype(np.float32)
    pb, tb2 = ex.allocate(10), ex.allocate(10)
    pb.from_numpy(p)
    tb2.from_numpy(t)
    want = -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean()
    assert abs(hg.ops.binary_cross_entropy(ex, pb, tb2) - want) < 1e-5
