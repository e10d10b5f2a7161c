"""In a process with PyTorch, Hologram's CPU work runs on torch's OpenMP threads (one pool on
the cores, not two fighting for them), and gives the same results there."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hologram as hg  # noqa: E402
import hologram_torch  # noqa: E402,F401


def _openmp_torch() -> bool:
    return "OpenMP" in torch.__config__.parallel_info()


@pytest.mark.skipif(not _openmp_torch(), reason="this torch build does not use OpenMP")
def test_hologram_torch_shares_torchs_openmp_threads():
    assert hg.cpu_thread_pool().startswith("openmp:"), hg.cpu_thread_pool()
    # torch's MKL (libtorch_cpu) takes the f32/f64 GEMMs.
    assert hg.cpu_blas() is not None and "libtorch_cpu" in hg.cpu_blas()


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemms_through_the_shared_blas_match_numpy(rng, trans_a, trans_b, dtype):
    # Transposed operands, batches, a vector and an empty inner dimension.
    # (Both paths: the BLAS takes GEMMs of 64 and more on every side, the crate the others.)
    for shape_a, shape_b in [((96, 130), (130, 70)), ((3, 70, 65), (3, 65, 90)), ((3, 40, 17), (3, 17, 9)),
                             ((64, 1), (1, 5)), ((1, 300), (300, 1)), ((8, 0), (0, 4))]:
        a = rng.standard_normal(shape_a).astype(dtype)
        b = rng.standard_normal(shape_b).astype(dtype)
        ha, hb = hg.asarray(a, device="cpu"), hg.asarray(b, device="cpu")
        if trans_a:
            ha = hg.asarray(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device="cpu").mT
        if trans_b:
            hb = hg.asarray(np.ascontiguousarray(np.swapaxes(b, -1, -2)), device="cpu").mT
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(hg.matmul(ha, hb).numpy(), a @ b, rtol=tol, atol=tol * 10)


def test_parallel_work_on_the_shared_pool_matches_numpy(rng):
    # Big enough to be split between threads: a GEMM, a map, a column sum and softmax rows.
    a = rng.standard_normal((384, 512)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)
    x = rng.standard_normal((1 << 18,)).astype(np.float32)
    ha, hb, hx = (hg.asarray(v, device="cpu") for v in (a, b, x))
    np.testing.assert_allclose(hg.matmul(ha, hb).numpy(), a @ b, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose((hx * 2 + 1).relu().numpy(), np.maximum(x * 2 + 1, 0), rtol=1e-6)
    np.testing.assert_allclose(ha.sum(0).numpy(), a.sum(0), rtol=1e-4, atol=1e-4)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(ha.softmax(-1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_the_pool_can_be_refused():
    code = "import hologram as hg, hologram_torch; print(hg.cpu_thread_pool())"
    env = {**os.environ, "HOLOGRAM_CPU_POOL": "rayon"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "rayon", out
