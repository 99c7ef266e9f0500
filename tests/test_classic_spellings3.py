"""Classic spellings added for TVM v0.6 programs: loom.div (C division), loom_llvm.llvm_version_major, MakeAPI as PrimFunc."""

import numpy as np
import pytest

import loom


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_div_is_c_division_on_ints_and_true_division_on_floats(target):
    n = 16
    A = loom.placeholder((n,), "int32", name="A")
    F = loom.placeholder((n,), "float32", name="F")
    Q = loom.compute((n,), lambda i: loom.div(A[i], 3), name="Q")
    R = loom.compute((n,), lambda i: loom.div(1.0, F[i] * 1e37), name="R")
    s = loom.create_schedule([Q.op, R.op])
    f = loom.build(s, [A, F, Q, R], target)
    a = np.arange(-8, 8, dtype="int32")
    fl = np.full(n, 100.0, "float32")
    q, r = np.zeros(n, "int32"), np.ones(n, "float32")
    f(a, fl, q, r)
    np.testing.assert_array_equal(q, np.trunc(a / 3).astype("int32"))  # toward zero, not floor
    np.testing.assert_allclose(r, np.zeros(n, "float32"))


def test_div_builds_truncdiv_or_a_float_division_node():
    x, y = loom.var("x"), loom.var("y", "float32")
    assert isinstance(loom.div(x, 4), loom.ir.expr.Div) and str(loom.div(x, 4)) == "truncdiv(x, 4)"
    assert loom.div(-7, 2).value == -3 and loom.div(7.0, 2).value == 3.5
    assert str(loom.div(y, 2).dtype) == "float32"
    with pytest.raises(loom.IRError, match="truncdiv by the constant zero"):
        loom.div(x, 0)


def test_llvm_version_major_is_llvmlites():
    loom_llvm = pytest.importorskip("loom_llvm")
    import llvmlite.binding as llvm

    assert loom_llvm.llvm_version_major() == llvm.llvm_version_info[0]


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_makeapi_of_an_ir_builder_body_is_a_primfunc_that_build_takes(target):
    """TVM's ``MakeAPI(stmt, "inc", [A, n], 0, True)`` then ``build``: a PrimFunc over the pointer and the size."""
    ib = loom.ir_builder.create()
    n = loom.var("n")
    A = ib.pointer("float32", name="A")
    with ib.for_range(0, n) as i:
        A[i] = A[i] * 2.0 + 1.0
    func = loom.ir.PrimFunc([A.asnode(), n], ib.get(), attrs={"global_symbol": "inc"})
    m = loom.build(func, target=target)
    a = np.arange(6, dtype="float32")
    m["inc"](a, 4)
    np.testing.assert_array_equal(a, [1, 3, 5, 7, 4, 5])
