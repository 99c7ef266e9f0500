"""loom.runtime.extern_libraries: a library registered for a symbol serves every native backend.

A small C library defining ``loom_test_axpb_<n>`` is compiled per test; an extern op calls
it.  llvm and c load it when the module loads, export_library links it (a fresh process
loads the export), and a library that went away is a clear error there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.runtime import extern_libraries as xl

NATIVE = ["llvm", "c"]
_counter = iter(range(10**6))


@pytest.fixture
def axpb(tmp_path):
    """(symbol, library path): ``void symbol(float *x, float *y, int32_t n)``: y = 3 * x + 1."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    symbol = f"loom_test_axpb_{next(_counter)}_{tmp_path.name[-8:].replace('-', '_')}"
    src = tmp_path / "axpb.c"
    src.write_text(f"#include <stdint.h>\nvoid {symbol}(float *x, float *y, int32_t n) "
                   "{ for (int32_t i = 0; i < n; ++i) y[i] = 3.0f * x[i] + 1.0f; }\n")
    lib = tmp_path / "libaxpb.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    name = f"axpb-{symbol}"
    xl.register_library(name, [symbol], lambda: str(lib))
    try:
        yield symbol, lib
    finally:
        xl.unregister_library(name)


def _program(symbol):
    A = loom.placeholder((10,), name="A")
    B = loom.extern((10,), [A], lambda ins, outs: loom.call_extern("int32", symbol, ins[0].data, outs[0].data, 10),
                    name="B")
    return loom.create_schedule(B.op), [A, B]


@pytest.mark.parametrize("target", NATIVE)
def test_a_registered_library_serves_the_module_and_its_export(target, axpb, tmp_path):
    symbol, lib = axpb
    s, args = _program(symbol)
    f = loom.build(s, args, target=target)
    a, b = np.arange(10, dtype="float32"), np.zeros(10, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, 3 * a + 1)
    out = tmp_path / f"export_{target}.so"
    f.export_library(str(out))
    code = textwrap.dedent(f"""
        import numpy as np, loom
        f = loom.runtime.load_module({str(out)!r})
        a, b = np.arange(10, dtype="float32"), np.zeros(10, "float32")
        f(a, b)
        assert (b == 3 * a + 1).all()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    lib.unlink()  # the dependency went away: loading the export says which library is missing
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert gone.returncode != 0 and "SerializationError" in gone.stderr and "libaxpb.so" in gone.stderr


@pytest.mark.parametrize("target, fragment", [("llvm", "calls functions this process does not define"),
                                              ("c", "undefined symbol")])
def test_an_unregistered_symbol_is_a_clear_error(target, fragment):
    s, args = _program(f"loom_test_nowhere_{next(_counter)}")
    with pytest.raises(loom.LoomError, match=fragment):
        loom.build(s, args, target=target)


@pytest.mark.parametrize("target", NATIVE)
def test_a_library_that_cannot_be_located_says_why(target):
    symbol = f"loom_test_unlocatable_{next(_counter)}"

    def locate():
        raise loom.LoomError("the test library is not installed")

    xl.register_library("unlocatable", [symbol], locate)
    try:
        s, args = _program(symbol)
        with pytest.raises(loom.LoomError, match="the test library is not installed"):
            loom.build(s, args, target=target)
    finally:
        xl.unregister_library("unlocatable")


def test_registry_rules(tmp_path):
    path = str(tmp_path / "libnothing.so")
    lib = xl.register_library("rules-a", ["rules_f", "rules_g"], lambda: path)
    try:
        assert xl.register_library("rules-a", ["rules_g", "rules_f"], lambda: path) is lib  # same: a no-op
        with pytest.raises(loom.LoomValueError, match="already registered with other symbols"):
            xl.register_library("rules-a", ["rules_h"], lambda: path)
        with pytest.raises(loom.LoomValueError, match=r"\['rules_g'\] already belong to library 'rules-a'"):
            xl.register_library("rules-b", ["rules_g"], lambda: path)
        with pytest.raises(loom.LoomValueError, match="must be C identifiers"):
            xl.register_library("rules-c", ["not a name"], lambda: path)
        with pytest.raises(loom.LoomTypeError, match="locate must be a callable"):
            xl.register_library("rules-c", ["rules_k"], path)
        assert "rules-a" in xl.registered_libraries()
        assert [x.name for x in xl.libraries_for(["rules_g", "other"])] == ["rules-a"]
        assert xl.link_arguments(["rules_f"]) == [path, f"-Wl,-rpath,{tmp_path}"]
        assert xl.link_arguments(["other"]) == []
        with pytest.raises(loom.LoomError, match="cannot load the shared library"):
            xl.load_libraries(["rules_f"])  # the file does not exist
    finally:
        xl.unregister_library("rules-a")
    with pytest.raises(loom.LoomValueError, match="'rules-a' is not registered"):
        xl.unregister_library("rules-a")
    bare = xl.register_library("rules-bare", ["rules_bare"], lambda: "libm.so.6")
    try:
        assert xl.link_arguments(["rules_bare"]) == ["-l:libm.so.6"] and bare.path() == "libm.so.6"
    finally:
        xl.unregister_library("rules-bare")
