"""Writing and running .hasm kernels from Python."""

import threading

import numpy as np

import hologram as hg

SAXPY = """
.kernel saxpy
.param .f32 a
.param .buf.f32 x
.param .buf.f32 y .rw
.param .u32 n
    mov.u32 %i, %gid;
    setp.ge.u32 %p, %i, n;
@%p exit;
    ld.f32 %x, x[%i];
    ld.f32 %y, y[%i];
    fma.f32 %y, a, %x, %y;
    st.f32 y[%i], %y;
"""


def test_asm_and_run(ex, rng):
    p = hg.asm(SAXPY)
    assert p.name == "saxpy" and [n for n, _, _ in p.params] == ["a", "x", "y", "n"]
    assert len(p.digest) == 64 and "%r0" in p.canonical()
    n = 1000
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y = ex.allocate(n), ex.allocate(n)
    x.from_numpy(xs)
    y.from_numpy(ys)
    ex.run(p, grid=(n + 255) // 256, block=256, args={"a": 2.0, "x": x, "y": y, "n": n})
    np.testing.assert_allclose(y.to_numpy(), 2 * xs + ys, rtol=1e-6)


def test_threads_share_an_executor(ex):
    errors = []

    def work(seed):
        try:
            a = hg.rand(5000, seed=seed, device=ex.backend)
            s = ((a * 2).relu().sum()).item()
            assert abs(s - (a.numpy() * 2).sum()) < 1e-2
        except Exception as e:  # noqa: BLE001 - collected and re-raised below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
