"""Simplify / CanonicalSimplify as passes."""

import pytest

import loom
from loom.ir import BufferStore, For, IfThenElse, PrimFunc
from loom.transform.simplify import CanonicalSimplify, Simplify
from random_programs import assert_same_result, random_func

A = loom.decl_buffer((16,), "int32", name="A")


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("factory", [Simplify, CanonicalSimplify])
def test_random_programs_keep_their_result(seed, factory):
    f, make_args = random_func(seed)
    g = factory()(f)
    loom.verify_well_formed(g)
    assert_same_result(f, g, make_args)


def test_loop_bounds_fold_guards_and_indices():
    """Inside ``for i in range(4)``, ``i < 4`` is true and ``(i*4 + 3) // 4`` is ``i``."""
    i = loom.var("i")
    before = For(i, 0, 4, "serial", IfThenElse(i < 4, BufferStore(A, loom.const(1), [loom.floordiv(i * 4 + 3, 4)])))
    want = For(i, 0, 4, "serial", BufferStore(A, loom.const(1), [i]))
    f = PrimFunc([A.data], before, buffer_map={A.data: A})
    loom.assert_structural_equal(Simplify()(f).body, want)
    assert Simplify().info.name == "Simplify" and CanonicalSimplify().info.name == "CanonicalSimplify"


def test_buffers_keep_their_identity():
    """Simplification never copies a buffer."""
    i = loom.var("i")
    f = PrimFunc([A.data], For(i, 0, 16, "serial", BufferStore(A, A[i] + 0 * i, [i])), buffer_map={A.data: A})
    g = Simplify()(f)
    assert g.body.body.buffer is A and g.body.body.value.buffer is A
