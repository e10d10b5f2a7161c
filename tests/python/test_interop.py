"""DLPack: zero-copy both ways with NumPy and PyTorch on the CPU."""

import numpy as np
import pytest

import hologram as hg


def test_numpy_round_trip_is_zero_copy():
    n = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = hg.from_dlpack(n)
    assert t.device == "cpu"
    assert t.numpy().ctypes.data == n.ctypes.data
    back = np.from_dlpack(t)
    assert back.ctypes.data == n.ctypes.data
    n[0, 0] = 99
    assert t[0, 0].item() == 99, "shared memory"
    # Strided arrays keep their strides.
    s = n[:, ::2]
    ts = hg.from_dlpack(s)
    np.testing.assert_array_equal(ts.numpy(), s)


def test_torch_round_trip_is_zero_copy():
    torch = pytest.importorskip("torch")
    x = torch.arange(10, dtype=torch.float32)
    t = hg.from_dlpack(x)
    assert t.numpy().ctypes.data == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr()
    r = (t * 2 + 1).realize()
    z = torch.from_dlpack(r)
    assert z.tolist() == (x * 2 + 1).tolist()
    for dt in (torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.uint8):
        v = torch.ones(3, dtype=dt)
        hv = hg.from_dlpack(v)
        assert torch.equal(torch.from_dlpack(hv), v)
