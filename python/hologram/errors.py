"""Exceptions. Every error Hologram raises is a :class:`HologramError`."""

from ._native import (  # noqa: F401
    BackendUnavailableError,
    CompileError,
    DeviceError,
    HologramError,
    OutOfBoundsError,
    OutOfMemoryError,
    ValidationError,
)

__all__ = [
    "HologramError",
    "BackendUnavailableError",
    "ValidationError",
    "CompileError",
    "OutOfBoundsError",
    "OutOfMemoryError",
    "DeviceError",
]
