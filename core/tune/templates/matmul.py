"""``matmul``: the CPU GEMM template, ``C[M, N] = A[M, K] @ B[K, N]``.

The schedule is the classic register-blocked GEMM: ``B`` is packed into column
panels ``packedB[N / bn][K][bn]`` (``bn`` is the inner part of the ``tile_y``
split), and each ``mr x bn`` tile of ``C`` (``mr`` from ``tile_x``) accumulates in
a ``local`` cache with ``k`` outermost, its rows unrolled or not and its columns
vectorized.  The knobs:

- ``tile_x``: rows of a tile (``[-1, mr]``), ``mr`` a factor of ``M`` up to 16;
- ``tile_y``: columns of a tile, the packing width (``[-1, bn]``), a factor of ``N``;
- ``tile_k``: ``k`` split ``[-1, ku]``, the inner ``ku`` steps unrolled (1: no split);
- ``reorder_outer``: the order of the two tile loops, ``[0, 1]`` row tiles outer,
  ``[1, 0]`` column panels outer (the packed panel stays in cache while the row
  tiles sweep it, the fast order at large sizes);
- ``ann_rows``: ``["unroll"]`` or ``["none"]`` for the tile's rows.

Every split divides its axis, so any ``M, N, K`` is correct.  The fallback
config is ``8 x 32``, column panels outer, rows unrolled (where ``M`` and ``N``
allow; else the nearest smaller tile), the config that matches OpenBLAS at one
thread on an AVX-512 core at 1024^3.

>>> import numpy as np, loom
>>> from loom.tune import Task
>>> task = Task(matmul, (48, 40, 17), target="llvm")
>>> len(task.space) > 50, task.flop == 2 * 48 * 40 * 17
(True, True)
>>> s, (A, B, C) = task.instantiate()                 # the fallback config
>>> f = loom.build(s, [A, B, C], target="llvm")
>>> a, b = np.ones((48, 17), "float32"), np.ones((17, 40), "float32")
>>> c = np.zeros((48, 40), "float32"); f(a, b, c); float(c[3, 5])
17.0
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...errors import LoomTypeError, LoomValueError
from ...te import compute, create_schedule, placeholder, reduce_axis, sum as te_sum
from ..knobs import AnnotateEntity, ReorderEntity, SplitEntity
from ..task import template

__all__ = ["matmul", "matmul_reference", "factors_between", "nearest_at_most", "check_dims"]

#: Row-tile heights tried: an ``mr x bn`` accumulator must fit the vector registers.
MAX_ROWS = 16
#: Packing widths tried: wider panels stop fitting L1 next to the ``A`` rows.
MAX_COLS = 128
#: Column tiles narrower than this waste the vector lanes (kept only when ``N`` has no wider factor).
MIN_COLS = 8


def check_dims(where: str, **dims: Any) -> None:
    """Every value in ``dims`` must be a positive int (shapes are static in a template)."""
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise LoomTypeError(f"{where}: {name} must be an int, got {value!r}")
        if value < 1:
            raise LoomValueError(f"{where}: {name} must be at least 1, got {value}")


def factors_between(n: int, lo: int, hi: int) -> list[int]:
    """The factors of ``n`` in ``[lo, hi]``; when there are none, the factors up to ``hi``
    (then just ``[1]`` at worst), so a knob never ends up empty.

    >>> factors_between(56, 8, 64), factors_between(17, 8, 16)
    ([8, 14, 28, 56], [1])
    """
    inside = [d for d in range(1, n + 1) if n % d == 0 and lo <= d <= hi]
    return inside or [d for d in range(1, min(n, hi) + 1) if n % d == 0]


def nearest_at_most(choices: Sequence[int], want: int) -> int:
    """The largest of ``choices`` not above ``want`` (else the smallest): a fallback's tile
    when the preferred one does not divide the axis.

    >>> nearest_at_most([1, 2, 4, 5, 10], 8), nearest_at_most([12, 24], 8)
    (5, 12)
    """
    below = [c for c in choices if c <= want]
    return max(below) if below else min(choices)


def _inner_in(allowed: Sequence[int]) -> Any:
    keep = set(allowed)
    return lambda e: e.size[-1] in keep


@template(name="loom.matmul")
def matmul(cfg: Any, M: int, N: int, K: int, dtype: str = "float32") -> tuple[Any, list]:
    """The CPU GEMM template (see the module docstring for its knobs).

    >>> from loom.tune import ConfigSpace
    >>> space = ConfigSpace(); _ = matmul(space, 64, 64, 64)
    >>> sorted(space.space_map)
    ['ann_rows', 'reorder_outer', 'tile_k', 'tile_x', 'tile_y']
    """
    check_dims("loom.tune.templates.matmul", M=M, N=N, K=K)
    M, N, K = int(M), int(N), int(K)
    rows = factors_between(M, 1, MAX_ROWS)
    cols = factors_between(N, MIN_COLS, MAX_COLS)
    kunroll = [d for d in (1, 2, 4) if K % d == 0]
    cfg.define_split("tile_x", M, num_outputs=2, filter=_inner_in(rows))
    cfg.define_split("tile_y", N, num_outputs=2, filter=_inner_in(cols))
    cfg.define_split("tile_k", K, num_outputs=2, filter=_inner_in(kunroll))
    cfg.define_reorder("reorder_outer", [0, 1], policy="all")
    cfg.define_annotate("ann_rows", [0], policy="candidate", candidate=[["unroll"], ["none"]])
    if cfg.is_fallback:
        cfg["tile_x"] = SplitEntity([-1, nearest_at_most(rows, 8)])
        cfg["tile_y"] = SplitEntity([-1, nearest_at_most(cols, 32)])
        cfg["tile_k"] = SplitEntity([-1, 1])
        cfg["reorder_outer"] = ReorderEntity([1, 0])
        cfg["ann_rows"] = AnnotateEntity(["unroll"])
    cfg.add_flop(2.0 * M * N * K)

    mr, bn = cfg["tile_x"].size[-1], cfg["tile_y"].size[-1]
    A = placeholder((M, K), dtype, name="A")
    B = placeholder((K, N), dtype, name="B")
    k = reduce_axis((0, K), name="k")
    packed = compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = compute((M, N), lambda i, j: te_sum(A[i, k] * packed[j // bn, k, j % bn], axis=k), name="C")

    s = create_schedule(C.op)
    acc = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], mr, bn)
    outer = [[xo, yo][i] for i in cfg["reorder_outer"].perm]
    s[C].reorder(*outer, xi, yi)
    s[C].parallel(outer[0])
    s[C].vectorize(yi)
    s[acc].compute_at(s[C], outer[1])

    ax, ay = s[acc].op.axis
    ko, ki = cfg["tile_k"].apply(s, acc, s[acc].op.reduce_axis[0])
    s[acc].reorder(ko, ki, ax, ay)
    if cfg["tile_k"].size[-1] > 1:
        s[acc].unroll(ki)
    cfg["ann_rows"].apply(s, acc, [ax])
    s[acc].vectorize(ay)

    px, _, pz = s[packed].op.axis
    s[packed].parallel(px)
    s[packed].vectorize(pz)
    return s, [A, B, C]


def matmul_reference(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """The expected output of :func:`matmul` for inputs ``a, b``, computed in float64
    (for ``Task(..., reference=matmul_reference)``).

    >>> matmul_reference(np.eye(2, dtype="float32"), np.full((2, 3), 2, "float32"))[0].tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    return [(a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)]

