"""Cross-thread reductions: the LowerThreadAllreduce pass, and reductions bound to threads end to end.

The pass is checked on hand-written functions for every thread count up to 33
(power of two or not) on the interpreter, which runs a block's threads together
and flags races; the schedules run on interp (shared memory, barriers, a tree),
llvm and c (threads one after another), each against numpy.
"""

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev
from loom.errors import LoomError, LoomValueError
from loom.ir import Allocate, AttrStmt, BufferStore, IfThenElse, PrimFunc, seq
from loom.ir.functor import post_order_visit
from loom.ir.reduce import CommReducer
from loom.testing import evaluate
from loom.transform.lower_thread_allreduce import LowerThreadAllreduce, thread_allreduce
from programs import argmax_reducer

TARGETS = ["interp", "llvm", "c"]


def _count(stmt, pred):
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if pred(n) else None)
    return len(found)


def _is_barrier(n):
    return isinstance(n, loom.ir.Call) and getattr(n.op, "name", "") == "tir.tvm_storage_sync"


def _block_sum(nthreads, groups=1, mode=None):
    """out[g] = 5 + sum of A[g, t] over the threads t with A[g, t] > 0.5, a block of groups x nthreads threads.

    The function as a cross-thread reduction lowers to it, or (``mode``) after LowerThreadAllreduce.
    """
    x, y = loom.var("x", "float32"), loom.var("y", "float32")
    add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
    A = loom.decl_buffer((groups, nthreads), "float32", name="A")
    out = loom.decl_buffer((groups,), "float32", name="out")
    R = loom.decl_buffer((1,), "float32", name="R", scope="local")
    tx = loom.thread_axis((0, nthreads), "threadIdx.x")
    ty = loom.thread_axis((0, groups), "threadIdx.y")
    v = A[ty.var, tx.var]
    red = thread_allreduce(add, [v], v > 0.5, [loom.const(5.0)], [R.data], [tx.var])
    store = AttrStmt(tx, "thread_extent", nthreads, IfThenElse(tx.var == 0, BufferStore(out, R[0], [ty.var])))
    body = Allocate(R.data, "float32", [1], True, seq(AttrStmt(tx, "thread_extent", nthreads, red), store), "local")
    body = AttrStmt(ty, "thread_extent", groups, body)
    f = PrimFunc([A.data, out.data], body, buffer_map={A.data: A, out.data: out}, attrs={"global_symbol": "block_sum"})
    return f if mode is None else LowerThreadAllreduce(mode)(f)


@pytest.mark.parametrize("nthreads", [1, 2, 3, 5, 7, 8, 12, 13, 16, 31, 32, 33])
@pytest.mark.parametrize("groups", [1, 3])
def test_allreduce_of_every_thread_count_on_the_interpreter(nthreads, groups):
    """The interpreter runs a block's threads together and flags any race between them."""
    a = np.random.default_rng(nthreads).random((groups, nthreads)).astype("float32")
    out = np.zeros(groups, "float32")
    evaluate(_block_sum(nthreads, groups, "gpu"), a, out)
    np.testing.assert_allclose(out, 5 + np.where(a > 0.5, a, 0).sum(1), rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("nthreads", [1, 6, 13])
def test_allreduce_built_for_each_target(target, nthreads):
    """``build`` lowers the call itself: shared memory and a tree on interp, an accumulation on llvm and c."""
    a = np.random.default_rng(nthreads).random((3, nthreads)).astype("float32")
    out = np.zeros(3, "float32")
    loom.build(_block_sum(nthreads, 3), target=target)(a, out)
    np.testing.assert_allclose(out, 5 + np.where(a > 0.5, a, 0).sum(1), rtol=1e-5)


def test_the_tree_halves_the_live_slots_with_a_barrier_per_step():
    f = _block_sum(13, 2, "gpu")
    shared = []
    post_order_visit(f.body, lambda n: shared.append(n) if isinstance(n, Allocate) and n.scope == "shared" else None)
    assert [int(e) for e in shared[0].extents] == [26]  # one slot per thread of the block
    assert _count(f.body, _is_barrier) == 5  # after staging, then steps 8 (5 slots), 4, 2, 1
    assert _count(_block_sum(13, mode="serial").body, _is_barrier) == 0


def test_allreduce_needs_constant_extents_and_its_threads_bound():
    x, y = loom.var("x", "float32"), loom.var("y", "float32")
    add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
    R = loom.decl_buffer((1,), "float32", name="R", scope="local")
    n = loom.var("n")
    tx = loom.thread_axis("threadIdx.x")
    red = thread_allreduce(add, [loom.const(1.0)], loom.const(True), [loom.const(0.0)], [R.data], [tx.var])
    f = PrimFunc([n], Allocate(R.data, "float32", [1], True, AttrStmt(tx, "thread_extent", n, red), "local"))
    with pytest.raises(LoomError, match="constant thread extents"):
        LowerThreadAllreduce("gpu")(f)
    LowerThreadAllreduce("serial")(f)  # threads that run one after another need no staging buffer
    g = PrimFunc([], Allocate(R.data, "float32", [1], True, red, "local"))
    with pytest.raises(LoomError, match="not bound to threadIdx"):
        LowerThreadAllreduce("gpu")(g)
    with pytest.raises(LoomValueError, match="mode must be"):
        LowerThreadAllreduce("warp")


# -- schedules ------------------------------------------------------------------------------


def _rows_sum(m, n, factor, where=None, init=None):
    A = loom.placeholder((m, n), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: loom.sum(A[i, k], axis=k, where=where(k) if where else None, init=init),
                     name="B")
    return A, k, B


def _build_run(s, args, target, *arrays):
    f = loom.build(s, args, target=target)
    f(*arrays)
    return arrays


@pytest.mark.parametrize("target", TARGETS)
def test_split_reduction_bound_to_threads_without_rfactor(target):
    """Each thread first sums its share over k.outer; rows stay a serial loop around the launch; init once."""
    m, n = 5, 70
    A, k, B = _rows_sum(m, n, 12, where=lambda k: k % 5 != 0, init=3.0)
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=12)
    s[B].bind(ki, loom.thread_axis("threadIdx.x"))
    a = np.random.default_rng(0).random((m, n)).astype("float32")
    _, b = _build_run(s, [A, B], target, a, np.zeros(m, "float32"))
    np.testing.assert_allclose(b, 3 + np.where(np.arange(n) % 5 != 0, a, 0).sum(1), rtol=1e-5)


def _tutorial_schedule(m, n, nthread, reducer=loom.sum):
    """TVM's reduction tutorial: rfactor, rows on blockIdx.x/threadIdx.y, the reduction on threadIdx.x."""
    A = loom.placeholder((m, n), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: reducer(A[i, k], axis=k), name="B")
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=nthread)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=4)
    s[B].bind(xo, loom.thread_axis("blockIdx.x"))
    s[B].bind(xi, loom.thread_axis("threadIdx.y"))
    tx = loom.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    return s, A, B


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("reducer, ref", [(loom.sum, np.sum), (loom.max, np.max)], ids=["sum", "max"])
@pytest.mark.parametrize("nthread", [16, 13])
def test_rfactor_rows_on_blocks_reduction_on_threads(target, reducer, ref, nthread):
    m, n = 10, 1027  # 4 rows per block do not divide 10; 13 threads do not divide 1027
    s, A, B = _tutorial_schedule(m, n, nthread, reducer)
    a = np.random.default_rng(1).standard_normal((m, n)).astype("float32")
    _, b = _build_run(s, [A, B], target, a, np.zeros(m, "float32"))
    np.testing.assert_allclose(b, ref(a, axis=1), rtol=1e-4, atol=1e-4)


def test_the_interpreter_runs_a_tree_with_barriers_and_cpus_run_no_barrier():
    s, A, B = _tutorial_schedule(10, 100, 16)
    gpu = LowerThreadAllreduce("gpu")(loom.lower(s, [A, B])["default_function"])
    serial = LowerThreadAllreduce("serial")(loom.lower(s, [A, B])["default_function"])
    assert _count(gpu.body, _is_barrier) == 5 and _count(serial.body, _is_barrier) == 0


@pytest.mark.parametrize("target", TARGETS)
def test_rfactor_argmax_on_threads_with_factor_axis(target):
    """TVM's test_rfactor_argmax: a tuple reducer across threads, the factored axis last."""
    m, n = 10, 1027
    idx = loom.placeholder((m, n), name="idx", dtype="int32")
    val = loom.placeholder((m, n), name="val", dtype="float32")
    k = loom.reduce_axis((0, n), name="k")
    T0, T1 = loom.compute((m,), lambda i: argmax_reducer()((idx[i, k], val[i, k]), axis=k), name="T")
    s = loom.create_schedule(T0.op)
    ko, kf = s[T0].split(k, factor=24)
    BF = s.rfactor(T0, kf, factor_axis=1)
    xo, xi = s[T0].split(s[T0].op.axis[0], factor=4)
    s[T0].bind(xo, loom.thread_axis("blockIdx.x"))
    s[T0].bind(xi, loom.thread_axis("threadIdx.y"))
    s[T0].bind(s[T0].op.reduce_axis[0], loom.thread_axis("threadIdx.x"))
    s[BF[0]].compute_at(s[T0], s[T0].op.reduce_axis[0])
    v = np.random.default_rng(2).random((m, n)).astype("float32")
    ii = np.tile(np.arange(n, dtype="int32"), (m, 1))
    _, _, t0, t1 = _build_run(s, [idx, val, T0, T1], target, ii, v, np.zeros(m, "int32"), np.zeros(m, "float32"))
    np.testing.assert_array_equal(t0, v.argmax(1))
    np.testing.assert_array_equal(t1, v.max(1))


@pytest.mark.parametrize("target", TARGETS)
def test_elementwise_then_reduction_then_elementwise_on_threads(target):
    """TVM's test_rfactor_elemwise_threads, with an elementwise producer inlined into the factored stage."""
    m, n, nthread = 10, 1025, 16
    A = loom.placeholder((m, n), name="A")
    E = loom.compute((m, n), lambda i, j: A[i, j] * 2.0 + 1.0, name="E")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: loom.sum(E[i, k], axis=k), name="B")
    C = loom.compute((m,), lambda i: B[i] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    s[E].compute_inline()
    bx, ty = s[C].split(s[C].op.axis[0], factor=nthread)
    ko, kf = s[B].split(k, factor=nthread)
    BF = s.rfactor(B, kf)
    s[B].compute_at(s[C], ty)
    s[C].bind(bx, loom.thread_axis("blockIdx.x"))
    s[C].bind(ty, loom.thread_axis("threadIdx.y"))
    tx = loom.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[C].set_store_predicate(tx.var.equal(0))  # C binds no tx: its store gets tx's attr of its own
    a = np.random.default_rng(3).random((m, n)).astype("float32")
    _, c = _build_run(s, [A, C], target, a, np.zeros(m, "float32"))
    np.testing.assert_allclose(c, (a * 2 + 1).sum(1) + 1, rtol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_two_reduction_axes_on_two_thread_dimensions(target):
    """k1 on threadIdx.y (3 threads) and a split of k2 on threadIdx.x (5): one group of 15 threads per row."""
    m, n1, n2 = 4, 3, 23
    A = loom.placeholder((m, n1, n2), name="A")
    k1 = loom.reduce_axis((0, n1), name="k1")
    k2 = loom.reduce_axis((0, n2), name="k2")
    B = loom.compute((m,), lambda i: loom.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(k2, factor=5)
    s[B].reorder(B.op.axis[0], k1, ki, ko)
    s[B].bind(B.op.axis[0], loom.thread_axis("blockIdx.x"))
    s[B].bind(k1, loom.thread_axis("threadIdx.y"))
    s[B].bind(ki, loom.thread_axis("threadIdx.x"))
    a = np.random.default_rng(4).random((m, n1, n2)).astype("float32")
    _, b = _build_run(s, [A, B], target, a, np.zeros(m, "float32"))
    np.testing.assert_allclose(b, a.sum(axis=(1, 2)), rtol=1e-5)


@pytest.mark.parametrize("host", TARGETS)
def test_cross_thread_reduction_on_a_device_target(host):
    name = loom.plugins.register(ext_dev)
    try:
        s, A, B = _tutorial_schedule(10, 300, 16)
        f = loom.build(s, [A, B], target="ext_dev", target_host=host)
        dev = loom.device("ext_dev")
        a = np.random.default_rng(5).random((10, 300)).astype("float32")
        Ad, Bd = loom.nd.array(a, dev), loom.nd.empty((10,), "float32", dev)
        f(Ad, Bd)
        np.testing.assert_allclose(Bd.numpy(), a.sum(1), rtol=1e-4)
    finally:
        loom.plugins.unregister(name)


def test_a_symbolic_thread_count_runs_serially_and_is_refused_where_threads_run_together():
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((1,), lambda i: loom.sum(A[k], axis=k), name="B")
    s = loom.create_schedule(B.op)
    s[B].bind(k, loom.thread_axis("threadIdx.x"))
    with pytest.raises(LoomError, match="constant thread extents"):
        loom.build(s, [A, B], target="interp")
    a, b = np.arange(7, dtype="float32"), np.zeros(1, "float32")
    loom.build(s, [A, B], target="llvm")(a, b)
    assert b[0] == 21


def test_schedule_errors():
    A, k, B = _rows_sum(8, 32, 8)
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    s[B].reorder(ki, B.op.axis[0], ko)
    s[B].bind(ki, loom.thread_axis("threadIdx.x"))
    with pytest.raises(LoomValueError, match="data loops must come before its reduction loops"):
        loom.lower(s, [A, B])
    s = loom.create_schedule(B.op)
    with pytest.raises(LoomValueError, match="not to blockIdx.x"):
        s[B].bind(k, loom.thread_axis("blockIdx.x"))
    with pytest.raises(loom.LoomTypeError, match="boolean condition"):
        s[B].set_store_predicate(B.op.axis[0] + 1)


def test_threads_of_the_block_outside_the_reduction_are_refused():
    """B is computed at C's block loop, but C's threadIdx.y threads would all reduce into B's slots."""
    A, k, B = _rows_sum(8, 32, 8)
    C = loom.compute((8,), lambda i: B[i] * 2.0, name="C")
    s = loom.create_schedule(C.op)
    bx, ty = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(bx, loom.thread_axis("blockIdx.x"))
    s[C].bind(ty, loom.thread_axis("threadIdx.y"))
    s[B].compute_at(s[C], bx)
    s[B].bind(k, loom.thread_axis("threadIdx.x"))
    with pytest.raises(LoomError, match="also runs threads along threadIdx.y"):
        loom.build(s, [A, C], target="interp")
