"""The suite's end-to-end tensor programs, each with a CPU schedule and a bound (blocks/threads) one.

Every builder takes the schedule ``variant`` (``"cpu"``: tile, vectorize,
parallel, unroll; ``"bound"``: every loop that touches memory bound to
``blockIdx``/``threadIdx``, reductions serial inside a thread, intermediate
stages inlined or attached inside a bound loop) and returns a :class:`Program`:
the schedule, its arguments, input values and numpy's answer.  Shapes are
chosen so that no split factor divides them: guards and tails run.

>>> p = PROGRAMS["pipeline"]("bound")
>>> [t.name for t in p.args], p.want.shape
(['A', 'D'], (13, 17))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import loom

from .harness import BLOCK, bind_root

__all__ = ["Program", "PROGRAMS", "M", "N", "K", "rand", "matmul"]

M, N, K = 13, 17, 19


@dataclass
class Program:
    """A schedule with everything needed to run it and check its last argument."""

    s: Any
    args: list[Any]
    values: list[Any]
    want: np.ndarray
    config: dict[str, Any] = field(default_factory=dict)
    tol: float = 1e-4


def rand(shape: tuple[int, ...], seed: int = 0, dtype: str = "float32") -> np.ndarray:
    """Reproducible standard-normal values."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def matmul(m: int, n: int, k: int) -> tuple[Any, Any, Any]:
    """``C = A @ B`` as a tensor expression: ``(A, B, C)``."""
    A = loom.placeholder((m, k), name="A")
    B = loom.placeholder((k, n), name="B")
    r = loom.reduce_axis((0, k), name="k")
    C = loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def _matmul_program(s: Any, A: Any, B: Any, C: Any, **config: Any) -> Program:
    a, b = rand((M, K)), rand((K, N), 1)
    return Program(s, [A, B, C], [a, b, np.zeros((M, N), "float32")], a @ b, config)


def matmul_default(variant: str) -> Program:
    """The default loop nest on a CPU; a 2-D grid of 2-D blocks, one local accumulator per thread, bound."""
    A, B, C = matmul(M, N, K)
    s = loom.create_schedule(C.op)
    if variant == "bound":
        CC = s.cache_write(C, "local")
        io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
        for axis, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
            s[C].bind(axis, loom.thread_axis(tag))
        s[CC].compute_at(s[C], ji)
    return _matmul_program(s, A, B, C)


def matmul_blocked(variant: str) -> Program:
    """The classic CPU schedule (tile 4x8, split k by 4, reorder, unroll k.inner), vectorized and
    parallel on a CPU, with the tiles bound to blocks and threads otherwise."""
    A, B, C = matmul(M, N, K)
    s = loom.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    if variant == "bound":
        s[C].reorder(io, jo, ii, ji, ko, ki)
        for axis, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
            s[C].bind(axis, loom.thread_axis(tag))
    else:
        s[C].reorder(io, jo, ko, ii, ki, ji)
        s[C].vectorize(ji)
        s[C].parallel(io)
    s[C].unroll(ki)
    return _matmul_program(s, A, B, C, auto_unroll_max_step=16, partition_const_loop=True)


def matmul_cached(variant: str) -> Program:
    """A local accumulator (cache_write) computed inside the fused, split output loop."""
    A, B, C = matmul(M, N, K)
    s = loom.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    if variant == "bound":
        _, where = bind_root(s, C)
    else:
        where, _ = s[C].split(s[C].fuse(*C.op.axis), factor=5)
    s[CC].compute_at(s[C], where)
    return _matmul_program(s, A, B, C)


def pipeline(variant: str) -> Program:
    """Three stages: B inlined, C computed inside D's loops."""
    A = loom.placeholder((M, N), name="A")
    B = loom.compute((M, N), lambda i, j: A[i, j] * 2.0, name="B")
    C = loom.compute((M, N), lambda i, j: B[i, j] + 1.0, name="C")
    D = loom.compute((M, N), lambda i, j: C[i, j] * C[i, j], name="D")
    s = loom.create_schedule(D.op)
    s[B].compute_inline()
    if variant == "bound":
        _, where = bind_root(s, D)
        s[C].set_scope("local")
    else:
        where, _ = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], where)
    a = rand((M, N))
    return Program(s, [A, D], [a, np.zeros_like(a)], (a * 2 + 1) ** 2, tol=1e-5)


def softmax(variant: str) -> Program:
    """Row max, exponentials, row sum and division: four stages attached to the output's rows."""
    X = loom.placeholder((M, N), name="X")
    k1 = loom.reduce_axis((0, N), name="k1")
    mx = loom.compute((M,), lambda i: loom.max(X[i, k1], axis=k1), name="mx")
    e = loom.compute((M, N), lambda i, j: loom.exp(X[i, j] - mx[i]), name="e")
    k2 = loom.reduce_axis((0, N), name="k2")
    total = loom.compute((M,), lambda i: loom.sum(e[i, k2], axis=k2), name="total")
    out = loom.compute((M, N), lambda i, j: e[i, j] / total[i], name="out")
    s = loom.create_schedule(out.op)
    rows, inner = s[out].split(out.op.axis[0], factor=3 if variant == "cpu" else 4)
    if variant == "bound":  # a block of 4 threads, one row each
        s[out].bind(rows, loom.thread_axis("blockIdx.x"))
        s[out].bind(inner, loom.thread_axis("threadIdx.x"))
        rows = inner
    for stage in (mx, e, total):
        s[stage].compute_at(s[out], rows)
        if variant == "bound":
            s[stage].set_scope("local")
    x = rand((M, N))
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    return Program(s, [X, out], [x, np.zeros_like(x)], ref / ref.sum(axis=1, keepdims=True), tol=1e-5)


def conv2d(variant: str) -> Program:
    """A padding stage (if_then_else) computed per output tile, then a 3x3 convolution."""
    n, c, h, w, oc, kh = 1, 3, 7, 9, 4, 3
    data = loom.placeholder((n, c, h, w), name="data")
    weight = loom.placeholder((oc, c, kh, kh), name="weight")
    pad = loom.compute(
        (n, c, h + 2, w + 2),
        lambda b, ch, y, x: loom.if_then_else(
            loom.all(y >= 1, y < h + 1, x >= 1, x < w + 1), data[b, ch, y - 1, x - 1], loom.const(0.0)),
        name="pad")
    rc, ry, rx = (loom.reduce_axis((0, e), name=nm) for e, nm in ((c, "rc"), (kh, "ry"), (kh, "rx")))
    conv = loom.compute(
        (n, oc, h, w),
        lambda b, o, y, x: loom.sum(pad[b, rc, y + ry, x + rx] * weight[o, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    s = loom.create_schedule(conv.op)
    if variant == "bound":  # one output per thread: its padded window and accumulator are local
        acc = s.cache_write(conv, "local")
        _, tx = bind_root(s, conv)
        s[acc].compute_at(s[conv], tx)
        s[pad].compute_at(s[acc], acc.op.axis[-1])
        s[pad].set_scope("local")
    else:
        where, _ = s[conv].split(conv.op.axis[2], factor=4)
        s[pad].compute_at(s[conv], where)
    d, wt = rand((n, c, h, w)), rand((oc, c, kh, kh), 1)
    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((n, oc, h, w), "float32")
    for y in range(h):
        for x in range(w):
            ref[0, :, y, x] = np.tensordot(wt, padded[0, :, y:y + kh, x:x + kh], axes=([1, 2, 3], [0, 1, 2]))
    return Program(s, [data, weight, conv], [d, wt, np.zeros_like(ref)], ref)


def symbolic(length: int) -> Callable[[str], Program]:
    """``C = A * 3 + B`` over a symbolic length ``n``, bound at run time to ``length``."""
    def build(variant: str) -> Program:
        n = loom.var("n")
        A = loom.placeholder((n,), name="A")
        B = loom.placeholder((n,), name="B")
        C = loom.compute((n,), lambda i: A[i] * 3.0 + B[i], name="C")
        s = loom.create_schedule(C.op)
        if variant == "bound":
            bind_root(s, C, BLOCK // 2)
        else:
            xo, xi = s[C].split(C.op.axis[0], factor=8)
            s[C].vectorize(xi)
            s[C].parallel(xo)
        a, b = rand((length,)), rand((length,), 1)
        return Program(s, [A, B, C], [a, b, np.zeros_like(a)], a * 3 + b, tol=1e-6)  # FMA rounds once

    return build


PROGRAMS: dict[str, Callable[[str], Program]] = {
    "matmul_default": matmul_default,
    "matmul_blocked": matmul_blocked,
    "matmul_cached": matmul_cached,
    "pipeline": pipeline,
    "softmax": softmax,
    "conv2d": conv2d,
    **{f"symbolic_{n}": symbolic(n) for n in (1, 7, 33)},
}


# --------------------------------------------------------------------------- threads sharing memory


def tiled_matmul(m: int, n: int, k: int, tile: int = 8) -> tuple[Any, list[Any]]:
    """C = A @ B; a tile x tile block of threads loads A's and B's tiles into shared memory together."""
    A, B, C = matmul(m, n, k)
    s = loom.create_schedule(C.op)
    AS, BS = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    ty, tx = loom.thread_axis("threadIdx.y"), loom.thread_axis("threadIdx.x")
    io, ii = s[C].split(C.op.axis[0], factor=tile)
    jo, ji = s[C].split(C.op.axis[1], factor=tile)
    s[C].reorder(io, jo, ii, ji)
    s[C].bind(io, loom.thread_axis("blockIdx.y"))
    s[C].bind(jo, loom.thread_axis("blockIdx.x"))
    s[C].bind(ii, ty)
    s[C].bind(ji, tx)
    s[CL].compute_at(s[C], ji)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=tile)
    for tile_stage in (AS, BS):
        s[tile_stage].compute_at(s[CL], ko)
        s[tile_stage].bind(s[tile_stage].op.axis[0], ty)
        s[tile_stage].bind(s[tile_stage].op.axis[1], tx)
    return s, [A, B, C]


def shared_reversal(n: int, block: int) -> tuple[Any, list[Any]]:
    """B[i] = A[n - 1 - i]: each block stages its window of A in shared memory, and each thread reads
    the element another thread of its block wrote."""
    A = loom.placeholder((n,), name="A")
    B = loom.compute((n,), lambda i: A[n - 1 - i] * 2.0, name="B")
    s = loom.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=block)
    s[B].bind(bx, loom.thread_axis("blockIdx.x"))
    s[B].bind(tx, loom.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], bx)
    s[AS].bind(s[AS].op.axis[0], loom.thread_axis("threadIdx.x"))
    return s, [A, B]
