"""Rewrite rules for logic, select and cast, grouped by node kind.

Comparisons live in :mod:`loom.arith.rules_cmp`.  Logic rules work on bool
operands, so they apply whatever the compared dtype, except where a rule
says ``m.is_int`` (NaN breaks trichotomy for floats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ._intmath import fits, is_int_type
from .pattern import FnRule, PVar, Rule, bcast, max_, min_, not_, pconsts, pvars, select

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["LOGIC_RULES"]

x, y, z = pvars("x y z")
c1, c2 = pconsts("c1 c2")
cond, lanes = PVar("cond"), PVar("lanes")

_TRUE, _FALSE = E.IntImm("bool", 1), E.IntImm("bool", 0)



def _int(p):
    return lambda m: m.is_int(p)


NOT = [
    Rule(not_(not_(x)), x),
    Rule(not_(x < y), y <= x, _int(x)),
    Rule(not_(x <= y), y < x, _int(x)),
    Rule(not_(x > y), x <= y, _int(x)),
    Rule(not_(x >= y), x < y, _int(x)),
    Rule(not_(x == y), x != y),
    Rule(not_(x != y), x == y),
    Rule(not_(bcast(x, lanes)), bcast(not_(x), lanes)),
]

AND = [
    Rule(x & x, x),
    Rule(x & not_(x), False),
    Rule(not_(x) & x, False),
    Rule((x < c1) & (x < c2), x < min_(c1, c2)),
    Rule((x <= c1) & (x <= c2), x <= min_(c1, c2)),
    Rule((c1 < x) & (c2 < x), max_(c1, c2) < x),
    Rule((c1 <= x) & (c2 <= x), max_(c1, c2) <= x),
    Rule((x < c1) & (c2 < x), False, lambda m: m.c1 <= m.c2 + 1),
    Rule((c2 < x) & (x < c1), False, lambda m: m.c1 <= m.c2 + 1),
    Rule((x <= c1) & (c2 <= x), False, lambda m: m.c1 < m.c2),
    Rule((c2 <= x) & (x <= c1), False, lambda m: m.c1 < m.c2),
    Rule((x == c1) & (x == c2), False, lambda m: m.c1 != m.c2),
    Rule((x == c1) & (x != c2), x == c1, lambda m: m.c1 != m.c2),
    Rule((x == y) & (x != y), False),
    Rule((x != y) & (x == y), False),
    Rule((x < y) & (y < x), False),
    Rule((x < y) & (y <= x), False),
    Rule((x <= y) & (y < x), False),
    Rule((x <= y) & (y <= x), x == y),
    Rule((x < y) & (x <= y), x < y),  # x < y implies x <= y (NaN makes both false)
    Rule((x <= y) & (x < y), x < y),
    Rule(bcast(x, lanes) & bcast(y, lanes), bcast(x & y, lanes)),
]

OR = [
    Rule(x | x, x),
    Rule(x | not_(x), True),
    Rule(not_(x) | x, True),
    Rule((x < c1) | (x < c2), x < max_(c1, c2)),
    Rule((x <= c1) | (x <= c2), x <= max_(c1, c2)),
    Rule((c1 < x) | (c2 < x), min_(c1, c2) < x),
    Rule((c1 <= x) | (c2 <= x), min_(c1, c2) <= x),
    Rule((x < c1) | (c2 < x), True, lambda m: m.c2 < m.c1),
    Rule((c2 < x) | (x < c1), True, lambda m: m.c2 < m.c1),
    Rule((x == c1) | (x != c2), x != c2, lambda m: m.c1 != m.c2),
    Rule((x != c1) | (x == c2), x != c1, lambda m: m.c1 != m.c2),
    Rule((x == y) | (x != y), True),
    Rule((x != y) | (x == y), True),
    Rule((x < y) | (y <= x), True, _int(x)),
    Rule((x <= y) | (y < x), True, _int(x)),
    Rule((x < y) | (x <= y), x <= y),
    Rule((x <= y) | (x < y), x <= y),
    Rule(bcast(x, lanes) | bcast(y, lanes), bcast(x | y, lanes)),
]

SELECT = [
    Rule(select(cond, x, x), x),
    Rule(select(not_(cond), x, y), select(cond, y, x)),
    Rule(select(cond, select(cond, x, y), z), select(cond, x, z)),
    Rule(select(cond, x, select(cond, y, z)), select(cond, x, z)),
    Rule(select(x < y, x, y), min_(x, y), _int(x)),
    Rule(select(x < y, y, x), max_(x, y), _int(x)),
    Rule(select(x <= y, x, y), min_(x, y), _int(x)),
    Rule(select(x <= y, y, x), max_(x, y), _int(x)),
    Rule(select(cond, True, False), cond, lambda m: m.dtype.is_bool),
    Rule(select(cond, False, True), not_(cond), lambda m: m.dtype.is_bool),
    Rule(select(bcast(cond, lanes), bcast(x, lanes), bcast(y, lanes)), bcast(select(cond, x, y), lanes)),
]


def _cast(e: E.Cast, an: Analyzer) -> Optional[E.PrimExpr]:
    v = e.value
    if isinstance(v, (E.IntImm, E.FloatImm)):
        folded = ops.cast(v, e.dtype)
        return folded if not isinstance(folded, E.Cast) else None
    if v.dtype == e.dtype:
        return v
    if isinstance(v, E.Cast) and v.value.dtype == e.dtype and is_int_type(e.dtype) and is_int_type(v.dtype):
        lo, hi = an._interval(v.value)  # narrowing then widening back is exact if nothing was cut
        if fits(lo, hi, v.dtype):
            return v.value
    if isinstance(v, E.Broadcast):
        return E.Broadcast(ops.cast(v.value, e.dtype.element_of()), v.lanes)
    return None


LOGIC_RULES: dict[type, list[Any]] = {E.Not: NOT, E.And: AND, E.Or: OR, E.Select: SELECT, E.Cast: [FnRule(_cast)]}
