"""RewriteUnsafeSelect: selects over loads become if_then_else, others stay."""

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, For, PrimFunc
from loom.testing import OutOfBoundsError, evaluate
from loom.testing.random_programs import assert_same_result, random_func
from loom.transform.rewrite_unsafe_select import RewriteUnsafeSelect, rewrite_unsafe_select

A = loom.decl_buffer((8,), "int32", name="A")
B = loom.decl_buffer((8,), "int32", name="B")


def shifted(i):
    """``B[i] = select(i > 0, A[i - 1], 0)``: the load is out of bounds when not taken at i = 0."""
    return PrimFunc([A.data, B.data], For(i, 0, 8, "serial", BufferStore(B, loom.select(i > 0, A[i - 1], 0), [i])),
                    buffer_map={A.data: A, B.data: B})


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_keep_their_result(seed):
    f, make_args = random_func(seed)
    g = RewriteUnsafeSelect()(f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_select_over_load_becomes_if_then_else():
    """The rewritten expression is a tir.if_then_else call with the same operands."""
    i = loom.var("i")
    got = rewrite_unsafe_select(loom.select(i > 0, A[i - 1], 0))
    want = loom.ir.Call("int32", loom.Op.get("tir.if_then_else"), [i > 0, A[i - 1], loom.const(0)])
    loom.assert_structural_equal(got, want)


def test_arithmetic_select_is_kept():
    """A select without loads is safe to evaluate on both sides and stays a select."""
    i = loom.var("i")
    e = loom.select(i > 0, i * 2, i - 1)
    assert rewrite_unsafe_select(e) is e


def test_rewrite_makes_the_out_of_bounds_side_unevaluated():
    """Before: the untaken load faults in the interpreter; after: the program runs."""
    f = shifted(loom.var("i"))
    a, b = np.arange(8, dtype="int32"), np.zeros(8, "int32")
    with pytest.raises(OutOfBoundsError):
        evaluate(f, a, b)
    evaluate(RewriteUnsafeSelect()(f), a, b)
    np.testing.assert_array_equal(b, [0, 0, 1, 2, 3, 4, 5, 6])


def test_nested_selects_rewrite_inner_first():
    """An unsafe select inside a safe one makes the outer one unsafe too."""
    i = loom.var("i")
    inner = loom.select(i < 7, A[i + 1], 0)
    got = rewrite_unsafe_select(loom.select(i > 2, inner, 5))
    calls = loom.ir.collect(got, lambda n: isinstance(n, loom.ir.Call))
    assert len(calls) == 2 and not loom.ir.collect(got, lambda n: isinstance(n, loom.ir.Select))
