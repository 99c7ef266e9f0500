"""Statement-level simplification: loop ranges, lets and conditions as facts."""

import pytest

import loom
from loom.arith import Analyzer, simplify
from loom.ir import (
    Allocate, AssertStmt, AttrStmt, BufferStore, For, IfThenElse, IRModule, IterVar, LetStmt, PrimFunc, Range, seq,
)

fd, fm = loom.floordiv, loom.floormod
A = loom.decl_buffer((64,), "int32", name="A")
i, j, n = loom.var("i"), loom.var("j"), loom.var("n")


def store(value, index=None):
    return BufferStore(A, loom.ir.expr_ops.convert_expr(value), [i if index is None else index])


def text(*lines):
    return "\n".join(lines)


def test_loop_bounds_remove_a_condition():
    """Inside range(16), i < 16 always holds."""
    loop = For(i, 0, 16, "serial", IfThenElse(i < 16, store(1)))
    assert str(simplify(loop)) == text("for i in range(16):", "    A[i] = 1")


def test_loop_bounds_pick_the_else_branch():
    """Inside range(16), i >= 16 never holds."""
    loop = For(i, 0, 16, "serial", IfThenElse(i >= 16, store(1), store(2)))
    assert str(simplify(loop)) == text("for i in range(16):", "    A[i] = 2")


def test_symbolic_loop_extent():
    """Inside range(n), i < n holds even though n is unknown."""
    loop = For(i, 0, n, "serial", IfThenElse(i < n, store(fd(i, 1))))
    assert str(simplify(loop)) == text("for i in range(n):", "    A[i] = i")


def test_loop_with_offset():
    """range(4, 12): the index arithmetic folds with the loop's bounds."""
    loop = For(i, 4, 8, "serial", store(fd(i, 4) + fm(i, 4), fm(i, 16)))
    assert str(simplify(loop)) == text("for i in range(4, 12):", "    A[i] = i // 4 + i % 4")


def test_split_index_recombines():
    """(io * 4 + ii) // 4 and % 4 under the loop bounds."""
    io, ii = loom.var("io"), loom.var("ii")
    flat = io * 4 + ii
    body = BufferStore(A, fd(flat, 4) * 4 + fm(flat, 4), [fm(flat, 64)])
    nest = For(io, 0, 16, "serial", For(ii, 0, 4, "serial", body))
    assert str(simplify(nest)) == text(
        "for io in range(16):", "    for ii in range(4):", "        A[io * 4 + ii] = io * 4 + ii")


def test_then_branch_knows_its_condition():
    """In the then-branch i < 8; in the else-branch 8 <= i."""
    body = IfThenElse(i < 8, store(fd(i, 8)), store(fd(i, 8)))
    loop = For(i, 0, 16, "serial", body)
    assert str(simplify(loop)) == text(
        "for i in range(16):", "    if i < 8:", "        A[i] = 0", "    else:", "        A[i] = 1")


def test_let_value_bounds_reach_the_body():
    """v = i // 4 lies in [0, 3] inside range(16)."""
    v = loom.var("v")
    loop = For(i, 0, 16, "serial", LetStmt(v, fd(i, 4), IfThenElse(v < 4, store(v))))
    assert str(simplify(loop)) == text("for i in range(16):", "    v: int32 = i // 4", "    A[i] = v")


def test_thread_extent_binds_the_thread_index():
    """A threadIdx.x axis of extent 32 ranges over [0, 32)."""
    tx = loom.var("tx")
    iv = IterVar(Range.from_min_extent(0, 32), tx, "thread_index", "threadIdx.x")
    s = AttrStmt(iv, "thread_extent", loom.const(32), IfThenElse(tx < 32, store(fd(tx, 32), tx)))
    assert str(simplify(s)).splitlines()[1] == "    A[tx] = 0"


def test_assert_condition_is_a_fact_after_it():
    s = AssertStmt(n < 10, "n too big", IfThenElse(n < 10, store(1, 0)))
    assert str(simplify(s)) == text("assert n < 10, 'n too big'", "A[0] = 1")


def _scan_like(scope="global", condition=True):
    """``T = allocate([n + 1]); for i in range(n): if likely(i + 1 < n + 1): T[i + 1] = ...`` (a scan's guard)."""
    T = loom.decl_buffer((n + 1,), "int32", name="T")
    guard = IfThenElse(loom.likely(i + 1 < n + 1), BufferStore(T, T[i] + 1, [i + 1]))
    return Allocate(T.data, "int32", [n + 1], loom.const(condition, "bool"), For(i, 0, n, "serial", guard),
                    scope=scope)


def test_an_allocation_extent_is_not_negative_in_its_body():
    """Every backend fails on a negative extent before the body runs (the interpreter raises), so n + 1 >= 0
    there: n + 1 does not wrap, and i + 1 < n + 1 is i < n, which the loop says."""
    out = simplify(_scan_like())
    assert "if" not in str(out) and "T[i + 1] = T[i] + 1" in str(out)


@pytest.mark.parametrize("scope, condition", [("shared", True), ("global", False)])
def test_no_extent_fact_for_kernel_memory_or_an_allocation_that_may_not_happen(scope, condition):
    assert "if likely(i + 1 < n + 1)" in str(simplify(_scan_like(scope, condition)))


def test_an_offset_compared_with_a_constant_bounds_the_variable_modulo_wraparound():
    an = Analyzer()
    with an.constraint_scope(n + 1 >= 0):  # n = INT_MAX would wrap n + 1 to INT_MIN
        assert (an.const_int_bound(n).min_value, an.const_int_bound(n).max_value) == (-1, 2**31 - 2)
    with an.constraint_scope(n - 1 <= 5):  # n = INT_MIN would wrap n - 1 to INT_MAX
        assert (an.const_int_bound(n).min_value, an.const_int_bound(n).max_value) == (-2**31 + 1, 6)
    u = loom.var("u", "uint8")
    with an.constraint_scope(u + 10 <= 20):  # u in [0, 10] or [246, 255]: only the hull is known
        assert (an.const_int_bound(u).min_value, an.const_int_bound(u).max_value) == (0, 255)
    with an.constraint_scope(u + 10 == 3):  # only u = 249 wraps to 3
        assert (an.const_int_bound(u).min_value, an.const_int_bound(u).max_value) == (249, 249)


def test_loop_var_facts_end_with_the_loop():
    """The same Var reused by a second loop gets that loop's range."""
    first = For(i, 0, 4, "serial", IfThenElse(i < 4, store(1)))
    second = For(i, 0, 64, "serial", IfThenElse(i < 4, store(2)))
    out = simplify(seq(first, second))
    assert str(out) == text(
        "for i in range(4):", "    A[i] = 1", "for i in range(64):", "    if i < 4:", "        A[i] = 2")


def test_conditions_outside_loops_are_kept():
    s = IfThenElse(j < 4, store(1, j))
    assert simplify(s) is s


def test_floats_fold_constants_only():
    F = loom.decl_buffer((4,), "float32", name="F")
    f = loom.var("f", "float32")
    s = BufferStore(F, (f + 1.0) - 1.0 + loom.const(1.0) * loom.const(2.0), [0])
    assert str(simplify(s)) == "F[0] = f + 1.0 - 1.0 + 2.0"


def test_buffers_keep_their_identity():
    loop = For(i, 0, 16, "serial", store(A[fd(i, 16)] + 1))
    out = simplify(loop)
    assert out.body.buffer is A and out.body.value.a.buffer is A
    assert str(out.body.value) == "A[0] + 1"


def test_prim_func_and_module():
    func = PrimFunc([A.data], For(i, 0, 16, "serial", IfThenElse(i < 16, store(1))), buffer_map={A.data: A})
    out = simplify(func)
    assert isinstance(out, PrimFunc) and str(out.body) == text("for i in range(16):", "    A[i] = 1")
    mod = simplify(IRModule({"main": func}))
    assert str(mod["main"].body) == str(out.body)


def test_an_analyzer_can_be_shared():
    an = Analyzer()
    an.bind(n, Range.from_min_extent(0, 8))
    s = IfThenElse(n < 8, store(1, 0))
    assert str(simplify(s, an)) == "A[0] = 1"


def test_rejects_other_objects():
    with pytest.raises(loom.LoomTypeError, match="PrimExpr, Stmt, PrimFunc or IRModule"):
        simplify("i + 1")
