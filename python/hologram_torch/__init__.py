"""PyTorch integration of Hologram: functional ops with autograd, ``nn`` modules, and a
``torch.compile`` backend named ``"hologram"``.

    import torch
    import hologram as hg
    import hologram_torch as hg_torch

    exec = hg.Executor(backend='auto')
    z = hg_torch.functional.add(exec, torch.randn(1024), torch.randn(1024))
    layer = hg_torch.nn.Linear(exec, 512, 256)
    compiled = torch.compile(model, backend="hologram")
"""

import hologram as _hg

from . import compile as _compile
from . import functional, nn  # noqa: F401
from ._bridge import default_executor, set_default_executor  # noqa: F401
from .compile import compile_stats, plan_profiles, plan_stats, reset_compile_stats  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401
from .step import TrainStep, compile_step  # noqa: F401

_compile.register()

# torch's CPU ops run on its OpenMP team; Hologram's CPU work joins that team rather than waking
# a second pool that would fight it for the cores (hologram.share_openmp_threads).
_hg.share_openmp_threads()

__all__ = [
    "functional", "nn", "default_executor", "set_default_executor", "compile_stats", "reset_compile_stats",
    "plan_stats", "plan_profiles",
    "compile_step", "TrainStep", "DistributedDataParallel",
]
