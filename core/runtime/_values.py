"""Scalar arguments and layout expressions, as the argument checker converts and evaluates them."""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir.dtype import DataType

__all__ = ["int_range", "scalar_converter", "int_evaluator"]


def int_range(t: DataType) -> tuple[int, int]:
    """The inclusive value range of an integer dtype."""
    if t.is_uint:
        return 0, (1 << t.bits) - 1
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


def scalar_converter(t: DataType) -> Callable[[Any], Any]:
    """A function taking a Python/numpy scalar to ``t``: TypeError for the wrong kind, ValueError out of range."""
    if t.is_integer:
        lo, hi = int_range(t)

        def to_int(x: Any) -> int:
            if isinstance(x, (float, np.floating)):
                raise TypeError("a float is not an integer")
            v = operator.index(x)
            if not lo <= v <= hi:
                raise ValueError(f"{v} is outside [{lo}, {hi}]")
            return v

        return to_int
    if t.is_bool:
        def to_bool(x: Any) -> bool:
            if isinstance(x, (bool, np.bool_)):
                return bool(x)
            if isinstance(x, (float, np.floating)):
                raise TypeError("a float is not a bool")
            if operator.index(x) in (0, 1):
                return bool(x)
            raise ValueError("expected True/False or 0/1")

        return to_bool
    if t.is_float:
        npd = t.numpy()

        def to_float(x: Any) -> Any:
            if isinstance(x, np.ndarray) and x.ndim == 0:
                x = x[()]
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.generic)) \
                    or (isinstance(x, np.generic) and x.dtype.kind not in "iuf" and x.dtype != npd):
                raise TypeError(f"{type(x).__name__} is not a real number")
            return npd.type(x)

        return to_float
    raise LoomTypeError(f"a scalar parameter of dtype {t} cannot be passed from Python")


_BINARY: dict[type, Callable[[int, int], int]] = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul, E.FloorDiv: operator.floordiv,
    E.FloorMod: operator.mod, E.Min: min, E.Max: max,
    E.Div: lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    E.Mod: lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
}


def int_evaluator(e: E.PrimExpr, fname: str) -> Callable[[dict], int]:
    """Compile an integer layout expression (``2 * n + 1``) over ``{id(var): value}``."""
    if isinstance(e, E.IntImm):
        value = e.value
        return lambda env: value
    if isinstance(e, E.Var):
        key = id(e)
        return lambda env: env[key]
    if isinstance(e, E.Cast):
        return int_evaluator(e.value, fname)
    op = _BINARY.get(type(e))
    if op is None:
        raise LoomTypeError(f"{fname}: cannot evaluate the layout expression {e} ({type(e).__name__}) at call time")
    a, b = int_evaluator(e.a, fname), int_evaluator(e.b, fname)
    return lambda env: op(a(env), b(env))
