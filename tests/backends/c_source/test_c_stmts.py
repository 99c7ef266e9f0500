"""Statements rendered to C agree with the interpreter: loops, allocations, asserts, vectors."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.function import PrimFunc

from c_helpers import check_against_interp, run_c


def func(buffers: list, body: S.Stmt, scalars: tuple = (), noalias: bool = False) -> PrimFunc:
    attrs = {"tir.noalias": True} if noalias else {}
    return PrimFunc([*[b.data for b in buffers], *scalars], body, buffer_map={b.data: b for b in buffers},
                    attrs=attrs)


def handle(name: str) -> E.Var:
    return loom.var(name, "handle")


@pytest.mark.parametrize("kind", ["serial", "unrolled", "parallel", "vectorized"])
@pytest.mark.parametrize("openmp", [False, True])
def test_every_loop_kind(kind: str, openmp: bool) -> None:
    """All loop kinds compute the same; parallel ones run under OpenMP when it is on."""
    A = loom.decl_buffer((64,), "float32", name="A")
    B = loom.decl_buffer((64,), "float32", name="B")
    i = loom.var("i")
    loop = S.For(i, 2, 60, kind, S.BufferStore(B, A[i] * 2.0 + 1.0, [i]))
    check_against_interp(func([A, B], loop, noalias=True), np.arange(64, dtype="float32"),
                         np.zeros(64, "float32"), openmp=openmp)


def test_while_let_and_if_then_else() -> None:
    """Collatz steps: a while loop whose state lives in a one-element stack array."""
    A = loom.decl_buffer((8,), "int32", name="A")
    i, t, x = loom.var("i"), handle("t"), loom.var("x")
    T = loom.decl_buffer((1,), "int32", name="T", data=t)
    cur = T[0]
    step = S.LetStmt(x, cur, S.IfThenElse(loom.floormod(x, 2) == 0, S.BufferStore(T, loom.floordiv(x, 2), [0]),
                                          S.BufferStore(T, x * 3 + 1, [0])))
    body = S.seq(S.BufferStore(T, A[i], [0]), S.BufferStore(A, 0, [i]),
                 S.While(T[0] != 1, S.seq(step, S.BufferStore(A, A[i] + 1, [i]))))
    loop = S.For(i, 0, 8, "serial", S.Allocate(t, "int32", [1], True, body))
    a = check_against_interp(func([A], loop), np.arange(1, 9, dtype="int32"))[0]
    assert list(a) == [0, 1, 7, 2, 5, 8, 16, 3]


@pytest.mark.parametrize("openmp", [False, True])
@pytest.mark.parametrize("size", [16, 100000])
def test_allocations_on_the_stack_and_the_heap(size: int, openmp: bool) -> None:
    """Small constant allocations are stack arrays, large ones heap memory; both per parallel iteration."""
    A = loom.decl_buffer((4, size), "float32", name="A")
    i, j, k, t = loom.var("i"), loom.var("j"), loom.var("k"), handle("tmp")
    T = loom.decl_buffer((size,), "float32", name="tmp", data=t)
    body = S.seq(S.For(j, 0, size, "serial", S.BufferStore(T, A[i, j] * 3.0, [j])),
                 S.For(k, 0, size, "serial", S.BufferStore(A, T[size - 1 - k], [i, k])))
    loop = S.For(i, 0, 4, "parallel", S.Allocate(t, "float32", [size], True, body))
    a = np.random.default_rng(0).standard_normal((4, size)).astype("float32")
    check_against_interp(func([A], loop), a, openmp=openmp)


def test_symbolic_allocation_and_shapes() -> None:
    """A heap buffer sized by a shape variable; N-d buffers with symbolic strides."""
    n = loom.var("n")
    A = loom.decl_buffer((n, 3), "int64", name="A")
    i, j, t = loom.var("i"), loom.var("j"), handle("acc")
    T = loom.decl_buffer((n,), "int64", name="acc", data=t)
    body = S.Allocate(t, "int64", [n], True, S.seq(
        S.For(i, 0, n, "serial", S.BufferStore(T, A[i, 0] + A[i, 1] * A[i, 2], [i])),
        S.For(j, 0, n, "serial", S.BufferStore(A, T[n - 1 - j], [j, 0]))))
    a = np.arange(3 * 37, dtype="int64").reshape(37, 3) * (1 << 30)
    check_against_interp(func([A], body), a)


def test_strided_buffers_and_elem_offset() -> None:
    """Buffer semantics: explicit strides and an element offset flatten the index."""
    m, s0, off = loom.var("m"), loom.var("s0"), loom.var("off")
    A = loom.decl_buffer((m, 2), "float64", name="A", strides=[s0, 1], elem_offset=off)
    B = loom.decl_buffer((m, 2), "float64", name="B")
    i, j = loom.var("i"), loom.var("j")
    body = S.For(i, 0, m, "serial", S.For(j, 0, 2, "serial", S.BufferStore(B, A[i, j] - 1.0, [i, j])))
    base = np.arange(60, dtype="float64").reshape(10, 6)
    view = base[1:, 2:4]
    check_against_interp(func([A, B], body), view, np.zeros((9, 2)))


def test_failing_assert_returns_minus_one_with_its_message() -> None:
    A = loom.decl_buffer((4,), "int32", name="A")
    n = loom.var("n")
    body = S.AssertStmt(n < 4, "n must be below 4", S.BufferStore(A, n, [n]))
    f = func([A], body, scalars=(n,))
    a = np.zeros(4, "int32")
    assert run_c(f, a, 2) == (0, None) and a[2] == 2
    assert run_c(f, a, 9) == (-1, "n must be below 4")


def test_assert_inside_heap_allocation_and_parallel_loop() -> None:
    """An assert under a heap allocation frees it; its parallel loop runs serially."""
    A = loom.decl_buffer((8,), "int32", name="A")
    n, i, t = loom.var("n"), loom.var("i"), handle("big")
    T = loom.decl_buffer((n,), "int32", name="big", data=t)
    body = S.For(i, 0, 8, "parallel", S.Allocate(t, "int32", [n], True, S.AssertStmt(
        A[i] < 100, 'A[i] "too big"', S.seq(S.BufferStore(T, A[i], [0]), S.BufferStore(A, T[0] + 1, [i])))))
    f = func([A], body, scalars=(n,))
    a = np.arange(8, dtype="int32")
    assert run_c(f, a, 5, openmp=True) == (0, None) and list(a) == list(range(1, 9))
    a[5] = 500
    assert run_c(f, a, 5, openmp=True) == (-1, 'A[i] "too big"')


def test_thread_extent_runs_as_a_loop() -> None:
    A = loom.decl_buffer((32,), "float32", name="A")
    tx = E.IterVar(E.Range(loom.const(0), loom.const(32)), loom.var("threadIdx.x"), "thread_index", "threadIdx.x")
    body = S.AttrStmt(tx, "thread_extent", 32, S.BufferStore(A, A[tx.var] + 1.0, [tx.var]))
    check_against_interp(func([A], body), np.arange(32, dtype="float32"))


@pytest.mark.parametrize("stride", [1, 2, -1])
def test_vector_gather_scatter(stride: int) -> None:
    """Ramps of any stride load and store lane by lane; unit stride uses one vector access."""
    A = loom.decl_buffer((32,), "float32", name="A")
    B = loom.decl_buffer((32,), "float32", name="B")
    i = loom.var("i")
    start = i * 8 + (7 if stride < 0 else 0)
    src = E.Ramp(start, loom.const(stride), 4) if stride != 2 else E.Ramp(i * 8, loom.const(2), 4)
    dst = E.Ramp(i * 4, loom.const(1), 4)
    idx = E.Ramp(i * 8, loom.const(2), 4)
    body = S.seq(S.BufferStore(B, E.BufferLoad(A, [src]) + E.Broadcast(loom.const(1.0, "float32"), 4), [dst]),
                 S.BufferStore(B, E.BufferLoad(A, [dst]), [idx + E.Broadcast(loom.const(1), 4)]))
    check_against_interp(func([A, B], S.For(i, 0, 4, "serial", body)), np.arange(32, dtype="float32"),
                         np.zeros(32, "float32"))


def test_vector_buffer_dtype_and_pointer_casts() -> None:
    """A buffer viewed with another element type reads through a cast pointer."""
    A = loom.decl_buffer((8,), "float32", name="A")
    Ai = loom.decl_buffer((8,), "int32", name="Ai", data=A.data)
    Y = loom.decl_buffer((8,), "int32", name="Y")
    i = loom.var("i")
    f = func([A, Y], S.For(i, 0, 8, "serial", S.BufferStore(Y, Ai[i], [i])))
    a = np.linspace(-2, 2, 8).astype("float32")
    y = check_against_interp(f, a, np.zeros(8, "int32"))[1]
    assert (y == a.view("int32")).all()


def test_copied_bodies_redeclare_in_blocks_of_their_own() -> None:
    """The same LetStmt/Allocate twice in one sequence (as unrolling copies them) still compiles."""
    A = loom.decl_buffer((4,), "int32", name="A")
    x, t = loom.var("x"), handle("t")
    T = loom.decl_buffer((1,), "int32", name="t", data=t)
    one = S.LetStmt(x, A[0] + 1, S.Allocate(t, "int32", [1], True, S.seq(
        S.BufferStore(T, x * 2, [0]), S.BufferStore(A, T[0], [0]))))
    a = check_against_interp(func([A], S.seq(one, one)), np.array([1, 0, 0, 0], "int32"))[0]
    assert a[0] == ((1 + 1) * 2 + 1) * 2
