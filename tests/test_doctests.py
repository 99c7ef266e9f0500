"""Every docstring example in the loom package runs and prints what it says."""

import doctest
import importlib
import pkgutil

import pytest

import loom


def _modules():
    yield "loom"
    for info in pkgutil.walk_packages(loom.__path__, "loom."):
        if not info.name.endswith("__main__"):
            yield info.name


@pytest.mark.parametrize("name", sorted(set(_modules())))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
