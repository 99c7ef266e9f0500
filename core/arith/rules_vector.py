"""Rewrite rules for vectors: lane-wise identities on ``Broadcast`` and ``Ramp``.

An operation on broadcasts is the broadcast of the scalar operation (exact
for every dtype).  Ramp rules regroup sums, so they are for integers; a
division of a ramp needs each lane's *mathematical* value, so it first
proves that no lane ``base + k * stride`` wraps around (``_lanes_exact``),
except remainders modulo a divisor of ``2**bits``.

>>> import loom
>>> from loom.ir import expr as E
>>> x = loom.var("x")
>>> an = loom.arith.Analyzer()
>>> an.update(x, loom.arith.ConstIntBound(0, 100))
>>> str(an.rewrite_simplify(E.FloorDiv(E.Ramp(x * 8 + 1, loom.const(1), 4), E.Broadcast(loom.const(8), 4))))
'broadcast(x, 4)'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ._intmath import divides_wrap, fits, is_int_type
from .pattern import FnRule, PVar, Rule, bcast, max_, min_, pvars, ramp, tdiv, tmod

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["VECTOR_RULES"]

x, y, z, w = pvars("x y z w")
lanes = PVar("lanes")


def _int_ramp(m: Any) -> bool:
    return m.is_int(x)


def _lanewise(op: Any) -> list[Any]:
    return [Rule(op(bcast(x, lanes), bcast(y, lanes)), bcast(op(x, y), lanes))]


def _lanes_exact(an: Analyzer, r: E.Ramp, stride: int) -> bool:
    """True when no lane ``base + k * stride`` of ``r`` wraps around."""
    lo, hi = an._interval(r.base)
    span = stride * (r.lanes - 1)
    return fits(lo + min(0, span), hi + max(0, span), r.dtype.element_of())


def _ramp_divmod(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``ramp(b, s, n) // broadcast(c)`` and ``% broadcast(c)`` for constants ``s`` and ``c > 0``.

    With ``c | s`` every lane has ``b``'s remainder: the quotient is
    ``ramp(b // c, s / c, n)``, the remainder ``broadcast(b % c)``.  When ``b``
    is ``r`` modulo ``c`` and ``r + s*k`` stays in ``[0, c)`` for every lane, all
    lanes share ``b``'s quotient and the remainders are ``ramp(r, s, n)``.
    """
    r, d = e.a, e.b
    if not (isinstance(r, E.Ramp) and isinstance(r.stride, E.IntImm) and isinstance(d, E.Broadcast)
            and isinstance(d.value, E.IntImm) and is_int_type(r.dtype) and d.value.value > 0):
        return None
    c, s, n = d.value.value, r.stride.value, r.lanes
    t = r.dtype.element_of()
    is_div = isinstance(e, E.FloorDiv)
    exact = _lanes_exact(an, r, s)
    if not exact and (is_div or not divides_wrap(c, t)):
        return None  # a wrapped lane's quotient (or residue modulo such c) is not the ramp's
    if s % c == 0:
        if is_div:
            return E.Ramp(ops.floordiv(r.base, c), ops.const(s // c, t), n)
        return E.Broadcast(ops.floormod(r.base, c), n)
    ms = an.modular_set(r.base)
    if ms.coeff % c != 0:
        return None
    rem = ms.base % c
    if 0 <= rem + s * (n - 1) < c:
        return E.Broadcast(ops.floordiv(r.base, c), n) if is_div else E.Ramp(ops.const(rem, t), r.stride, n)
    if is_div or (isinstance(r.base, E.IntImm) and r.base.value == rem):
        return None
    if not fits(rem + min(0, s * (n - 1)), rem + max(0, s * (n - 1)), t):
        return None
    return E.FloorMod(E.Ramp(ops.const(rem, t), r.stride, n), d)  # only the residue of b matters


def _int_chain(m: Any) -> bool:
    return m.is_int(y)


VECTOR_RULES: dict[type, list[Any]] = {
    E.Add: _lanewise(lambda a, b: a + b) + [
        Rule(ramp(x, y, lanes) + ramp(z, w, lanes), ramp(x + z, y + w, lanes), _int_ramp),
        Rule(ramp(x, y, lanes) + bcast(z, lanes), ramp(x + z, y, lanes), _int_ramp),
        Rule(bcast(z, lanes) + ramp(x, y, lanes), ramp(z + x, y, lanes), _int_ramp),
    ],
    E.Sub: _lanewise(lambda a, b: a - b) + [
        Rule(ramp(x, y, lanes) - ramp(z, w, lanes), ramp(x - z, y - w, lanes), _int_ramp),
        Rule(ramp(x, y, lanes) - bcast(z, lanes), ramp(x - z, y, lanes), _int_ramp),
        Rule(bcast(z, lanes) - ramp(x, y, lanes), ramp(z - x, 0 - y, lanes), _int_ramp),
    ],
    E.Mul: _lanewise(lambda a, b: a * b) + [
        Rule(ramp(x, y, lanes) * bcast(z, lanes), ramp(x * z, y * z, lanes), _int_ramp),
        Rule(bcast(z, lanes) * ramp(x, y, lanes), ramp(x * z, y * z, lanes), _int_ramp),
    ],
    E.FloorDiv: _lanewise(lambda a, b: a // b) + [FnRule(_ramp_divmod)],
    E.FloorMod: _lanewise(lambda a, b: a % b) + [FnRule(_ramp_divmod)],
    E.Div: _lanewise(tdiv),
    E.Mod: _lanewise(tmod),
    # min(min(v, broadcast(y)), broadcast(z)): the two broadcasts meet as scalars (ints: no NaN).
    E.Min: _lanewise(min_) + [
        Rule(min_(min_(x, bcast(y, lanes)), bcast(z, lanes)), min_(x, bcast(min_(y, z), lanes)), _int_chain),
    ],
    E.Max: _lanewise(max_) + [
        Rule(max_(max_(x, bcast(y, lanes)), bcast(z, lanes)), max_(x, bcast(max_(y, z), lanes)), _int_chain),
    ],
    E.EQ: _lanewise(lambda a, b: a == b),
    E.NE: _lanewise(lambda a, b: a != b),
    E.LT: _lanewise(lambda a, b: a < b),
    E.LE: _lanewise(lambda a, b: a <= b),
    E.GT: _lanewise(lambda a, b: a > b),
    E.GE: _lanewise(lambda a, b: a >= b),
    E.Ramp: [Rule(ramp(x, 0, lanes), bcast(x, lanes), _int_ramp)],
}
