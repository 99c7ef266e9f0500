"""Scheduled programs run on the interpreter agree with numpy (shapes the factors do not divide)."""

import numpy as np
import pytest

import loom
from loom.ir.stmt import ForKind
from loom.te import tensor_ops  # noqa: F401 - Tensor arithmetic
from loom.te.operation import compute, extern, placeholder, thread_axis
from loom.te.reduction import comm_reducer, reduce_axis
from loom.te.reduction import max as rmax
from loom.te.reduction import sum as rsum
from loom.te.schedule import create_schedule

import sched_helpers
from loom.te.schedule_ops import schedule_to_stmt
from loom.testing import RaceError, evaluate
from loom.transform.thread_sync import ThreadSync
from sched_helpers import attrs_of, loops, rand, realizes, run, to_prim_func

M, N, K = 13, 17, 19


def _has_storage_flatten():
    try:
        from loom.transform.storage_flatten import storage_flatten  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(autouse=True, params=["helper", "pass"])
def flatten_mode(request, monkeypatch):
    """Every program runs twice: flattened by the test helper and by the StorageFlatten pass."""
    if request.param == "pass" and not _has_storage_flatten():
        pytest.skip("the StorageFlatten pass is not available")
    monkeypatch.setitem(sched_helpers.FLATTEN, "mode", request.param)


def _matmul():
    A = placeholder((M, K), name="A")
    B = placeholder((K, N), name="B")
    k = reduce_axis((0, K), name="k")
    C = compute((M, N), lambda i, j: rsum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def _check_matmul(s, A, B, C):
    a, b = rand((M, K)), rand((K, N), seed=1)
    c = np.full((M, N), np.nan, "float32")
    stmt = run(s, [A, B, C], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    return stmt


def test_matmul_default_schedule():
    A, B, C = _matmul()
    _check_matmul(create_schedule(C.op), A, B, C)


@pytest.mark.parametrize("factor", [1, 3, 4, 19, 25])
def test_matmul_split_every_axis(factor):
    A, B, C = _matmul()
    s = create_schedule(C.op)
    i, j = C.op.axis
    s[C].split(i, factor=factor)
    s[C].split(j, nparts=factor)
    s[C].split(C.op.reduce_axis[0], factor=factor)
    _check_matmul(s, A, B, C)


def test_matmul_tile_reorder_fuse():
    A, B, C = _matmul()
    s = create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 5)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=6)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    fused = s[C].fuse(io, jo)
    s[C].unroll(ki)
    s[C].vectorize(ji)
    stmt = _check_matmul(s, A, B, C)
    kinds = {f.loop_var.name: f.kind for f in loops(stmt)}
    assert kinds[fused.var.name] is ForKind.SERIAL
    assert kinds["k.inner"] is ForKind.UNROLLED and kinds["j.inner"] is ForKind.VECTORIZED


def test_matmul_fuse_reduction_with_data_axis():
    A, B, C = _matmul()
    s = create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(i, C.op.reduce_axis[0], j)
    s[C].fuse(C.op.reduce_axis[0], j)
    _check_matmul(s, A, B, C)


def test_matmul_gpu_style_with_caches():
    """Shared tiles fetched cooperatively: each of the block's 4x8 threads loads its own elements."""
    A, B, C = _matmul()
    s = create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    threads = {tag: thread_axis(tag) for tag in ("blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y")}
    bx, tx = s[C].split(C.op.axis[0], factor=4)
    by, ty = s[C].split(C.op.axis[1], factor=8)
    s[C].reorder(bx, by, tx, ty)
    for iv, tag in ((bx, "blockIdx.x"), (by, "blockIdx.y"), (tx, "threadIdx.x"), (ty, "threadIdx.y")):
        s[C].bind(iv, threads[tag])
    s[CL].compute_at(s[C], ty)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=5)
    for cache in (AA, BB):
        s[cache].compute_at(s[CL], ko)
        rows, lanes = s[cache].split(s[cache].fuse(*cache.op.axis), factor=32)  # up to 32 elements per round
        ty_, tx_ = s[cache].split(lanes, factor=4)
        s[cache].bind(ty_, threads["threadIdx.y"])
        s[cache].bind(tx_, threads["threadIdx.x"])
    a, b = rand((M, K)), rand((K, N), seed=1)
    c = np.full((M, N), np.nan, "float32")
    stmt = schedule_to_stmt(s)
    func = ThreadSync("shared")(to_prim_func(stmt, [A, B, C]))  # the barriers the threads need
    evaluate(func, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    r = realizes(stmt)
    assert r["A.shared"].storage_scope == "shared" and r["C.local"].storage_scope == "local"
    assert [int(x.extent) for x in r["A.shared"].bounds] == [4, 5]  # relaxed over the threads sharing it
    assert [int(x.extent) for x in r["C.local"].bounds] == [1, 1]   # one element per thread
    tags = [a.node.thread_tag for a in attrs_of(stmt, "thread_extent")]
    assert tags[:4] == ["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"]
    assert set(tags[4:]) == {"threadIdx.x", "threadIdx.y"}


def test_gpu_style_caches_without_cooperation_race():
    """Every thread writing the whole shared tile (no binding of the cache stage) is a write/write race."""
    A, B, C = _matmul()
    s = create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    bx, tx = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(bx, thread_axis("blockIdx.x"))
    s[C].bind(tx, thread_axis("threadIdx.x"))
    s[AA].compute_at(s[C], bx)
    with pytest.raises(RaceError, match="A.shared"):
        _check_matmul(s, A, B, C)


def _chain(n):
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: A[i] + 1.0, name="B")
    C = compute((n,), lambda i: B[i] * 2.0, name="C")
    D = compute((n,), lambda i: C[i] - 3.0, name="D")
    return A, B, C, D


def test_compute_at_chain_of_three_stages():
    A, B, C, D = _chain(23)
    s = create_schedule(D.op)
    xo, _ = s[D].split(D.op.axis[0], factor=5)
    s[C].compute_at(s[D], xo)
    co, _ = s[C].split(C.op.axis[0], factor=2)
    s[B].compute_at(s[C], co)
    a, d = rand((23,)), np.zeros(23, "float32")
    stmt = run(s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)
    r = realizes(stmt)
    assert int(r["C"].bounds[0].extent) == 5 and int(r["B"].bounds[0].extent) == 2


def test_compute_inline_elementwise_stages():
    A, B, C, D = _chain(11)
    s = create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    a, d = rand((11,)), np.zeros(11, "float32")
    stmt = run(s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)
    assert list(realizes(stmt)) == ["D"]


def test_compute_root_undoes_compute_at():
    A, B, C, D = _chain(9)
    s = create_schedule(D.op)
    xo, _ = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], xo)
    s[C].compute_root()
    a, d = rand((9,)), np.zeros(9, "float32")
    stmt = run(s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)
    assert int(realizes(stmt)["C"].bounds[0].extent) == 9


def test_reduction_computed_inside_consumer():
    A = placeholder((M, K), name="A")
    k = reduce_axis((0, K), name="k")
    S = compute((M,), lambda i: rsum(A[i, k], axis=k), name="S")
    T = compute((M,), lambda i: S[i] * 0.5, name="T")
    s = create_schedule(T.op)
    xo, _ = s[T].split(T.op.axis[0], factor=4)
    s[S].compute_at(s[T], xo)
    s[S].split(S.op.reduce_axis[0], factor=7)
    a, t = rand((M, K)), np.zeros(M, "float32")
    run(s, [A, T], a, t)
    np.testing.assert_allclose(t, a.sum(1) * 0.5, rtol=1e-5)


def test_softmax_in_several_stages():
    n, m = 5, 11
    X = placeholder((n, m), name="X")
    k1, k2 = reduce_axis((0, m), name="k1"), reduce_axis((0, m), name="k2")
    mx = compute((n,), lambda i: rmax(X[i, k1], axis=k1), name="mx")
    ex = compute((n, m), lambda i, j: loom.exp(X[i, j] - mx[i]), name="ex")
    sm = compute((n,), lambda i: rsum(ex[i, k2], axis=k2), name="sm")
    Y = compute((n, m), lambda i, j: ex[i, j] / sm[i], name="Y")
    s = create_schedule(Y.op)
    s[mx].compute_at(s[Y], Y.op.axis[0])
    s[ex].compute_at(s[Y], Y.op.axis[0])
    s[sm].compute_at(s[Y], Y.op.axis[0])
    jo, ji = s[Y].split(Y.op.axis[1], factor=4)
    s[Y].vectorize(ji)
    x, y = rand((n, m)), np.zeros((n, m), "float32")
    run(s, [X, Y], x, y)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5)


def test_conv2d_with_padding_stage():
    n, c, h, w, f, r = 1, 2, 7, 6, 3, 3
    data = placeholder((n, c, h, w), name="data")
    kern = placeholder((f, c, r, r), name="kern")
    pad = compute((n, c, h + 2, w + 2), lambda b, ch, y, x: loom.if_then_else(
        loom.all(y >= 1, y <= h, x >= 1, x <= w), data[b, ch, y - 1, x - 1], loom.const(0.0)), name="pad")
    rc, ry, rx = reduce_axis((0, c), "rc"), reduce_axis((0, r), "ry"), reduce_axis((0, r), "rx")
    out = compute((n, f, h, w), lambda b, o, y, x: rsum(pad[b, rc, y + ry, x + rx] * kern[o, rc, ry, rx],
                                                        axis=[rc, ry, rx]), name="out")
    s = create_schedule(out.op)
    yo, yi = s[out].split(out.op.axis[2], factor=4)
    s[pad].compute_at(s[out], yo)
    s[out].reorder(out.op.axis[0], out.op.axis[1], yo, rc, yi, out.op.axis[3], ry, rx)
    d, kk = rand((n, c, h, w)), rand((f, c, r, r), seed=2)
    o = np.zeros((n, f, h, w), "float32")
    stmt = run(s, [data, kern, out], d, kk, o)
    p = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros_like(o)
    for y in range(h):
        for x in range(w):
            ref[:, :, y, x] = np.einsum("bcij,ocij->bo", p[:, :, y:y + r, x:x + r], kk)
    np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-5)
    assert int(realizes(stmt)["pad"].bounds[2].extent) == 6  # 4 output rows need 4 + 2 padded rows


def test_symbolic_shapes():
    m = loom.var("m")
    A = placeholder((m,), name="A")
    B = compute((m,), lambda i: A[i] + 1.0, name="B")
    C = compute((m,), lambda i: B[i] * 2.0, name="C")
    s = create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    s[C].parallel(xo)
    stmt = None
    for size in (1, 4, 10):
        a, c = rand((size,)), np.zeros(size, "float32")
        stmt = run(s, [A, C], a, c)
        np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    assert loops(stmt)[0].kind is ForKind.PARALLEL


def test_symbolic_matmul_tiled():
    n = loom.var("n")
    A = placeholder((n, n), name="A")
    B = placeholder((n, n), name="B")
    k = reduce_axis((0, n), name="k")
    C = compute((n, n), lambda i, j: rsum(A[i, k] * B[k, j], axis=k), name="C")
    s = create_schedule(C.op)
    s[C].tile(*C.op.axis, 3, 2)
    for size in (5, 6):
        a, b, c = rand((size, size)), rand((size, size), seed=3), np.zeros((size, size), "float32")
        run(s, [A, B, C], a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_bind_threads_and_virtual_threads():
    A, B, C, D = _chain(29)
    s = create_schedule(D.op)
    s[B].compute_inline()
    bx, rest = s[D].split(D.op.axis[0], factor=8)
    vx, tx = s[D].split(rest, nparts=2)
    s[D].bind(bx, thread_axis("blockIdx.x"))
    s[D].bind(vx, thread_axis("vthread"))
    s[D].bind(tx, thread_axis("threadIdx.x"))
    s[C].compute_at(s[D], tx)
    a, d = rand((29,)), np.zeros(29, "float32")
    stmt = run(s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)
    assert [int(x.value) for x in attrs_of(stmt, "thread_extent")] == [4, 4]
    assert [int(x.value) for x in attrs_of(stmt, "virtual_thread")] == [2]
    assert int(realizes(stmt)["C"].bounds[0].extent) == 1  # local to one thread


def test_multi_output_compute_and_tuple_reduction():
    A = placeholder((M, K), name="A")
    S, P = compute((M, K), lambda i, j: (A[i, j] + 1.0, A[i, j] * 3.0), name="SP")
    argmax = comm_reducer(
        lambda x, y: (loom.select(x[1] >= y[1], x[0], y[0]), loom.select(x[1] >= y[1], x[1], y[1])),
        lambda t0, t1: (loom.const(-1, t0), loom.min_value(t1)), name="argmax")
    k = reduce_axis((0, K), name="k")
    idx, val = compute((M,), lambda i: argmax((k, S[i, k] * P[i, k]), axis=k), name="T")
    s = create_schedule(idx.op)
    xo, _ = s[idx].split(idx.op.axis[0], factor=5)
    s[S].compute_at(s[idx], xo)
    s[idx].split(k, factor=4)
    a = rand((M, K))
    oi, ov = np.zeros(M, "int32"), np.zeros(M, "float32")
    run(s, [A, idx, val], a, oi, ov)
    prod = (a + 1) * (a * 3)
    np.testing.assert_array_equal(oi, prod.argmax(1))
    np.testing.assert_allclose(ov, prod.max(1), rtol=1e-6)


def test_reduction_with_where_and_offset_axis():
    A = placeholder((M, K), name="A")
    k = reduce_axis((2, K), name="k")
    B = compute((M,), lambda i: rsum(A[i, k], axis=k, where=k % 3 != 0), name="B")
    s = create_schedule(B.op)
    s[B].split(k, factor=4)
    a, b = rand((M, K)), np.zeros(M, "float32")
    run(s, [A, B], a, b)
    cols = [c for c in range(2, K) if c % 3 != 0]
    np.testing.assert_allclose(b, a[:, cols].sum(1), rtol=1e-5)


def test_extern_stage_between_computes():
    A = placeholder((10,), name="A")
    B = compute((10,), lambda i: A[i] * 2.0, name="B")

    def body(ins, outs):
        i = loom.var("i")
        return loom.ir.For(i, 0, 10, "serial", loom.ir.BufferStore(outs[0], ins[0][9 - i] + 1.0, [i]))

    C = extern((10,), [B], body, name="C")
    D = compute((10,), lambda i: C[i] - 1.0, name="D")
    s = create_schedule(D.op)
    a, d = rand((10,)), np.zeros(10, "float32")
    stmt = run(s, [A, D], a, d)
    np.testing.assert_allclose(d, (a * 2)[::-1], rtol=1e-6)
    assert len(attrs_of(stmt, "extern_buffer_bind")) == 2


def test_cache_write_of_elementwise_then_split():
    A, B, C, D = _chain(14)
    s = create_schedule(D.op)
    DL = s.cache_write(D, "local")
    xo, xi = s[D].split(D.op.axis[0], factor=4)
    s[DL].compute_at(s[D], xo)
    a, d = rand((14,)), np.zeros(14, "float32")
    stmt = run(s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)
    assert realizes(stmt)["D.local"].storage_scope == "local"
