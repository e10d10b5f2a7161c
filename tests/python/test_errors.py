"""Each failure raises a specific HologramError subclass with a useful message."""

import numpy as np
import pytest

import hologram as hg


def test_hierarchy():
    for cls in (hg.BackendUnavailableError, hg.ValidationError, hg.CompileError, hg.OutOfBoundsError, hg.OutOfMemoryError, hg.DeviceError):
        assert issubclass(cls, hg.HologramError)


def test_unavailable_backend():
    with pytest.raises(hg.BackendUnavailableError, match="not available"):
        hg.Executor(backend="dx12")
    with pytest.raises(hg.BackendUnavailableError, match="unknown backend"):
        hg.Executor(backend="tpu")


def test_invalid_program_has_line_and_column():
    with pytest.raises(hg.ValidationError, match="2:16") as parse:
        hg.asm(".kernel k\n    mov.u32 %a 1;\n")
    assert (parse.value.line, parse.value.column) == (2, 16)
    with pytest.raises(hg.ValidationError, match="read-only") as invalid:
        hg.asm(".kernel k\n.param .buf.f32 y\n    st.f32 y[0], 1.0;\n")
    assert (invalid.value.line, invalid.value.column) == (3, 5)


def test_out_of_bounds_kernel(ex):
    # Every lane goes out of bounds, so no backend writes anything (on GPUs only the lanes
    # that go out of bounds stop).
    p = hg.asm(".kernel spill\n.param .buf.f32 y .rw\n    add.u32 %j, %gid, 8;\n    st.f32 y[%j], 1.0;\n")
    y = ex.allocate(8, dtype=np.float32)
    with pytest.raises(hg.OutOfBoundsError, match=r"index \d+ into 'y', which has 8 elements"):
        ex.run(p, grid=1, block=8, args={"y": y})
        ex.synchronize()
    assert not y.to_numpy().any(), "nothing was written"


def test_shape_and_dtype_errors(ex):
    a = hg.zeros((2, 3), device=ex.backend)
    with pytest.raises(hg.ValidationError, match="broadcast"):
        a + hg.zeros(4, device=ex.backend)
    with pytest.raises(hg.ValidationError, match="axis"):
        a.sum(axis=3)
    with pytest.raises(hg.ValidationError, match="not defined"):
        hg.zeros(3, dtype="int32", device=ex.backend).exp()
    with pytest.raises(hg.ValidationError):
        hg.asarray([1.0]).reshape(3)
