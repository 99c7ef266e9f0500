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


def division(op: str, dtype: str, divisor: object, form: str = "scalar"):
    """``C[i] = op(A[i], divisor)`` lowered: ``divisor`` is a constant, or ``"array"`` for ``B[i]``;
    ``form`` is ``"scalar"``, ``"vector"`` (split by 4, inner vectorized) or ``"parallel"``."""
    n = 16
    A, B = loom.placeholder((n,), dtype, name="A"), loom.placeholder((n,), dtype, name="B")
    fn = getattr(loom, op)
    C = loom.compute((n,), (lambda i: fn(A[i], B[i])) if divisor == "array"
                     else (lambda i: fn(A[i], loom.const(divisor, dtype))), name="C")
    s = loom.create_schedule(C.op)
    if form == "vector":
        _, inner = s[C].split(C.op.axis[0], factor=4)
        s[C].vectorize(inner)
    elif form == "parallel":
        s[C].parallel(C.op.axis[0])
    return loom.lower(s, [A, B, C] if divisor == "array" else [A, C], name="f")


def argmax_reducer():
    """TVM's argmax as a tuple reducer over (index, value): the index of the largest value."""
    def fcombine(x, y):
        take = x[1] >= y[1]
        return loom.select(take, x[0], y[0]), loom.select(take, x[1], y[1])

    return loom.comm_reducer(fcombine, lambda t0, t1: (loom.const(-1, t0), loom.min_value(t1)), name="argmax")
