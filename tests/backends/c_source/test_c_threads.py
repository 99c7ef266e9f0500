"""Parallel loops run on the number of threads LOOM_NUM_THREADS asks for (OpenMP's default when unset)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.errors import LoomValueError

N = 64


def thread_ids(openmp: bool = True):
    """A module writing, for each i of a parallel loop, the OpenMP thread that ran iteration i."""
    B = loom.compute((N,), lambda i: loom.call_extern("int32", "omp_get_thread_num"), name="B")
    s = loom.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    # Without the openmp attribute, -fopenmp still links omp_get_thread_num for the body.
    target = {"kind": "c", "flags": "-O1" if openmp else "-O1 -fopenmp", "openmp": openmp}
    return loom.build(s, [B], target=loom.target.Target(target), name="thread_ids")


def run(f) -> np.ndarray:
    b = np.full(N, -1, "int32")
    f(b)
    return b


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parallel_loop_uses_the_configured_threads(threads: int, monkeypatch) -> None:
    monkeypatch.setenv("LOOM_NUM_THREADS", str(threads))
    f = thread_ids()
    assert ctypes.c_int32.in_dll(f._library.cdll, "loom_num_threads").value == threads
    # schedule(static): thread t runs the t-th contiguous block of iterations.
    expected = np.repeat(np.arange(threads), [len(c) for c in np.array_split(np.arange(N), threads)])
    np.testing.assert_array_equal(run(f), expected)


def test_the_count_is_read_when_the_module_is_loaded(monkeypatch) -> None:
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")
    f = thread_ids()
    monkeypatch.setenv("LOOM_NUM_THREADS", "1")
    assert set(run(f)) == {0, 1}  # unchanged until a module is loaded again
    g = thread_ids()
    assert set(run(g)) == {0}


def test_without_openmp_loops_are_serial(monkeypatch) -> None:
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")
    f = thread_ids(openmp=False)
    assert "#pragma omp" not in f.get_source() and set(run(f)) == {0}


def test_bad_thread_count_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("LOOM_NUM_THREADS", "many")
    with pytest.raises(LoomValueError, match=r"LOOM_NUM_THREADS='many': expected a non-negative integer"):
        thread_ids()


_UNSET = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_c_threads import run, thread_ids
    print(sorted(set(run(thread_ids()).tolist())))
""")


def test_unset_falls_back_to_openmp_default(tmp_path) -> None:
    """0 is not a valid num_threads clause: unset means omp_get_max_threads() (here OMP_NUM_THREADS)."""
    env = {k: v for k, v in os.environ.items() if k != "LOOM_NUM_THREADS"}
    env.update(OMP_NUM_THREADS="2", LOOM_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _UNSET, os.path.dirname(__file__)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0, 1]"
