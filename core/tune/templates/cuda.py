"""``matmul_cuda``: the GPU GEMM template, ``C[M, N] = A[M, K] @ B[K, N]`` for ``target="cuda"``.

A block of ``ty x tx`` threads computes a ``ty*py x tx*px`` tile of ``C``, each
thread a ``py x px`` sub-tile accumulated in registers (a ``local`` cache).  The
reduction is split into steps of ``kt``; with ``shared`` on, each step first copies
the block's slices of ``A`` and ``B`` into shared memory, all threads of the
block together (barriers around each use), else every thread reads global memory.
The knobs:

- ``tile_y``, ``tile_x``: ``[-1, threads, per_thread]`` for rows and columns
  (blocks, threads of a block, elements of a thread), 8 to 32 threads per axis
  where the size allows, a block tile of at most 128;
- ``tile_k``: ``[-1, kt]``, the reduction step, 4 to 16;
- ``shared``: stage ``A`` and ``B`` in shared memory, or not;
- ``unroll``: ``"none"``, ``"k"`` (the ``kt`` loop) or ``"k+tile"`` (it and the thread's sub-tile).

Each knob is bounded on its own, so every config fits the launch limits (at most
32 x 32 = 1024 threads, and ``(128 + 128) * 16`` elements of shared memory).
Only core Loom is needed to build the schedule; building for ``cuda`` needs the
loom-cuda backend and nvcc, and the schedules also run on ``interp`` (GPU
semantics on the reference interpreter), which is how they are checked without a GPU.

>>> import numpy as np, loom
>>> from loom.tune import Task
>>> task = Task(matmul_cuda, (32, 32, 16), target="interp")
>>> s, (A, B, C) = task.instantiate(task.space.get(0))
>>> f = loom.build(s, [A, B, C], target="interp")
>>> a, b = np.ones((32, 16), "float32"), np.ones((16, 32), "float32")
>>> c = np.zeros((32, 32), "float32"); f(a, b, c); float(c.min()), float(c.max())
(16.0, 16.0)
"""

from __future__ import annotations

from typing import Any

from ...te import compute, create_schedule, placeholder, reduce_axis, sum as te_sum, thread_axis
from ..knobs import OtherOptionEntity, SplitEntity
from ..task import template
from .matmul import check_dims, factors_between, nearest_at_most

__all__ = ["matmul_cuda", "cooperative_fetch"]

#: Threads per block axis: 32 x 32 is the 1024-thread limit of every CUDA GPU.
MAX_THREADS = 32
#: Elements per thread per axis: 8 x 8 accumulators keep within the register file.
MAX_PER_THREAD = 8
#: Block tile per axis: with ``tile_k`` at most 16, shared memory stays under 48 KiB even for float64.
MAX_BLOCK = 128


def _block_split(length: int) -> tuple[list[int], Any]:
    """The thread counts tried for one axis and the filter of its ``[-1, threads, per_thread]`` split."""
    threads = factors_between(length, 8, MAX_THREADS)

    def keep(e: SplitEntity) -> bool:
        _, t, p = e.size
        return t in threads and p <= MAX_PER_THREAD and t * p <= MAX_BLOCK

    return threads, keep


@template(name="loom.matmul_cuda")
def matmul_cuda(cfg: Any, M: int, N: int, K: int, dtype: str = "float32") -> tuple[Any, list]:
    """The GPU GEMM template (see the module docstring for its knobs).

    >>> from loom.tune import ConfigSpace
    >>> space = ConfigSpace(); _ = matmul_cuda(space, 1024, 1024, 1024)
    >>> len(space), sorted(space.space_map)
    (2178, ['shared', 'tile_k', 'tile_x', 'tile_y', 'unroll'])
    """
    check_dims("loom.tune.templates.matmul_cuda", M=M, N=N, K=K)
    M, N, K = int(M), int(N), int(K)
    rows, keep_rows = _block_split(M)
    cols, keep_cols = _block_split(N)
    ksteps = factors_between(K, 4, 16)
    cfg.define_split("tile_y", M, num_outputs=3, filter=keep_rows)
    cfg.define_split("tile_x", N, num_outputs=3, filter=keep_cols)
    cfg.define_split("tile_k", K, num_outputs=2, filter=lambda e: e.size[-1] in ksteps)
    cfg.define_knob("shared", [True, False])
    cfg.define_knob("unroll", ["k", "k+tile", "none"])
    if cfg.is_fallback:
        # 16 x 16 threads of 4 x 4 elements, 8-deep steps staged in shared memory (where the sizes allow).
        for name, length, choices in (("tile_y", M, rows), ("tile_x", N, cols)):
            t = nearest_at_most(choices, 16)
            p = nearest_at_most([d for d in range(1, MAX_PER_THREAD + 1) if (length // t) % d == 0], 4)
            cfg[name] = SplitEntity([-1, t, p])
        cfg["tile_k"] = SplitEntity([-1, nearest_at_most(ksteps, 8)])
        cfg["shared"] = OtherOptionEntity(True)
        cfg["unroll"] = OtherOptionEntity("k")
    cfg.add_flop(2.0 * M * N * K)

    A = placeholder((M, K), dtype, name="A")
    B = placeholder((K, N), dtype, name="B")
    r = reduce_axis((0, K), name="r")
    C = compute((M, N), lambda i, j: te_sum(A[i, r] * B[r, j], axis=r), name="C")
    s = create_schedule(C.op)
    shared = bool(cfg["shared"].val)
    stages = [s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])] if shared else []
    acc = s.cache_write(C, "local")

    by, ty, yi = cfg["tile_y"].apply(s, C, C.op.axis[0])
    bx, tx, xi = cfg["tile_x"].apply(s, C, C.op.axis[1])
    s[C].reorder(by, bx, ty, tx, yi, xi)
    thread_y, thread_x = thread_axis("threadIdx.y"), thread_axis("threadIdx.x")
    s[C].bind(by, thread_axis("blockIdx.y"))
    s[C].bind(bx, thread_axis("blockIdx.x"))
    s[C].bind(ty, thread_y)
    s[C].bind(tx, thread_x)
    s[acc].compute_at(s[C], tx)

    ko, ki = cfg["tile_k"].apply(s, acc, s[acc].op.reduce_axis[0])
    ay, ax = s[acc].op.axis
    s[acc].reorder(ko, ki, ay, ax)
    unroll = cfg["unroll"].val
    if unroll in ("k", "k+tile"):
        s[acc].unroll(ki)
    if unroll == "k+tile":
        s[acc].unroll(ay)
        s[acc].unroll(ax)

    for stage in stages:
        cooperative_fetch(s, stage, acc, ko, (thread_y, cfg["tile_y"].size[1]), (thread_x, cfg["tile_x"].size[1]))
    return s, [A, B, C]


def cooperative_fetch(s: Any, stage: Any, consumer: Any, axis: Any, threads_y: tuple[Any, int],
                      threads_x: tuple[Any, int]) -> None:
    """Compute ``stage`` (a shared-memory copy) at ``axis`` of ``consumer``, its elements dealt out
    to the block's threads: the copy's axes fused, then split over ``threads_y`` x ``threads_x``
    (each ``(thread IterVar, count)``), so the threads load each step's slice together."""
    (ty, nty), (tx, ntx) = threads_y, threads_x
    s[stage].compute_at(s[consumer], axis)
    fused = s[stage].fuse(*s[stage].op.axis)
    _, lanes = s[stage].split(fused, factor=nty * ntx)
    ly, lx = s[stage].split(lanes, factor=ntx)
    s[stage].bind(ly, ty)
    s[stage].bind(lx, tx)
