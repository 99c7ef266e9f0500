"""Tutorial "Reduction": row sums split, rfactor-ed, reduced across threads; a 2-D convolution; a custom reducer."""

import numpy as np
import pytest

import loom


def _row_sum():
    n, m = loom.var("n"), loom.var("m")
    A = loom.placeholder((n, m), name="A")
    k = loom.reduce_axis((0, m), "k")
    B = loom.compute((n,), lambda i: loom.sum(A[i, k], axis=k), name="B")
    return A, B


def _check_row_sum(s, A, B, kind="llvm"):
    f = loom.build(s, [A, B], kind)
    a = np.random.uniform(size=(70, 45)).astype(A.dtype)
    b = np.zeros(70, dtype=B.dtype)
    f(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-4)


def test_split_reduction_and_rows():
    A, B = _row_sum()
    s = loom.create_schedule(B.op)
    s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    _check_row_sum(s, A, B)
    s[B].bind(xo, loom.thread_axis("blockIdx.x"))
    s[B].bind(xi, loom.thread_axis("threadIdx.x"))
    _check_row_sum(s, A, B)


@pytest.mark.parametrize("kind", ["llvm", "c", "interp"])
def test_rfactor_then_cross_thread_reduction(kind):
    A, B = _row_sum()
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    assert BF.op.name == "B.rf" and len(s[B].op.reduce_axis) == 1
    _check_row_sum(s, A, B, kind)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, loom.thread_axis("blockIdx.x"))
    s[B].bind(xi, loom.thread_axis("threadIdx.y"))
    tx = loom.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    _check_row_sum(s, A, B, kind)


def test_convolution_as_a_two_dimensional_reduction():
    n = loom.var("n")
    Input = loom.placeholder((n, n), name="Input")
    Filter = loom.placeholder((3, 3), name="Filter")
    di, dj = loom.reduce_axis((0, 3), name="di"), loom.reduce_axis((0, 3), name="dj")
    Output = loom.compute((n - 2, n - 2),
                          lambda i, j: loom.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]), name="Output")
    s = loom.create_schedule(Output.op)
    f = loom.build(s, [Input, Filter, Output], "llvm")
    x, w = np.random.rand(9, 9).astype("float32"), np.random.rand(3, 3).astype("float32")
    out = np.zeros((7, 7), "float32")
    f(x, w, out)
    want = np.array([[(x[i:i + 3, j:j + 3] * w).sum() for j in range(7)] for i in range(7)])
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_a_custom_commutative_reducer():
    n, m = loom.var("n"), loom.var("m")
    product = loom.comm_reducer(lambda x, y: x * y, lambda t: loom.const(1, dtype=t), name="product")
    A = loom.placeholder((n, m), name="A")
    k = loom.reduce_axis((0, m), name="k")
    B = loom.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    f = loom.build(loom.create_schedule(B.op), [A, B], "llvm")
    a = np.random.uniform(0.5, 1.5, size=(4, 6)).astype("float32")
    b = np.zeros(4, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a.prod(axis=1), rtol=1e-5)
