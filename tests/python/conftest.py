"""Shared fixtures: the executors to test (the CPU always; others from HOLOGRAM_TEST_BACKENDS)."""

import os

import numpy as np
import pytest

import hologram as hg


def backends():
    names = ["cpu"]
    for n in os.environ.get("HOLOGRAM_TEST_BACKENDS", "").split(","):
        n = n.strip()
        if n and n not in names:
            names.append(n)
    return names


@pytest.fixture(params=backends())
def ex(request):
    return hg.Executor(backend=request.param)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
