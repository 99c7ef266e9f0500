"""Programs whose intermediates share memory (StorageRewrite), checked against numpy on every kind.

Each program is built so that the planner reuses memory in one of its ways: a
chain of elementwise stages written in place, a stage that reads its producer
in another order (no in place: the next but one stage takes the memory), and
symbolic shapes.  The count of allocations left is asserted by the unit tests
(tests/transform/test_storage_rewrite.py); here every backend must compute the
same values with the shared memory.
"""

from __future__ import annotations

import numpy as np
import pytest

import loom

from .harness import KindUnderTest, bind_root
from .programs import rand


def _chain(shape, stages, reverse_at=None):
    A = loom.placeholder(shape, name="A")
    out, T = [], A
    for t in range(stages):
        prev = T
        if t == reverse_at:  # reads its producer backwards along the last axis
            last = shape[-1]
            T = loom.compute(shape, lambda *ix, p=prev, k=t: p[ix[:-1] + (last - 1 - ix[-1],)] * 0.5 + k,
                             name=f"T{t}")
        else:
            T = loom.compute(shape, lambda *ix, p=prev, k=t: p[ix] + (k + 1), name=f"T{t}")
        out.append(T)
    return A, out


def _want(a, stages, reverse_at=None):
    x = a
    for t in range(stages):
        x = x[..., ::-1] * 0.5 + t if t == reverse_at else x + (t + 1)
    return x


@pytest.mark.parametrize("reverse_at", [None, 2])
def test_chain_of_stages(kind_under_test: KindUnderTest, reverse_at) -> None:
    kind = kind_under_test
    A, stages = _chain((6, 37), 5, reverse_at)
    s = loom.create_schedule(stages[-1].op)
    if kind.on_device:
        for T in stages:
            bind_root(s, T)
    f = kind.build(s, [A, stages[-1]])
    a = rand((6, 37))
    got = kind.run(f, a, np.zeros_like(a))[-1]
    np.testing.assert_allclose(got, _want(a, 5, reverse_at), rtol=1e-6, atol=1e-6)


def test_chain_with_symbolic_shape(kind_under_test: KindUnderTest) -> None:
    kind = kind_under_test
    m, n = loom.var("m"), loom.var("n")
    A, stages = _chain((m, n), 4)
    s = loom.create_schedule(stages[-1].op)
    if kind.on_device:
        for T in stages:
            bind_root(s, T)
    else:
        xo, xi = s[stages[1]].split(stages[1].op.axis[1], factor=8)  # a split tail: guarded, still in place
        s[stages[1]].vectorize(xi)
    f = kind.build(s, [A, stages[-1]])
    for shape in ((3, 21), (1, 1)):
        a = rand(shape)
        got = kind.run(f, a, np.zeros_like(a))[-1]
        np.testing.assert_allclose(got, _want(a, 4), rtol=1e-6, atol=1e-6)


def test_stages_computed_at_an_outer_loop(kind_under_test: KindUnderTest) -> None:
    """Two row buffers allocated per row, used by sibling loops of that row: they share one memory."""
    kind = kind_under_test
    if kind.on_device:
        pytest.skip("rows computed at a serial outer loop: a CPU schedule")
    A = loom.placeholder((9, 33), name="A")
    R1 = loom.compute((9, 33), lambda i, j: A[i, j] * 2.0, name="R1")
    S1 = loom.compute((9, 33), lambda i, j: R1[i, 32 - j] + 1.0, name="S1")
    R2 = loom.compute((9, 33), lambda i, j: S1[i, j] * S1[i, 32 - j], name="R2")
    Out = loom.compute((9, 33), lambda i, j: R2[i, 32 - j] - A[i, j], name="Out")
    s = loom.create_schedule(Out.op)
    for T in (R1, S1, R2):
        s[T].compute_at(s[Out], Out.op.axis[0])
    f = kind.build(s, [A, Out])
    a = rand((9, 33))
    got = kind.run(f, a, np.zeros_like(a))[-1]
    s1 = (a * 2.0)[:, ::-1] + 1.0
    r2 = s1 * s1[:, ::-1]
    np.testing.assert_allclose(got, r2[:, ::-1] - a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scope", ["global:pk", "local.pk"])
def test_stages_packed_into_a_special_memory(kind_under_test: KindUnderTest, scope) -> None:
    """Stages of three dtypes in one tagged scope: packed into one allocation at offsets."""
    kind = kind_under_test
    if kind.on_device and scope.startswith("local"):
        pytest.skip("local memory of a stage bound to threads at the root: each kernel would see its own")
    A = loom.placeholder((6, 37), name="A")
    T0 = loom.compute((6, 37), lambda i, j: A[i, j] + 1.0, name="T0")
    T1 = loom.compute((6, 37), lambda i, j: (T0[i, j] * 4.0).astype("int16"), name="T1")
    T2 = loom.compute((6, 37), lambda i, j: T0[i, 36 - j].astype("float64") - T1[i, j].astype("float64"), name="T2")
    Out = loom.compute((6, 37), lambda i, j: T2[i, j].astype("float32") + T1[i, 36 - j].astype("float32"), name="Out")
    s = loom.create_schedule(Out.op)
    for T in (T0, T1, T2):
        s[T].set_scope(scope)
        if kind.on_device:
            bind_root(s, T)
    if kind.on_device:
        bind_root(s, Out)
    f = kind.build(s, [A, Out])
    a = rand((6, 37))
    got = kind.run(f, a, np.zeros_like(a))[-1]
    t0 = a + 1.0
    t1 = (t0 * 4.0).astype("int16")
    t2 = t0[:, ::-1].astype("float64") - t1
    np.testing.assert_allclose(got, t2.astype("float32") + t1[:, ::-1], rtol=1e-5, atol=1e-5)
