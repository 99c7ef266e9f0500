"""The end-to-end suite's target parametrization, shared with the hybrid tests.

``buildable_kinds()`` lists the installed CPU target kinds that can build;
``target`` is the e2e fixture running a test once per kind.
"""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "e2e_conftest", pathlib.Path(__file__).resolve().parents[1] / "e2e" / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)

buildable_kinds = _e2e.buildable_kinds
target = _e2e.target
