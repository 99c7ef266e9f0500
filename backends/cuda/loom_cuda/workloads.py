"""GPU schedules of the classic workloads, shared by the tests, the docs and ``bench/bench_cuda.py``.

Each function returns ``(schedule, args)`` for ``loom.build(s, args, target="cuda")``;
the schedules bind loops to ``blockIdx``/``threadIdx`` the way a TVM user
would write them, and run unchanged on ``interp`` or ``ext_dev`` (GPU semantics
on the reference interpreter), which is how they are checked without a GPU.

>>> import numpy as np, loom
>>> s, args = vector_add(1000, threads=128)
>>> f = loom.build(s, args, target="interp")
>>> a, b = np.ones(1000, "float32"), np.arange(1000, dtype="float32")
>>> c = np.zeros(1000, "float32"); f(a, b, c); bool((c == a + b).all())
True
"""

from __future__ import annotations

from typing import Any

import loom
from loom.tune.templates.cuda import cooperative_fetch

__all__ = ["vector_add", "tiled_matmul", "row_sum", "row_softmax", "half_elementwise"]


def _threads(name: str) -> Any:
    return loom.thread_axis(name)


def vector_add(n: Any, threads: int = 256, lanes: int = 1, dtype: str = "float32") -> tuple[Any, list[Any]]:
    """``C = A + B``: each block covers ``threads * lanes`` elements, each thread ``lanes`` adjacent ones
    (a vectorized access of ``lanes`` elements when ``lanes > 1``)."""
    A = loom.placeholder((n,), dtype, name="A")
    B = loom.placeholder((n,), dtype, name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i], name="C")
    s = loom.create_schedule(C.op)
    bx, rest = s[C].split(C.op.axis[0], factor=threads * lanes)
    if lanes > 1:
        tx, vec = s[C].split(rest, factor=lanes)
        s[C].vectorize(vec)
    else:
        tx = rest
    s[C].bind(bx, _threads("blockIdx.x"))
    s[C].bind(tx, _threads("threadIdx.x"))
    return s, [A, B, C]


def tiled_matmul(n: int, m: int | None = None, k: int | None = None, tile: int = 16, per_thread: int = 4,
                 k_tile: int = 8, dtype: str = "float32") -> tuple[Any, list[Any]]:
    """``C = A @ B`` (``A`` n x k, ``B`` k x m) with shared-memory tiles loaded cooperatively.

    A block of ``tile x tile`` threads computes a ``tile * per_thread`` square of
    ``C``; each thread ``per_thread x per_thread`` elements, accumulated in a
    ``local`` cache.  For each step of ``k_tile`` along ``k`` the block's threads
    copy a tile of ``A`` and of ``B`` into ``shared`` memory together (ThreadSync
    puts a barrier before and after each use), then each thread reads them.
    """
    m = n if m is None else m
    k = n if k is None else k
    A = loom.placeholder((n, k), dtype, name="A")
    B = loom.placeholder((k, m), dtype, name="B")
    r = loom.reduce_axis((0, k), name="r")
    C = loom.compute((n, m), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    s = loom.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    ty, tx = _threads("threadIdx.y"), _threads("threadIdx.x")
    block = tile * per_thread
    bi, ii = s[C].split(C.op.axis[0], factor=block)
    bj, jj = s[C].split(C.op.axis[1], factor=block)
    ti, yi = s[C].split(ii, nparts=tile)
    tj, xi = s[C].split(jj, nparts=tile)
    s[C].reorder(bi, bj, ti, tj, yi, xi)
    s[C].bind(bi, _threads("blockIdx.y"))
    s[C].bind(bj, _threads("blockIdx.x"))
    s[C].bind(ti, ty)
    s[C].bind(tj, tx)
    s[CL].compute_at(s[C], tj)
    ko, ki = s[CL].split(CL.op.reduce_axis[0], factor=k_tile)
    s[CL].reorder(ko, ki, *CL.op.axis)
    s[CL].unroll(ki)
    for S in (AS, BS):
        cooperative_fetch(s, S, CL, ko, (ty, tile), (tx, tile))
    return s, [A, B, C]


def row_sum(rows: Any, cols: Any, threads: int = 256, dtype: str = "float32") -> tuple[Any, list[Any]]:
    """``B[i] = sum(A[i, :])``: a block per row, the row's columns shared by ``threads`` threads whose
    partial sums a cross-thread reduction combines (warp shuffles and shared memory on the GPU)."""
    A = loom.placeholder((rows, cols), dtype, name="A")
    k = loom.reduce_axis((0, cols), name="k")
    B = loom.compute((rows,), lambda i: loom.sum(A[i, k], axis=k), name="B")
    s = loom.create_schedule(B.op)
    _, ki = s[B].split(k, factor=threads)
    s[B].bind(B.op.axis[0], _threads("blockIdx.x"))
    s[B].bind(ki, _threads("threadIdx.x"))
    return s, [A, B]


def row_softmax(rows: Any, cols: Any, threads: int = 256, dtype: str = "float32") -> tuple[Any, list[Any]]:
    """``softmax(A, axis=1)`` in one kernel: a block per row computes the row's max and the sum of
    ``exp(A - max)`` with cross-thread reductions, then each thread writes its share of the row."""
    A = loom.placeholder((rows, cols), dtype, name="A")
    k1 = loom.reduce_axis((0, cols), name="k1")
    k2 = loom.reduce_axis((0, cols), name="k2")
    mx = loom.compute((rows,), lambda i: loom.max(A[i, k1], axis=k1), name="row_max")
    ex = loom.compute((rows, cols), lambda i, j: loom.exp(A[i, j] - mx[i]), name="exps")
    sm = loom.compute((rows,), lambda i: loom.sum(ex[i, k2], axis=k2), name="row_sum")
    out = loom.compute((rows, cols), lambda i, j: ex[i, j] / sm[i], name="softmax")
    s = loom.create_schedule(out.op)
    s[ex].compute_inline()
    bx, tx = _threads("blockIdx.x"), _threads("threadIdx.x")
    s[out].bind(out.op.axis[0], bx)
    _, ji = s[out].split(out.op.axis[1], factor=threads)
    s[out].bind(ji, tx)
    for red in (mx, sm):
        # The reduction's value is in thread 0 of the block; in shared memory every thread reads it.
        s[red].set_scope("shared")
        s[red].compute_at(s[out], out.op.axis[0])
        _, ki = s[red].split(red.op.reduce_axis[0], factor=threads)
        s[red].bind(ki, tx)
    return s, [A, out]


def half_elementwise(n: Any, threads: int = 256, dtype: str = "float16") -> tuple[Any, list[Any]]:
    """``C = A * B + exp(A)`` in half precision (``float16`` or ``bfloat16``)."""
    A = loom.placeholder((n,), dtype, name="A")
    B = loom.placeholder((n,), dtype, name="B")
    C = loom.compute((n,), lambda i: A[i] * B[i] + loom.exp(A[i]), name="C")
    s = loom.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=threads)
    s[C].bind(bx, _threads("blockIdx.x"))
    s[C].bind(tx, _threads("threadIdx.x"))
    return s, [A, B, C]
