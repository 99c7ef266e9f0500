"""CModule.export_library writes a shared library that load_module reads back, in this or a fresh process."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.errors import LoomError
from loom.ir import stmt as S
from loom.ir.function import PrimFunc
from loom.runtime import load_module
from loom.runtime.native_library import LibraryModule, read_library_metadata
from loom.testing import AssertionFailed

from programs import blocked_matmul

M, N, K = 13, 17, 19


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOM_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture()
def exported(tmp_path):
    """A parallel blocked matmul built for ``c`` and exported: (module, library path)."""
    s, args = blocked_matmul(M, N, K)
    f = loom.build(s, args, target="c -flags=-O1", name="matmul")
    path = str(tmp_path / "matmul.so")
    f.export_library(path)
    return f, path


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")


def test_export_writes_a_plain_shared_library(exported) -> None:
    f, path = exported
    meta = read_library_metadata(path)
    assert meta["format"] == "c" and meta["entry"] == "matmul" and meta["symbols"] == {"matmul": "matmul"}
    assert meta["sources"] == {"c": f.get_source()}
    lib = ctypes.CDLL(path)  # callable without Loom: the symbols are ordinary C symbols
    assert lib.matmul and ctypes.c_int32.in_dll(lib, "loom_num_threads") is not None
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".loom-")]


def test_round_trip_in_this_process(exported) -> None:
    f, path = exported
    g = load_module(path)
    assert isinstance(g, LibraryModule) and g.format == "c" and g.entry_name == "matmul"
    assert g.get_source("c") == g.get_source() == f.get_source()
    a, b = _inputs()
    c = np.zeros((M, N), "float32")
    g(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_loaded_module_rejects_bad_arguments(exported) -> None:
    _, path = exported
    g = load_module(path)
    a, b = _inputs()
    c = np.zeros((M, N), "float32")
    with pytest.raises(LoomError, match=r"matmul takes 3 arguments \(A, B, C\), got 2"):
        g(a, b)
    with pytest.raises(LoomError, match=r"shape\[1\] must be 17, got shape \(13, 18\)"):
        g(a, b, np.zeros((M, N + 1), "float32"))
    with pytest.raises(LoomError, match="needs dtype float32, got an array of float64"):
        g(a.astype("float64"), b, c)
    with pytest.raises(LoomError, match="takes an array"):
        g(a, b, "not an array")
    assert not c.any()  # nothing ran


_FRESH = textwrap.dedent("""
    import sys
    import numpy as np
    import loom
    g = loom.runtime.load_module(sys.argv[1])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((13, 19)).astype("float32")
    b = rng.standard_normal((19, 17)).astype("float32")
    c = np.zeros((13, 17), "float32")
    g(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    try:
        g(a, b, np.zeros((17, 13), "float32"))
    except loom.LoomError as err:
        print("rejected:", type(err).__name__)
    print(type(g).__name__, g.entry_name, "int32_t matmul(" in g.get_source("c"))
""")


def test_round_trip_in_a_fresh_process(exported) -> None:
    _, path = exported
    env = {**os.environ, "LOOM_CACHE": "0"}  # loading must not need the compiler's cache
    done = subprocess.run([sys.executable, "-c", _FRESH, path], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("rejected: Argument") and lines[1] == "LibraryModule matmul True"


def test_exported_assertions_still_report(tmp_path) -> None:
    n = loom.var("n")
    A = loom.decl_buffer((4,), "int32", name="A")
    body = S.AssertStmt(n > 0, "n must be positive", S.BufferStore(A, n, [0]))
    f = loom.build(PrimFunc([A.data, n], body, buffer_map={A.data: A}), target="c -flags=-O1", name="guarded")
    path = str(tmp_path / "guarded.so")
    f.export_library(path)
    g = load_module(path)
    a = np.zeros(4, "int32")
    g(a, 5)
    assert a[0] == 5
    with pytest.raises(AssertionFailed, match="n must be positive"):
        g(a, 0)


_THREADS = textwrap.dedent("""
    import sys
    import numpy as np
    import loom
    b = np.full(64, -1, "int32")
    loom.runtime.load_module(sys.argv[1])(b)
    print(sorted(set(b.tolist())))
""")


@pytest.mark.parametrize("threads", ["1", "2"])
def test_exported_library_honours_loom_num_threads(tmp_path, threads: str) -> None:
    B = loom.compute((64,), lambda i: loom.call_extern("int32", "omp_get_thread_num"), name="B")
    s = loom.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    path = str(tmp_path / "tid.so")
    loom.build(s, [B], target="c -flags=-O1", name="tid").export_library(path)
    env = {**os.environ, "LOOM_NUM_THREADS": threads}
    done = subprocess.run([sys.executable, "-c", _THREADS, path], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(list(range(int(threads))))
