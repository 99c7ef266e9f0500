"""Every test here starts from, and leaves behind, a freshly built plugin manager."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import loom.plugins


@pytest.fixture(autouse=True)
def fresh_plugin_manager() -> Iterator[None]:
    loom.plugins.reset_plugin_manager()
    yield
    loom.plugins.reset_plugin_manager()
