"""Tensor programs and schedules shared by the backend and end-to-end tests."""

from __future__ import annotations

import loom


def matmul(m: int, n: int, k: int):
    """``C = A @ B`` as a tensor expression: returns ``(A, B, C)``."""
    A = loom.placeholder((m, k), name="A")
    B = loom.placeholder((k, n), name="B")
    r = loom.reduce_axis((0, k), name="k")
    C = loom.compute((m, n), lambda i, j: loom.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def blocked_matmul(m: int = 13, n: int = 17, k: int = 19):
    """The classic CPU schedule (docs/schedules.md): tile 4x8, split k by 4, reorder,
    vectorize the inner column loop, parallelize the outer row loop.

    Returns ``(schedule, [A, B, C])``; the default shapes divide none of the factors.
    """
    A, B, C = matmul(m, n, k)
    s = loom.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]
