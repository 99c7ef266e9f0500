"""RemoveNoOp: statements without effect disappear, everything else stays."""

import numpy as np
import pytest

import loom
from loom.ir import (
    Allocate, AssertStmt, AttrStmt, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, seq,
)
from loom.testing import evaluate
from loom.testing.random_programs import assert_same_result, random_func
from loom.transform import PassContext
from loom.transform.remove_no_op import RemoveNoOp, remove_no_op

A = loom.decl_buffer((8,), "int32", name="A")
NOP = Evaluate(loom.const(0))


def func(body):
    return PrimFunc([A.data], body, buffer_map={A.data: A})


def store(i, v=1):
    return BufferStore(A, loom.const(v), [i])


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_result(seed):
    f, make_args = random_func(seed)
    g = RemoveNoOp()(f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_empty_loop_and_constant_evaluate_vanish():
    """A loop over nothing and an Evaluate of a constant become one no-op."""
    i = loom.var("i")
    loom.assert_structural_equal(remove_no_op(seq(For(i, 0, 8, "serial", NOP), Evaluate(loom.const(3)))), NOP)


def test_zero_extent_loop_is_removed():
    """A loop whose extent is 0 never runs its (non-empty) body."""
    i = loom.var("i")
    s = seq(For(i, 0, 0, "serial", store(i)), store(0))
    loom.assert_structural_equal(remove_no_op(s), store(0))


def test_self_assignment_is_removed_but_other_stores_stay():
    """``A[i] = A[i]`` is dropped; ``A[i] = A[i + 1]`` is not."""
    i = loom.var("i")
    keep = BufferStore(A, A[i + 1], [i])
    s = For(i, 0, 7, "serial", seq(BufferStore(A, A[i], [i]), keep))
    loom.assert_structural_equal(remove_no_op(s), For(i, 0, 7, "serial", keep))


def test_if_with_empty_branches():
    """An if with nothing in either branch vanishes; an empty then-branch flips the condition."""
    i = loom.var("i")
    assert remove_no_op(IfThenElse(i < 3, NOP, NOP)).value.value == 0
    got = remove_no_op(IfThenElse(i < 3, NOP, store(0)))
    loom.assert_structural_equal(got, IfThenElse(loom.ir.Not(i < 3), store(0)))


def test_wrappers_around_nothing_vanish():
    """Attr, let and allocate statements around a no-op are removed; asserts stay."""
    x, buf = loom.var("x"), loom.var("buf", "handle")
    s = seq(AttrStmt(None, "pragma_x", 1, NOP), LetStmt(x, loom.const(2), NOP),
            Allocate(buf, "int32", [4], True, NOP))
    loom.assert_structural_equal(remove_no_op(s), NOP)
    kept = AssertStmt(x > 0, "x must be positive", NOP)
    assert remove_no_op(kept) is kept


def test_impure_calls_survive():
    """An extern call is an effect even when its result is unused."""
    call = Evaluate(loom.call_extern("int32", "side_effect", 1))
    assert remove_no_op(call) is call


def test_unchanged_function_is_returned_as_is():
    """A function with nothing to remove comes back as the same object."""
    i = loom.var("i")
    f = func(For(i, 0, 8, "serial", store(i)))
    with PassContext():
        assert RemoveNoOp()(f) is f


def test_assert_of_true_becomes_its_body():
    """``assert True`` cannot fail: only its body remains; a False or symbolic assert stays."""
    i, x = loom.var("i"), loom.var("x")
    body = For(i, 0, 8, "serial", store(i, 5))
    before = seq(AssertStmt(loom.const(True), "never fails", body), store(0, 2))
    want = seq(body, store(0, 2))
    loom.assert_structural_equal(remove_no_op(before), want)
    outs = []
    for f in (func(before), RemoveNoOp()(func(before))):
        a = np.zeros(8, dtype="int32")
        evaluate(f, a)
        outs.append(a)
    assert (outs[0] == outs[1]).all() and list(outs[1]) == [2] + [5] * 7
    for cond in (loom.const(False), x > 0):
        kept = AssertStmt(cond, "checked", body)
        assert remove_no_op(kept) is kept
