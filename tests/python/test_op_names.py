"""The op names Python code passes to the native tensor come from the core's one table."""
import pathlib
import re

from hologram import _native

ROOT = pathlib.Path(__file__).resolve().parents[2] / "python"

# Literal op names handed to the native tensor: `_t.unary("x")`, `_un("x")`, `_bin("x", ...)`,
# `_t.binary("x", ...)`, `_t.reduce("x", ...)`.
CALLS = {
    "unary": re.compile(r'(?:\.unary|\b_un)\(\s*"(\w+)"'),
    "binary": re.compile(r'(?:\.binary|\b_bin)\(\s*"(\w+)"'),
    "reduce": re.compile(r'\.reduce\(\s*"(\w+)"'),
}


def test_every_name_python_uses_is_in_the_table():
    table = _native.op_names()
    used = {kind: set() for kind in CALLS}
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        for kind, pattern in CALLS.items():
            for name in pattern.findall(text):
                used[kind].add(name)
                assert name in table[kind], f"{path.name}: '{name}' is not a {kind} op name ({table[kind]})"
    # The scan found the calls (a scan that matches nothing would pass vacuously). The
    # operators, unary math and `sum` are the native base class's methods: no names there.
    assert {"div", "pow", "maximum"} <= used["binary"]
    assert {"mean", "max"} <= used["reduce"]


def test_names_round_trip_through_the_native_tensor():
    import numpy as np
    import hologram as hg

    t = hg.asarray(np.array([0.5, 2.0], dtype=np.float32), device=hg.Executor("cpu"))
    for name, want in (("reciprocal", [2.0, 0.5]), ("square", [0.25, 4.0]), ("recip", [2.0, 0.5])):
        got = hg.Tensor._wrap(t._t.unary(name)).numpy()
        assert np.allclose(got, want), (name, got)
