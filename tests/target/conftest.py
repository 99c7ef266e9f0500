"""Every target test runs against the test kinds in target_kinds.py, not installed backends."""

import pytest

from loom.target import override_kinds

from target_kinds import ALL


@pytest.fixture(autouse=True)
def test_kinds():
    """Swap the kind registry for the test kinds; the real one comes back afterwards."""
    with override_kinds(*ALL):
        yield
