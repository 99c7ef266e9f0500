"""End-to-end tests run once per installed target kind that a plugin can build."""

import pytest

from e2e_kinds import buildable_kinds


@pytest.fixture(params=buildable_kinds())
def target(request):
    return request.param
