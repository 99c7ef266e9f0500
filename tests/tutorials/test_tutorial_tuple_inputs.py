"""Tutorial "Compute and Reduce with Tuple Inputs": batchwise compute, argmax, scheduling by operation."""

import numpy as np
import pytest

import loom
from loom.testing.conformance.harness import buildable_cpu_kinds

KINDS = buildable_cpu_kinds()


@pytest.mark.parametrize("kind", KINDS)
def test_batchwise_computation(kind):
    n, m = loom.var("n"), loom.var("m")
    A0 = loom.placeholder((m, n), name="A0")
    A1 = loom.placeholder((m, n), name="A1")
    B0, B1 = loom.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
    s = loom.create_schedule(B0.op)
    f = loom.build(s, [A0, A1, B0, B1], kind)
    a0, a1 = np.random.rand(5, 7).astype("float32"), np.random.rand(5, 7).astype("float32")
    b0, b1 = np.zeros_like(a0), np.zeros_like(a1)
    f(a0, a1, b0, b1)
    np.testing.assert_allclose(b0, a0 + 2, rtol=1e-6)
    np.testing.assert_allclose(b1, a1 * 3, rtol=1e-6)


def fcombine(x, y):
    lhs = loom.ir.expr.Select((x[1] >= y[1]), x[0], y[0])
    rhs = loom.ir.expr.Select((x[1] >= y[1]), x[1], y[1])
    return lhs, rhs


def fidentity(t0, t1):
    return loom.const(-1, t0), loom.min_value(t1)


@pytest.mark.parametrize("kind", KINDS)
def test_argmax_with_a_tuple_reducer(kind):
    argmax = loom.comm_reducer(fcombine, fidentity, name="argmax")
    m, n = loom.var("m"), loom.var("n")
    idx = loom.placeholder((m, n), name="idx", dtype="int32")
    val = loom.placeholder((m, n), name="val", dtype="int32")
    k = loom.reduce_axis((0, n), "k")
    T0, T1 = loom.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = loom.create_schedule(T0.op)
    f = loom.build(s, [idx, val, T0, T1], kind)
    rng = np.random.default_rng(1)
    vals = rng.permutation(6 * 9).reshape(6, 9).astype("int32")  # distinct: one maximum per row
    idxs = np.tile(np.arange(9, dtype="int32"), (6, 1))
    t0, t1 = np.zeros(6, "int32"), np.zeros(6, "int32")
    f(idxs, vals, t0, t1)
    assert t0.tolist() == vals.argmax(1).tolist() and t1.tolist() == vals.max(1).tolist()


@pytest.mark.parametrize("kind", KINDS)
def test_a_multi_output_operation_is_scheduled_as_one(kind):
    n, m = loom.var("n"), loom.var("m")
    A0 = loom.placeholder((m, n), name="A0")
    B0, B1 = loom.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    A1 = loom.placeholder((m, n), name="A1")
    C = loom.compute((m, n), lambda i, j: A1[i, j] + B0[i, j], name="C")
    s = loom.create_schedule(C.op)
    s[B0].compute_at(s[C], C.op.axis[0])
    assert s[B1] is s[B0]
    f = loom.build(s, [A0, A1, C], kind)
    a0, a1 = np.random.rand(4, 6).astype("float32"), np.random.rand(4, 6).astype("float32")
    c = np.zeros_like(a0)
    f(a0, a1, c)
    np.testing.assert_allclose(c, a1 + a0 + 2, rtol=1e-6)
