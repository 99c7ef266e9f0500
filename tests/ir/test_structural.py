"""structural_equal / structural_hash: renaming at binding sites, free vars, buffers."""

import pytest

import loom
from loom.ir import (
    Allocate, BufferStore, Evaluate, For, IntImm, Let, LetStmt, PrimFunc, Var, decl_buffer, seq,
)
from loom.ir.structural import StructuralMismatch


def _loop(n=8, name="i"):
    A = decl_buffer((16,), "float32", name="A")
    i = loom.var(name)
    return A, For(i, 0, n, "serial", BufferStore(A, A[i] + 1.0, [i]))


def _func(name="A", extent=8):
    n = loom.var("n")
    A = decl_buffer((n,), "float32", name=name)
    i = loom.var("i")
    body = For(i, 0, n, "serial", BufferStore(A, A[i] * 2.0, [i]))
    return PrimFunc([A.data, n], body, buffer_map={A.data: A})


def test_loop_vars_equal_up_to_renaming():
    A = decl_buffer((16,), "float32", name="A")
    i, j = loom.var("i"), loom.var("j")
    a = For(i, 0, 8, "serial", BufferStore(A, A[i] + 1.0, [i]))
    b = For(j, 0, 8, "serial", BufferStore(A, A[j] + 1.0, [j]))
    assert loom.structural_equal(a, b)
    assert loom.structural_hash(a) == loom.structural_hash(b)


def test_loop_var_use_must_follow_binding():
    A = decl_buffer((16,), "float32", name="A")
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    a = For(i, 0, 8, "serial", For(j, 0, 8, "serial", BufferStore(A, A[i] + 1.0, [j])))
    b = For(i, 0, 8, "serial", For(k, 0, 8, "serial", BufferStore(A, A[k] + 1.0, [i])))
    assert not loom.structural_equal(a, b)


def test_free_vars_compare_by_identity_unless_mapped():
    x, y = loom.var("x"), loom.var("y")
    assert loom.structural_equal(x + 1, x + 1)
    assert not loom.structural_equal(x + 1, y + 1)
    assert loom.structural_equal(x + 1, y + 1, map_free_vars=True)
    assert loom.structural_hash(x + 1, map_free_vars=True) == loom.structural_hash(y + 1, map_free_vars=True)


def test_mapped_free_vars_must_be_consistent():
    x, y = loom.var("x"), loom.var("y")
    assert not loom.structural_equal(x + x, x + y, map_free_vars=True)
    assert not loom.structural_equal(x + y, x + x, map_free_vars=True)


def test_dtype_and_constant_differences():
    x = loom.var("x")
    assert not loom.structural_equal(x + 1, x + 2)
    assert not loom.structural_equal(loom.var("a", "int32"), loom.var("b", "int64"), map_free_vars=True)
    assert not loom.structural_equal(loom.const(1, "int32"), loom.const(1, "int64"))
    assert not loom.structural_equal(loom.const(1.0), loom.const(1, "int32"))
    assert loom.structural_equal(loom.const(float("nan")), loom.const(float("nan")))


def test_let_binding():
    x, y = loom.var("x"), loom.var("y")
    z = loom.var("z")
    assert loom.structural_equal(Let(x, z + 1, x * 2), Let(y, z + 1, y * 2))
    assert not loom.structural_equal(Let(x, z + 1, x * 2), Let(y, z + 1, z * 2))


def test_functions_equal_with_fresh_params_and_shape_vars():
    assert loom.structural_equal(_func(), _func())
    assert loom.structural_hash(_func()) == loom.structural_hash(_func())
    assert loom.structural_equal(_func("A"), _func("B")), "buffer names are hints"


def test_functions_differ_in_body():
    f, g = _func(), _func()
    g = g.with_(body=For(loom.var("i"), 0, 4, "serial", Evaluate(IntImm("int32", 0))))
    assert not loom.structural_equal(f, g)


def test_allocate_binds_buffer_var():
    def make():
        buf_var = loom.var("tmp", "handle")
        B = decl_buffer((4,), "float32", name="tmp", data=buf_var)
        return Allocate(buf_var, "float32", [4], True, BufferStore(B, loom.const(0.0), [0]))

    assert loom.structural_equal(make(), make())
    assert loom.structural_hash(make()) == loom.structural_hash(make())


def test_sequences_and_attrs():
    _, a = _loop()
    assert not loom.structural_equal(seq(a, a), seq(a))
    f = _func()
    assert not loom.structural_equal(f.with_attr("k", 1), f.with_attr("k", 2))
    assert loom.structural_equal(f.with_attr("k", 1).with_attr("j", 2), f.with_attr("j", 2).with_attr("k", 1))


def test_let_stmt_and_shared_subtrees():
    x = loom.var("x")
    e = x * 3
    a = LetStmt(x, loom.const(1), Evaluate(e + e))
    y = loom.var("y")
    b = LetStmt(y, loom.const(1), Evaluate(y * 3 + y * 3))
    assert loom.structural_equal(a, b)


def test_assert_structural_equal_reports_path():
    x = loom.var("x")
    with pytest.raises(StructuralMismatch) as info:
        loom.assert_structural_equal(x + 1, x + 2)
    assert ".b.value" in str(info.value)
    assert isinstance(info.value, loom.LoomError)


def test_deep_trees_do_not_overflow():
    x = loom.var("x")
    e = x
    for k in range(3000):
        e = e + k
    assert loom.structural_equal(e, e)
    assert isinstance(loom.structural_hash(e), int)


def test_var_vs_sizevar_differ():
    assert not loom.structural_equal(Var("n"), loom.size_var("n"), map_free_vars=True)
