"""Fixtures shared by the runtime tests."""

from __future__ import annotations

import pytest

from loom.runtime.registry import list_global_func_names, register_func, remove_global_func


@pytest.fixture
def reg():
    """``reg(name, fn)`` registers a global function for one test (replacing any), removed after it."""
    made = []

    def add(name, fn):
        register_func(name, fn, override=True)
        made.append(name)
        return fn

    yield add
    for name in made:
        if name in list_global_func_names():
            remove_global_func(name)
