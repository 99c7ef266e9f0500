"""Helpers for operator and schedule writers: constant shapes as Python ints, and graph traversal.

>>> import loom
>>> from loom.topi.util import get_const_tuple
>>> A = loom.placeholder((2, 3 * 4), name="A")
>>> get_const_tuple(A.shape)
(2, 12)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..arith import Analyzer
from ..te.tensor import PlaceholderOp, Tensor

__all__ = ["get_const_int", "get_const_tuple", "traverse_graph"]


def get_const_int(expr: Any) -> int:
    """``expr`` as a Python int: an int, or an integer expression that simplifies to a constant.

    An expression that is not constant (a shape variable) is a :class:`loom.LoomValueError`.
    """
    if isinstance(expr, bool) or not isinstance(expr, (int, E.PrimExpr)):
        raise LoomTypeError(f"get_const_int expects an int or an integer expression, got {type(expr).__name__}")
    if isinstance(expr, int):
        return expr
    if not expr.dtype.is_int and not expr.dtype.is_uint:
        raise LoomTypeError(f"get_const_int expects an integer expression, got {expr} of dtype {expr.dtype}")
    folded = expr if isinstance(expr, E.IntImm) else Analyzer().simplify(expr)
    if not isinstance(folded, E.IntImm):
        raise LoomValueError(f"get_const_int: {expr} is not a constant")
    return int(folded.value)


def get_const_tuple(exprs: Iterable[Any]) -> tuple[int, ...]:
    """A shape (of ints or constant integer expressions) as a tuple of Python ints."""
    return tuple(get_const_int(e) for e in exprs)


def traverse_graph(outs: Iterable[Tensor], visit: Callable[[Any], None]) -> None:
    """Call ``visit(op)`` once for every compute-like operation that ``outs`` depend on.

    The walk is breadth-first from the outputs; placeholders are not visited.
    """
    seen: set[int] = set()
    stack = [t.op for t in outs]
    while stack:
        op = stack.pop(0)
        if id(op) in seen or isinstance(op, PlaceholderOp):
            continue
        seen.add(id(op))
        visit(op)
        stack.extend(t.op for t in op.input_tensors)
