"""``Schedule.rfactor``: the factored tensor's shape and axes, errors, and results against numpy."""

import numpy as np
import pytest

import loom
from loom.errors import LoomTypeError, LoomValueError
from programs import argmax_reducer

TARGETS = ["interp", "llvm", "c"]


def _two_axis_sum():
    n = loom.var("n")
    k1 = loom.reduce_axis((0, n), name="k1")
    k2 = loom.reduce_axis((0, n), name="k2")
    A = loom.placeholder((n, n, n), name="A")
    B = loom.compute((n,), lambda i: loom.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    return n, k1, k2, A, B


def test_rfactor_of_an_unsplit_axis_keeps_the_other_reduction():
    n, k1, k2, A, B = _two_axis_sum()
    s = loom.create_schedule(B.op)
    BF = s.rfactor(B, k1)
    assert len(BF.shape) == 2 and BF.shape[0] is n and BF.shape[1] is n
    assert BF.name == "B.rf" and list(BF.op.body[0].axis) == [k2]
    assert s[B].op.body[0].axis[0].dom.extent is n
    assert len(s[B].all_iter_vars) == 2 and s[B].leaf_iter_vars == s[B].all_iter_vars
    assert [st.op.name for st in s.stages] == ["A", "B.rf", "B"]
    assert s[s[B].op] is s[B]  # the new operation is this stage's too


@pytest.mark.parametrize("factor_axis", [0, 1, -1, -2])
def test_rfactor_of_a_split_axis_with_factor_axis(factor_axis):
    n, k1, k2, A, B = _two_axis_sum()
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(k1, factor=4)
    s[B].split(B.op.axis[0], factor=8)  # untouched by rfactor: B starts over with fresh loops
    BF = s.rfactor(B, ki, factor_axis)
    new_dim = 0 if factor_axis in (0, -2) else 1
    assert BF.shape[new_dim].value == 4 and BF.shape[1 - new_dim] is n
    assert BF.op.axis[new_dim].var is ki.var
    assert BF.op.body[0].axis[0] is k2 and BF.op.body[0].axis[-1].var is ko.var
    assert s[B].op.body[0].axis[0].dom.extent.value == 4
    assert s[B].op.reduce_axis[0].var.name == "k1.inner.v" and not s[B].relations


def test_rfactor_errors():
    n, k1, k2, A, B = _two_axis_sum()
    C = loom.compute((n,), lambda i: B[i] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    with pytest.raises(LoomValueError, match="computes no reduction"):
        s.rfactor(C, C.op.axis[0])
    with pytest.raises(LoomValueError, match="data-parallel loop"):
        s.rfactor(B, B.op.axis[0])
    ko, ki = s[B].split(k1, factor=4)
    with pytest.raises(LoomValueError, match="already split"):
        s.rfactor(B, k1)
    with pytest.raises(LoomValueError, match="factor_axis=3 is out of range"):
        s.rfactor(B, ki, 3)
    with pytest.raises(LoomTypeError, match="factor_axis must be an int"):
        s.rfactor(B, ki, True)
    with pytest.raises(LoomTypeError, match="expects the reduction's Tensor"):
        s.rfactor(B.op, ki)
    fused = s[B].fuse(B.op.axis[0], ko)
    with pytest.raises(LoomValueError, match="fused with the data axis i"):
        s.rfactor(B, fused)


def test_rfactor_refuses_stages_attached_to_the_loops_it_replaces():
    A = loom.placeholder((8, 32), name="A")
    E = loom.compute((8, 32), lambda i, j: A[i, j] + 1.0, name="E")
    k = loom.reduce_axis((0, 32), name="k")
    B = loom.compute((8,), lambda i: loom.sum(E[i, k], axis=k), name="B")
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    s[E].compute_at(s[B], ko)
    with pytest.raises(LoomValueError, match="E is computed at B.k.outer"):
        s.rfactor(B, ki)


def _run(s, args, target, *arrays):
    f = loom.build(s, args, target=target)
    f(*arrays)
    return arrays


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("factor_axis", [0, 1])
def test_rfactor_sum_against_numpy(target, factor_axis):
    """TVM's test_rfactor / test_rfactor_factor_axis: a split that does not divide, BF's new axis parallel."""
    n = 1027
    A = loom.placeholder((n,), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((1,), lambda i: loom.sum(A[k], axis=k), name="B")
    s = loom.create_schedule(B.op)
    kf, ki = s[B].split(k, nparts=4)
    BF = s.rfactor(B, kf, factor_axis)
    s[BF].parallel(BF.op.axis[factor_axis])
    a = np.random.default_rng(0).random(n).astype("float32")
    _, b = _run(s, [A, B], target, a, np.zeros(1, "float32"))
    np.testing.assert_allclose(b, [a.sum()], rtol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_rfactor_of_the_outer_part_with_a_condition_and_init(target):
    """Factor the outer loop of a split, with where= (checked per element) and init= (applied once)."""
    m, n = 6, 50
    A = loom.placeholder((m, n), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: loom.sum(A[i, k], axis=k, where=k % 3 != 1, init=10.0), name="B")
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ko, factor_axis=1)
    assert [int(x) for x in BF.shape] == [m, 7]
    a = np.random.default_rng(1).random((m, n)).astype("float32")
    _, b = _run(s, [A, B], target, a, np.zeros(m, "float32"))
    keep = np.arange(n) % 3 != 1
    np.testing.assert_allclose(b, a[:, keep].sum(1) + 10.0, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_rfactor_of_one_of_two_axes_with_a_max(target):
    m, n1, n2 = 5, 6, 7
    A = loom.placeholder((m, n1, n2), name="A")
    k1 = loom.reduce_axis((0, n1), name="k1")
    k2 = loom.reduce_axis((0, n2), name="k2")
    B = loom.compute((m,), lambda i: loom.max(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = loom.create_schedule(B.op)
    BF = s.rfactor(B, k2)  # BF[k2, i] = max over k1; B = max over BF's first axis
    s[BF].compute_at(s[B], s[B].op.axis[0])
    a = np.random.default_rng(2).standard_normal((m, n1, n2)).astype("float32")
    _, b = _run(s, [A, B], target, a, np.zeros(m, "float32"))
    np.testing.assert_array_equal(b, a.max(axis=(1, 2)))


@pytest.mark.parametrize("target", TARGETS)
def test_rfactor_of_the_only_axis_leaves_no_reduction_in_the_factored_stage(target):
    n = 20
    A = loom.placeholder((3, n), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((3,), lambda i: loom.sum(A[i, k], axis=k, where=k < 15), name="B")
    s = loom.create_schedule(B.op)
    BF = s.rfactor(B, k)
    assert not BF.op.reduce_axis  # BF[k, i] = A[i, k] where k < 15, else the identity
    a = np.random.default_rng(3).random((3, n)).astype("float32")
    _, b = _run(s, [A, B], target, a, np.zeros(3, "float32"))
    np.testing.assert_allclose(b, a[:, :15].sum(1), rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_rfactor_argmax_tuple_reduction(target):
    """TVM's test_rfactor_argmax without threads: one factored tensor per output."""
    m, n = 8, 1027
    idx = loom.placeholder((m, n), name="idx", dtype="int32")
    val = loom.placeholder((m, n), name="val", dtype="float32")
    k = loom.reduce_axis((0, n), name="k")
    T0, T1 = loom.compute((m,), lambda i: argmax_reducer()((idx[i, k], val[i, k]), axis=k), name="T")
    s = loom.create_schedule(T0.op)
    ko, kf = s[T0].split(k, factor=32)
    BF = s.rfactor(T0, kf)
    assert isinstance(BF, list) and len(BF) == 2 and BF[0].op is BF[1].op
    assert [str(t.dtype) for t in BF] == ["int32", "float32"]
    v = np.random.default_rng(4).random((m, n)).astype("float32")
    ii = np.tile(np.arange(n, dtype="int32"), (m, 1))
    _, _, t0, t1 = _run(s, [idx, val, T0, T1], target, ii, v, np.zeros(m, "int32"), np.zeros(m, "float32"))
    np.testing.assert_array_equal(t0, v.argmax(1))
    np.testing.assert_array_equal(t1, v.max(1))
