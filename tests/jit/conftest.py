"""Fixtures of the loom.jit tests."""

import pytest

from loom.testing.conformance.harness import buildable_cpu_kinds


@pytest.fixture(params=buildable_cpu_kinds())
def target(request):
    """Every CPU kind that builds here (interp, llvm, c); a test module may define its own."""
    return request.param
