"""Small parallel loops run on one thread; loops with enough work (or unknown work) use the team."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.codegen.parallel_work import PARALLEL_GRAIN, min_iterations_per_thread, work_per_iteration
from loom.ir import expr as E
from loom.ir import BufferStore, Evaluate, For, IfThenElse, SeqStmt, While
from loom.ir.intrin import call_packed

TARGETS = [t for t in ("llvm", "c") if t in loom.target.list_kinds()]


def _thread_ids(target: str, n: int, lanes: int = 1) -> np.ndarray:
    """``T[i]`` = the OpenMP thread that ran iteration ``i // lanes`` of a parallel loop.

    The thread id is a pure extern call, which the work count sees as one element per store.
    """
    A = loom.placeholder((n,), "int32", name="A")
    T = loom.compute((n,), lambda i: loom.call_pure_extern("int32", "omp_get_thread_num") + A[i], name="T")
    s = loom.create_schedule(T.op)
    outer, inner = s[T].split(T.op.axis[0], factor=lanes)
    s[T].parallel(outer)
    f = loom.build(s, [A, T], target=target, name="thread_ids")
    out = np.full(n, -1, "int32")
    f(np.zeros(n, "int32"), out)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_a_small_loop_runs_on_the_calling_thread(monkeypatch, target):
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")
    assert set(_thread_ids(target, 4096).tolist()) == {0}
    assert set(_thread_ids(target, 4096, lanes=8).tolist()) == {0}


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_with_enough_work_per_thread_uses_the_team(monkeypatch, target):
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")
    ids = _thread_ids(target, 2 * PARALLEL_GRAIN, lanes=16)
    assert ids.tolist() == [0] * PARALLEL_GRAIN + [1] * PARALLEL_GRAIN
    # Just under two threads' worth: one thread.
    assert set(_thread_ids(target, 2 * PARALLEL_GRAIN - 16, lanes=16).tolist()) == {0}


def _buffer():
    return loom.decl_buffer((1 << 20,), "float32", name="A")


def test_work_counts_stores_times_loop_extents():
    A = _buffer()
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    store = BufferStore(A, loom.const(1.0), [i])
    vector = BufferStore(A, E.Broadcast(loom.const(1.0, "float32"), 8), [E.Ramp(i, 1, 8)])
    assert work_per_iteration(store) == 1
    assert work_per_iteration(vector) == 8
    assert work_per_iteration(For(j, 0, 4, "serial", For(k, 0, 3, "serial", store))) == 12
    assert work_per_iteration(SeqStmt([store, vector])) == 9
    assert work_per_iteration(IfThenElse(i > 2, store, vector)) == 9
    assert work_per_iteration(For(j, 0, 4, "serial", Evaluate(loom.const(0)))) == 0
    assert min_iterations_per_thread(For(j, 0, 4, "serial", vector)) == PARALLEL_GRAIN // 32


def test_unknown_work_keeps_every_thread():
    A = _buffer()
    i, j, n = loom.var("i"), loom.var("j"), loom.var("n")
    store = BufferStore(A, loom.const(1.0), [i])
    assert work_per_iteration(For(j, 0, n, "serial", store)) is None  # a symbolic inner extent
    assert work_per_iteration(While(i < 3, store)) is None
    assert work_per_iteration(Evaluate(call_packed("f", i))) is None
    assert work_per_iteration(BufferStore(A, loom.call_extern("float32", "blas_thing", i), [i])) is None
    assert work_per_iteration(SeqStmt([store, Evaluate(call_packed("f", i))])) is None
    assert min_iterations_per_thread(Evaluate(call_packed("f", i))) == 1
