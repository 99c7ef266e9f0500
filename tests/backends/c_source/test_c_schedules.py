"""Lowered schedules (``loom.lower``) rendered to C agree with the interpreter and numpy."""

from __future__ import annotations

import numpy as np
import pytest

import loom

from programs import blocked_matmul

from c_helpers import check_against_interp, run_c

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


@pytest.mark.parametrize("openmp", [False, True])
@pytest.mark.parametrize("n", [8, 37])
def test_vector_add_split_vectorize_parallel(n: int, openmp: bool) -> None:
    """A symbolic-length vector add: a vector main loop and a guarded scalar tail."""
    size = loom.var("n")
    A = loom.placeholder((size,), name="A")
    B = loom.placeholder((size,), name="B")
    C = loom.compute((size,), lambda i: A[i] + B[i] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    s[C].parallel(outer)
    mod = loom.lower(s, [A, B, C], name="vadd")
    a, b = rand(n), rand(n)
    c = check_against_interp(mod, a, b, np.zeros(n, "float32"), openmp=openmp)[-1]
    np.testing.assert_allclose(c, a + b * 2.0, rtol=1e-6)


def matmul_schedule() -> tuple:
    M, N, K = 13, 17, 19
    s, args = blocked_matmul(M, N, K)
    return s, args, (M, N, K)


@pytest.mark.parametrize("partition", [False, True])
def test_blocked_matmul_from_the_docs(partition: bool) -> None:
    """docs/schedules.md's matmul; partitioning gives the main part real vector code."""
    s, args, (M, N, K) = matmul_schedule()
    with loom.build_config(partition_const_loop=partition):
        mod = loom.lower(s, args, name="matmul")
    a, b = rand(M, K), rand(K, N)
    c = check_against_interp(mod, a, b, np.zeros((M, N), "float32"), openmp=True, rtol=1e-5, atol=1e-5)[-1]
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("explicit", [False, True])
def test_compute_at_pipeline_with_unrolling(explicit: bool) -> None:
    """A producer computed inside its consumer's loop: a local allocation per iteration."""
    M, N = 13, 17
    X = loom.placeholder((M, N), name="X")
    Y = loom.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    Z = loom.compute((M, N), lambda i, j: Y[i, j] + 1.0, name="Z")
    s = loom.create_schedule(Z.op)
    zo, zi = s[Z].split(Z.op.axis[0], factor=4)
    s[Y].compute_at(s[Z], zo)
    s[Z].parallel(zo)
    with loom.build_config(auto_unroll_max_step=64, unroll_explicit=explicit):
        mod = loom.lower(s, [X, Z], name="pipeline")
    x = rand(M, N)
    z = check_against_interp(mod, x, np.zeros((M, N), "float32"), openmp=True)[-1]
    np.testing.assert_allclose(z, x * 2.0 + 1.0, rtol=1e-6)


def test_softmax_with_exp() -> None:
    """Row softmax: max and sum reductions, exp, division; symbolic rows."""
    m = loom.var("m")
    n = 10
    X = loom.placeholder((m, n), name="X")
    k1 = loom.reduce_axis((0, n), name="k1")
    mx = loom.compute((m,), lambda i: loom.max(X[i, k1], axis=k1), name="mx")
    ex = loom.compute((m, n), lambda i, j: loom.exp(X[i, j] - mx[i]), name="ex")
    k2 = loom.reduce_axis((0, n), name="k2")
    sm = loom.compute((m,), lambda i: loom.sum(ex[i, k2], axis=k2), name="sm")
    Y = loom.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="Y")
    s = loom.create_schedule(Y.op)
    s[Y].parallel(Y.op.axis[0])
    mod = loom.lower(s, [X, Y], name="softmax")
    x = rand(7, n)
    y = check_against_interp(mod, x, np.zeros((7, n), "float32"), openmp=True, rtol=1e-5)[-1]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_symbolic_shapes_bind_from_arguments() -> None:
    """Shape variables arrive as extra ABI words; a 2-d transpose of any size."""
    m, n = loom.var("m"), loom.var("n")
    A = loom.placeholder((m, n), name="A", dtype="int64")
    B = loom.compute((n, m), lambda i, j: A[j, i] * 3 - 1, name="B")
    s = loom.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[1], factor=4)
    s[B].vectorize(bi)
    mod = loom.lower(s, [A, B], name="transpose")
    for rows, cols in ((5, 3), (8, 9)):
        a = np.arange(rows * cols, dtype="int64").reshape(rows, cols) - 20
        b = check_against_interp(mod, a, np.zeros((cols, rows), "int64"))[-1]
        np.testing.assert_array_equal(b, a.T * 3 - 1)


def test_bound_checkers_assert_out_of_range_shapes() -> None:
    """With instrument_bound_checkers the asserts of the lowered code run natively."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = loom.create_schedule(B.op)
    with loom.build_config(instrument_bound_checkers=True):
        mod = loom.lower(s, [A, B], name="inc")
    a = rand(9)
    b = np.zeros(9, "float32")
    assert run_c(mod, a, b) == (0, None)
    np.testing.assert_allclose(b, a + 1.0)
