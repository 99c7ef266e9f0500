"""LOOM_NUM_THREADS beyond what the process can start: a warning and fewer threads, never libgomp ending the process."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import loom
from loom import envvars
from loom.errors import LoomValueError
from loom.runtime import threads
from loom.runtime.native_library import set_library_threads


def _parallel_library(kind: str, path: str) -> None:
    """Export ``B = A * 2`` over 1024 rows, the rows a parallel loop (more rows than MAX_THREADS)."""
    A = loom.placeholder((1024, 4), name="A")
    B = loom.compute((1024, 4), lambda i, j: A[i, j] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    loom.build(s, [A, B], target=kind, name="twice").export_library(path)


_LIMITED_CHILD = """
import resource, sys, warnings
import numpy as np
import loom

def mapped() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))

# Room for the call, not for {max_threads} thread stacks of 8 MiB.
resource.setrlimit(resource.RLIMIT_AS, (mapped() + (512 << 20), resource.RLIM_INFINITY))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    f = loom.runtime.load_module(sys.argv[1])
for w in caught:
    print("warning:", w.category.__name__, w.message)
a = np.arange(4096, dtype="float32").reshape(1024, 4)
b = np.zeros_like(a)
f(a, b)
assert (b == a * 2).all()
print("computed")
"""


@pytest.mark.parametrize("kind", ["llvm", "c"])
def test_too_many_threads_under_a_memory_limit_warn_instead_of_ending_the_process(kind, tmp_path):
    path = str(tmp_path / f"twice_{kind}.so")
    _parallel_library(kind, path)
    script = textwrap.dedent(_LIMITED_CHILD.format(max_threads=envvars.MAX_THREADS))
    env = {**os.environ, "LOOM_NUM_THREADS": "10000"}
    env.pop("OMP_STACKSIZE", None)
    env.pop("GOMP_STACKSIZE", None)
    proc = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"child ended with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "computed" in proc.stdout, proc.stdout
    assert f"LOOM_NUM_THREADS=10000 is more than {envvars.MAX_THREADS}" in proc.stdout
    assert "RuntimeWarning LOOM_NUM_THREADS asks for" in proc.stdout and "could start only" in proc.stdout


_WRAP_CHILD = """
import ctypes, sys, warnings
import loom
from loom.runtime.native_library import THREADS_SYMBOL
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    f = loom.runtime.load_module(sys.argv[1])
print("knob", ctypes.c_int32.from_address(f._symbol_address(THREADS_SYMBOL)).value)
for w in caught:
    print("warning:", w.message)
"""


def test_a_count_above_int32_is_capped_with_a_warning_not_wrapped(tmp_path):
    path = str(tmp_path / "twice.so")
    _parallel_library("c", path)
    env = {**os.environ, "LOOM_NUM_THREADS": str(2 ** 32 + 1)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_WRAP_CHILD), path], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    knob = int(proc.stdout.split("knob ")[1].split()[0])
    assert f"LOOM_NUM_THREADS={2 ** 32 + 1} is more than {envvars.MAX_THREADS}" in proc.stdout
    # 2**32 + 1 wraps to 1 in the int32 knob; capped it is MAX_THREADS (or fewer, with a warning saying so).
    assert knob == envvars.MAX_THREADS or ("could start only" in proc.stdout and 1 <= knob < envvars.MAX_THREADS)


def test_the_knob_refuses_counts_it_cannot_hold():
    knob = ctypes.c_int32(5)
    with pytest.raises(LoomValueError, match="between 0 and 2147483647"):
        set_library_threads(ctypes.addressof(knob), 2 ** 32 + 1)
    with pytest.raises(LoomValueError):
        set_library_threads(ctypes.addressof(knob), -1)
    assert knob.value == 5
    set_library_threads(ctypes.addressof(knob), 3)
    assert knob.value == 3


# -- usable_threads without starting threads -------------------------------------------------------------------


@pytest.fixture
def probe(monkeypatch):
    """Replace the thread probe: the test sets how many threads start; calls are recorded."""
    calls: list[int] = []
    state = {"startable": 10 ** 6}

    def fake(count: int) -> int:
        calls.append(count)
        return min(count, state["startable"])

    monkeypatch.setattr(threads, "_startable", fake)
    monkeypatch.setattr(threads, "_verified", 0)
    monkeypatch.setattr(threads, "_short", {})
    monkeypatch.setattr(threads, "_cores", lambda: 4)
    return calls, state


def test_counts_up_to_the_cores_are_never_probed(probe):
    calls, _ = probe
    assert [threads.usable_threads(n, "LOOM_NUM_THREADS") for n in (0, 1, 4)] == [0, 1, 4]
    assert calls == []


def test_a_count_that_starts_is_probed_once(probe):
    calls, _ = probe
    assert threads.usable_threads(40, "LOOM_NUM_THREADS") == 40
    assert threads.usable_threads(40, "LOOM_NUM_THREADS") == 40
    assert threads.usable_threads(20, "LOOM_NUM_THREADS") == 20
    assert calls == [39]  # the calling thread is the team's first member


def test_a_count_that_does_not_start_falls_back_to_half_of_what_did(probe):
    calls, state = probe
    state["startable"] = 11
    with pytest.warns(RuntimeWarning, match=r"LOOM_NUM_THREADS asks for 40 threads .* could start only 12 .* use 6"):
        assert threads.usable_threads(40, "LOOM_NUM_THREADS") == 6
    assert calls == [39]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # found short once: neither probed nor warned about again
        assert threads.usable_threads(40, "LOOM_NUM_THREADS") == 6
    assert calls == [39]
    state["startable"] = 0
    with pytest.warns(RuntimeWarning, match="use 1"):
        assert threads.usable_threads(50, "the target's num_cores") == 1


def test_counts_above_the_cap_are_capped_before_probing(probe):
    calls, _ = probe
    with pytest.warns(RuntimeWarning, match=f"more than {envvars.MAX_THREADS}"):
        assert threads.usable_threads(2 ** 32 + 1, "the target's num_cores") == envvars.MAX_THREADS
    assert calls == [envvars.MAX_THREADS - 1]
    with pytest.raises(LoomValueError):
        threads.usable_threads(-2, "LOOM_NUM_THREADS")


def test_the_probe_starts_and_joins_real_threads():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert threads._startable(8) == 8
        assert threads._startable_in_python(3) == 3


def test_openmp_stack_size_is_read_like_libgomp(monkeypatch):
    monkeypatch.delenv("OMP_STACKSIZE", raising=False)
    monkeypatch.setenv("GOMP_STACKSIZE", "64")
    assert threads.openmp_stack_size() == 64 << 10
    monkeypatch.setenv("OMP_STACKSIZE", "2 M")
    assert threads.openmp_stack_size() == 2 << 20
    monkeypatch.setenv("OMP_STACKSIZE", "lots")
    assert threads.openmp_stack_size() == 64 << 10  # libgomp ignores a malformed value too
