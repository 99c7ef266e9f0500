"""Shared test setup: hypothesis profiles and import paths for test helpers."""

import atexit
import os
import shutil
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

# Test helper modules (ir_samples.py...) live beside the tests that use them.
for sub in ("", "ir"):  # tests/programs.py, tests/ir/ir_samples.py
    path = os.path.join(os.path.dirname(__file__), sub)
    if path not in sys.path:
        sys.path.insert(0, path)

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("LOOM_HYPOTHESIS_PROFILE", "default"))

# Compiled kernels are cached on disk (loom.runtime.disk_cache): tests use a private folder, never the
# user's cache. The xdist controller creates it before the workers start; they inherit the variable.
if "LOOM_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="loom-test-cache-")
    os.environ["LOOM_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, True)


@pytest.fixture
def registered():
    """``registered(module)`` registers a plugin module for one test (and returns it); all are removed after."""
    import loom.plugins

    mods = []

    def add(mod):
        loom.plugins.register(mod)
        mods.append(mod)
        return mod

    yield add
    for mod in mods:
        loom.plugins.unregister(mod)
