"""Python operators on expressions, with dtype matching and constant folding.

The functions here are the user-facing builders (``loom.var``, ``loom.const``,
``loom.select``, ``loom.floordiv``...).  Folding is deliberately light: only
constant-with-constant arithmetic and the identities ``x+0``, ``x*1``, ``x*0``
for integers.  Everything else belongs to the simplifier.

>>> import loom
>>> n = loom.var("n")
>>> str(loom.floordiv(n * 8 + 3, 8))
'(n * 8 + 3) // 8'
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..errors import IRError, LoomTypeError, LoomValueError
from .dtype import DataType
from . import expr as E
from . import bitwise as _bitwise

__all__ = [
    "const", "convert_expr", "var", "size_var", "select", "div", "floordiv", "floormod", "truncdiv",
    "truncmod", "min_value", "max_value", "all", "any", "cast", "const_value", "is_nonzero_constant",
]

_INT32 = DataType.of("int32")


def const(value: Any, dtype: Any = None) -> E.PrimExpr:
    """A constant expression; the dtype is inferred from ``value`` when omitted.

    A numpy scalar keeps its dtype; a bool constant of a number is its truth.

    >>> str(const(3).dtype), str(const(2.5).dtype), str(const(1 << 40).dtype), str(const(np.uint8(1)).dtype)
    ('int32', 'float32', 'int64', 'uint8')
    >>> const(2, "bool")
    True
    """
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            dtype = "bool"
        elif isinstance(value, (np.integer, np.floating)):
            dtype = value.dtype.name
        elif isinstance(value, (int, np.integer)):
            dtype = "int32" if -(2**31) <= int(value) < 2**31 else "int64"
        elif isinstance(value, (float, np.floating)):
            dtype = "float32"
        else:
            raise LoomTypeError(f"cannot make a constant of {type(value).__name__}")
    t = DataType.of(dtype)
    if t.lanes > 1:
        return E.Broadcast(const(value, t.element_of()), t.lanes)
    if t.is_float:
        return E.FloatImm(t, float(value))
    if t.is_bool:
        return E.IntImm(t, int(bool(value)))
    if t.is_integer:
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise LoomTypeError(f"cannot make a {t} constant of the non-integer {value}")
        return E.IntImm(t, int(value))
    raise LoomTypeError(f"cannot make a constant of dtype {t}")


def convert_expr(value: Any, dtype: Any = None) -> E.PrimExpr:
    """Turn a Python number (or an expression) into an expression."""
    if isinstance(value, E.PrimExpr):
        return value
    if hasattr(value, "as_expr"):  # tensor slices, iteration variables
        return value.as_expr()
    if isinstance(value, (bool, int, float, np.generic)):
        return const(value, dtype)
    raise LoomTypeError(f"expected an expression or a number, got {type(value).__name__}")


def var(name: str = "v", dtype: Any = "int32") -> E.Var:
    """A new symbolic variable.

    >>> n = var("n"); n.name, str(n.dtype)
    ('n', 'int32')
    """
    return E.Var(name, dtype)


def size_var(name: str = "size", dtype: Any = "int32") -> E.SizeVar:
    """A new variable known to be non-negative (a shape dimension)."""
    return E.SizeVar(name, dtype)


def cast(value: Any, dtype: Any) -> E.PrimExpr:
    """Convert ``value`` to ``dtype``; constants fold."""
    t = DataType.of(dtype)
    value = convert_expr(value)
    if value.dtype == t:
        return value
    if isinstance(value, (E.IntImm, E.FloatImm)) and t.lanes == 1:
        return _fold_cast(value.value, t)
    if value.dtype.lanes == 1 and t.lanes > 1:
        return E.Broadcast(cast(value, t.element_of()), t.lanes)
    return E.Cast(t, value)


def _fold_cast(v: Any, t: DataType) -> E.PrimExpr:
    if t.is_bool:
        return E.IntImm(t, int(bool(v)))
    if t.is_integer:
        if isinstance(v, float):
            if not math.isfinite(v):
                return E.Cast(t, E.FloatImm("float64", v))
            v = int(v)
        bits = t.bits
        v &= (1 << bits) - 1  # two's complement wrap, as the hardware does
        if t.is_int and v >= 1 << (bits - 1):
            v -= 1 << bits
        return E.IntImm(t, v)
    return E.FloatImm(t, _round_float(v, t))


def _round_float(v: Any, t: DataType) -> float:
    """``v`` rounded to the float dtype ``t``; overflow gives inf, as the hardware does."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.array(v).astype(t.numpy()))


# ---------------------------------------------------------------------------
# dtype matching


def _rank(t: DataType) -> tuple[int, int, int]:
    # Integers promote by width, so uint32 + int8 is uint32, never a truncating int8; at equal
    # width signed wins, as in TVM (int32 + uint32 is int32; C would pick uint32).  Any float
    # beats any integer.
    kind, tie = {"bool": (0, 0), "int": (1, 1), "uint": (1, 0), "bfloat": (2, 0), "float": (2, 1)}.get(t.code, (-1, 0))
    return kind, t.bits, tie


def _match(a: Any, b: Any) -> tuple[E.PrimExpr, E.PrimExpr]:
    """Bring two operands to one dtype, as TVM's binary_op_match_type."""
    if not isinstance(a, E.PrimExpr):
        b = convert_expr(b)
        a = _python_const(a, b.dtype)
    elif not isinstance(b, E.PrimExpr):
        b = _python_const(b, a.dtype)
    ta, tb = a.dtype, b.dtype
    if ta.lanes != tb.lanes:
        if ta.lanes == 1:
            a, ta = E.Broadcast(a, tb.lanes), a.dtype.with_lanes(tb.lanes)
        elif tb.lanes == 1:
            b, tb = E.Broadcast(b, ta.lanes), b.dtype.with_lanes(ta.lanes)
        else:
            raise IRError(f"operands have different lanes: {ta} and {tb}")
    if ta == tb:
        return a, b
    if ta.is_handle or tb.is_handle:
        raise IRError(f"cannot combine {ta} and {tb}")
    target = ta if _rank(ta) >= _rank(tb) else tb
    return cast(a, target), cast(b, target)


def _python_const(v: Any, like: DataType) -> E.PrimExpr:
    if hasattr(v, "as_expr"):
        return v.as_expr()
    elem = like.element_of()
    if isinstance(v, (float, np.floating)) and not elem.is_float:
        c = const(v)  # a float literal promotes an integer expression to float32, as in TVM
    elif isinstance(v, (bool, np.bool_)) and not elem.is_bool:
        c = const(int(v), elem)
    elif elem.is_bool and not isinstance(v, (bool, np.bool_)):
        c = const(v)
    else:
        try:
            c = const(v, elem)
        except Exception:
            c = const(v)
    if like.lanes > 1 and c.dtype.lanes == 1:
        c = E.Broadcast(c, like.lanes)
    return c


# ---------------------------------------------------------------------------
# folding builders


def _both_const(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    return isinstance(a, (E.IntImm, E.FloatImm)) and isinstance(b, (E.IntImm, E.FloatImm))


def _is_const(e: E.PrimExpr, v: int) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value == v


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def _arith(node: type[E.BinaryOp], fold: Callable[[Any, Any], Any],
           fold_float: Callable[[Any, Any], Any] | None = None) -> Callable[[Any, Any], E.PrimExpr]:
    def build(a: Any, b: Any) -> E.PrimExpr:
        a, b = _match(a, b)
        if _both_const(a, b):
            t = a.dtype
            if t.is_float:
                f = fold_float or fold
                return E.FloatImm(t, _round_float(f(a.value, b.value), t))
            try:
                return _fold_cast(fold(a.value, b.value), t)
            except ZeroDivisionError:
                pass
        return node(a, b)

    return build


_add0 = _arith(E.Add, lambda x, y: x + y)
_sub0 = _arith(E.Sub, lambda x, y: x - y)
_mul0 = _arith(E.Mul, lambda x, y: x * y)


def add(a: Any, b: Any) -> E.PrimExpr:
    a, b = _match(a, b)
    if _is_const(b, 0) and not a.dtype.is_float:
        return a
    if _is_const(a, 0) and not b.dtype.is_float:
        return b
    return _add0(a, b)


def sub(a: Any, b: Any) -> E.PrimExpr:
    a, b = _match(a, b)
    if _is_const(b, 0) and not a.dtype.is_float:
        return a
    return _sub0(a, b)


def mul(a: Any, b: Any) -> E.PrimExpr:
    a, b = _match(a, b)
    if not a.dtype.is_float:
        if _is_const(b, 1):
            return a
        if _is_const(a, 1):
            return b
        if _is_const(a, 0) or _is_const(b, 0):
            return const(0, a.dtype)
    return _mul0(a, b)


def _check_int(name: str, a: E.PrimExpr) -> None:
    if not (a.dtype.is_integer):
        raise LoomTypeError(f"{name} needs integer operands, got {a.dtype}")


def _divlike(node: type[E.BinaryOp], fold: Callable[[int, int], int], name: str) -> Callable[[Any, Any], E.PrimExpr]:
    inner = _arith(node, fold)

    def build(a: Any, b: Any) -> E.PrimExpr:
        a, b = _match(a, b)
        _check_int(name, a)
        if _is_const(b, 0):
            raise IRError(f"{name} by the constant zero")
        if _is_const(b, 1):
            return a if node in (E.FloorDiv, E.Div) else const(0, a.dtype)
        return inner(a, b)

    return build


floordiv = _divlike(E.FloorDiv, lambda x, y: x // y, "floordiv")
floormod = _divlike(E.FloorMod, lambda x, y: x % y, "floormod")
truncdiv = _divlike(E.Div, _trunc_div, "truncdiv")
truncmod = _divlike(E.Mod, lambda x, y: x - _trunc_div(x, y) * y, "truncmod")
floordiv.__doc__ = "Integer division rounding toward negative infinity (Python ``//``)."
floormod.__doc__ = "Remainder of :func:`floordiv`; its sign follows the divisor."
truncdiv.__doc__ = "Integer division rounding toward zero (C ``/``)."
truncmod.__doc__ = "Remainder of :func:`truncdiv`; its sign follows the dividend."


def true_div(a: Any, b: Any) -> E.PrimExpr:
    a, b = _match(a, b)
    if not a.dtype.is_float:
        raise LoomTypeError(
            "'/' on integer expressions is ambiguous: use '//' (floordiv), loom.truncdiv, "
            "or cast to a float dtype first"
        )
    return _arith(E.Div, lambda x, y: x / y if y != 0 else math.copysign(math.inf, x) if x else math.nan)(a, b)


def div(a: Any, b: Any) -> E.PrimExpr:
    """Division as C spells ``a / b`` (TVM's ``tvm.div``): true division on floats, truncdiv on integers.

    Written out, the integer rounding is no longer ambiguous, so ``div`` takes integers where ``/`` does not.

    >>> import loom
    >>> x = loom.var("x")
    >>> str(loom.div(x, 4)), str(loom.div(loom.const(1.0), x.astype("float32")))
    ('truncdiv(x, 4)', '1.0 / float32(x)')
    """
    a, b = _match(a, b)
    return true_div(a, b) if a.dtype.is_float else truncdiv(a, b)


def minimum(a: Any, b: Any) -> E.PrimExpr:
    return _arith(E.Min, min)(a, b)


def maximum(a: Any, b: Any) -> E.PrimExpr:
    return _arith(E.Max, max)(a, b)


def _cmp(node: type[E.CmpOp], fold: Callable[[Any, Any], bool]) -> Callable[[Any, Any], E.PrimExpr]:
    def build(a: Any, b: Any) -> E.PrimExpr:
        a, b = _match(a, b)
        if _both_const(a, b):
            return E.IntImm("bool", int(fold(a.value, b.value)))
        return node(a, b)

    return build


eq = _cmp(E.EQ, lambda x, y: x == y)
ne = _cmp(E.NE, lambda x, y: x != y)
lt = _cmp(E.LT, lambda x, y: x < y)
le = _cmp(E.LE, lambda x, y: x <= y)
gt = _cmp(E.GT, lambda x, y: x > y)
ge = _cmp(E.GE, lambda x, y: x >= y)


def _as_bool(x: Any) -> E.PrimExpr:
    x = convert_expr(x)
    if not x.dtype.is_bool:
        raise LoomTypeError(f"logical operators need bool operands, got {x.dtype}")
    return x


def logical_and(a: Any, b: Any) -> E.PrimExpr:
    a, b = _as_bool(a), _as_bool(b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, E.IntImm):
            return y if x.value else x
    return E.And(a, b)


def logical_or(a: Any, b: Any) -> E.PrimExpr:
    a, b = _as_bool(a), _as_bool(b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, E.IntImm):
            return x if x.value else y
    return E.Or(a, b)


def logical_not(a: Any) -> E.PrimExpr:
    a = _as_bool(a)
    if isinstance(a, E.IntImm):
        return E.IntImm("bool", 1 - a.value)
    return E.Not(a)


def select(cond: Any, true_value: Any, false_value: Any) -> E.PrimExpr:
    """``true_value if cond else false_value`` as an expression (both sides may run).

    >>> x = var("x"); str(select(x > 0, x, 0))
    'select(x > 0, x, 0)'
    """
    cond = _as_bool(cond)
    t, f = _match(true_value, false_value)
    if isinstance(cond, E.IntImm):
        return t if cond.value else f
    return E.Select(cond, t, f)


def all(*conds: Any) -> E.PrimExpr:  # noqa: A001 - mirrors TVM's tvm.all
    """Logical and of the arguments, folded left; at least one is needed, as in TVM.

    >>> x = var("x"); str(all(x > 0, x < 9))
    'x > 0 and x < 9'
    >>> all()
    Traceback (most recent call last):
      ...
    loom.errors.LoomValueError: loom.all() needs at least one condition
    """
    return _fold_conds("all", logical_and, conds)


def any(*conds: Any) -> E.PrimExpr:  # noqa: A001 - mirrors TVM's tvm.any
    """Logical or of the arguments, folded left; at least one is needed, as in TVM.

    >>> x = var("x"); str(any(x < 0, x > 9))
    'x < 0 or x > 9'
    """
    return _fold_conds("any", logical_or, conds)


def _fold_conds(name: str, combine: Callable[[Any, Any], E.PrimExpr], conds: tuple[Any, ...]) -> E.PrimExpr:
    if not conds:
        raise LoomValueError(f"loom.{name}() needs at least one condition")
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = combine(out, c)
    return out


def min_value(dtype: Any) -> E.PrimExpr:
    """The smallest value of ``dtype`` (``-inf`` for floats)."""
    t = DataType.of(dtype)
    if t.is_float:
        return E.FloatImm(t, -math.inf)
    return E.IntImm(t, E._int_range(t)[0])


def max_value(dtype: Any) -> E.PrimExpr:
    """The largest value of ``dtype`` (``inf`` for floats)."""
    t = DataType.of(dtype)
    if t.is_float:
        return E.FloatImm(t, math.inf)
    return E.IntImm(t, E._int_range(t)[1])


def const_value(e: Any) -> int | float | None:
    """The Python value of a constant expression, or None."""
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    return None


def is_nonzero_constant(e: Any) -> bool:
    """Whether ``e`` is an integer constant (or a broadcast of one) without a zero lane: a divisor
    that needs no zero check.

    >>> is_nonzero_constant(const(3)), is_nonzero_constant(const(0)), is_nonzero_constant(var("n"))
    (True, False, False)
    """
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, E.IntImm) and e.value != 0


def _neg(a: E.PrimExpr) -> E.PrimExpr:
    return sub(const(0, a.dtype.element_of()) if a.dtype.lanes == 1 else E.Broadcast(const(0, a.dtype.element_of()), a.dtype.lanes), a)


def _attach() -> None:
    # Set with setattr: PrimExpr declares these methods for type checkers (expr.py).
    methods: dict[str, Callable[..., Any]] = {
        "__add__": lambda s, o: add(s, o),
        "__radd__": lambda s, o: add(o, s),
        "__sub__": lambda s, o: sub(s, o),
        "__rsub__": lambda s, o: sub(o, s),
        "__mul__": lambda s, o: mul(s, o),
        "__rmul__": lambda s, o: mul(o, s),
        "__truediv__": lambda s, o: true_div(s, o),
        "__rtruediv__": lambda s, o: true_div(o, s),
        "__floordiv__": lambda s, o: floordiv(s, o),
        "__rfloordiv__": lambda s, o: floordiv(o, s),
        "__mod__": lambda s, o: floormod(s, o),
        "__rmod__": lambda s, o: floormod(o, s),
        "__neg__": _neg,
        "__lt__": lambda s, o: lt(s, o),
        "__le__": lambda s, o: le(s, o),
        "__gt__": lambda s, o: gt(s, o),
        "__ge__": lambda s, o: ge(s, o),
        "__eq__": lambda s, o: eq(s, o) if _operand(o) else NotImplemented,
        "__ne__": lambda s, o: ne(s, o) if _operand(o) else NotImplemented,
        "__and__": lambda s, o: _bitwise.and_(s, o),
        "__rand__": lambda s, o: _bitwise.and_(o, s),
        "__or__": lambda s, o: _bitwise.or_(s, o),
        "__ror__": lambda s, o: _bitwise.or_(o, s),
        "__invert__": lambda s: _bitwise.invert(s),
        "__xor__": lambda s, o: _bitwise.bitwise_xor(s, o),
        "__rxor__": lambda s, o: _bitwise.bitwise_xor(o, s),
        "__lshift__": lambda s, o: _bitwise.shift_left(s, o),
        "__rlshift__": lambda s, o: _bitwise.shift_left(o, s),
        "__rshift__": lambda s, o: _bitwise.shift_right(s, o),
        "__rrshift__": lambda s, o: _bitwise.shift_right(o, s),
        "astype": lambda s, dtype: cast(s, dtype),
        "equal": lambda s, o: eq(s, o),
    }
    for name, method in methods.items():
        setattr(E.PrimExpr, name, method)


def _operand(o: Any) -> bool:
    return isinstance(o, (E.PrimExpr, bool, int, float, np.generic))


_attach()
