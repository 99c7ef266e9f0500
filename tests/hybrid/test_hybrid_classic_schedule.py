"""Schedules dumped as hybrid script: TVM v0.6's ``test_schedule`` ported, and compute schedules.

``loom.hybrid.build`` prints the statement a schedule lowers to; the text must parse back
and compute the same thing on every target, and run as Python to the same arrays.
"""
# ruff: noqa: F821, F841 - hybrid keywords (output_tensor, range kinds, math) are injected, not imported

import numpy as np

import loom
from loom.hybrid import script
from loom.ir import For
from loom.te._te_functor import te_collect
from loom.te.schedule_ops import schedule_to_stmt

from hybrid_classic import round_trip


@script
def outer_product(a, b):
    c = output_tensor((64, 64), a.dtype)
    for i in range(64):
        for j in range(64):
            c[i, j] = a[i] * b[j]
    return c


def _loops(sch):
    return [(f.loop_var.name, int(f.extent), f.kind.value)
            for f in te_collect(schedule_to_stmt(sch), lambda n: isinstance(n, For))]


def _inputs():
    return loom.placeholder((64,), "float32", name="a"), loom.placeholder((64,), "float32", name="b")


def test_split_reorder_and_annotate(target):
    a, b = _inputs()
    c = outer_product(a, b)
    sch = loom.create_schedule(c.op)
    i, j = c.op.axis
    io, ii = sch[c].split(i, 4)
    sch[c].parallel(ii)
    jo, ji = sch[c].split(j, 4)
    joo, joi = sch[c].split(jo, 4)
    sch[c].vectorize(ji)
    sch[c].reorder(ii, io, joo, joi, ji)
    assert _loops(sch) == [("i.inner", 4, "parallel"), ("i.outer", 16, "serial"), ("j.outer.outer", 4, "serial"),
                           ("j.outer.inner", 4, "serial"), ("j.inner", 4, "vectorized")]
    first, again = round_trip(outer_product, [a, b], target, sch=sch, outs=[c])
    src = first.module.get_source()
    assert "for i_inner in parallel(4):" in src and "for j_inner in vectorize(4):" in src
    assert again.module.get_source() == src  # the dumped loops are the re-parsed operation's own


def test_fuse(target):
    a, b = _inputs()
    c = outer_product(a, b)
    sch = loom.create_schedule(c.op)
    sch[c].fuse(c.op.axis[0], c.op.axis[1])
    assert _loops(sch) == [("i.j.fused", 4096, "serial")]
    first, _ = round_trip(outer_product, [a, b], target, sch=sch, outs=[c])
    assert "c[i_j_fused // 64, i_j_fused % 64]" in first.module.get_source()


def test_imperfect_split(target):
    a, b = _inputs()
    c = outer_product(a, b)
    sch = loom.create_schedule(c.op)
    sch[c].split(c.op.axis[0], 3)
    first, _ = round_trip(outer_product, [a, b], target, sch=sch, outs=[c])
    assert "if likely(i_outer * 3 + i_inner < 64):" in first.module.get_source()


def test_bind_in_a_schedule(target):
    a, b = _inputs()
    c = outer_product(a, b)
    sch = loom.create_schedule(c.op)
    i, j = c.op.axis
    sch[c].bind(i, loom.thread_axis("blockIdx.x"))
    jo, ji = sch[c].split(j, 16)
    sch[c].bind(ji, loom.thread_axis("threadIdx.x"))
    first, _ = round_trip(outer_product, [a, b], target, sch=sch, outs=[c])
    src = first.module.get_source()
    assert "for blockIdx_x in bind('blockIdx.x', 64):" in src and "bind('threadIdx.x', 16)" in src


# -- compute schedules ------------------------------------------------------------------------------

def _check_module(sch, ins, outs, reference, target):
    """The module of ``sch``: its Python gives ``reference``; its operation, built for ``target``, too."""
    mod = loom.hybrid.build(sch, ins, outs)
    arrays = [np.random.default_rng(1).standard_normal([int(s) for s in t.shape]).astype(str(t.dtype)) for t in ins]
    want = reference(*arrays)
    want = want if isinstance(want, tuple) else (want,)
    got = mod(*arrays)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    new = mod(*ins)
    new = new if isinstance(new, list) else [new]
    f = loom.build(loom.create_schedule([t.op for t in new]), list(ins) + new, target=target)
    results = [np.zeros([int(s) for s in t.shape], str(t.dtype)) for t in new]
    f(*arrays, *results)
    for g, w in zip(results, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return mod.get_source()


def test_compute_at_producer_is_allocated_from_its_corner(target):
    A = loom.placeholder((10, 6), name="A")
    B = loom.compute((10, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((10, 6), lambda i, j: B[i, j] + 1.0, name="C")
    s = loom.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=3)
    s[B].compute_at(s[C], xo)
    src = _check_module(s, [A], [C], lambda a: a * 2.0 + 1.0, target)
    # B keeps the rows of one outer iteration, indexed from the first of them
    assert "B = allocate((3, 6), 'float32', 'global')" in src
    assert "B[i, j] = A[i + i_outer * 3, j] * 2.0" in src and "= B[i_inner, j_1] + 1.0" in src


def test_cache_read_and_a_reduction(target):
    A = loom.placeholder((8, 12), name="A")
    k = loom.reduce_axis((0, 12), name="k")
    S = loom.compute((8,), lambda i: loom.sum(A[i, k] * A[i, k], axis=k), name="S")
    s = loom.create_schedule(S.op)
    AL = s.cache_read(A, "local", [S])
    ko, ki = s[S].split(S.op.reduce_axis[0], factor=4)
    s[AL].compute_at(s[S], ko)
    src = _check_module(s, [A], [S], lambda a: (a * a).sum(axis=1), target)
    assert "A_local = allocate((1, 4), 'float32', 'local')" in src
    assert "S[i] = 0.0" in src


def test_several_outputs_of_one_compute(target):
    A = loom.placeholder((5, 4), name="A")
    B, C = loom.compute((5, 4), lambda i, j: (A[i, j] + 1.0, A[i, j] * A[i, j]), name="BC")
    s = loom.create_schedule(B.op)
    src = _check_module(s, [A], [B, C], lambda a: (a + 1.0, a * a), target)
    assert "BC_v0 = output_tensor((5, 4), 'float32')" in src and "return BC_v0, BC_v1" in src


def test_select_casts_and_typed_constants(target):
    A = loom.placeholder((16,), "float64", name="A")
    half = loom.exp(loom.const(0.1, "float64"))
    B = loom.compute((16,), lambda i: loom.if_then_else(A[i] > 0.1, A[i] * half, loom.exp(A[i])), name="B")
    C = loom.compute((16,), lambda i: (B[i] * 3).astype("int64") + loom.const(2 ** 40, "int64"), name="C")
    s = loom.create_schedule(C.op)
    s[B].compute_inline()

    def reference(a):
        b = np.where(a > 0.1, a * np.exp(0.1), np.exp(a))
        return (b * 3).astype("int64") + 2 ** 40

    src = _check_module(s, [A], [C], reference, target)
    # Beside an expression a literal takes its dtype; alone (an argument) it is written with its dtype.
    assert "A[i] > 0.1" in src and "exp(float64(0.1))" in src and "+ 1099511627776" in src
