"""Hologram: a compute SDK for the Atlas ISA, on the CPU, NVIDIA GPUs (CUDA) and
Apple/Vulkan/DX12 GPUs (wgpu).

Quick start::

    import hologram as hg
    import numpy as np

    exec = hg.Executor(backend='auto')        # best available backend
    a = exec.allocate(1024, dtype=np.float32)
    b = exec.allocate(1024, dtype=np.float32)
    c = exec.allocate(1024, dtype=np.float32)
    a.from_numpy(np.random.randn(1024).astype(np.float32))
    b.from_numpy(np.random.randn(1024).astype(np.float32))
    hg.ops.vector_add(exec, a, b, c)
    result = c.to_numpy()
"""

import numpy as _np

from . import backend, ops  # noqa: F401
from ._native import __version__  # noqa: F401
from .backend import get_default_backend, is_cuda_available, is_metal_available, is_vulkan_available  # noqa: F401
from .errors import (  # noqa: F401
    BackendUnavailableError,
    CompileError,
    DeviceError,
    HologramError,
    OutOfBoundsError,
    OutOfMemoryError,
    ValidationError,
)
from .executor import Buffer, Executor, cpu_blas, cpu_thread_pool, share_openmp_threads  # noqa: F401
from .exchange import Exchange  # noqa: F401
from .plan import Plan, Recording, record  # noqa: F401
from .program import Program, asm  # noqa: F401
from . import autograd, distributed, nn  # noqa: E402,F401
from .distributed import device_count as cuda_device_count  # noqa: E402,F401
from .tensor import (  # noqa: F401
    Tensor,
    arange,
    asarray,
    cat,
    concat,
    executor_for,
    from_dlpack,
    from_dlpack_capsule,
    full,
    matmul,
    ones,
    rand,
    randn,
    tensor,
    where,
    zeros,
)

bool_ = _np.dtype(_np.bool_)
uint8 = _np.dtype(_np.uint8)
int8 = _np.dtype(_np.int8)
int16 = _np.dtype(_np.int16)
int32 = _np.dtype(_np.int32)
int64 = _np.dtype(_np.int64)
float16 = _np.dtype(_np.float16)
float32 = _np.dtype(_np.float32)
float64 = _np.dtype(_np.float64)
bfloat16 = "bfloat16"

__all__ = [
    "Executor", "Buffer", "Exchange", "Tensor", "Program", "asm", "ops", "backend", "Plan", "Recording", "record",
    "asarray", "tensor", "zeros", "ones", "full", "arange", "rand", "randn", "matmul", "where",
    "cat", "concat", "from_dlpack", "from_dlpack_capsule", "executor_for", "autograd", "nn", "distributed", "cuda_device_count",
    "cpu_blas", "cpu_thread_pool", "share_openmp_threads",
    "is_cuda_available", "is_metal_available", "is_vulkan_available", "get_default_backend",
    "HologramError", "BackendUnavailableError", "ValidationError", "CompileError",
    "OutOfBoundsError", "OutOfMemoryError", "DeviceError",
]
