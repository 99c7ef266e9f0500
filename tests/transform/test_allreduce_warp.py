"""Cross-thread reductions lowered to warp shuffles (TVM's classic CUDA allreduce), run on the interpreter.

The pass is checked on hand-written functions whose target has a ``thread_warp_size``
(the IR each strategy gives, and its values with a condition and an init); then
schedules with a reduce axis bound to threadIdx.x are built for
``ext_dev -thread_warp_size=32`` and ``=16`` (kernels run by the interpreter, which
holds each shuffle until the lanes of its mask meet and flags divergent warps and
shared-memory races) and compared with numpy: row sum, max, argmax and softmax,
for extents within a warp, of several warps, and ones that keep the tree.
"""

import numpy as np
import pytest

import loom
import loom.testing.ext_dev as ext_dev
from loom.ir import Allocate, AttrStmt, BufferStore, IfThenElse, PrimFunc, seq
from loom.ir.functor import post_order_visit
from loom.ir.reduce import CommReducer
from loom.target import Target
from loom.testing import evaluate
from loom.transform.lower_thread_allreduce import LowerThreadAllreduce, thread_allreduce
from programs import argmax_reducer


@pytest.fixture(autouse=True)
def _ext_dev(registered):
    registered(ext_dev)


def _nodes(stmt, pred):
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if pred(n) else None)
    return found


def _calls(stmt, name):
    return _nodes(stmt, lambda n: isinstance(n, loom.ir.Call) and getattr(n.op, "name", "") == name)


def _shared(stmt):
    return _nodes(stmt, lambda n: isinstance(n, Allocate) and n.scope == "shared")


def _block_sum(nthreads, groups, target, reduce_tag="threadIdx.x"):
    """out[g] = 5 + sum of A[g, t] over the threads t with A[g, t] > 0.5: ``groups`` x ``nthreads`` threads,
    after LowerThreadAllreduce("gpu") for a kernel of ``target``."""
    x, y = loom.var("x", "float32"), loom.var("y", "float32")
    add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
    A = loom.decl_buffer((groups, nthreads), "float32", name="A")
    out = loom.decl_buffer((groups,), "float32", name="out")
    R = loom.decl_buffer((1,), "float32", name="R", scope="local")
    group_tag = "threadIdx.y" if reduce_tag == "threadIdx.x" else "threadIdx.x"
    tr, tg = loom.thread_axis((0, nthreads), reduce_tag), loom.thread_axis((0, groups), group_tag)
    v = A[tg.var, tr.var]
    red = thread_allreduce(add, [v], v > 0.5, [loom.const(5.0)], [R.data], [tr.var])
    store = AttrStmt(tr, "thread_extent", nthreads, IfThenElse(tr.var == 0, BufferStore(out, R[0], [tg.var])))
    body = Allocate(R.data, "float32", [1], True, seq(AttrStmt(tr, "thread_extent", nthreads, red), store), "local")
    f = PrimFunc([A.data, out.data], AttrStmt(tg, "thread_extent", groups, body),
                 buffer_map={A.data: A, out.data: out}, attrs={"global_symbol": "block_sum", "target": Target(target)})
    return LowerThreadAllreduce("gpu")(f)


def _check_block_sum(f, nthreads, groups):
    a = np.random.default_rng(nthreads).random((groups, nthreads)).astype("float32")
    out = np.zeros(groups, "float32")
    evaluate(f, a, out)
    np.testing.assert_allclose(out, 5 + np.where(a > 0.5, a, 0).sum(1), rtol=1e-5)


@pytest.mark.parametrize("nthreads, groups, mask", [(16, 2, 0xFFFFFFFF), (4, 3, 0xFFF), (32, 1, 0xFFFFFFFF)])
def test_within_a_warp_shuffles_only(nthreads, groups, mask):
    """Offsets n/2 ... 1 of width n: no shared memory, no barrier; the mask names the block's lanes."""
    f = _block_sum(nthreads, groups, "ext_dev -thread_warp_size=32")
    shuffles = _calls(f.body, "tir.tvm_warp_shuffle_down")
    assert [int(c.args[2]) for c in shuffles] == [nthreads >> k for k in range(1, nthreads.bit_length())]
    assert {int(c.args[3]) for c in shuffles} == {nthreads} and {int(c.args[4]) for c in shuffles} == {32}
    assert {(c.args[0].dtype, int(c.args[0])) for c in shuffles} == {("uint32", mask)}
    assert not _shared(f.body) and not _calls(f.body, "tir.tvm_storage_sync")
    _check_block_sum(f, nthreads, groups)


def test_a_partial_last_warp_gets_a_mask_of_its_own():
    f = _block_sum(16, 3, "ext_dev -thread_warp_size=32")  # 48 threads: warps of 32 and 16 lanes
    mask = _calls(f.body, "tir.tvm_warp_shuffle_down")[0].args[0]
    assert isinstance(mask, loom.ir.Select) and {int(mask.true_value), int(mask.false_value)} == {0xFFFF, 0xFFFFFFFF}
    _check_block_sum(f, 16, 3)


@pytest.mark.parametrize("nthreads, groups, ws", [(64, 2, 32), (128, 1, 16), (256, 1, 16)])
def test_several_warps_stage_their_values_in_shared_memory(nthreads, groups, ws):
    """Each warp reduces, lane 0 stages it (a slot per warp), a barrier, then the staged slots are reduced."""
    f = _block_sum(nthreads, groups, f"ext_dev -thread_warp_size={ws}")
    widths = [int(c.args[3]) for c in _calls(f.body, "tir.tvm_warp_shuffle_down")]
    warps = nthreads // ws
    assert widths == [ws] * (ws.bit_length() - 1) + [warps] * (warps.bit_length() - 1)
    assert [[int(e) for e in a.extents] for a in _shared(f.body)] == [[groups * warps]]
    assert len(_calls(f.body, "tir.tvm_storage_sync")) == 1
    _check_block_sum(f, nthreads, groups)


@pytest.mark.parametrize("nthreads, target, reduce_tag", [
    (12, "ext_dev -thread_warp_size=32", "threadIdx.x"),  # not a power of two
    (64, "ext_dev -thread_warp_size=4", "threadIdx.x"),  # more than warp_size ** 2
    (16, "ext_dev -thread_warp_size=32", "threadIdx.y"),  # lanes of a group would not be consecutive
    (16, "ext_dev", "threadIdx.x"),  # no warp size: the tree as before
    (16, "interp", "threadIdx.x"),
])
def test_other_reductions_keep_the_shared_memory_tree(nthreads, target, reduce_tag):
    f = _block_sum(nthreads, 2, target, reduce_tag)
    assert not _calls(f.body, "tir.tvm_warp_shuffle_down") and _shared(f.body)
    _check_block_sum(f, nthreads, 2)


def test_a_block_wider_than_the_reduction_keeps_the_tree():
    """Another attr gives threadIdx.x 32 threads: lanes 16..31 would skip the shuffles their mask names."""
    x, y = loom.var("x", "float32"), loom.var("y", "float32")
    add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
    A = loom.decl_buffer((32,), "float32", name="A")
    R = loom.decl_buffer((1,), "float32", name="R", scope="local")
    tx = loom.thread_axis((0, 16), "threadIdx.x")
    red = thread_allreduce(add, [A[tx.var]], loom.const(True), [loom.const(0.0)], [R.data], [tx.var])
    other = AttrStmt(tx, "thread_extent", 32, BufferStore(A, loom.const(1.0), [tx.var]))
    body = Allocate(R.data, "float32", [1], True, seq(AttrStmt(tx, "thread_extent", 16, red), other), "local")
    body = AttrStmt(loom.thread_axis((0, 1), "blockIdx.x"), "thread_extent", 1, body)  # one launch
    f = PrimFunc([A.data], body, buffer_map={A.data: A},
                 attrs={"global_symbol": "wide", "target": Target("ext_dev -thread_warp_size=32")})
    lowered = LowerThreadAllreduce("gpu")(f)
    assert not _calls(lowered.body, "tir.tvm_warp_shuffle_down") and _shared(lowered.body)


# -- schedules built for ext_dev with a warp size --------------------------------------------------


def _run(s, args, ws, inputs):
    """Build for ``ext_dev -thread_warp_size=ws``, run on ext_dev memory; the outputs and the kernels' source."""
    f = loom.build(s, args, target=f"ext_dev -thread_warp_size={ws}", target_host="llvm")
    dev = loom.device("ext_dev")
    outs = [loom.nd.empty([int(d) for d in t.shape], t.dtype, dev) for t in args[len(inputs):]]
    f(*[loom.nd.array(a, dev) for a in inputs], *outs)
    return [o.numpy() for o in outs], f.imported_modules[0].get_source()


def _rows(m, n, reducer, dtype="float32", **kw):
    A = loom.placeholder((m, n), name="A", dtype=dtype)
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: reducer(A[i, k], axis=k, **kw), name="B")
    s = loom.create_schedule(B.op)
    s[B].bind(B.op.axis[0], loom.thread_axis("blockIdx.x"))
    s[B].bind(k, loom.thread_axis("threadIdx.x"))
    return s, [A, B]


def _strategy(n, ws):
    if n & (n - 1) or n > ws * ws:
        return "tree"
    return "warp" if n <= ws else "staged"


@pytest.mark.parametrize("ws", [32, 16])
@pytest.mark.parametrize("n", [4, 32, 64, 128, 256, 1024, 48])
def test_row_sum(n, ws):
    m = 2 if n >= 256 else 3
    s, args = _rows(m, n, loom.sum)
    a = np.random.default_rng(n).random((m, n)).astype("float32")
    (b,), src = _run(s, args, ws, [a])
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)
    strategy = _strategy(n, ws)
    assert ("tvm_warp_shuffle_down" in src) == (strategy != "tree")
    assert ("red_stage" in src) == (strategy == "staged") and ("red_buf0 = allocate" in src)


@pytest.mark.parametrize("n, ws", [(32, 32), (256, 32), (48, 32), (64, 16)])
def test_row_max(n, ws):
    s, args = _rows(3, n, loom.max)
    a = np.random.default_rng(n).standard_normal((3, n)).astype("float32")
    (b,), _ = _run(s, args, ws, [a])
    np.testing.assert_array_equal(b, a.max(1))


@pytest.mark.parametrize("dtype", ["float64", "int64", "int16", "int8"])
def test_value_dtypes(dtype):
    """16, 32 and 64-bit values shuffle; 8-bit ones keep the tree."""
    s, args = _rows(2, 64, loom.sum, dtype)
    a = np.random.default_rng(0).integers(-50, 50, (2, 64)).astype(dtype)
    (b,), src = _run(s, args, 16, [a])
    np.testing.assert_array_equal(b, a.sum(1, dtype=dtype))
    assert ("tvm_warp_shuffle_down" in src) == (dtype != "int8")


@pytest.mark.parametrize("n, ws", [(16, 32), (128, 32), (64, 16)])
def test_argmax_shuffles_both_values_of_the_tuple(n, ws):
    m = 3
    idx = loom.placeholder((m, n), name="idx", dtype="int32")
    val = loom.placeholder((m, n), name="val", dtype="float32")
    k = loom.reduce_axis((0, n), name="k")
    T0, T1 = loom.compute((m,), lambda i: argmax_reducer()((idx[i, k], val[i, k]), axis=k), name="T")
    s = loom.create_schedule(T0.op)
    s[T0].bind(T0.op.axis[0], loom.thread_axis("blockIdx.x"))
    s[T0].bind(k, loom.thread_axis("threadIdx.x"))
    v = np.random.default_rng(n).random((m, n)).astype("float32")
    ii = np.tile(np.arange(n, dtype="int32"), (m, 1))
    (t0, t1), src = _run(s, [idx, val, T0, T1], ws, [ii, v])
    np.testing.assert_array_equal(t0, v.argmax(1))
    np.testing.assert_array_equal(t1, v.max(1))
    assert src.count("tvm_warp_shuffle_down(") == 2 * (n.bit_length() - 1)  # log2(n) steps of two values


@pytest.mark.parametrize("ws", [32, 16])
def test_masked_threads_and_an_init(ws):
    """n = 70 split by 32: every thread sums its share (some have fewer), the where clause masks more."""
    m, n = 3, 70
    A = loom.placeholder((m, n), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: loom.sum(A[i, k], axis=k, where=k % 5 != 0, init=3.0), name="B")
    s = loom.create_schedule(B.op)
    s[B].bind(B.op.axis[0], loom.thread_axis("blockIdx.x"))
    ko, ki = s[B].split(k, factor=32)
    s[B].bind(ki, loom.thread_axis("threadIdx.x"))
    a = np.random.default_rng(6).random((m, n)).astype("float32")
    (b,), src = _run(s, [A, B], ws, [a])
    np.testing.assert_allclose(b, 3 + np.where(np.arange(n) % 5 != 0, a, 0).sum(1), rtol=1e-5)
    assert "tvm_warp_shuffle_down" in src


@pytest.mark.parametrize("nthread, rows, ws", [(16, 4, 32), (16, 3, 32), (32, 2, 16), (8, 4, 16)])
def test_rows_on_threadidx_y_reduce_in_segments_of_a_warp(nthread, rows, ws):
    """TVM's reduction tutorial: rfactor, rows on blockIdx.x/threadIdx.y; several groups share a warp."""
    m, n = 7, 100
    A = loom.placeholder((m, n), name="A")
    k = loom.reduce_axis((0, n), name="k")
    B = loom.compute((m,), lambda i: loom.sum(A[i, k], axis=k), name="B")
    s = loom.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=nthread)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=rows)
    s[B].bind(xo, loom.thread_axis("blockIdx.x"))
    s[B].bind(xi, loom.thread_axis("threadIdx.y"))
    tx = loom.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    a = np.random.default_rng(7).random((m, n)).astype("float32")
    (b,), src = _run(s, [A, B], ws, [a])
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-4)
    assert "tvm_warp_shuffle_down" in src


@pytest.mark.parametrize("n, ws", [(32, 32), (128, 32), (64, 16)])
def test_row_softmax_two_reductions(n, ws):
    """max, then the sum of exp(x - max), each across threadIdx.x, staged for the block in shared memory."""
    m = 3
    A = loom.placeholder((m, n), name="A")
    k1, k2 = loom.reduce_axis((0, n), name="k1"), loom.reduce_axis((0, n), name="k2")
    M = loom.compute((m,), lambda i: loom.max(A[i, k1], axis=k1), name="M")
    E = loom.compute((m, n), lambda i, j: loom.exp(A[i, j] - M[i]), name="E")
    S = loom.compute((m,), lambda i: loom.sum(E[i, k2], axis=k2), name="S")
    O = loom.compute((m, n), lambda i, j: E[i, j] / S[i], name="O")
    s = loom.create_schedule(O.op)
    s[E].compute_inline()
    s[O].bind(O.op.axis[0], loom.thread_axis("blockIdx.x"))
    s[O].bind(O.op.axis[1], loom.thread_axis("threadIdx.x"))
    for stage in (M, S):
        s[stage].compute_at(s[O], O.op.axis[0])
        s[stage].set_scope("shared")
        s[stage].bind(stage.op.reduce_axis[0], loom.thread_axis("threadIdx.x"))
    a = np.random.default_rng(n).standard_normal((m, n)).astype("float32")
    (o,), src = _run(s, [A, O], ws, [a])
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(o, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert src.count("tvm_warp_shuffle_down(") == 2 * (n.bit_length() - 1)  # log2(n) steps per reduction
