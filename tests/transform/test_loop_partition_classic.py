"""TVM v0.6's LoopPartition tests (test_pass_loop_partition.py) with Loom's names.

Each checks the structure TVM's test checks (no guard left in the main part,
tails present, the number of loops or ``max`` nodes) and then that the program
still computes numpy's values on every CPU target, the interpreter first.
TVM's ir_builder programs evaluate ``m`` or ``n`` for effect; here they store
which branch ran, so that the result can be compared.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import loom
from loom.ir import BufferStore, For, IfThenElse, Max, PrimFunc, Ramp, Select, SeqStmt, collect, seq

from partition_checks import count, on_targets, partitioned, pfunc, scheduled

RNG = np.random.default_rng(6)


def vector_add(n: Any, factor: int) -> tuple[Any, list]:
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    T = loom.compute((n,), lambda i: A[i] + B[i], name="T")
    s = loom.create_schedule(T.op)
    s[T].split(T.op.axis[0], factor=factor)
    return s, [A, B, T]


def test_basic():
    """A symbolic split: the main loop has no guard, the tail keeps it."""
    s, args = vector_add(loom.var("n"), 4)
    body = scheduled(s, args)
    assert isinstance(body, SeqStmt) and len(body.seq) == 2
    assert count(body.seq[0], IfThenElse) == 0 and count(body.seq[1], IfThenElse) == 1
    for n in (1, 4, 13):
        a, b = RNG.random(n, "float32"), RNG.random(n, "float32")
        on_targets(s, args, [a, b, np.zeros(n, "float32")], False, lambda r: np.testing.assert_array_equal(r[2], a + b))


@pytest.mark.parametrize("n, factor", [(21, 4), (60, 16)], ids=["const_loop", "single_likely"])
def test_const_loop_and_single_likely(n, factor):
    """Constant extents under partition_const_loop: no guard is left, not even in the tail."""
    s, args = vector_add(n, factor)
    assert count(scheduled(s, args, const=True), IfThenElse) == 0
    assert count(scheduled(s, args, const=False), IfThenElse) == 1  # constant loops are left alone by default
    a, b = RNG.random(n, "float32"), RNG.random(n, "float32")
    on_targets(s, args, [a, b, np.zeros(n, "float32")], True, lambda r: np.testing.assert_array_equal(r[2], a + b))


def branch_nest(n: Any, m: Any, conds: list[Callable[..., Any]]) -> tuple[PrimFunc, list]:
    """``for i < 4, j < n, k < m: if likely(cond(i, j, k)): O_c[i, j, k] = 1 else 2``, one output per condition."""
    i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
    outs = [loom.decl_buffer((4, n, m), "int32", name=f"O{c}") for c in range(len(conds))]
    stores = [IfThenElse(loom.likely(cond(i, j, k)), BufferStore(O, loom.const(1), [i, j, k]),
                         BufferStore(O, loom.const(2), [i, j, k])) for O, cond in zip(outs, conds)]
    body = For(i, 0, 4, "serial", For(j, 0, n, "serial", For(k, 0, m, "serial", seq(*stores))))
    return pfunc(outs, [n, m], body), outs


@pytest.mark.parametrize("which", ["multi_loop", "multi_if"])
def test_multi_loop_and_multi_if(which):
    """Guards over two symbolic inner loops: the first part of the outer loop's body has no branch."""
    n, m = loom.var("n"), loom.var("m")
    conds = [lambda i, j, k: i * m + j + k < n]
    if which == "multi_if":
        conds.append(lambda i, j, k: i * m + j - k < n)
    f, _ = branch_nest(n, m, conds)
    body = partitioned(f)
    assert isinstance(body, For) and isinstance(body.body, SeqStmt)
    assert count(body.body.seq[0], IfThenElse) == 0
    for nv, mv in ((7, 3), (5, 1), (9, 4)):
        i, j, k = np.meshgrid(np.arange(4), np.arange(nv), np.arange(mv), indexing="ij")
        want = [np.where(i * mv + j + k < nv, 1, 2), np.where(i * mv + j - k < nv, 1, 2)]
        outs = [np.zeros((4, nv, mv), "int32") for _ in conds]

        def check(r: list, want: list = want) -> None:
            for got, w in zip(r[:len(conds)], want):
                np.testing.assert_array_equal(got, w)

        on_targets(f, None, outs + [nv, mv], False, check)


def thread_rows(m: Any, l: Any) -> tuple[Any, list]:
    A = loom.placeholder((m, l), name="A")
    B = loom.compute((m, l), lambda i, j: A[i, j] + 3.0, name="B")
    s = loom.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 32)
    xi0, xi1 = s[B].split(xi, nparts=16)
    s[B].bind(xi0, loom.thread_axis("threadIdx.x"))
    return s, [A, B]


def test_thread_axis():
    """A loop around a threadIdx scope: relaxed over the threads, its main part loses the guard.

    (TVM's test also puts B in shared scope, which changes nothing here; an output in
    shared memory could not be checked.)
    """
    s, args = thread_rows(loom.var("m"), loom.var("l"))
    body = scheduled(s, args)
    assert isinstance(body, SeqStmt) and count(body.seq[0], IfThenElse) == 0 and count(body.seq[1], IfThenElse) == 1
    for m, l in ((70, 5), (32, 3), (5, 2)):
        a = RNG.random((m, l), "float32")
        on_targets(s, args, [a, np.zeros_like(a)], False, lambda r: np.testing.assert_array_equal(r[1], a + 3.0))


def test_vectorize():
    """Partitioning over blockIdx makes a guard-free branch the vectorizer turns into ramps."""
    n = loom.var("n")
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    bias, scale = loom.var("bias", dtype="float32"), loom.var("scale", dtype="float32")
    C = loom.compute(A.shape, lambda i: A[i] + B[i] * scale + bias, name="C")
    s = loom.create_schedule(C.op)
    bx, x = s[C].split(C.op.axis[0], factor=32 * 4)
    tx, x = s[C].split(x, nparts=32)
    _, x = s[C].split(x, factor=4)
    s[C].bind(bx, loom.thread_axis("blockIdx.x"))
    s[C].bind(tx, loom.thread_axis("threadIdx.x"))
    s[C].vectorize(x)
    args = [A, B, C, bias, scale]
    (f,) = loom.lower(s, args).functions.values()
    (branch,) = [b for b in collect(f.body, lambda y: isinstance(y, IfThenElse)) if b.else_case is not None]
    assert x.var.name not in str(branch.condition) and "blockIdx.x" in str(branch.condition)
    assert count(branch.then_case, Ramp) > 0 and count(branch.else_case, Ramp) == 0
    for nv in (1, 128, 300):
        a, b = RNG.random(nv, "float32"), RNG.random(nv, "float32")
        on_targets(s, args, [a, b, np.zeros(nv, "float32"), 0.5, 2.0], False,
                   lambda r: np.testing.assert_allclose(r[2], a + b * 2.0 + 0.5, rtol=1e-6))


def select_loop(extent: Any, cond: Callable[..., Any], n: Any, m: Any, shape: Any) -> PrimFunc:
    """``for i < extent, j < 4: O[i*4 + j] = select(likely(cond(i, j)), m, n)``."""
    i, j = loom.var("i"), loom.var("j")
    O = loom.decl_buffer((shape,), "int32", name="O")
    body = For(i, 0, extent, "serial", For(j, 0, 4, "serial",
                                           BufferStore(O, Select(loom.likely(cond(i, j)), m, n), [i * 4 + j])))
    return pfunc([O], [m, n], body)


def test_condition():
    """A likely inside a Select is a guard too: the main part has no Select left."""
    m, n = loom.var("m"), loom.var("n")
    f = select_loop(loom.truncdiv(n + 3, 4), lambda i, j: i * 4 + j < n, n, m, loom.truncdiv(n + 3, 4) * 4)
    body = partitioned(f)
    assert isinstance(body, SeqStmt) and count(body.seq[0], Select) == 0 and count(body.seq[1], Select) == 1
    for nv in (1, 8, 11):
        size = (nv + 3) // 4 * 4
        want = np.where(np.arange(size) < nv, 7, nv)
        on_targets(f, None, [np.zeros(size, "int32"), 7, nv], False, lambda r: np.testing.assert_array_equal(r[0], want))


def test_condition_EQ():  # noqa: N802 - TVM's name
    """``likely(i == 5)``: the loop splits around i = 5 and the Select is decided in every piece."""
    m, n = loom.var("m"), loom.var("n")
    i = loom.var("i")
    O = loom.decl_buffer((10,), "int32", name="O")
    f = pfunc([O], [m, n], For(i, 0, 10, "serial", BufferStore(O, Select(loom.likely(i == 5), m, n), [i])))
    body = partitioned(f, const=True)
    assert isinstance(body, SeqStmt) and len(body.seq) == 3 and count(body, Select) == 0
    want = np.where(np.arange(10) == 5, 7, 3)
    on_targets(f, None, [np.zeros(10, "int32"), 7, 3], True, lambda r: np.testing.assert_array_equal(r[0], want))


def test_thread_axis2():
    """A loop inside blockIdx/threadIdx scopes is split at points that do not depend on threadIdx."""
    n = 4096
    m = loom.var("m")
    A, B = loom.placeholder((n,), name="A"), loom.placeholder((n,), name="B")
    C = loom.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = loom.create_schedule(C.op)
    bx, x = s[C].split(C.op.axis[0], factor=32)
    tx, x = s[C].split(x, nparts=32)
    _, x = s[C].split(x, factor=m)
    s[C].bind(bx, loom.thread_axis("blockIdx.x"))
    s[C].bind(tx, loom.thread_axis("threadIdx.x"))
    args = [A, B, C, m]
    (f,) = loom.lower(s, args).functions.values()
    loops = collect(f.body, lambda y: isinstance(y, For))
    assert len(loops) >= 2 and not any("threadIdx" in str(lp.min) + str(lp.extent) for lp in loops)
    a, b = RNG.random(n, "float32"), RNG.random(n, "float32")
    for mv in (1, 3):
        on_targets(s, args, [a, b, np.zeros(n, "float32"), mv], False,
                   lambda r: np.testing.assert_array_equal(r[2], a + b))


def test_everything_during_deduction():
    """``likely(i / j < m)`` with j = 0 possible deduces nothing: the nest is left as it was."""
    m, n = loom.var("m"), loom.var("n")
    i, j = loom.var("i"), loom.var("j")
    O = loom.decl_buffer((n, 32), "int32", name="O")
    body = For(i, 0, n, "serial", For(j, 0, 32, "serial", IfThenElse(loom.likely(loom.truncdiv(i, j) < m),
                                                                     BufferStore(O, m, [i, j]))))
    got = partitioned(pfunc([O], [m, n], body))
    assert isinstance(got, For) and isinstance(got.body, For) and isinstance(got.body.body, IfThenElse)
    # The same nest with j from 1 (so that it can run) is checked for its values.
    body = For(i, 0, n, "serial", For(j, 0, 31, "serial", IfThenElse(
        loom.likely(loom.truncdiv(i, j + 1) < m), BufferStore(O, m, [i, j + 1]))))
    ii, jj = np.meshgrid(np.arange(9), np.arange(32), indexing="ij")
    want = np.where((jj > 0) & (ii // np.maximum(jj, 1) < 2), 2, 0)
    on_targets(pfunc([O], [m, n], body), None, [np.zeros((9, 32), "int32"), 2, 9], True,
               lambda r: np.testing.assert_array_equal(r[0], want))


def test_multi_likely():
    """Two split axes reordered: every tail of both axes loses its guards."""
    n, m = 94, 62
    A, B = loom.placeholder((n, m), name="A"), loom.placeholder((n, m), name="B")
    T = loom.compute((n, m), lambda i, j: A[i, j] + B[i, j], name="T")
    s = loom.create_schedule(T.op)
    x, y = T.op.axis
    xo, xi = s[T].split(x, factor=16)
    yo, yi = s[T].split(y, factor=16)
    s[T].reorder(xo, yo, xi, yi)
    body = scheduled(s, [A, B, T], const=True)
    assert count(body, IfThenElse) == 0
    # The main nest (4 loops), the j tail of full i blocks (2), the i tail (3), the corner (2).
    assert count(body, For) == 11
    a, b = RNG.random((n, m), "float32"), RNG.random((n, m), "float32")
    on_targets(s, [A, B, T], [a, b, np.zeros((n, m), "float32")], True,
               lambda r: np.testing.assert_array_equal(r[2], a + b))


def pool_nest(data: Any, out: Any, first: Callable[..., Any], second: Callable[..., Any]) -> For:
    """``for ow < 16, kw < 3: if likely(first): if likely(second): out[ow] = max(out[ow], data[ow + kw - 1])``."""
    ow, kw = loom.var("ow"), loom.var("kw")
    store = BufferStore(out, loom.max(out[ow], data[ow + kw - 1]), [ow])
    return For(ow, 0, 16, "serial", For(kw, 0, 3, "serial", IfThenElse(
        loom.likely(first(ow, kw)), IfThenElse(loom.likely(second(ow, kw)), store))))


def test_oneD_pool():  # noqa: N802 - TVM's name
    """A 1-D max pool with padding split in three nests: the border guards all go."""
    data, out = loom.decl_buffer((16,), "float32", name="data"), loom.decl_buffer((16,), "float32", name="out")
    body = seq(pool_nest(data, out, lambda ow, kw: ow > 0, lambda ow, kw: ow < 15),
               pool_nest(data, out, lambda ow, kw: ow < 1, lambda ow, kw: kw > 0),
               pool_nest(data, out, lambda ow, kw: ow > 14, lambda ow, kw: kw < 2))
    f = pfunc([data, out], [], body)
    assert count(partitioned(f, const=True), IfThenElse) == 0
    d = RNG.random(16, "float32")
    padded = np.concatenate([[-np.inf], d, [-np.inf]]).astype("float32")
    want = np.max([padded[:-2], padded[1:-1], padded[2:]], axis=0)
    on_targets(f, None, [d, np.full(16, -np.inf, "float32")], True, lambda r: np.testing.assert_array_equal(r[1], want))


def stencil(dtype: str) -> PrimFunc:
    m = 514
    Ab, Bb = loom.decl_buffer((m * m,), dtype, name="A"), loom.decl_buffer((m * m,), dtype, name="B")
    i, j = loom.var("i"), loom.var("j")
    store = BufferStore(Ab, Bb[i * m + j + 1] + Bb[(i + 1) * m + j + 1] + Bb[(i + 2) * m + j + 1], [(i + 1) * m + j + 1])
    return pfunc([Ab, Bb], [], For(i, 0, 11, "serial", For(j, 0, 160, "serial",
                                                          IfThenElse(loom.likely(i * 160 + j < 1600), store))))


def test_cce_loop_1():
    """A stencil over a 2-D range flattened into 11 x 160 with a guard at 1600: no guard is left.

    TVM's program is float16; the values are checked in float32 (the C backend has no float16).
    """
    assert count(partitioned(stencil("float16"), const=True), IfThenElse) == 0
    m = 514
    b = RNG.random(m * m, "float32")
    want = np.zeros(m * m, "float32")
    cols = np.arange(160) + 1
    for row in range(10):
        want[(row + 1) * m + cols] = b[row * m + cols] + b[(row + 1) * m + cols] + b[(row + 2) * m + cols]
    on_targets(stencil("float32"), None, [np.zeros(m * m, "float32"), b], True,
               lambda r: np.testing.assert_array_equal(r[0], want))


def test_cce_loop_2():
    """Tiles of 32 over 112: the last tile takes the other branch; both branches are decided per piece.

    (TVM's test calls an extern intrinsic with (head, tail); here each tile stores them.)
    """
    length, tile = 112, 32
    loop = (length + tile - 1) // tile
    i = loom.var("i")
    O = loom.decl_buffer((loop, 2), "int32", name="O")
    head = i * tile

    def emit(tail: Any) -> Any:
        return seq(BufferStore(O, head, [i, 0]), BufferStore(O, tail, [i, 1]))

    f = pfunc([O], [], For(i, 0, loop, "serial", IfThenElse(loom.likely(head + tile > length),
                                                           emit(loom.const(length)), emit(head + tile))))
    assert count(partitioned(f, const=True), IfThenElse) == 0
    heads = np.arange(loop) * tile
    want = np.stack([heads, np.minimum(heads + tile, length)], axis=1)
    on_targets(f, None, [np.zeros((loop, 2), "int32")], True, lambda r: np.testing.assert_array_equal(r[0], want))


def test_cce_loop_3():
    """9998 x 4 iterations guarded at 39991: the last row runs 3 of its 4 iterations, unguarded."""
    i, j = loom.var("i"), loom.var("j")
    O = loom.decl_buffer((9998,), "int32", name="O")
    f = pfunc([O], [], For(i, 0, 9998, "serial", For(j, 0, 4, "serial", IfThenElse(
        loom.likely(i * 4 + j < 39991), BufferStore(O, O[i] + j + 1, [i])))))
    assert count(partitioned(f, const=True), IfThenElse) == 0
    want = np.full(9998, 10, "int32")
    want[-1] = 6  # j = 0, 1, 2
    on_targets(f, None, [np.zeros(9998, "int32")], True, lambda r: np.testing.assert_array_equal(r[0], want))


def conv(channels: int, out_channels: int, size: int) -> tuple[Any, list]:
    """TVM's conv2d (3 x 3, stride 1, no padding) with its output tiled 16 x 16."""
    data = loom.placeholder((1, channels, size, size), name="data")
    kernel = loom.placeholder((3, 3, channels, out_channels), name="kernel")
    ic, kh, kw = (loom.reduce_axis((0, e), name=nm) for e, nm in ((channels, "ic"), (3, "kh"), (3, "kw")))
    out = size - 2
    C = loom.compute((1, out_channels, out, out), lambda n, oc, oh, ow: loom.sum(
        data[n, ic, oh + kh, ow + kw] * kernel[kh, kw, ic, oc], axis=[ic, kh, kw]), name="conv2d")
    s = loom.create_schedule(C.op)
    _, _, oh, ow = C.op.axis
    s[C].tile(oh, ow, 16, 16)
    return s, [data, kernel, C]


def test_conv_tiling():
    """TVM's 128-channel 64 x 64 conv tiled by 16: no guard is left (values checked on a smaller one)."""
    s, args = conv(128, 64, 64)
    assert count(scheduled(s, args, const=True), IfThenElse) == 0
    s, args = conv(3, 2, 20)
    d, k = RNG.random((1, 3, 20, 20), "float32"), RNG.random((3, 3, 3, 2), "float32")
    want = np.zeros((1, 2, 18, 18), "float32")
    for dh in range(3):
        for dw in range(3):
            want[0] += np.einsum("chw,co->ohw", d[0, :, dh:dh + 18, dw:dw + 18], k[dh, dw])
    on_targets(s, args, [d, k, np.zeros((1, 2, 18, 18), "float32")], True,
               lambda r: np.testing.assert_allclose(r[2], want, rtol=1e-5))


def test_multilevel_splitting_with_indivisble_factors():
    """130 split by 8, then by 16, unrolled: 8 maxes in the main loop and 2 for the last elements."""
    A = loom.placeholder((130,), dtype="float32", name="A")
    B = loom.compute((130,), lambda i: loom.max(A[i], loom.const(0.0, "float32")), name="B")  # topi.nn.relu
    s = loom.create_schedule(B.op)
    (y,) = s[B].op.axis
    yo, yi = s[B].split(y, factor=8)
    yoo, yoi = s[B].split(yo, factor=16)
    s[B].reorder(yoo, yoi, yi)
    s[B].unroll(yi)
    with loom.build_config(partition_const_loop=True):
        (f,) = loom.lower(s, [A, B], name="x").functions.values()
    assert count(f.body, Max) == 10 and count(f.body, IfThenElse) == 0
    a = RNG.standard_normal(130).astype("float32")
    on_targets(s, [A, B], [a, np.zeros(130, "float32")], True, lambda r: np.testing.assert_array_equal(r[1], np.maximum(a, 0)))


def test_double_splitting_with_indivisible_factors():
    """A producer split by 10 inside its consumer's blocks of 32 over 48 elements: no guard anywhere."""
    m = 48
    A = loom.placeholder((m,), name="A")
    C = loom.compute((m,), lambda i: A[i], name="C")
    D = loom.compute((m,), lambda i: C[i], name="D")
    s = loom.create_schedule(D.op)
    co, ci = s[C].split(C.op.axis[0], factor=10)
    do, di = s[D].split(D.op.axis[0], 32)
    s[C].compute_at(s[D], do)
    with loom.build_config(partition_const_loop=True):
        (f,) = loom.lower(s, [A, C, D], name="fadd1").functions.values()
    assert count(f.body, IfThenElse) == 0
    a = RNG.random(m, "float32")

    def check(r: list) -> None:
        np.testing.assert_array_equal(r[1], a)
        np.testing.assert_array_equal(r[2], a)

    on_targets(s, [A, C, D], [a, np.zeros(m, "float32"), np.zeros(m, "float32")], True, check)


def split_sum(K: int) -> tuple[Any, Any, list]:
    k = loom.reduce_axis((0, K), "k")
    A = loom.placeholder((1, K), name="A")
    B = loom.compute((1,), lambda b: loom.sum(A[b, k], axis=k), name="B")
    return loom.create_schedule(B.op), B, [A, B]


@pytest.mark.skipif(not hasattr(loom.create_schedule(split_sum(4)[1].op), "rfactor"),
                    reason="Schedule.rfactor is not in this build (issue 15, item 9)")
def test_simple_rfactor():
    """The factored stage's loop over the outer reduction chunks is partitioned."""
    s, B, args = split_sum(16 * 4 + 4)
    ko, _ = s[B].split(s[B].op.reduce_axis[0], 16)
    s.rfactor(B, ko, 0)
    (f,) = loom.lower(s, args, simple_mode=True).functions.values()
    before, after = partitioned(f), partitioned(f, const=True)
    assert not loom.structural_equal(before, after) and count(after, IfThenElse) < count(before, IfThenElse)
    a = RNG.random((1, 68), "float32")
    on_targets(s, args, [a, np.zeros(1, "float32")], True, lambda r: np.testing.assert_allclose(r[1], a.sum(1), rtol=1e-5))


def test_split_reduction():
    """test_simple_rfactor's reduction without rfactor: the split reduce loop loses its guard."""
    s, B, args = split_sum(16 * 4 + 4)
    s[B].split(s[B].op.reduce_axis[0], 16)
    (f,) = loom.lower(s, args, simple_mode=True).functions.values()
    before, after = partitioned(f), partitioned(f, const=True)
    assert count(before, IfThenElse) == 1 and count(after, IfThenElse) == 0
    a = RNG.random((1, 68), "float32")
    on_targets(s, args, [a, np.zeros(1, "float32")], True, lambda r: np.testing.assert_allclose(r[1], a.sum(1), rtol=1e-5))
