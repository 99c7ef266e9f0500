"""Python numbers given to expression constructors.

``Add(x, 1)``, ``Ramp(i, 1, 4)``, ``Select(c, y, 0.0)`` and ``Let(v, 1, e)``
accept Python (and numpy) numbers, as TVM's constructors did through its FFI.
A number takes the dtype of its sibling expression (the other operand, the
other branch, the ramp's base, the let's variable), by the same rule as the
operators (``x + 1``); with no sibling expression it takes the default dtype
of :func:`loom.const` (int32, float32, bool).

>>> import loom
>>> from loom.ir import expr as E
>>> x = loom.var("x", "int64")
>>> str(E.Ramp(x, 1, 4).dtype), str(E.EQ(x, 5).b.dtype)
('int64x4', 'int64')
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["expr_or_number_types", "typed_literals"]

_NUMBERS = (numbers.Number, np.bool_)  # Python and numpy numbers (bool is an int)


def expr_or_number_types() -> tuple[type, ...]:
    """The types a literal-accepting field takes (resolved lazily: PrimExpr is defined later)."""
    from .expr import PrimExpr

    return (PrimExpr, *_NUMBERS)


def typed_literals(node: Any, *names: str, like: Any = None) -> None:
    """Replace the numbers among ``node``'s fields ``names`` by constants.

    Constructors call it only when a field holds a number (it imports lazily: keep it off
    the path of ordinary construction).

    A number takes ``like`` (a dtype) if given, else the dtype of the first
    of ``names`` that holds an expression, else the default constant dtype.
    """
    from .expr import PrimExpr
    from .expr_ops import _python_const, convert_expr

    values = [getattr(node, n) for n in names]
    if like is None:
        like = next((v.dtype for v in values if isinstance(v, PrimExpr)), None)
    for n, v in zip(names, values):
        if not isinstance(v, PrimExpr):
            object.__setattr__(node, n, convert_expr(v) if like is None else _python_const(v, like))
