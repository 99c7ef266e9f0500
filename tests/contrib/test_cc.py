"""``save("x.o")`` + ``loom.contrib.cc.create_shared`` + ``load_module``: TVM's ahead-of-time flow."""

import subprocess
import sys

import numpy as np
import pytest

import loom
from loom.contrib import cc, util
from loom.runtime.native_library import LinkError


def _doubler(parallel):
    A = loom.placeholder((64,), name="A")
    B = loom.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    if parallel:
        xo, _ = s[B].split(B.op.axis[0], 8)
        s[B].parallel(xo)
    return s, [A, B]


@pytest.mark.parametrize("kind", ["llvm", "c"])
@pytest.mark.parametrize("parallel", [False, True])
def test_a_saved_object_links_into_a_loadable_library(kind, parallel):
    s, args = _doubler(parallel)
    f = loom.build(s, args, kind, name="dbl")
    temp = util.tempdir()
    f.save(temp.relpath("dbl.o"))
    cc.create_shared(temp.relpath("dbl.so"), [temp.relpath("dbl.o")])
    g = loom.runtime.load_module(temp.relpath("dbl.so"))
    a, b = np.arange(64, dtype="float32"), np.zeros(64, "float32")
    g(a, b)
    np.testing.assert_allclose(b, 2 * a)
    assert g.entry_name == "dbl"


def test_the_c_module_saves_its_source():
    s, args = _doubler(False)
    temp = util.tempdir()
    loom.build(s, args, "c", name="dbl").save(temp.relpath("dbl.c"))
    assert "dbl" in open(temp.relpath("dbl.c")).read()
    with pytest.raises(loom.LoomValueError, match="writes 'c' or 'o'"):
        loom.build(s, args, "c").save(temp.relpath("dbl.txt"))


def test_a_library_calling_blas_loads_in_a_fresh_process():
    pytest.importorskip("scipy_openblas32")
    from loom.contrib import cblas

    A = loom.placeholder((8, 4), name="A")
    B = loom.placeholder((4, 5), name="B")
    C = cblas.matmul(A, B)
    temp = util.tempdir()
    loom.build(loom.create_schedule(C.op), [A, B, C], "llvm").save(temp.relpath("mm.o"))
    cc.create_shared(temp.relpath("mm.so"), [temp.relpath("mm.o")])
    code = (
        "import numpy as np, loom\n"
        f"g = loom.runtime.load_module({temp.relpath('mm.so')!r})\n"
        "a = np.random.rand(8, 4).astype('float32'); b = np.random.rand(4, 5).astype('float32')\n"
        "c = np.zeros((8, 5), 'float32'); g(a, b, c)\n"
        "assert np.allclose(c, a @ b, rtol=1e-5)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_create_shared_reports_a_failed_link():
    temp = util.tempdir()
    with open(temp.relpath("bad.c"), "w") as fh:
        fh.write("int f(void) { return missing_symbol_xyz(; }\n")
    with pytest.raises(LinkError, match="failed"):
        cc.create_shared(temp.relpath("bad.so"), [temp.relpath("bad.c")])
    with pytest.raises(loom.LoomTypeError, match="object file paths"):
        cc.create_shared(temp.relpath("x.so"), [])
