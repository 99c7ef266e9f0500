"""Parallel loops on the llvm target: OpenMP threads, thread counts, nesting, errors."""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import loom  # noqa: E402
from llvm_programs import run_python  # noqa: E402
from programs import blocked_matmul, matmul  # noqa: E402

_REGION_CALL = re.compile(r'call void @"?GOMP_parallel"?\(')


def _thread_ids(n: int):
    """``T[i]`` = the OpenMP thread that ran iteration ``i`` of a parallel loop."""
    A = loom.placeholder((n,), "int32", name="A")
    T = loom.compute((n,), lambda i: loom.call_extern("int32", "omp_get_thread_num") + A[i], name="T")
    s = loom.create_schedule(T.op)
    s[T].parallel(T.op.axis[0])
    f = loom.build(s, [A, T], target="llvm", name="thread_ids")
    out = np.full(n, -1, "int32")
    f(np.zeros(n, "int32"), out)
    return out


@pytest.mark.parametrize("threads, n, expected", [
    ("2", 8, [0] * 4 + [1] * 4),       # static schedule: contiguous halves
    ("1", 8, [0] * 8),
    ("3", 7, [0, 0, 0, 1, 1, 1, 2]),   # chunks of ceil(7 / 3)
    ("4", 3, [0, 1, 2]),               # never more threads than iterations
])
def test_loom_num_threads_sets_the_team(monkeypatch, threads, n, expected):
    monkeypatch.setenv("LOOM_NUM_THREADS", threads)
    np.testing.assert_array_equal(_thread_ids(n), expected)


def test_default_team_has_more_than_one_thread_on_a_multicore_host(monkeypatch):
    monkeypatch.delenv("LOOM_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    ids = _thread_ids(64)
    assert ids[0] == 0 and np.all(np.diff(ids) >= 0)  # contiguous chunks in thread order
    if loom.target.Target("llvm").attrs["num_cores"] > 1:
        assert len(set(ids.tolist())) > 1


def test_bad_loom_num_threads_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("LOOM_NUM_THREADS", "many")
    with pytest.raises(loom.LoomError, match="LOOM_NUM_THREADS.*'many'"):
        _thread_ids(4)


def _fused():
    A, B, C = matmul(23, 19, 11)
    s = loom.create_schedule(C.op)
    s[C].parallel(s[C].fuse(*C.op.axis))
    return s, [A, B, C]


def _nested():
    A, B, C = matmul(9, 21, 7)
    s = loom.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    s[C].parallel(C.op.axis[1])  # inside a parallel loop: runs serially on its thread
    return s, [A, B, C]


def _row_reductions():
    A = loom.placeholder((13, 300), name="A")
    k = loom.reduce_axis((0, 300), name="k")
    M = loom.compute((13,), lambda i: loom.max(A[i, k], axis=k), name="M")
    s = loom.create_schedule(M.op)
    s[M].parallel(M.op.axis[0])
    return s, [A, M]


def _compute_at(factor: int):
    """``B = A * 2`` computed per chunk of ``C = B + 1``: an allocation inside the parallel loop."""
    n = 4 * factor + 3
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = loom.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[B].compute_at(s[C], xo)
    s[C].parallel(xo)
    if factor % 8 == 0:
        s[C].vectorize(xi)
    return s, [A, C]


def _symbolic_int64():
    n = loom.var("n", "int64")
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[i] * 3.0 - 1.0, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].parallel(xo)
    s[B].vectorize(xi)
    return s, [A, B]


SCHEDULES = {
    "outer_parallel_inner_vectorized": lambda: blocked_matmul(37, 29, 23),
    "fused_parallel_axis": _fused,
    "nested_parallel": _nested,
    "parallel_with_reduction": _row_reductions,
    "allocation_in_parallel_loop": lambda: _compute_at(8),
    "heap_allocation_in_parallel_loop": lambda: _compute_at(20000),  # 80 KB: over the stack limit
}


def _numpy(name, arrays):
    if name == "parallel_with_reduction":
        return arrays[0].max(axis=1)
    if name.endswith("allocation_in_parallel_loop"):
        return arrays[0] * 2 + 1
    return arrays[0] @ arrays[1]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_parallel_schedules_match_numpy(monkeypatch, name):
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")
    s, args = SCHEDULES[name]()
    f = loom.build(s, args, target="llvm", name=name)
    rng = np.random.default_rng(7)
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in args[:-1]]
    out = np.full([int(d) for d in args[-1].shape], np.nan, "float32")
    f(*ins, out)
    np.testing.assert_allclose(out, _numpy(name, ins), rtol=1e-5, atol=1e-5)
    assert len(_REGION_CALL.findall(f.get_source("ll-raw"))) == 1  # one region: nested loops stay inside


def test_allocations_in_the_body_are_per_thread():
    """The buffer of a stage computed at a parallel loop lives in the outlined function (one per thread)."""
    for factor, site in [(8, "alloca"), (20000, "aligned_alloc")]:
        s, args = _compute_at(factor)
        raw = loom.build(s, args, target="llvm").get_source("ll-raw")
        body = raw[raw.index('.parallel.body"('):]
        body = body[:body.index("\n}")]
        assert site in body, f"no {site} in the outlined body of the factor {factor} schedule"


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 1000])
def test_symbolic_int64_extent(monkeypatch, size):
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")
    s, args = _symbolic_int64()
    f = loom.build(s, args, target="llvm")
    a = np.arange(size, dtype="float32")
    b = np.full(size, np.nan, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 3 - 1)


_FAILING = textwrap.dedent("""
    import sys, numpy as np, loom
    from loom.ir import AssertStmt, BufferStore, For, PrimFunc
    from loom.testing import AssertionFailed

    n = loom.var("n")
    A = loom.decl_buffer((n,), "float32", name="A")
    i = loom.var("i")
    check = AssertStmt(A[i] >= loom.const(0.0, "float32"), "A must be non-negative",
                       BufferStore(A, A[i] + 1.0, [i]))
    f = loom.build(PrimFunc([A.data], For(i, 0, n, "parallel", check), buffer_map={A.data: A},
                            attrs={"global_symbol": "bump"}), target="llvm")
    for bad in (0, 63, 64, 127):  # in either thread's chunk
        a = np.zeros(128, "float32"); a[bad] = -1
        try:
            f(a)
        except AssertionFailed as err:
            assert "A must be non-negative" in str(err) and err.function == "bump", err
        else:
            sys.exit(f"no error for a negative A[{bad}]")
    a = np.zeros(128, "float32")
    f(a); f(a)  # still usable after the failures
    assert (a == 2).all()

    X, Idx = loom.placeholder((8,), "int32", name="X"), loom.placeholder((8,), "int32", name="Idx")
    Y = loom.compute((8,), lambda j: X[Idx[j]], name="Y")
    s = loom.create_schedule(Y.op)
    s[Y].parallel(Y.op.axis[0])
    with loom.build_config(instrument_bound_checkers=True):
        g = loom.build(s, [X, Idx, Y], target="llvm", name="gather")
    y = np.zeros(8, "int32")
    g(np.arange(8, dtype="int32") * 3, np.arange(8, dtype="int32")[::-1].copy(), y)
    assert y.tolist() == [21, 18, 15, 12, 9, 6, 3, 0], y
    try:
        g(np.arange(8, dtype="int32"), np.array([0, 1, 2, 3, 4, 5, 6, 99], "int32"), y)
    except loom.LoomError as err:
        assert "out-of-bounds access to buffer X" in str(err), err
    else:
        sys.exit("no error for an out-of-bounds gather")
    print("survived")
""")


def test_failing_assert_in_a_parallel_body_raises_and_the_process_survives():
    assert run_python(_FAILING, env={"LOOM_NUM_THREADS": "2"}).strip() == "survived"


_FORK = textwrap.dedent("""
    import os, signal, sys, time, numpy as np, loom

    def thread_ids():
        A = loom.placeholder((16,), "int32", name="A")
        T = loom.compute((16,), lambda i: loom.call_extern("int32", "omp_get_thread_num") + A[i], name="T")
        s = loom.create_schedule(T.op)
        s[T].parallel(T.op.axis[0])
        return loom.build(s, [A, T], target="llvm")

    def run(f):
        out = np.full(16, -1, "int32")
        f(np.zeros(16, "int32"), out)
        return sorted(set(out.tolist()))

    f = thread_ids()
    assert run(f) == [0, 1]  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:  # libgomp's pool is gone here: regions must run on one thread, not wait for it
        os._exit(0 if run(f) == [0] and run(thread_ids()) == [0] else 3)
    for _ in range(600):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        sys.exit("the forked child hung in a parallel region")
    assert os.waitstatus_to_exitcode(status) == 0, status
    print("ok")
""")


def test_parallel_regions_run_serially_in_a_forked_child():
    assert run_python(_FORK, env={"LOOM_NUM_THREADS": "2"}).strip() == "ok"


def test_target_num_cores_is_the_default_thread_count(monkeypatch):
    import ctypes

    from loom.runtime.native_library import THREADS_SYMBOL

    monkeypatch.delenv("LOOM_NUM_THREADS", raising=False)
    s, args = blocked_matmul(8, 8, 8)
    m = loom.build(s, args, target="llvm -num_cores=1")
    assert ctypes.c_int32.from_address(m.jit.global_address(THREADS_SYMBOL)).value == 1
    monkeypatch.setenv("LOOM_NUM_THREADS", "2")  # the environment wins over the target
    m = loom.build(s, args, target="llvm -num_cores=1")
    assert ctypes.c_int32.from_address(m.jit.global_address(THREADS_SYMBOL)).value == 2
