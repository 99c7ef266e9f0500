"""``export_library`` writes one file; ``loom.runtime.load_module`` in a fresh process runs it the same.

The child process registers the same runtime plugins (ext_dev...) but builds
nothing: it loads the file, runs it on the program's inputs and saves the
output, which must equal, bit for bit, what the module gave in this process.
For a device kind the file holds the host module and the device module it
imports.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, run_child
from .programs import PROGRAMS

_CHILD = """
from loom.testing.conformance.programs import PROGRAMS

path, name, variant, out = args
f = loom.runtime.load_module(path)
p = PROGRAMS[name](variant)
got = kind.run(f, *p.values)[-1]
np.save(out, got)
print("imports", *[type(m).__name__ for m in f.imported_modules])
"""


@pytest.mark.parametrize("name", ["matmul_blocked", "softmax"])
def test_export_and_load_in_a_fresh_process(kind_under_test: KindUnderTest, name: str, tmp_path: Path) -> None:
    kind = kind_under_test
    variant = "bound" if kind.on_device else "cpu"
    p = PROGRAMS[name](variant)
    with loom.build_config(**p.config):
        f = kind.build(p.s, p.args)
    assert bool(f.imported_modules) == kind.on_device  # a device kind's kernels live in an imported module
    want = kind.run(f, *p.values)[-1]
    np.testing.assert_allclose(want, p.want, rtol=p.tol, atol=p.tol)
    path = tmp_path / "exported.so"
    f.export_library(path)
    assert sorted(x.name for x in tmp_path.iterdir()) == [path.name]  # one file, host and device together
    out = tmp_path / "out.npy"
    proc = run_child(_CHILD, kind, str(path), name, variant, str(out))
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.split() == ["imports", *[type(m).__name__ for m in f.imported_modules]]
    np.testing.assert_array_equal(np.load(out), want)
