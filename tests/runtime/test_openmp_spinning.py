"""Loom bounds libgomp's idle spinning before libgomp loads, unless the user chose."""

import os
import subprocess
import sys

import pytest

from loom.runtime import threads

PROBE = """
import os, numpy as np, loom
A = loom.placeholder((64,), name="A")
B = loom.compute((64,), lambda i: A[i] + 1.0, name="B")
s = loom.create_schedule(B.op)
s[B].parallel(B.op.axis[0])
f = loom.build(s, [A, B], target=TARGET)
a = np.ones(64, "float32"); b = np.empty_like(a); f(a, b)
assert (b == 2).all()
print(os.environ.get("GOMP_SPINCOUNT"), os.environ.get("OMP_WAIT_POLICY"))
"""


def _probe(target, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "LOOM_OMP_SPIN")}
    full.update(env)
    code = PROBE.replace("TARGET", repr(target))
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_parallel_module_loads_libgomp_with_bounded_spinning(target):
    assert _probe(target) == [str(threads.DEFAULT_SPIN_COUNT), "None"]


def test_the_users_choice_wins():
    # OMP_WAIT_POLICY=active also once crashed the process at exit: LLVM unloaded libgomp under its spinning threads.
    assert _probe("llvm", OMP_WAIT_POLICY="active") == ["None", "active"]
    assert _probe("llvm", GOMP_SPINCOUNT="100") == ["100", "None"]
    assert _probe("llvm", LOOM_OMP_SPIN="default") == ["None", "None"]


def test_prepare_openmp_runs_once(monkeypatch):
    monkeypatch.setattr(threads, "_openmp_prepared", [])
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("LOOM_OMP_SPIN", raising=False)
    threads.prepare_openmp()
    assert os.environ["GOMP_SPINCOUNT"] == str(threads.DEFAULT_SPIN_COUNT)
    os.environ["GOMP_SPINCOUNT"] = "7"
    threads.prepare_openmp()  # libgomp read it already: later calls change nothing
    assert os.environ["GOMP_SPINCOUNT"] == "7"
