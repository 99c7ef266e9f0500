"""The end-to-end suite's target parametrization, shared with the hybrid tests.

``buildable_kinds()`` lists the installed CPU target kinds that can build;
``target`` runs a test once per kind.
"""

import pytest

from loom.testing.conformance.harness import buildable_cpu_kinds as buildable_kinds


@pytest.fixture(params=buildable_kinds())
def target(request):
    return request.param
