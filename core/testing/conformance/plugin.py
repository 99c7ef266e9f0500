"""The pytest plugin of Loom's backend conformance suite: ``--loom-kind``, ``--loom-host`` and the fixtures.

Run the suite against installed kinds (each test runs once per kind; the
default is every installed kind whose plugin implements ``loom_backend``)::

    pytest --pyargs loom.testing.conformance --loom-kind=yourkind
    python -m loom.testing.conformance --loom-kind=yourkind      # the same, shorter

``--loom-kind`` must be known before pytest parses the command line, and pytest
never reads a conftest of a ``--pyargs`` package before that, so this plugin
comes through the ``pytest11`` entry point of Loom's core distribution (where plugin autoloading
is off, add ``-p loom.testing.conformance.plugin``).  ``--loom-kind=ext_dev`` registers the test device
:mod:`loom.testing.ext_dev` when it is not installed; ``--loom-host`` picks the
host kind of device kinds' split builds (default: :class:`loom.target.CompilationConfig`'s).
Add ``-n 2`` (pytest-xdist) to use two processes.

In your own tests the fixtures are there too (the entry point loads the plugin):
``loom_kind`` (the kind's name, one test per chosen kind) and
``kind_under_test`` (a :class:`~loom.testing.conformance.harness.KindUnderTest`
that builds for the kind and places arrays on its device).

What the suite checks, each result against numpy or the reference interpreter:
end-to-end programs (matmul schedules, pipelines with compute_at and inline,
softmax, conv2d, symbolic shapes) with CPU and bound schedules; GPU programs
(shared memory, barriers) on kinds with GPU thread semantics and their refusal
elsewhere; random schedules and random integer programs; bad arguments (in a
child process); export and load in a fresh process; every elementwise
intrinsic; integer wrap and division.

The plugin keeps the session's compiled-kernel cache (``LOOM_CACHE_DIR``) and
hypothesis' files (``HYPOTHESIS_STORAGE_DIRECTORY``) in a private temporary
folder when the variables are unset, and the property tests keep no example
database, so nothing is written beside the package or the caller (add ``-p
no:cacheprovider`` to keep pytest's own cache out of a read-only install).
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "pytest_generate_tests", "loom_kind", "kind_under_test",
           "chosen_kinds"]

_KINDS = pytest.StashKey[list]()
_HERE = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loom", "Loom backend conformance suite")
    group.addoption("--loom-kind", action="store", default=None, metavar="KIND[,KIND...]",
                    help="target kinds to check (comma-separated); default: every installed kind with a backend")
    group.addoption("--loom-host", action="store", default=None, metavar="KIND",
                    help="host kind of device kinds' split builds (default: llvm, c or interp, as installed)")


def pytest_configure(config: pytest.Config) -> None:
    # Compiled kernels and hypothesis' files (it caches constants under .hypothesis in the working
    # directory) go to one private folder per session: nothing beside the caller or the package.  Set
    # before pytest-xdist starts its workers, which inherit the variables.
    missing = [v for v in ("LOOM_CACHE_DIR", "HYPOTHESIS_STORAGE_DIRECTORY") if v not in os.environ]
    if missing and _runs_the_suite(config):
        root = tempfile.mkdtemp(prefix="loom-conformance-")
        atexit.register(shutil.rmtree, root, True)
        for var in missing:
            os.environ[var] = os.path.join(root, var.lower())
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])
    if config.getoption("loom_kind") is not None or config.getoption("loom_host") is not None:
        chosen_kinds(config)  # a usage error now, before collection, names the bad kind


def _runs_the_suite(config: pytest.Config) -> bool:
    """True when the session checks kinds: the suite is on the command line, or ``--loom-kind`` is."""
    if config.getoption("loom_kind") is not None:
        return True
    for arg in config.args:
        name = arg.split("::")[0]
        if name.startswith(__package__) or Path(name).resolve().is_relative_to(_HERE):
            return True
    return False


def chosen_kinds(config: pytest.Config) -> list[str]:
    """The kinds this session checks (validated once; ext_dev registered when asked for)."""
    if _KINDS in config.stash:
        return config.stash[_KINDS]
    import loom
    from loom.errors import LoomError

    from .harness import KindUnderTest, buildable_kinds

    raw = config.getoption("loom_kind")
    if raw is None:
        kinds = buildable_kinds()
    else:
        kinds = list(dict.fromkeys(k.strip() for k in raw.split(",") if k.strip()))
        if not kinds:
            raise pytest.UsageError("--loom-kind: give at least one target kind")
    if "ext_dev" in kinds and "ext_dev" not in loom.plugins.collect_target_kinds():
        import loom.testing.ext_dev as ext_dev

        loom.plugins.register(ext_dev)
    host = config.getoption("loom_host")
    installed = buildable_kinds()
    for kind in kinds + ([host] if host else []):
        try:
            KindUnderTest.resolve(kind, host)
        except LoomError as err:
            raise pytest.UsageError(f"--loom-kind/--loom-host: cannot check {kind!r}: {err}\n"
                                    f"installed kinds with a backend: {', '.join(installed) or 'none'}") from None
    config.stash[_KINDS] = kinds
    return kinds


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "loom_kind" in metafunc.fixturenames:
        kinds = chosen_kinds(metafunc.config)
        metafunc.parametrize("loom_kind", kinds, ids=kinds, indirect=True)


@pytest.fixture
def loom_kind(request: pytest.FixtureRequest) -> str:
    """The target kind under test: each test that uses it runs once per kind chosen by ``--loom-kind``.

    A device kind whose device this machine lacks (cuda without a GPU) is skipped, saying why.
    """
    kind = str(request.param)
    reason = _absent_device(kind)
    if reason:
        pytest.skip(f"{kind}: {reason}")
    return kind


def _absent_device(kind: str) -> str | None:
    """Why the device of ``kind`` cannot run here, else None (CPU kinds always can)."""
    import loom
    from loom.errors import LoomError
    from loom.runtime.device_api import get_device_api

    device_type = int(loom.target.get_kind(kind).device_type)
    if device_type == 1:
        return None
    try:
        return get_device_api(device_type).unavailable_reason(loom.target.Device(device_type, 0))
    except LoomError as err:
        return str(err)


@pytest.fixture
def kind_under_test(loom_kind: str, request: pytest.FixtureRequest) -> Any:
    """The kind under test as a :class:`~loom.testing.conformance.harness.KindUnderTest`."""
    from .harness import KindUnderTest

    return KindUnderTest.resolve(loom_kind, request.config.getoption("loom_host"))


# -- collection: import the suite's modules by their package name --------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # pytest names a module after the folders holding __init__.py above it; in an editable install
    # those are the source folders (core/...), not loom/..., so a Package would import the suite's
    # __init__ under a wrong name.  A plain Dir imports nothing; the modules come by their real name.
    if path.resolve() == _HERE or (_HERE.is_relative_to(path.resolve()) and (path / "__init__.py").is_file()):
        return pytest.Dir.from_parent(parent, path=path)
    return None


class _SuiteModule(pytest.Module):
    def _getobj(self) -> Any:
        return importlib.import_module(f"{__package__}.{self.path.stem}")


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if module_path.resolve().parent == _HERE:
        return _SuiteModule.from_parent(parent, path=module_path)
    return None
