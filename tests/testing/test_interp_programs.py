"""Whole programs and every statement kind on the reference interpreter."""

import numpy as np
import pytest

import loom
from loom.ir import (
    Allocate, AssertStmt, AttrStmt, BufferStore, Evaluate, For, IfThenElse, IRModule, IterVar, Let,
    LetStmt, Range, SeqStmt, While, seq,
)
from loom.ir import expr as E
from loom.testing import AssertionFailed, Interpreter, InterpreterError, evaluate

from interp_helpers import prim

T = E.IntImm("bool", 1)


def _matmul(n, dtype):
    A, B, C = (loom.decl_buffer((n, n), dtype, name=x) for x in "ABC")
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    zero = loom.const(0, dtype)
    update = BufferStore(C, C[i, j] + A[i, k] * B[k, j], [i, j])
    body = For(i, 0, n, "serial", For(j, 0, n, "serial", seq(BufferStore(C, zero, [i, j]), For(k, 0, n, "serial", update))))
    return prim(body, A, B, C, name="matmul")


def test_vector_add_with_symbolic_length():
    """C = A + B over a length bound from the arrays."""
    n = loom.size_var("n")
    A, B, C = (loom.decl_buffer((n,), "float32", name=x) for x in "ABC")
    i = loom.var("i")
    f = prim(For(i, 0, n, "serial", BufferStore(C, A[i] + B[i], [i])), A, B, C)
    rng = np.random.default_rng(0)
    for size in (1, 7, 33):
        a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
        c = np.zeros(size, np.float32)
        assert evaluate(f, a, b, c) is None
        np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_matmul_loop_nest_matches_numpy(dtype):
    """A 3-deep loop nest computes the matrix product (ints exactly)."""
    rng = np.random.default_rng(1)
    a = rng.integers(-9, 9, (16, 16)).astype(dtype)
    b = rng.integers(-9, 9, (16, 16)).astype(dtype)
    c = np.full((16, 16), 7, dtype)
    evaluate(_matmul(16, dtype), a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_reduction_with_allocated_accumulator():
    """Row sums accumulate in an Allocate'd float64 scalar, then store as float32."""
    A = loom.decl_buffer((4, 6), "float32", name="A")
    B = loom.decl_buffer((4,), "float32", name="B")
    acc_ptr = loom.var("acc", "handle")
    acc = loom.decl_buffer((1,), "float64", name="acc", data=acc_ptr)
    i, j = loom.var("i"), loom.var("j")
    body = For(i, 0, 4, "serial", Allocate(acc_ptr, "float64", [1], T, seq(
        BufferStore(acc, loom.const(0.0, "float64"), [0]),
        For(j, 0, 6, "serial", BufferStore(acc, acc[0] + E.Cast("float64", A[i, j]), [0])),
        BufferStore(B, E.Cast("float32", acc[0]), [i]),
    )))
    a = np.arange(24, dtype=np.float32).reshape(4, 6) / 3
    b = np.zeros(4, np.float32)
    evaluate(prim(body, A, B), a, b)
    np.testing.assert_array_equal(b, a.astype(np.float64).sum(axis=1).astype(np.float32))


@pytest.mark.parametrize("dtype, pattern", [
    ("float32", np.nan), ("float16", np.nan), ("bfloat16", np.nan), ("int32", 0x5A5A5A5A),
    ("uint8", 0x5A), ("int64", 0x5A5A5A5A5A5A5A5A), ("bool", True),
])
def test_allocate_fills_a_fixed_garbage_pattern(dtype, pattern):
    """Reading an allocation before writing it gives a recognisable, deterministic value."""
    ptr = loom.var("tmp", "handle")
    tmp = loom.decl_buffer((3,), dtype, name="tmp", data=ptr)
    out = loom.decl_buffer((3,), dtype, name="out")
    i = loom.var("i")
    body = Allocate(ptr, dtype, [3], T, For(i, 0, 3, "serial", BufferStore(out, tmp[i], [i])))
    o = np.zeros(3, loom.DataType.of(dtype).numpy())
    evaluate(prim(body, out), o)
    np.testing.assert_array_equal(o.astype(np.float64), np.full(3, pattern, dtype=np.float64))


def test_allocate_with_false_condition_has_no_memory():
    """An Allocate whose condition is false provides no storage: any access is out of bounds."""
    ptr = loom.var("tmp", "handle")
    tmp = loom.decl_buffer((2,), "int32", name="tmp", data=ptr)
    body = Allocate(ptr, "int32", [2], E.IntImm("bool", 0), BufferStore(tmp, loom.const(1), [0]))
    with pytest.raises(loom.testing.OutOfBoundsError, match="0 elements"):
        evaluate(prim(body), check_dims=False)


def test_let_expression_and_let_statement():
    """Let binds inside an expression; LetStmt binds for a statement body."""
    A = loom.decl_buffer((1,), "int32", name="A")
    x, y = loom.var("x"), loom.var("y")
    body = LetStmt(x, A[0] * 3, BufferStore(A, Let(y, x + 1, y * y) + x, [0]))
    a = np.array([4], np.int32)
    evaluate(prim(body, A), a)
    assert a[0] == 13 * 13 + 12


def test_while_loop_counts_collatz_steps():
    """A While loop with a data-dependent trip count."""
    A = loom.decl_buffer((2,), "int32", name="A")  # A[0] = value, A[1] = steps
    v = A[0]
    step = E.Select(E.EQ(loom.floormod(v, 2), loom.const(0)), loom.floordiv(v, 2), v * 3 + 1)
    body = While(E.NE(A[0], loom.const(1)), seq(BufferStore(A, step, [0]), BufferStore(A, A[1] + 1, [1])))
    a = np.array([27, 0], np.int32)
    evaluate(prim(body, A), a)
    assert a.tolist() == [1, 111]


def test_while_loop_iteration_cap_stops_a_runaway_loop():
    """An endless While loop raises once it passes max_while_iterations."""
    A = loom.decl_buffer((1,), "int32", name="A")
    body = While(E.GE(A[0], loom.const(0)), BufferStore(A, A[0] + 1, [0]))
    with pytest.raises(InterpreterError, match="more than 50 iterations"):
        evaluate(prim(body, A), np.zeros(1, np.int32), max_while_iterations=50)


def test_if_then_else_takes_each_branch():
    """IfThenElse runs the then branch or the else branch; without else, nothing."""
    A = loom.decl_buffer((6,), "int32", name="A")
    i = loom.var("i")
    with_else = IfThenElse(E.LT(i, loom.const(3)), BufferStore(A, i * 10, [i]), BufferStore(A, -i, [i]))
    no_else = IfThenElse(E.EQ(i, loom.const(5)), BufferStore(A, loom.const(99), [i]))
    a = np.zeros(6, np.int32)
    evaluate(prim(For(i, 0, 6, "serial", seq(with_else, no_else)), A), a)
    assert a.tolist() == [0, 10, 20, -3, -4, 99]


def test_assert_stmt_passes_or_fails_with_its_message():
    """A false AssertStmt raises AssertionFailed carrying the message; a true one runs the body."""
    n = loom.var("n")
    A = loom.decl_buffer((1,), "int32", name="A")
    body = AssertStmt(E.GT(n, loom.const(0)), "n must be positive", BufferStore(A, n, [0]))
    f = prim(body, n, A, name="checked")
    a = np.zeros(1, np.int32)
    evaluate(f, 5, a)
    assert a[0] == 5
    with pytest.raises(AssertionFailed, match="checked: assertion failed: n must be positive") as info:
        evaluate(f, 0, a)
    assert info.value.message == "n must be positive"
    assert a[0] == 5


@pytest.mark.parametrize("kind", ["serial", "unrolled", "parallel", "vectorized", "thread_binding"])
def test_every_loop_kind_runs_serially_in_order(kind):
    """Each iteration sees the previous one's store, whatever the loop kind."""
    A = loom.decl_buffer((8,), "int32", name="A")
    i = loom.var("i")
    tag = "threadIdx.x" if kind == "thread_binding" else ""
    loop = For(i, 1, 7, kind, BufferStore(A, A[i - 1] * 2 + i, [i]), thread_tag=tag)
    a = np.zeros(8, np.int32)
    a[0] = 1
    evaluate(prim(loop, A), a)
    expect = [1]
    for k in range(1, 8):  # min 1, extent 7
        expect.append(expect[-1] * 2 + k)
    assert a.tolist() == expect


def test_thread_extent_attr_iterates_its_thread_variable():
    """A classic thread_extent AttrStmt runs its body once per thread index."""
    A = loom.decl_buffer((4,), "int32", name="A")
    tx = loom.var("threadIdx.x")
    iv = IterVar(Range.from_min_extent(0, 4), tx, "thread_index", "threadIdx.x")
    body = AttrStmt(iv, "thread_extent", 4, BufferStore(A, tx * tx, [tx]))
    a = np.zeros(4, np.int32)
    evaluate(prim(body, A), a)
    assert a.tolist() == [0, 1, 4, 9]


def test_other_attr_stmts_are_transparent():
    """A pragma AttrStmt just runs its body once."""
    A = loom.decl_buffer((1,), "int32", name="A")
    body = AttrStmt(None, "pragma_unroll", 1, BufferStore(A, A[0] + 1, [0]))
    a = np.zeros(1, np.int32)
    evaluate(prim(body, A), a)
    assert a[0] == 1


def test_long_seq_stmt_runs_in_order():
    """A SeqStmt longer than the unrolled form still runs every statement in order."""
    A = loom.decl_buffer((1,), "int64", name="A")
    stmts = [BufferStore(A, A[0] * 3 + k, [0]) for k in range(40)]
    a = np.zeros(1, np.int64)
    evaluate(prim(SeqStmt(stmts), A), a)
    expect = 0
    for k in range(40):
        expect = (expect * 3 + k + (1 << 63)) % (1 << 64) - (1 << 63)  # int64 wraps
    assert int(a[0]) == expect


def test_evaluate_of_a_pure_expression_is_a_no_op():
    """Evaluate of a constant or a variable does nothing."""
    n = loom.var("n")
    evaluate(prim(seq(Evaluate(loom.const(0)), Evaluate(n)), n), 3)


def test_loop_var_overflow_is_reported():
    """A loop whose range leaves its variable's dtype is an error, not silent wrapping."""
    A = loom.decl_buffer((1,), "int8", name="A")
    i = loom.var("i", "int8")
    loop = For(i, loom.const(120, "int8"), loom.const(20, "int8"), "serial", BufferStore(A, i, [loom.const(0)]))
    with pytest.raises(InterpreterError, match="overflows its dtype int8"):
        evaluate(prim(loop, A), np.zeros(1, np.int8))


def test_free_variable_is_rejected_before_running():
    """A variable no parameter, loop or let binds is an error at compile time."""
    A = loom.decl_buffer((1,), "int32", name="A")
    ghost = loom.var("ghost")
    with pytest.raises(loom.LoomValueError, match="variable ghost"):
        Interpreter(prim(BufferStore(A, ghost, [0]), A))


def test_variable_used_outside_its_let_is_rejected():
    """Scopes end: a LetStmt variable is unbound after its body."""
    A = loom.decl_buffer((1,), "int32", name="A")
    x = loom.var("x")
    body = seq(LetStmt(x, loom.const(1), BufferStore(A, x, [0])), BufferStore(A, x, [0]))
    with pytest.raises(loom.LoomValueError, match="variable x"):
        Interpreter(prim(body, A))


def test_interpreter_compiles_once_and_runs_many_times():
    """An Interpreter object runs again with other arrays and sizes."""
    n = loom.size_var("n")
    A = loom.decl_buffer((n,), "int32", name="A")
    i = loom.var("i")
    run = Interpreter(prim(For(i, 0, n, "serial", BufferStore(A, A[i] + i, [i])), A, name="bump"))
    assert run.name == "bump"
    for size in (3, 5):
        a = np.ones(size, np.int32)
        run(a)
        assert a.tolist() == [1 + k for k in range(size)]


def test_module_entry_selection():
    """An IRModule runs 'main', its only function, or the named entry."""
    A = loom.decl_buffer((1,), "int32", name="A")
    one = prim(BufferStore(A, loom.const(1), [0]), A)
    two = prim(BufferStore(A, loom.const(2), [0]), A)
    a = np.zeros(1, np.int32)
    evaluate(IRModule({"only": one}), a)
    assert a[0] == 1
    evaluate(IRModule({"main": two, "other": one}), a)
    assert a[0] == 2
    mod = IRModule({"f": one, "g": two})
    evaluate(mod, a, entry="f")
    assert a[0] == 1
    evaluate(mod["g"], a)
    assert a[0] == 2
    with pytest.raises(loom.LoomValueError, match="none is 'main'"):
        evaluate(mod, a)
    with pytest.raises(loom.LoomTypeError, match="PrimFunc or an IRModule"):
        evaluate("main", a)


def test_vector_element_buffer_in_an_allocation():
    """An Allocate of float32x4 elements holds whole vectors, one per index."""
    ptr = loom.var("v", "handle")
    V4 = loom.decl_buffer((2,), "float32x4", name="V4", data=ptr)
    A, C = loom.decl_buffer((8,), "float32", name="A"), loom.decl_buffer((8,), "float32", name="C")
    i = loom.var("i")
    twice = A.vload([i * 4], "float32x4") * loom.const(2.0, "float32x4")
    body = Allocate(ptr, "float32x4", [2], T, seq(
        For(i, 0, 2, "serial", BufferStore(V4, twice, [i])),
        For(i, 0, 2, "serial", C.vstore([i * 4], E.BufferLoad(V4, [i]))),
    ))
    a, c = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    evaluate(prim(body, A, C), a, c)
    np.testing.assert_array_equal(c, a * 2)


def test_rebinding_a_live_variable_restores_it_afterwards():
    """A Let or loop that rebinds the same Var inside its own scope does not clobber the outer value."""
    x, j = loom.var("x"), loom.var("j")
    R = loom.decl_buffer((5,), "int32", name="R")
    let = BufferStore(R, Let(x, loom.const(1), E.Add(Let(x, loom.const(5), x), x)), [4])
    loops = For(j, 0, 2, "serial", seq(
        For(j, 0, 3, "serial", BufferStore(R, j, [j + 1])),
        BufferStore(R, j, [j]),
    ))
    r = np.zeros(5, np.int32)
    evaluate(prim(seq(loops, let), R), r)
    assert r.tolist() == [0, 1, 1, 2, 6]


def test_deep_expression_chain():
    """A 3000-term left-nested sum (an unrolled reduction) compiles and runs."""
    A = loom.decl_buffer((1,), "int64", name="A")
    total = A[0]
    for k in range(3000):
        total = E.Add(total, loom.const(k, "int64"))
    a = np.ones(1, np.int64)
    evaluate(prim(BufferStore(A, total, [0]), A), a)
    assert a[0] == 1 + sum(range(3000))
