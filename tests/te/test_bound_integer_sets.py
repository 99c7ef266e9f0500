"""Bound inference reasons about index sets in ℤ, and a stage covering its whole domain gets its shape.

A halo ``A[ii], A[ii + 1], A[ii + 2]`` under a loop of symbolic extent is 3 elements (not
``max(ii + 1, ii + 2) - min(ii, ii + 2) + 1``: only ``ii + 2`` could wrap, and a wrapped index
is out of bounds anyway).  A group computed at a row of its consumer covers the row's ``n``
columns (not ``max(n, 0)``).  Every schedule is also built and checked against numpy.
"""

import numpy as np
import pytest

import loom
from loom.te.bound import infer_bound

TARGETS = ["interp", "llvm", "c"]


def _run(s, args, target, *arrays):
    f = loom.build(s, args, target=target)
    f(*arrays)
    return arrays


def _conv1d():
    n = loom.var("n")
    X = loom.placeholder((n + 2,), name="X")
    A = loom.compute((n + 2,), lambda i: X[i] * 2.0, name="A")
    B = loom.compute((n,), lambda ii: A[ii] + A[ii + 1] + A[ii + 2], name="B")
    s = loom.create_schedule(B.op)
    s[A].compute_at(s[B], B.op.axis[0])
    return s, X, A, B


def test_conv1d_halo_is_three_elements():
    s, _, A, _ = _conv1d()
    r = infer_bound(s)[A.op.axis[0]]
    assert isinstance(r.extent, loom.ir.expr.IntImm) and r.extent.value == 3
    assert str(r.min) == "ii"


@pytest.mark.parametrize("target", TARGETS)
def test_conv1d_halo_runs(target):
    s, X, _, B = _conv1d()
    x = np.random.default_rng(1).standard_normal(9).astype("float32")
    b = np.zeros(7, "float32")
    _run(s, [X, B], target, x, b)
    np.testing.assert_allclose(b, 2 * (x[:-2] + x[1:-1] + x[2:]), rtol=1e-5)


def _blur():
    n = loom.var("n")
    X = loom.placeholder((n, n), name="X")
    A = loom.compute((n, n), lambda i, j: X[i, j] + 1.0, name="A")
    B = loom.compute((n - 2, n - 2), lambda i, j: A[i + 1, j + 1] + A[i, j + 1] + A[i + 2, j + 1]
                     + A[i + 1, j] + A[i + 1, j + 2], name="B")
    s = loom.create_schedule(B.op)
    s[A].compute_at(s[B], B.op.axis[1])
    return s, X, A, B


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_blur_window_is_three_by_three(target):
    s, X, A, B = _blur()
    bounds = infer_bound(s)
    assert [str(bounds[iv].extent) for iv in A.op.axis] == ["3", "3"]
    x = np.random.default_rng(2).standard_normal((8, 8)).astype("float32")
    b = np.zeros((6, 6), "float32")
    _run(s, [X, B], target, x, b)
    a = x + 1
    want = a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
    np.testing.assert_allclose(b, want, rtol=1e-5)


def _group_chain():
    m, n = loom.var("m"), loom.var("n")
    P = loom.placeholder((m, n), name="P")
    x = loom.compute((m, n), lambda i, j: P[i, j] * 3.0, name="x")
    x1 = loom.compute(x.shape, lambda *i: x(*i) + 1.0, name="x1")
    x2 = loom.compute(x.shape, lambda *i: x1(*i) + 2.0, name="x2")
    return P, x, x1, x2


def _check_chain(s, P, x2, target):
    p = np.random.default_rng(3).standard_normal((5, 7)).astype("float32")
    out = np.zeros((5, 7), "float32")
    _run(s, [P, x2], target, p, out)
    np.testing.assert_allclose(out, p * 3 + 3, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_group_computed_at_a_row_covers_n_columns(target):
    P, x, x1, x2 = _group_chain()
    s = loom.create_schedule(x2.op)
    g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    g.compute_at(s[x2], x2.op.axis[0])
    bounds = infer_bound(s)
    n = x.shape[1]
    for t in (x, x1):
        assert str(bounds[t.op.axis[0]].extent) == "1"
        assert bounds[t.op.axis[1]].extent is n  # the shape itself, not max(n, 0)
    _check_chain(s, P, x2, target)


@pytest.mark.parametrize("target", TARGETS)
def test_nested_groups(target):
    P, x, x1, x2 = _group_chain()
    s = loom.create_schedule(x2.op)
    g1 = s.create_group(outputs=x, inputs=x, include_inputs=True)
    g2 = s.create_group(outputs=x1, inputs=x, include_inputs=True)
    g2.compute_at(s[x2], x2.op.axis[0])
    g1.compute_at(s[x1], s[x1].op.axis[1])
    bounds = infer_bound(s)
    assert [str(bounds[iv].extent) for iv in (*x.op.axis, x1.op.axis[0])] == ["1", "1", "1"]
    assert bounds[x1.op.axis[1]].extent is x.shape[1]
    _check_chain(s, P, x2, target)


@pytest.mark.parametrize("target", TARGETS)
def test_a_stage_read_whole_gets_its_shape_and_no_guard(target):
    """B is read over its whole domain [0, n): its loop and allocation are n, with no bound check."""
    n, m = loom.var("n"), loom.var("m")
    A = loom.placeholder((m,), name="A")
    B = loom.compute((n,), lambda i: A[0] + i.astype("float32"), name="B")
    k = loom.reduce_axis((0, n), name="k")
    C = loom.compute((m,), lambda i: loom.sum(B[k] + A[i], axis=k), name="C")
    s = loom.create_schedule(C.op)
    assert infer_bound(s)[B.op.axis[0]].extent is n
    assert "likely" not in str(loom.lower(s, [A, C, n], simple_mode=True))
    a = np.arange(4, dtype="float32")
    c = np.zeros(4, "float32")
    _run(s, [A, C, n], target, a, c, 5)
    np.testing.assert_allclose(c, [sum(a[0] + j + a[i] for j in range(5)) for i in range(4)], rtol=1e-5)


def test_a_partly_read_stage_stays_clamped():
    """Only a region equal to the whole domain is taken as it is; a part of it still cannot go negative."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = loom.compute((n - 1,), lambda i: B[i + 1], name="C")
    s = loom.create_schedule(C.op)
    r = infer_bound(s)[B.op.axis[0]]
    assert str(r.min) == "1" and str(r.extent) == "max(n - 1, 0)"
