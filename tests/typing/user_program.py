"""A typed user program: ``make typecheck`` checks it against Loom's annotations.

It is what user code does (placeholders, computes with lambdas, a reduction, a schedule,
build and call) with annotations a type checker verifies: the builders return precise
types (``loom.compute`` of an expression is one Tensor whose ``op.axis`` is known, of a
tuple a list of them), so no cast is needed.  ``test_user_program.py`` also runs it.
"""

from __future__ import annotations

import numpy as np

import loom
from loom.ir import DataType, IterVar, PrimExpr, Var
from loom.runtime.module import Module
from loom.te import Schedule, Stage, Tensor
from loom.te.tensor import ComputeOp, PlaceholderOp


def scale_and_sum(target: str = "llvm") -> tuple[np.ndarray, np.ndarray]:
    """``B = A * 2 + 1`` and ``C[i] = sum_k A[i, k]``, built for ``target`` and run."""
    n: Var = loom.var("n")
    m: Var = loom.var("m")
    A: Tensor[PlaceholderOp] = loom.placeholder((n, m), "float32", name="A")
    dtype: DataType = A.dtype
    assert str(dtype) == "float32"

    B: Tensor[ComputeOp] = loom.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    k: IterVar = loom.reduce_axis((0, m), name="k")
    C = loom.compute((n,), lambda i: loom.sum(A[i, k], axis=k), name="C")
    D, E = loom.compute((n,), lambda i: (A[i, 0], A[i, 0] + B[i, 0]), name="DE")
    first: Tensor = D
    both: list[Tensor[ComputeOp]] = loom.compute((n,), lambda i: (A[i, 0], E[i]), name="F")
    assert first.op is E.op and len(both) == 2

    body: PrimExpr = B.op.body[0]
    assert body.dtype == dtype
    s: Schedule = loom.create_schedule([B.op, C.op])
    stage: Stage = s[B]
    outer, inner = s[B].split(B.op.axis[1], factor=8)
    stage.vectorize(inner)
    stage.parallel(s[B].op.axis[0])
    io: IterVar = s[C].fuse(*C.op.axis)
    AC = s.cache_read(A, "local", [C])
    s[AC].compute_at(s[C], io)
    assert io.var.name and s[AC].op.axis

    f: Module = loom.build(s, [A, B, C], target=target, name="scale_and_sum")
    a = np.random.default_rng(0).standard_normal((5, 19)).astype("float32")
    b = np.zeros_like(a)
    c = np.zeros(5, "float32")
    f(a, b, c)
    return b, c


def expressions() -> str:
    """Operators on expressions and iteration variables build expressions."""
    x, y = loom.var("x"), loom.var("y")
    e: PrimExpr = (x + 1) * y // 2 - 3 % y
    cond: PrimExpr = (x < y) & (x >= 0) | ~(y == 4)
    chosen: PrimExpr = loom.select(cond, e, loom.const(0))
    k = loom.reduce_axis((0, 4), name="k")
    shifted: PrimExpr = k * 2 + x
    return str(loom.max(chosen, shifted, 1))


def rejected(A: Tensor[PlaceholderOp], n: Var) -> None:
    """Code the type checker must reject (never run).  Were a type imprecise (Any), the
    ignore would be unused, which ``warn_unused_ignores`` reports as an error."""
    one: list[Tensor] = loom.compute((n,), lambda i: A[i])  # type: ignore[assignment]
    two: Tensor = loom.compute((n,), lambda i: (A[i], A[i] + 1))  # type: ignore[assignment]
    axis = A.op.axis  # type: ignore[attr-defined]
    expr: Tensor = A[0] + 1  # type: ignore[assignment]
    added: PrimExpr = A + 1  # type: ignore[assignment]
    print(one, two, axis, expr, added)


def main() -> None:
    b, c = scale_and_sum()
    print(b.shape, c.shape, expressions())


if __name__ == "__main__":
    main()
