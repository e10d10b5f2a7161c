"""Dtype names shared by the SDK: NumPy dtypes, strings and torch dtypes map to one name."""

from typing import Any, Optional

import numpy as np

#: What a ``dtype=`` argument takes: a NumPy dtype or scalar type, a torch dtype, a string.
DTypeLike = Any

#: Names the native layer understands, keyed by every spelling we accept.
_ALIASES = {
    "bool": "bool", "bool_": "bool",
    "uint8": "u8", "u8": "u8", "int8": "i8", "i8": "i8",
    "int16": "i16", "i16": "i16", "uint16": "u16", "u16": "u16",
    "int32": "i32", "i32": "i32", "uint32": "u32", "u32": "u32",
    "int64": "i64", "i64": "i64", "uint64": "u64", "u64": "u64",
    "float16": "f16", "f16": "f16", "half": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float32": "f32", "f32": "f32", "float": "f32",
    "float64": "f64", "f64": "f64", "double": "f64",
}

#: NumPy dtype of each native name (bf16 has none; ml_dtypes provides one if installed).
_NUMPY = {
    "bool": np.dtype(np.bool_), "u8": np.dtype(np.uint8), "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16), "u16": np.dtype(np.uint16), "i32": np.dtype(np.int32),
    "u32": np.dtype(np.uint32), "i64": np.dtype(np.int64), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}

try:  # optional: a NumPy bfloat16
    import ml_dtypes as _ml

    _NUMPY["bf16"] = np.dtype(_ml.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    pass


def native_name(dtype: DTypeLike) -> str:
    """The native name (``f32``, ``bool``, ...) of a NumPy dtype, torch dtype or string."""
    if dtype is None:
        return "f32"
    if isinstance(dtype, str):
        key = dtype
    else:
        text = str(dtype)
        if text.startswith("torch."):
            key = text[len("torch."):]
        else:
            try:
                key = np.dtype(dtype).name
            except TypeError:
                key = text
    try:
        return _ALIASES[key.lower()]
    except KeyError:
        from .errors import ValidationError

        raise ValidationError(f"unsupported dtype {dtype!r}") from None


def numpy_dtype(name: str) -> Optional[np.dtype]:
    """The NumPy dtype of a native name, or None (bf16 without ml_dtypes)."""
    return _NUMPY.get(name)


def public_dtype(name: str) -> "np.dtype | str":
    """What ``.dtype`` returns: a NumPy dtype, or the string ``'bfloat16'``."""
    d = _NUMPY.get(name)
    return d if d is not None else "bfloat16"
