"""hg.Tensor against NumPy: creation, operators with broadcasting, reductions, indexing, matmul."""

import numpy as np
import pytest

import hologram as hg


def close(t, ref, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(t), ref, rtol=rtol, atol=atol)


def test_creation(ex):
    d = ex.backend
    assert hg.zeros((2, 3), device=d).tolist() == [[0.0] * 3] * 2
    assert hg.ones(4, dtype="int32", device=d).dtype == np.int32
    assert hg.full((2,), 7.5, device=d).tolist() == [7.5, 7.5]
    assert hg.arange(5, device=d).tolist() == [0, 1, 2, 3, 4]
    assert hg.arange(0, 1, 0.25, device=d).tolist() == [0.0, 0.25, 0.5, 0.75]
    a = hg.asarray([[1, 2], [3, 4]], device=d)
    assert a.shape == (2, 2) and a.dtype == np.int64 and a.ndim == 2 and a.size == 4
    r = hg.rand(1000, seed=3, device=d).numpy()
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.05
    assert np.array_equal(hg.rand(16, seed=3, device=d).numpy(), hg.rand(16, seed=3, device="cpu").numpy())


def test_operators_broadcast(ex, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal(4).astype(np.float32) + 3
    a, b = hg.asarray(x, device=ex.backend), hg.asarray(y, device=ex.backend)
    close(a + b, x + y)
    close(a - b, x - y)
    close(a * b, x * y)
    close(a / b, x / y)
    close(2 - a, 2 - x)
    close(1 / b, 1 / y)
    close(a ** 2, x ** 2)
    close(-a, -x)
    close(abs(a), np.abs(x))
    close(a.relu(), np.maximum(x, 0))
    close(a.exp(), np.exp(x))
    close(b.log(), np.log(y))
    close(b.sqrt(), np.sqrt(y))
    close(a.tanh(), np.tanh(x))
    close(a.sigmoid(), 1 / (1 + np.exp(-x)))
    close(a.clip(-0.5, 0.5), np.clip(x, -0.5, 0.5))
    assert ((a > 0).numpy() == (x > 0)).all()
    assert (a > 0).dtype == np.bool_
    close(hg.where(a > 0, a, 0.0), np.where(x > 0, x, 0))
    i = hg.asarray(np.array([7, -7, 9], dtype=np.int32), device=ex.backend)
    assert (i // 2).tolist() == [3, -3, 4]  # integer division truncates toward zero
    assert (i / 2).tolist() == [3.5, -3.5, 4.5]  # true division gives floats


def test_fused_chain_is_one_launch(ex, rng):
    x = hg.asarray(rng.standard_normal(10000).astype(np.float32), device=ex.backend).realize()
    y = hg.asarray(rng.standard_normal(10000).astype(np.float32), device=ex.backend).realize()
    before = ex.stats()["launches"] if ex.backend == x.device else None
    n0 = x.executor.stats()["launches"]
    z = ((x + y).relu() * y).numpy()
    assert x.executor.stats()["launches"] - n0 == 1
    np.testing.assert_allclose(z, np.maximum(x.numpy() + y.numpy(), 0) * y.numpy(), rtol=1e-6)
    del before


def test_reductions(ex, rng):
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    a = hg.asarray(x, device=ex.backend)
    close(a.sum(), x.sum(), rtol=1e-4)
    close(a.sum(axis=1), x.sum(axis=1), rtol=1e-5)
    close(a.mean(axis=(0, 2)), x.mean(axis=(0, 2)), rtol=1e-5)
    close(a.max(axis=-1, keepdims=True), x.max(axis=-1, keepdims=True))
    close(a.min(axis=0), x.min(axis=0))
    assert a.argmax(axis=2).tolist() == x.argmax(axis=2).tolist()
    assert a.argmin().item() == x.argmin()
    close(a.softmax(axis=-1), np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=1e-5)


def test_views_and_indexing(ex):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = hg.asarray(x, device=ex.backend)
    assert a.reshape(6, 4).shape == (6, 4)
    assert a.T.shape == (4, 3, 2)
    close(a.T, x.T)
    close(a.transpose(0, 2), x.transpose(2, 1, 0))
    close(a[1], x[1])
    close(a[:, 1:3, ::2], x[:, 1:3, ::2])
    close(a[..., -1], x[..., -1])
    close(a[None, 0], x[None, 0])
    assert a[1, 2, 3].item() == 23.0
    b = hg.zeros((2, 3), device=ex.backend)
    b[0] = hg.asarray([1.0, 2.0, 3.0], device=ex.backend)
    assert b.tolist() == [[1, 2, 3], [0, 0, 0]]
    # A number written at an index (a 0-d value into a 0-d view), and numbers as 0-d tensors.
    b[1, 2] = 5
    b[0] = 9.5
    assert b.tolist() == [[9.5, 9.5, 9.5], [0, 0, 5]]
    assert hg.asarray(5.0, device=ex.backend).shape == () and hg.asarray(np.float32(2)).ndim == 0
    with pytest.raises(IndexError):
        a[5]


def test_matmul(ex, rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    a, b = hg.asarray(x, device=ex.backend), hg.asarray(y, device=ex.backend)
    close(a @ b, x @ y, rtol=1e-5, atol=1e-5)
    close(b.T @ b, y.T @ y, rtol=1e-5, atol=1e-5)


def test_dtype_conversions(ex):
    a = hg.asarray([1.7, -1.7, 300.0], device=ex.backend)
    assert a.astype("int32").tolist() == [1, -1, 300]
    assert a.astype(np.uint8).tolist() == [1, 0, 255]  # float to integer saturates
    h = a.astype("float16")
    assert h.dtype == np.float16 and h.numpy().dtype == np.float16


def test_array_protocol_and_repr(ex):
    a = hg.asarray([1.0, 2.0], device=ex.backend)
    assert np.asarray(a).tolist() == [1.0, 2.0]
    assert np.add(a, 1).tolist() == [2.0, 3.0]
    assert "Tensor(" in repr(a) and ex.backend in repr(a)


def test_large_reads_are_correct_whichever_memory_they_land_in(ex, rng):
    """Backends whose memory is not host memory may lend page-locked memory for reads of 256 KiB
    and more (CUDA does); the CPU backend's arrays are views of its own memory and lend none."""
    from hologram import _native

    x = rng.standard_normal((300, 1024), dtype=np.float32)
    t = hg.asarray(x, device=ex.backend)
    lent = _native.read_pinned(t._t)
    if ex.backend == "cpu":
        assert lent is None
    else:
        assert lent is None or np.array_equal(np.asarray(lent), x)
    out = (t + 1).numpy()
    np.testing.assert_array_equal(out, x + 1)
    out[0, 0] = 123.0
    assert (t + 1).numpy()[0, 0] == x[0, 0] + 1
