"""loom.contrib.cblas.matmul: an extern op whose body calls OpenBLAS (scipy-openblas32) directly.

Every case is compared with numpy on interp (numpy's gemm), llvm and c (OpenBLAS), and
TVM v0.6's extern-op tutorial runs with renames only.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom.contrib import cblas
from loom.ir import stmt as S

pytest.importorskip("scipy_openblas32", reason="loom.contrib.cblas needs scipy-openblas32 (the [blas] extra)")

TARGETS = ["interp", "llvm", "c"]
RTOL = {"float32": 1e-5, "float64": 1e-12}


def rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transa, transb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul_against_numpy(target, dtype, transa, transb):
    M, N, K = 13, 7, 9
    A = loom.placeholder((K, M) if transa else (M, K), dtype, name="A")
    B = loom.placeholder((N, K) if transb else (K, N), dtype, name="B")
    C = cblas.matmul(A, B, transa, transb)
    assert [int(x) for x in C.shape] == [M, N] and str(C.dtype) == dtype
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target=target)
    a, b = rand(tuple(int(x) for x in A.shape), dtype, 1), rand(tuple(int(x) for x in B.shape), dtype, 2)
    c = np.full((M, N), np.nan, dtype)  # BLAS with beta = 0 must not read C
    f(a, b, c)
    np.testing.assert_allclose(c, (a.T if transa else a) @ (b.T if transb else b), rtol=RTOL[dtype])


@pytest.mark.parametrize("target", TARGETS)
def test_body_is_one_call_of_the_blas_routine(target):
    A, B = loom.placeholder((4, 3), "float64", name="A"), loom.placeholder((3, 2), "float64", name="B")
    C = cblas.matmul(A, B, name="gemm")
    assert C.op.name == "gemm" and isinstance(C.op.body, S.Evaluate)
    call = C.op.body.value
    assert call.op.name == "tir.call_extern" and call.args[0].value == "scipy_cblas_dgemm"
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target=target)
    if target == "c":
        assert "scipy_cblas_dgemm(101, 111, 111, 4, 2, 3, 1.0, " in f.get_source()


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_shapes_and_the_inner_dimension_assertion(target):
    n, k, k2, m = (loom.var(x) for x in ("n", "k", "k2", "m"))
    A, B = loom.placeholder((n, k), name="A"), loom.placeholder((k2, m), name="B")
    C = cblas.matmul(A, B)
    f = loom.build(loom.create_schedule(C.op), [A, B, C], target=target)
    a, b, c = rand((6, 4), "float32"), rand((4, 5), "float32", 3), np.zeros((6, 5), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    with pytest.raises(loom.testing.AssertionFailed, match="the inner dimensions of A and B differ"):
        f(a, rand((3, 5), "float32"), c)


@pytest.mark.parametrize("target", ["interp", "llvm", "c"])
def test_matmul_between_computes_with_a_scalar_bias(target):
    """TVM's extern_op tutorial: cblas.matmul, then a compute adding a bias (small on interp)."""
    n, l, m = (1024, 128, 235) if target != "interp" else (24, 16, 11)
    bias = loom.var("bias", dtype="float32")
    A, B = loom.placeholder((n, l), name="A"), loom.placeholder((l, m), name="B")
    A2 = loom.compute((n, l), lambda i, j: A[i, j] * 2.0, name="A2")
    C = cblas.matmul(A2, B)
    D = loom.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = loom.create_schedule(D.op)
    f = loom.build(s, [A, B, D, bias], target=target)
    a, b = np.random.uniform(size=(n, l)).astype("float32"), np.random.uniform(size=(l, m)).astype("float32")
    d = np.zeros((n, m), "float32")
    f(a, b, d, 10.0)
    np.testing.assert_allclose(d, np.dot(a * 2, b) + 10, rtol=1e-5)


@pytest.mark.parametrize("lhs, rhs, kwargs, err, fragment", [
    ((4, 3), (4, 2), {}, loom.LoomValueError, "the inner dimensions differ: A is 4 x 3 and B is 4 x 2"),
    ((4, 3), (2, 4), {"transa": True}, loom.LoomValueError, "the inner dimensions differ"),
    ((4,), (4, 2), {}, loom.LoomValueError, "lhs A must be a matrix"),
    ((4, 3), (3, 2, 1), {}, loom.LoomValueError, "rhs B must be a matrix"),
])
def test_bad_shapes(lhs, rhs, kwargs, err, fragment):
    A, B = loom.placeholder(lhs, name="A"), loom.placeholder(rhs, name="B")
    with pytest.raises(err, match=fragment):
        cblas.matmul(A, B, **kwargs)


def test_bad_dtypes_and_arguments():
    A = loom.placeholder((4, 4), "float32", name="A")
    with pytest.raises(loom.LoomTypeError, match="A is float32 but rhs B is float64"):
        cblas.matmul(A, loom.placeholder((4, 4), "float64", name="B"))
    with pytest.raises(loom.LoomTypeError, match="lhs I is int32; BLAS multiplies float32 or float64"):
        cblas.matmul(loom.placeholder((4, 4), "int32", name="I"), A)
    with pytest.raises(loom.LoomTypeError, match="rhs must be a Tensor, got ndarray"):
        cblas.matmul(A, np.zeros((4, 4)))


def test_exported_libraries_load_in_a_fresh_process(tmp_path):
    A, B = loom.placeholder((6, 4), name="A"), loom.placeholder((5, 4), name="B")
    C = cblas.matmul(A, B, transb=True)
    s = loom.create_schedule(C.op)
    for target in ("llvm", "c"):
        path = tmp_path / f"mm_{target}.so"
        loom.build(s, [A, B, C], target=target).export_library(str(path))
        needed = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
        assert "libscipy_openblas.so" in needed  # a dependency, found through the rpath
        code = textwrap.dedent(f"""
            import numpy as np, loom
            f = loom.runtime.load_module({str(path)!r})
            rng = np.random.default_rng(0)
            a, b = rng.random((6, 4), dtype="float32"), rng.random((5, 4), dtype="float32")
            c = np.zeros((6, 5), "float32")
            f(a, b, c)
            np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)
            print("ok")
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_missing_scipy_openblas32_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy_openblas32", None)  # import fails as if not installed
    with pytest.raises(loom.LoomError, match=r"pip install \"loom-compiler\[blas\]\""):
        cblas._library_path()


def test_the_interpreter_gemm_honours_leading_dimensions_alpha_and_beta():
    a = np.arange(12, dtype="float64")  # a 2 x 3 matrix stored with rows of 5 (leading dimension 5)
    b = np.arange(6, dtype="float64")  # 3 x 2
    c = np.ones(4, dtype="float64")
    cblas._gemm(101, 111, 111, 2, 2, 3, 2.0, a, 5, b, 2, 0.5, c, 2)
    want = 2.0 * np.stack([a[0:3], a[5:8]]) @ b.reshape(3, 2) + 0.5
    np.testing.assert_allclose(c.reshape(2, 2), want)
    with pytest.raises(loom.LoomValueError, match="only row-major"):
        cblas._gemm(102, 111, 111, 2, 2, 3, 1.0, a, 5, b, 2, 0.0, c, 2)
    with pytest.raises(loom.LoomValueError, match="does not fit"):
        cblas._gemm(101, 111, 111, 3, 2, 3, 1.0, a, 5, b, 2, 0.0, c, 2)
