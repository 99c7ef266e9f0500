"""``export_library`` of llvm modules: a shared library that ``load_module`` loads in any process."""

from __future__ import annotations

import ctypes
import textwrap

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from loom.ir import AssertStmt, BufferStore, IRModule, PrimFunc  # noqa: E402
from loom.runtime.arguments import ArgumentTypeError, ArgumentValueError  # noqa: E402
from loom.runtime.native_library import LibraryModule, read_library_metadata  # noqa: E402
from loom.testing import AssertionFailed  # noqa: E402
from loom_llvm import plugin  # noqa: E402
from llvm_programs import run_python  # noqa: E402
from programs import blocked_matmul  # noqa: E402


def _library_module():
    """Three functions: a parallel blocked matmul (entry), a symbolic scale, a guarded increment."""
    s, args = blocked_matmul(13, 17, 19)
    funcs = dict(loom.lower(s, args, name="matmul").functions)
    n, x = loom.var("n"), loom.var("x", "float32")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * x, name="B")
    sb = loom.create_schedule(B.op)
    outer, inner = sb[B].split(B.op.axis[0], factor=8)
    sb[B].parallel(outer)
    sb[B].vectorize(inner)
    funcs.update(loom.lower(sb, [A, x, B], name="scale").functions)
    G = loom.decl_buffer((2,), "int32", name="G")
    funcs["guarded"] = PrimFunc([G.data], AssertStmt(G[0] > 0, "G[0] must be positive",
                                                     BufferStore(G, G[0] + G[1], [1])),
                                buffer_map={G.data: G}, attrs={"global_symbol": "guarded"})
    return loom.build(IRModule(funcs), target="llvm")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    mod = _library_module()
    path = tmp_path_factory.mktemp("export") / "lib.so"
    mod.export_library(path)
    return mod, path


_CHILD = textwrap.dedent("""
    import sys, numpy as np, loom
    m = loom.runtime.load_module(sys.argv[1])
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((13, 19), dtype="float32"), rng.standard_normal((19, 17), dtype="float32")
    c = np.zeros((13, 17), "float32")
    m(a, b, c)  # the entry: the parallel matmul
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    for size in (0, 5, 8, 1001):
        v, out = np.arange(size, dtype="float32"), np.zeros(size, "float32")
        m["scale"](v, 1.5, out)
        np.testing.assert_array_equal(out, v * np.float32(1.5))
    print(type(m).__name__, m.format, m.entry_name, sorted(m.function_names))
    print("llvm_loaded" if "llvmlite" in sys.modules else "no_llvm")
""")


def test_round_trip_in_a_fresh_process(exported):
    _, path = exported
    out = run_python(_CHILD, str(path), env={"LOOM_NUM_THREADS": "2"}).split("\n")
    assert out[0] == "LibraryModule llvm matmul ['guarded', 'matmul', 'scale']"
    assert out[1] == "no_llvm"  # loading and running needs neither LLVM nor the compiler


def test_loaded_module_checks_arguments_and_reports_asserts(exported):
    _, path = exported
    m = loom.runtime.load_module(path)
    assert isinstance(m, LibraryModule) and m.entry_name == "matmul"
    a, b, c = (np.zeros(s, "float32") for s in ((13, 19), (19, 17), (13, 17)))
    with pytest.raises(ArgumentTypeError, match="matmul"):
        m(a, b)
    with pytest.raises(ArgumentTypeError, match="matmul"):
        m(a, b, c.astype("float64"))
    with pytest.raises(ArgumentValueError, match="matmul"):
        m(a, b, np.zeros((13, 16), "float32"))
    with pytest.raises(ArgumentValueError, match="scale"):
        m["scale"](np.zeros(4, "float32"), 1.0, np.zeros(5, "float32"))
    g = np.array([0, 5], "int32")
    with pytest.raises(AssertionFailed, match=r"G\[0\] must be positive"):
        m["guarded"](g)
    g[0] = 2
    m["guarded"](g)
    assert g.tolist() == [2, 7]


def test_library_embeds_sources_and_signatures(exported):
    mod, path = exported
    loaded = loom.runtime.load_module(path)
    assert loaded.get_source("ll") == mod.get_source("ll")
    assert "matmul:" in loaded.get_source("asm")
    meta = read_library_metadata(path)
    assert meta["format"] == "llvm" and meta["symbols"]["scale"] == "scale"
    assert set(meta["sources"]) == {"ll", "asm"}


def test_library_is_a_plain_shared_object(exported):
    """Any C caller can use it: the ABI symbols and the thread-count knob are exported."""
    _, path = exported
    lib = ctypes.CDLL(str(path))
    ctypes.c_int32.in_dll(lib, "loom_num_threads").value = 1
    g = (ctypes.c_uint64 * 1)()
    data = np.array([3, 4], "int32")
    g[0] = data.ctypes.data
    err = ctypes.c_char_p()
    fn = lib.guarded
    fn.restype = ctypes.c_int32
    assert fn(g, ctypes.byref(err)) == 0 and data.tolist() == [3, 7]


def test_load_hook_answers_only_for_llvm(exported):
    _, path = exported
    assert plugin.loom_load_module(path=str(path), fmt="c") is None
    assert isinstance(plugin.loom_load_module(path=str(path), fmt="llvm"), LibraryModule)


def test_export_of_a_module_without_parallel_loops_needs_no_openmp(tmp_path):
    A = loom.placeholder((4,), name="A")
    B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], target="llvm", name="inc")
    assert not f.uses_openmp
    f.export_library(tmp_path / "inc.so")
    assert b"libgomp" not in (tmp_path / "inc.so").read_bytes()
    b = np.zeros(4, "float32")
    loom.runtime.load_module(tmp_path / "inc.so")(np.ones(4, "float32"), b)
    np.testing.assert_array_equal(b, 2.0)
