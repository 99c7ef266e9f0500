"""Tutorial "External Tensor Functions": a packed BLAS call, the cblas wrapper, and a Python callback."""

import numpy as np
import pytest

import loom
from loom.contrib import cblas  # noqa: F401  (registers the packed BLAS call)

n, l, m = 64, 16, 23


def _check_matmul_plus_bias(C, A, B, bias):
    D = loom.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = loom.create_schedule(D.op)
    ctx = loom.cpu(0)
    f = loom.build(s, [A, B, D, bias], "llvm")
    a = loom.nd.array(np.random.uniform(size=(n, l)).astype(A.dtype), ctx)
    b = loom.nd.array(np.random.uniform(size=(l, m)).astype(B.dtype), ctx)
    d = loom.nd.array(np.zeros((n, m), dtype=D.dtype), ctx)
    f(a, b, d, 10.0)
    loom.testing.assert_allclose(d.asnumpy(), np.dot(a.asnumpy(), b.asnumpy()) + 10, rtol=1e-5)


def test_an_extern_stage_calling_the_packed_blas_function():
    assert loom.get_global_func("loom.contrib.cblas.matmul", allow_missing=True)
    bias = loom.var("bias", dtype="float32")
    A = loom.placeholder((n, l), name="A")
    B = loom.placeholder((l, m), name="B")
    C = loom.extern((n, m), [A, B], lambda ins, outs: loom.call_packed(
        "loom.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False), name="C")
    _check_matmul_plus_bias(C, A, B, bias)


def test_the_cblas_wrapper():
    pytest.importorskip("scipy_openblas32")
    bias = loom.var("bias", dtype="float32")
    A = loom.placeholder((n, l), name="A")
    B = loom.placeholder((l, m), name="B")
    _check_matmul_plus_bias(cblas.matmul(A, B), A, B, bias)


def test_a_python_function_as_an_extern_stage():
    seen = []

    @loom.register_func("loom.test.tutorial_addone", override=True)
    def my_addone(x, y):
        seen.append((type(x), type(y)))
        loom.nd.array(x.asnumpy() + 1).copyto(y)

    try:
        A = loom.placeholder((n,), name="A")
        B = loom.extern(A.shape, [A], lambda ins, outs: loom.call_packed(
            "loom.test.tutorial_addone", ins[0], outs[0]), name="C")
        s = loom.create_schedule(B.op)
        f = loom.build(s, [A, B], "llvm")
        a = loom.nd.array(np.random.uniform(size=(n,)).astype(A.dtype))
        b = loom.nd.array(np.random.uniform(size=(n,)).astype(B.dtype))
        f(a, b)
        loom.testing.assert_allclose(b.asnumpy(), a.asnumpy() + 1, rtol=1e-5)
        assert seen == [(loom.nd.NDArray, loom.nd.NDArray)]
    finally:
        loom.remove_global_func("loom.test.tutorial_addone")
