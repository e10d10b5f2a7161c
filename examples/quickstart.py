"""Hologram quick start: the seeds' example, working, plus a taste of the Tensor API.

Run: python examples/quickstart.py   (after `pip install` of the hologram wheel)
"""

import numpy as np

import hologram as hg


def main():
    print(f"hologram {hg.__version__}; default backend: {hg.get_default_backend()}")
    print(f"CUDA available: {hg.is_cuda_available()}, Metal available: {hg.is_metal_available()}")

    # The seed API: an executor, buffers, and ops by name.
    exec = hg.Executor(backend="auto")
    a = exec.allocate(1024, dtype=np.float32)
    b = exec.allocate(1024, dtype=np.float32)
    c = exec.allocate(1024, dtype=np.float32)
    x = np.random.randn(1024).astype(np.float32)
    y = np.random.randn(1024).astype(np.float32)
    a.from_numpy(x)
    b.from_numpy(y)
    hg.ops.vector_add(exec, a, b, c)
    result = c.to_numpy()
    assert np.allclose(result, x + y)
    print(f"vector_add on {exec.backend}: max |error| = {np.abs(result - (x + y)).max():.2e}")

    # Tensors: NumPy-style operators, fused into one kernel when the result is needed.
    t = hg.asarray(x, device=exec.backend)
    u = hg.asarray(y, device=exec.backend)
    z = (t + u).relu() * u
    assert np.allclose(z.numpy(), np.maximum(x + y, 0) * y)
    print(f"relu(a+b)*b: {z.shape}, sum = {z.sum().item():.4f}")

    # Your own kernel in the Atlas ISA.
    double = hg.asm(
        ".kernel double\n.param .buf.f32 v .rw\n.param .u32 n\n"
        "    setp.ge.u32 %p, %gid, n;\n@%p exit;\n"
        "    ld.f32 %x, v[%gid];\n    add.f32 %x, %x, %x;\n    st.f32 v[%gid], %x;\n"
    )
    exec.run(double, grid=4, block=256, args={"v": c, "n": 1024})
    assert np.allclose(c.to_numpy(), 2 * (x + y))
    print("custom .hasm kernel: ok")


if __name__ == "__main__":
    main()
