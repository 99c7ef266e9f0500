"""Statement constructors, their validation, and seq() flattening."""

import pytest

import loom
from loom.errors import IRError, LoomTypeError
from loom.ir import expr as E
from loom.ir.stmt import (
    Allocate, AssertStmt, AttrStmt, BufferStore, Evaluate, For, ForKind, IfThenElse, LetStmt, SeqStmt,
    While, no_op, seq,
)


def _buf(shape=(8,), dtype="float32"):
    return loom.decl_buffer(shape, dtype, name="A")


def test_for_converts_python_bounds_and_kind():
    i = loom.var("i")
    loop = For(i, 2, 8, "unrolled", no_op())
    assert isinstance(loop.min, E.IntImm) and loop.min.value == 2 and loop.extent.value == 8
    assert loop.kind is ForKind.UNROLLED and loop.thread_tag == "" and loop.annotations == {}


def test_for_promotes_narrower_constant_bounds_to_the_loop_var_dtype():
    i = loom.var("i", "int64")
    loop = For(i, 0, loom.const(8, "int16"), "serial", no_op())
    assert loop.min.dtype == "int64" and loop.extent.dtype == "int64" and loop.extent.value == 8


def test_for_thread_binding_needs_a_tag():
    tx = loom.var("tx")
    assert For(tx, 0, 32, "thread_binding", no_op(), thread_tag="threadIdx.x").thread_tag == "threadIdx.x"
    with pytest.raises(IRError, match="thread_binding loop needs a thread_tag"):
        For(tx, 0, 32, "thread_binding", no_op())


@pytest.mark.parametrize("build, message", [
    (lambda i: For(i, loom.const(0, "int64"), 8, "serial", no_op()), "min is int64 but the loop var is int32"),
    (lambda i: For(i, 0, loom.var("n", "int64"), "serial", no_op()), "extent is int64"),
    (lambda i: For(i, 0, 8, "fast", no_op()), "unknown loop kind 'fast'"),
])
def test_for_rejects(build, message):
    with pytest.raises(IRError, match=message):
        build(loom.var("i"))


@pytest.mark.parametrize("build, message", [
    (lambda: For(loom.const(1), 0, 8, "serial", no_op()), "For.loop_var expects Var"),
    (lambda: For(loom.var("i"), 0, 8, "serial"), "For.body expects Stmt, got NoneType"),
])
def test_for_rejects_wrong_field_types(build, message):
    with pytest.raises(LoomTypeError, match=message):
        build()


def test_buffer_store():
    A = _buf()
    i = loom.var("i")
    s = BufferStore(A, 1.0, [i])
    assert s.value.dtype == "float32" and s.indices == (i,)
    vec = BufferStore(A, E.Broadcast(loom.const(0.0), 4), [E.Ramp(i, loom.const(1), 4)])
    assert vec.value.dtype == "float32x4"


@pytest.mark.parametrize("value, indices, message", [
    (lambda i: loom.const(1, "int32"), lambda i: [i], "value is int32, buffer element is float32"),
    (lambda i: loom.const(1.0), lambda i: [E.Ramp(i, loom.const(1), 4)], "buffer element is float32x4"),
    (lambda i: loom.const(1.0), lambda i: [i, i], "2 indices for 1 dimensions"),
    (lambda i: loom.const(1.0), lambda i: [loom.var("f", "float32")], "non-integer dtype float32"),
])
def test_buffer_store_rejects(value, indices, message):
    i = loom.var("i")
    with pytest.raises(IRError, match=message):
        BufferStore(_buf(), value(i), indices(i))


@pytest.mark.parametrize("build, what", [
    (lambda x: IfThenElse(x, no_op()), "IfThenElse condition must be a scalar bool, got int32"),
    (lambda x: IfThenElse(E.Broadcast(x > 0, 4), no_op()), "scalar bool, got boolx4"),
    (lambda x: While(x, no_op()), "While condition must be a scalar bool"),
    (lambda x: AssertStmt(x, "msg", no_op()), "AssertStmt condition must be bool"),
])
def test_conditions_must_be_bool(build, what):
    with pytest.raises(IRError, match=what):
        build(loom.var("x"))


def test_conditional_statements():
    x = loom.var("x")
    s = IfThenElse(x > 0, Evaluate(x), None)
    assert s.else_case is None
    a = AssertStmt(x > 0, "x must be positive", no_op())
    assert isinstance(a.message, E.StringImm) and a.message.value == "x must be positive"
    assert While(True, no_op()).condition.value == 1


def test_let_stmt():
    v = loom.var("v")
    s = LetStmt(v, 3, Evaluate(v))
    assert s.value.value == 3
    with pytest.raises(IRError, match="LetStmt v: var is int32 but value is float32"):
        LetStmt(v, 1.5, Evaluate(v))


def test_attr_stmt_converts_values():
    s = AttrStmt(None, "pragma_note", "hello", no_op())
    assert isinstance(s.value, E.StringImm)
    assert AttrStmt(loom.var("x"), "pragma_unroll", 4, no_op()).value.value == 4


def test_allocate():
    buf = loom.var("buf", "handle")
    s = Allocate(buf, "float16", [4, 8], True, no_op(), "shared")
    assert s.dtype == "float16" and [e.value for e in s.extents] == [4, 8] and s.scope == "shared"
    assert Allocate(buf, "int8", [1], True, no_op()).scope == "global"
    with pytest.raises(IRError, match="buffer_var must be a handle Var"):
        Allocate(loom.var("buf"), "int8", [4], True, no_op())


def test_evaluate_and_no_op():
    e = no_op()
    assert isinstance(e, Evaluate) and isinstance(e.value, E.IntImm) and e.value.value == 0
    assert Evaluate(5).value.value == 5


def test_seq_flattens_nested_sequences_and_drops_none():
    a, b, c, d = (Evaluate(loom.var(n)) for n in "abcd")
    s = seq(a, SeqStmt([b, SeqStmt([c])]), None, d)
    assert isinstance(s, SeqStmt)
    assert s.seq[0] is a and s.seq[1] is b and s.seq[3] is d
    assert len(s) == 4 and s[1] is b


def test_seq_of_one_or_none():
    a = Evaluate(loom.var("a"))
    assert seq(a) is a
    assert seq(None, a, None) is a
    empty = seq()
    assert isinstance(empty, Evaluate) and empty.value.value == 0
