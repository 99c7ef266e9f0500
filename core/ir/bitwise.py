"""Bitwise operators on integer expressions: ``<< >> & | ^ ~`` (TVM's ``shift_left`` ... ``bitwise_not``).

On integers, Python's operators build these intrinsics; on bools, ``& | ~`` stay
the logical ``And``/``Or``/``Not``.  Both operands are brought to one dtype as
for arithmetic, and constants fold.

Semantics, the same on every backend and in the interpreter:

* ``a << n`` and ``a >> n`` shift by ``n`` modulo the bit width (as x86 and Java
  do; C leaves larger shifts undefined); ``<<`` wraps, ``>>`` is arithmetic for
  signed and logical for unsigned types;
* ``& | ^ ~`` act on the two's-complement bits.

>>> import loom
>>> x = loom.var("x")
>>> str(x << 2), str((x & 7) | 8), str(~x)
('shift_left(x, 2)', 'bitwise_or(bitwise_and(x, 7), 8)', 'bitwise_not(x)')
>>> loom.const(-8) >> 1, loom.const(1) << 33
(-4, 2)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import LoomTypeError
from . import expr as E
from .op import Op, register_op

__all__ = ["shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "OPS"]


def _shift(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def run(a: Any, n: Any) -> Any:
        a = np.asarray(a)
        width = a.dtype.itemsize * 8
        return f(a, np.asarray(n).astype(a.dtype) & (width - 1))
    return run


#: Op name -> (numpy implementation, number of operands).
OPS: dict[str, tuple[Callable[..., Any], int]] = {
    "tir.shift_left": (_shift(np.left_shift), 2),
    "tir.shift_right": (_shift(np.right_shift), 2),  # numpy: arithmetic for signed, logical for unsigned
    "tir.bitwise_and": (np.bitwise_and, 2),
    "tir.bitwise_or": (np.bitwise_or, 2),
    "tir.bitwise_xor": (np.bitwise_xor, 2),
    "tir.bitwise_not": (np.invert, 1),
}
for _name, (_impl, _arity) in OPS.items():
    register_op(_name, _arity, _impl, doc=f"{_name[4:].replace('_', ' ')} of integers")


def _integers(what: str, *xs: E.PrimExpr) -> None:
    for x in xs:
        if not x.dtype.is_integer:
            raise LoomTypeError(f"{what} needs integer operands, got {x.dtype} ({x})")


def _fold(name: str, dtype: Any, *values: int) -> E.PrimExpr:
    scalar = dtype.element_of().numpy()
    out = OPS[name][0](*(np.array(v).astype(scalar) for v in values))
    return E.IntImm(dtype, int(out))


def _binary(name: str, a: Any, b: Any) -> E.PrimExpr:
    from .expr_ops import _match

    a, b = _match(a, b)
    _integers(name[4:], a, b)
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return _fold(name, a.dtype, a.value, b.value)
    return E.Call(a.dtype, Op.get(name), [a, b])


def shift_left(a: Any, n: Any) -> E.PrimExpr:
    """``a << n`` (``n`` modulo the bit width; wraps)."""
    return _binary("tir.shift_left", a, n)


def shift_right(a: Any, n: Any) -> E.PrimExpr:
    """``a >> n`` (``n`` modulo the bit width; arithmetic for signed types)."""
    return _binary("tir.shift_right", a, n)


def bitwise_and(a: Any, b: Any) -> E.PrimExpr:
    """``a & b`` of integers."""
    return _binary("tir.bitwise_and", a, b)


def bitwise_or(a: Any, b: Any) -> E.PrimExpr:
    """``a | b`` of integers."""
    return _binary("tir.bitwise_or", a, b)


def bitwise_xor(a: Any, b: Any) -> E.PrimExpr:
    """``a ^ b`` of integers."""
    return _binary("tir.bitwise_xor", a, b)


def bitwise_not(a: Any) -> E.PrimExpr:
    """``~a`` of an integer."""
    from .expr_ops import convert_expr

    a = convert_expr(a)
    _integers("bitwise_not", a)
    if isinstance(a, E.IntImm):
        return _fold("tir.bitwise_not", a.dtype, a.value)
    return E.Call(a.dtype, Op.get("tir.bitwise_not"), [a])


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or (isinstance(x, E.PrimExpr) and x.dtype.is_bool)


def and_(a: Any, b: Any) -> E.PrimExpr:
    """``a & b``: logical for bools, bitwise for integers."""
    from .expr_ops import logical_and

    return logical_and(a, b) if _is_bool(a) or _is_bool(b) else bitwise_and(a, b)


def or_(a: Any, b: Any) -> E.PrimExpr:
    """``a | b``: logical for bools, bitwise for integers."""
    from .expr_ops import logical_or

    return logical_or(a, b) if _is_bool(a) or _is_bool(b) else bitwise_or(a, b)


def invert(a: Any) -> E.PrimExpr:
    """``~a``: logical not for a bool, bitwise for an integer."""
    from .expr_ops import logical_not

    return logical_not(a) if _is_bool(a) else bitwise_not(a)
