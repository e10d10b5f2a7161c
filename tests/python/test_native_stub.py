"""python/hologram/_native.pyi (what mypy checks the package against) lists every class,
method and function the native extension has, and nothing it lacks."""

import ast
from pathlib import Path

from hologram import _native

STUB = Path(__file__).resolve().parents[2] / "python" / "hologram" / "_native.pyi"
# Built only with CUDA support (NCCL); the stub lists them for type checking either way.
CUDA_ONLY = {"Communicator", "nccl_version", "nccl_unique_id", "nccl_group_start", "nccl_group_end"}


def _stub():
    tree = ast.parse(STUB.read_text())
    classes = {c.name: {f.name for f in c.body if isinstance(f, ast.FunctionDef)}
               for c in tree.body if isinstance(c, ast.ClassDef)}
    functions = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
    return classes, functions


def _public(name: str) -> bool:
    return not name.startswith("_") or name in ("__dlpack__", "__dlpack_device__")


def test_stub_lists_everything_the_extension_has():
    classes, functions = _stub()
    missing = []
    for name in dir(_native):
        obj = getattr(_native, name)
        if not _public(name):
            continue
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            if name not in classes:
                missing.append(f"class {name}")
                continue
            missing += [f"{name}.{m}" for m in dir(obj) if _public(m) and m not in classes[name]]
        elif callable(obj) and not isinstance(obj, type) and name not in functions:
            missing.append(name)
    assert missing == [], f"add to {STUB.name}: {missing}"


def test_stub_lists_nothing_the_extension_lacks():
    classes, functions = _stub()
    extra = [f for f in functions if f not in CUDA_ONLY and not hasattr(_native, f)]
    for name, methods in classes.items():
        if name in CUDA_ONLY or (name == "seed_ops" and hasattr(_native, "seed_ops")):
            continue
        cls = getattr(_native, name, None)
        if cls is None:
            extra.append(f"class {name}")
            continue
        extra += [f"{name}.{m}" for m in methods if m != "__init__" and not hasattr(cls, m)]
    assert extra == [], f"not in the extension (remove from {STUB.name}): {extra}"
