"""Backend detection: which backends this machine can run, and which one ``auto`` picks."""

from . import _native


def available_backends() -> dict:
    """``{name: (available, detail)}``: the device for available backends, else why not (this
    opens every backend; ``is_cuda_available()`` and friends check one)."""
    return {name: (ok, detail) for name, ok, detail in _native.backends()}


def _available(name: str) -> bool:
    # Only the backend asked about is opened: checking CUDA must not start the Vulkan loader.
    return _native.backend_status(name)[0]


def is_cuda_available() -> bool:
    """True when the CUDA backend can run here (driver, NVRTC and a GPU present)."""
    return _available("cuda")


def is_metal_available() -> bool:
    """True when the Metal backend can run here (macOS with a Metal GPU)."""
    return _available("metal")


def is_vulkan_available() -> bool:
    """True when a hardware Vulkan adapter is available."""
    return _available("vulkan")


def get_default_backend() -> str:
    """The backend ``Executor(backend='auto')`` picks: ``HOLOGRAM_BACKEND`` if set, else CUDA,
    then a hardware Metal/Vulkan/DX12 GPU, then ``'cpu'``."""
    return _native.default_backend()
