"""hologram_torch uses only hologram's public API: no private attribute, module or helper of
the ``hologram`` package (``x._t``, ``Tensor._wrap``, ``hologram._native``, ``executor._e``,
...). The private names are read from hologram's own sources, so a new one is covered too."""

import ast
from pathlib import Path

import hologram as hg

ROOT = Path(__file__).resolve().parents[2] / "python"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def hologram_private_names() -> set:
    """Every private name the hologram package defines: its private modules, module-level
    names, class attributes and methods, and attributes it sets on instances."""
    names = {p.stem for p in (ROOT / "hologram").iterdir() if _private(p.stem)}
    names |= {"_native"}
    for path in (ROOT / "hologram").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                candidates = [node.name]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                candidates = [node.id]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                candidates = [node.attr]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                candidates = [node.value]  # __slots__ entries
            else:
                continue
            names |= {n for n in candidates if n.isidentifier() and _private(n)}
    return names


def private_uses(source: str, filename: str, private: set) -> list:
    """``file:line: what`` for each use of a hologram private in ``source``: an attribute of
    anything but ``self``/``cls`` named like one, a private hologram module imported, or a
    private name passed as a string to ``getattr``/``setattr``/``hasattr``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{filename}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "hologram":
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{filename}:{node.lineno}: from {node.module} import")
            found += [f"{filename}:{node.lineno}: import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [f"{filename}:{node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "hologram" and any(_private(p) for p in a.name.split("."))]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) > 1 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in private:
            found.append(f"{filename}:{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


def test_private_names_are_found():
    names = hologram_private_names()
    assert {"_t", "_wrap", "_native", "_e", "_p", "_c", "_r", "_bin"} <= names


def test_the_scan_catches_private_uses():
    private = hologram_private_names()
    bad = (
        "import hologram as hg\nfrom hologram import _native\nimport hologram._dtypes\n"
        "from hologram._dtypes import native_name\n"
        "y = x._t.softmax(1)\nz = hg.Tensor._wrap(y)\nex._e.synchronize()\nplan._p.run([])\n"
        "getattr(x, '_t')\nself._t = 1\n"
    )
    uses = private_uses(bad, "bad.py", private)
    assert len(uses) == 8, uses  # every line but `self._t = 1`
    assert private_uses("import torch\ntorch._C._nn.x(step._version)\nself._e = 1\n", "ok.py", private) == []


def test_hologram_torch_uses_only_public_hologram():
    private = hologram_private_names()
    uses = []
    for path in sorted((ROOT / "hologram_torch").glob("*.py")):
        uses += private_uses(path.read_text(), f"hologram_torch/{path.name}", private)
    assert uses == [], "hologram_torch reaches into hologram's privates:\n" + "\n".join(uses)


def test_public_surface_is_exported_and_documented():
    for mod in (hg.autograd, hg.nn):
        for name in mod.__all__:
            fn = getattr(mod, name)
            assert fn.__doc__, f"{mod.__name__}.{name} has no docstring"
    for name in ("slice", "maximum", "minimum", "copy_into", "assign_all", "rand_seeded"):
        assert getattr(hg.Tensor, name).__doc__, name
    for obj in (hg.Recording, hg.Plan.try_run, hg.from_dlpack_capsule, hg.Executor.order_after_stream,
                hg.Executor.order_before_stream):
        assert obj.__doc__
