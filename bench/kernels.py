"""The benchmark kernels as Loom tensor expressions and schedules.

Each ``schedule_<workload>()`` returns ``(schedule, args)`` for a workload of
:mod:`workloads`; :func:`build` lowers and builds one for a target.  The schedules
are the classic hand-written CPU schedules (TVM's "How to optimize GEMM on CPU"
for the blocked matmul); ``tvm_kernels.py`` writes the very same ones in Apache
TVM's API, so the two columns of the benchmark compare code generators, not
schedules.
"""

from __future__ import annotations

from typing import Any, Callable

import loom

from workloads import SIZES

__all__ = ["SCHEDULES", "build", "schedule_vadd", "schedule_matmul_naive", "schedule_matmul_blocked",
           "schedule_softmax", "schedule_conv2d", "schedule_flatten"]


def schedule_vadd(n: int | None = None) -> tuple[Any, list]:
    """``C = A + B`` (``n`` floats, default the workload's): 64-wide vectors, chunks spread over the threads."""
    n = SIZES["vadd"]["n"] if n is None else n
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i], name="C")
    s = loom.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    return s, [A, B, C]


def _matmul(packed: bool):
    p = SIZES["matmul"]
    m, n, k, bn = p["m"], p["n"], p["k"], p["bn"]
    A = loom.placeholder((m, k), name="A")
    B = loom.placeholder((k, n), name="B")
    r = loom.reduce_axis((0, k), name="k")
    if not packed:
        return A, B, None, loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    # B re-laid out as [n / bn][k][bn]: the inner loop then reads bn consecutive floats.
    packed_b = loom.compute((n // bn, k, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * packed_b[j // bn, r, j % bn], axis=r), name="C")
    return A, B, packed_b, C


def schedule_matmul_naive() -> tuple[Any, list]:
    """``C = A @ B`` with the default schedule: three nested loops, k innermost."""
    A, B, _, C = _matmul(packed=False)
    return loom.create_schedule(C.op), [A, B, C]


def schedule_matmul_blocked() -> tuple[Any, list]:
    """The classic blocked GEMM: bn x bn tiles accumulated in a cache-write buffer,
    k split by 4 and unrolled, inner j vectorized, outer rows parallel, B packed."""
    p = SIZES["matmul"]
    bn, kfactor = p["bn"], p["kfactor"]
    A, B, packed_b, C = _matmul(packed=True)
    s = loom.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, factor=kfactor)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    s[C].parallel(xo)
    x, _, z = s[packed_b].op.axis
    s[packed_b].vectorize(z)
    s[packed_b].parallel(x)
    return s, [A, B, C]


def schedule_softmax() -> tuple[Any, list]:
    """Row softmax in four stages (max, exp, sum, divide), all computed per row of
    the output, rows in parallel.  The two row reductions are split by hand into
    ``lanes`` vectorized partial reductions plus a short final one: the same
    rewrite ``rfactor`` does, written in the expression so both compilers get it."""
    p = SIZES["softmax"]
    rows, cols, lanes = p["rows"], p["cols"], p["lanes"]
    X = loom.placeholder((rows, cols), name="X")
    ko = loom.reduce_axis((0, cols // lanes), name="ko")
    part_max = loom.compute((rows, lanes), lambda i, l: loom.max(X[i, ko * lanes + l], axis=ko), name="part_max")
    kl = loom.reduce_axis((0, lanes), name="kl")
    row_max = loom.compute((rows,), lambda i: loom.max(part_max[i, kl], axis=kl), name="row_max")
    E = loom.compute((rows, cols), lambda i, j: loom.exp(X[i, j] - row_max[i]), name="E")
    so = loom.reduce_axis((0, cols // lanes), name="so")
    part_sum = loom.compute((rows, lanes), lambda i, l: loom.sum(E[i, so * lanes + l], axis=so), name="part_sum")
    sl = loom.reduce_axis((0, lanes), name="sl")
    row_sum = loom.compute((rows,), lambda i: loom.sum(part_sum[i, sl], axis=sl), name="row_sum")
    Y = loom.compute((rows, cols), lambda i, j: E[i, j] / row_sum[i], name="Y")

    s = loom.create_schedule(Y.op)
    i, j = Y.op.axis
    s[Y].parallel(i)
    jo, ji = s[Y].split(j, factor=lanes)
    s[Y].vectorize(ji)
    for stage in (part_max, row_max, E, part_sum, row_sum):
        s[stage].compute_at(s[Y], i)
    for part in (part_max, part_sum):
        s[part].reorder(part.op.reduce_axis[0], part.op.axis[1])
        s[part].vectorize(part.op.axis[1])
    _, ej = E.op.axis
    _, eji = s[E].split(ej, factor=lanes)
    s[E].vectorize(eji)
    return s, [X, Y]


def schedule_conv2d() -> tuple[Any, list]:
    """NCHW direct convolution: an ``ftile`` x ``xtile`` block of outputs (output
    channels x columns) accumulates in registers over (rc, ry, rx), columns
    vectorized, output rows parallel; the padded input is computed first, in
    parallel over its rows, so each thread's convolution reads the padded rows its
    own core wrote (all but the two at each edge of its share)."""
    p = SIZES["conv2d"]
    n, c, f, size, kk, pad = p["batch"], p["cin"], p["cout"], p["size"], p["kernel"], p["pad"]
    out = size + 2 * pad - kk + 1
    data = loom.placeholder((n, c, size, size), name="data")
    weight = loom.placeholder((f, c, kk, kk), name="weight")
    padded = loom.compute(
        (n, c, size + 2 * pad, size + 2 * pad),
        lambda b, ch, y, x: loom.if_then_else(
            loom.all(y >= pad, y < size + pad, x >= pad, x < size + pad),
            data[b, ch, y - pad, x - pad], loom.const(0.0, "float32")), name="padded")
    rc = loom.reduce_axis((0, c), name="rc")
    ry = loom.reduce_axis((0, kk), name="ry")
    rx = loom.reduce_axis((0, kk), name="rx")
    conv = loom.compute(
        (n, f, out, out),
        lambda b, ff, y, x: loom.sum(padded[b, rc, y + ry, x + rx] * weight[ff, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")

    s = loom.create_schedule(conv.op)
    pb, pc, py, px = padded.op.axis
    s[padded].reorder(pb, py, pc, px)
    s[padded].parallel(s[padded].fuse(pb, py))
    acc = s.cache_write(conv, "global")
    b, ff, y, x = conv.op.axis
    fo, fi = s[conv].split(ff, factor=p["ftile"])
    xo, xi = s[conv].split(x, factor=p["xtile"])
    s[conv].reorder(b, y, fo, xo, fi, xi)
    s[conv].parallel(s[conv].fuse(b, y))
    s[acc].compute_at(s[conv], xo)
    _, af, _, ax = s[acc].op.axis
    arc, ary, arx = s[acc].op.reduce_axis
    s[acc].reorder(arc, ary, arx, af, ax)
    s[acc].unroll(af)
    s[acc].vectorize(ax)
    return s, [data, weight, conv]


def schedule_flatten() -> tuple[Any, list]:
    """``B[i] = A[i // m, i % m]`` with ``n`` and ``m`` bound when called: the schedule of vector add.

    The offset ``(i // m) * m + i % m`` is ``i``: the generated code should neither
    divide nor gather (loom.codegen.flat_offset).
    """
    n, m = loom.var("n"), loom.var("m")
    A = loom.placeholder((n, m), name="A")
    B = loom.compute((n * m,), lambda i: A[i // m, i % m], name="B")
    s = loom.create_schedule(B.op)
    outer, inner = s[B].split(B.op.axis[0], factor=64)
    s[B].parallel(outer)
    s[B].vectorize(inner)
    return s, [A, B]


SCHEDULES: dict[str, Callable[[], tuple[Any, list]]] = {
    "vadd": schedule_vadd,
    "matmul_naive": schedule_matmul_naive,
    "matmul_blocked": schedule_matmul_blocked,
    "softmax": schedule_softmax,
    "conv2d": schedule_conv2d,
    "flatten": schedule_flatten,
}


def build(name: str, target: str) -> Any:
    """Lower and build the kernel of workload ``name`` for ``target``; the function is named ``name``."""
    s, args = SCHEDULES[name]()
    return loom.build(s, args, target=target, name=name)
