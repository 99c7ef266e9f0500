"""Bound inference: ranges of split/fused loops and of producer regions under compute_at."""

from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.arith import Analyzer
from loom.ir import expr as E
from loom.te.bound import infer_bound, storage_rank, thread_rank
from loom.arith.int_set import IntervalSet, cover_range, eval_set, union
from loom.te.operation import compute, placeholder, thread_axis
from loom.te.reduction import reduce_axis
from loom.te.reduction import sum as rsum
from loom.te.schedule import create_schedule


def ext(r):
    return int(r.extent)


def _chain(n=20):
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: A[i] + 1.0, name="B")
    C = compute((n,), lambda i: B[i] * 2.0, name="C")
    return A, B, C


def test_split_extents_round_up():
    _, _, C = _chain(20)
    s = create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=6)
    b = infer_bound(s)
    assert (ext(b[xo]), ext(b[xi])) == (4, 6)
    assert ext(b[C.op.axis[0]]) == 20


def test_split_by_nparts():
    _, _, C = _chain(20)
    s = create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], nparts=3)
    b = infer_bound(s)
    assert (ext(b[xo]), ext(b[xi])) == (3, 7)


def test_fused_extent_is_the_product():
    A = placeholder((5, 7), name="A")
    B = compute((5, 7), lambda i, j: A[i, j], name="B")
    s = create_schedule(B.op)
    f = s[B].fuse(*B.op.axis)
    fo, fi = s[B].split(f, factor=4)
    b = infer_bound(s)
    assert (ext(b[f]), ext(b[fo]), ext(b[fi])) == (35, 9, 4)


def test_symbolic_split_extent():
    n = loom.var("n")
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: A[i], name="B")
    s = create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], factor=8)
    assert str(infer_bound(s)[xo].extent) == "(n + 7) // 8"


def test_producer_region_under_compute_at_inner_loop():
    _, B, C = _chain(20)
    s = create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xi)
    r = infer_bound(s)[B.op.axis[0]]
    assert ext(r) == 1 and str(r.min) == "i.outer * 4 + i.inner"


def test_producer_region_under_compute_at_outer_loop():
    _, B, C = _chain(20)
    s = create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    r = infer_bound(s)[B.op.axis[0]]
    assert ext(r) == 4 and str(r.min) == "i.outer * 4"


def test_stencil_region_grows_by_the_window():
    A = placeholder((30,), name="A")
    B = compute((30,), lambda i: A[i] * 2.0, name="B")
    C = compute((28,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=7)
    s[B].compute_at(s[C], xo)
    r = infer_bound(s)[B.op.axis[0]]
    assert ext(r) == 9 and str(r.min) == "i.outer * 7"


def test_root_producer_covers_all_consumers_reads():
    A = placeholder((30,), name="A")
    B = compute((30,), lambda i: A[i] * 2.0, name="B")
    C = compute((10,), lambda i: B[i * 2 + 3], name="C")
    s = create_schedule(C.op)
    r = infer_bound(s)[B.op.axis[0]]
    assert (int(r.min), ext(r)) == (3, 19)


def test_reads_are_clipped_to_the_tensor():
    A = placeholder((10,), name="A")
    B = compute((10,), lambda i: A[i] + 1.0, name="B")
    C = compute((10,), lambda i: B[i - 1] + B[i] + B[i + 1], name="C")  # reads B[-1] and B[10]
    s = create_schedule(C.op)
    r = infer_bound(s)[B.op.axis[0]]
    assert (int(r.min), ext(r)) == (0, 10)


def test_reduction_axes_keep_their_domain_under_compute_at():
    A = placeholder((6, 9), name="A")
    k = reduce_axis((0, 9), name="k")
    S = compute((6,), lambda i: rsum(A[i, k], axis=k), name="S")
    T = compute((6,), lambda i: S[i] + 1.0, name="T")
    s = create_schedule(T.op)
    s[S].compute_at(s[T], T.op.axis[0])
    b = infer_bound(s)
    assert ext(b[S.op.axis[0]]) == 1 and ext(b[k]) == 9


def test_chain_of_three_stages_composes_regions():
    A = placeholder((24,), name="A")
    B = compute((24,), lambda i: A[i] + 1.0, name="B")
    C = compute((24,), lambda i: B[i] * 2.0, name="C")
    D = compute((24,), lambda i: C[i] - 1.0, name="D")
    s = create_schedule(D.op)
    do, _ = s[D].split(D.op.axis[0], factor=8)
    s[C].compute_at(s[D], do)
    co, _ = s[C].split(C.op.axis[0], factor=2)
    s[B].compute_at(s[C], co)
    b = infer_bound(s)
    assert ext(b[C.op.axis[0]]) == 8 and ext(b[co]) == 4
    assert ext(b[B.op.axis[0]]) == 2
    free = set(loom.ir.collect(b[B.op.axis[0]].min, lambda n: isinstance(n, E.Var)))
    assert free == {do.var, co.var}  # fixed by both enclosing loops


def test_thread_scope_decides_relaxation():
    _, B, C = _chain(32)
    s = create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bx, thread_axis("blockIdx.x"))
    s[C].bind(tx, thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], tx)
    assert ext(infer_bound(s)[B.op.axis[0]]) == 1      # local: one element per thread
    s[B].set_scope("shared")
    assert ext(infer_bound(s)[B.op.axis[0]]) == 8      # shared: the whole thread block's part


def test_scope_ranks():
    assert [storage_rank(x) for x in ("global", "shared", "warp", "local", "")] == [0, 1, 2, 3, 0]
    assert [thread_rank(x) for x in ("blockIdx.y", "threadIdx.x", "vthread")] == [0, 1, 1]


# ---------------------------------------------------------------------------
# interval arithmetic, checked against brute force


def test_interval_union_and_cover():
    an = Analyzer()
    a = IntervalSet(loom.const(2), loom.const(5))
    b = IntervalSet(loom.const(-1), loom.const(3))
    u = union([a, b], an)
    assert (int(u.min), int(u.max)) == (-1, 5)
    r = cover_range(u, loom.ir.Range.from_min_extent(0, 100), an)
    assert (int(r.min), int(r.extent)) == (-1, 7)
    assert int(cover_range(IntervalSet.everything(), r, an).extent) == 7
    assert union([], an) is None


_OPS = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "floordiv": lambda x, y: loom.floordiv(x, y), "floormod": lambda x, y: loom.floormod(x, y),
    "min": lambda x, y: loom.ir.Min(x, y), "max": lambda x, y: loom.ir.Max(x, y),
}
_PY = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "floordiv": lambda x, y: x // y, "floormod": lambda x, y: x % y, "min": min, "max": max,
}


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(sorted(_OPS)), lo=st.integers(-20, 20), width=st.integers(0, 12),
       c=st.integers(-6, 6).filter(lambda v: v != 0), scale=st.integers(-3, 3))
def test_eval_set_contains_every_value(op, lo, width, c, scale):
    x = loom.var("x")
    expr = _OPS[op](x * scale + 1, loom.const(c))
    s = eval_set(expr, {x: IntervalSet(loom.const(lo), loom.const(lo + width))}, Analyzer())
    values = [_PY[op](v * scale + 1, c) for v in range(lo, lo + width + 1)]
    if s.min is not None:
        assert int(s.min) <= min(values)
    if s.max is not None:
        assert int(s.max) >= max(values)
    if op in ("add", "sub", "mul", "min", "max"):
        assert s.min is not None and s.max is not None  # exact rules never give up here
        assert (int(s.min), int(s.max)) == (min(values), max(values))


def test_eval_set_keeps_unrelaxed_variables_symbolic():
    i, j = loom.var("i"), loom.var("j")
    s = eval_set(i * 8 + j, {j: IntervalSet(loom.const(0), loom.const(7))}, Analyzer())
    assert (str(s.min), str(s.max)) == ("i * 8", "i * 8 + 7")
    p = eval_set(i * 8 + j, {}, Analyzer())
    assert p.is_point and str(p.min) == "i * 8 + j"


def test_a_region_read_only_by_guarded_iterations_has_extent_zero():
    """A producer attached in a loop that runs past the tensor (a fused, split tail) gets an empty
    region on those iterations: its allocation has extent 0 there, never a negative one."""
    import numpy as np

    import loom

    A = loom.placeholder((1, 1), name="A")
    B = loom.compute((1, 1), lambda i, j: A[i, j] * 2.0, name="B")
    D = loom.compute((1, 1), lambda i, j: B[i, j] + A[i, j] - 1.0, name="D")
    s = loom.create_schedule(D.op)
    i, j = D.op.axis
    io, ii = s[D].split(i, factor=3)
    iio, iii = s[D].split(ii, nparts=1)
    s[D].reorder(io, iio, j, iii)
    fused = s[D].fuse(j, iii)
    s[B].compute_at(s[D], fused)
    f = loom.build(s, [A, D], target="interp")
    d = np.zeros((1, 1), "float32")
    f(np.full((1, 1), 2.0, "float32"), d)
    assert d[0, 0] == 5.0


def test_bound_axes_of_an_attached_cache_stage_index_from_the_region_start():
    """The cooperative fetch: A.shared's axes bound to threads cover [by*8, by*8 + 8), so the store goes to
    A.shared[ty, tx] and the load comes from A[by*8 + ty, ko*8 + tx] (it used to be A.shared[ty - by*8, ...])."""
    import loom
    from loom.testing.conformance.programs import tiled_matmul

    s, args = tiled_matmul(32, 32, 32)
    text = str(loom.lower(s, args))
    assert "A.shared[threadIdx.y, threadIdx.x] = A[blockIdx.y * 8 + threadIdx.y, k.outer * 8 + threadIdx.x]" in text
    assert "B.shared[threadIdx.y, threadIdx.x] = B[k.outer * 8 + threadIdx.y, blockIdx.x * 8 + threadIdx.x]" in text
