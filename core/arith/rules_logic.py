"""Rewrite rules for comparisons, logic, select and cast, grouped by node kind.

Comparisons on integers are decided first from facts (constraints in scope),
then from bounds, then from the exact difference ``a - b``.  ``==`` and
``!=`` compare residues, so ring rewrites (moving constants across) are exact
even with wrap-around; ``<`` and ``<=`` need ``m.no_overflow``.  Comparisons
of floats are only folded (NaN makes most identities false).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ._intmath import fits, is_int_type
from .pattern import FnRule, PVar, Rule, bcast, max_, min_, not_, pconsts, pvars, select

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["CMP_RULES", "LOGIC_RULES", "decide_cmp"]

x, y, z = pvars("x y z")
c1, c2 = pconsts("c1 c2")
cond, lanes = PVar("cond"), PVar("lanes")

_TRUE, _FALSE = E.IntImm("bool", 1), E.IntImm("bool", 0)


def decide_cmp(e: E.CmpOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """True/False for an integer comparison that facts, bounds or ``a - b`` decide."""
    if not is_int_type(e.a.dtype) or e.a.dtype.lanes != 1:
        return None
    known = an._lookup_fact(e)
    if known is not None:
        return known
    (alo, ahi), (blo, bhi) = an._interval(e.a), an._interval(e.b)
    if isinstance(e, (E.EQ, E.NE)):
        differ = ahi < blo or bhi < alo or an._never_equal(e.a, e.b)
        if differ:
            return _FALSE if isinstance(e, E.EQ) else _TRUE
        if an._always_equal(e.a, e.b):
            return _TRUE if isinstance(e, E.EQ) else _FALSE
        return None
    strict = isinstance(e, E.LT)
    d = an._diff_interval(e.a, e.b)
    lo, hi = d if d is not None else (alo - bhi, ahi - blo)
    if hi < 0 or (hi == 0 and not strict):
        return _TRUE
    if lo > 0 or (lo == 0 and strict):
        return _FALSE
    return None


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _ovf(*pats):
    return lambda m: m.no_overflow(*pats)


LT = [
    FnRule(decide_cmp),
    Rule(x < x, False),
    Rule(x + c1 < c2, x < c2 - c1, lambda m: m.no_overflow(x + c1) and m.fits(m.c2 - m.c1)),
    Rule(x - c1 < c2, x < c2 + c1, lambda m: m.no_overflow(x - c1) and m.fits(m.c2 + m.c1)),
    Rule(c1 < x + c2, c1 - c2 < x, lambda m: m.no_overflow(x + c2) and m.fits(m.c1 - m.c2)),
    Rule(c1 < x - c2, c1 + c2 < x, lambda m: m.no_overflow(x - c2) and m.fits(m.c1 + m.c2)),
    Rule(x + c1 < y + c2, x < y + (c2 - c1), _ovf(x + c1, y + c2, y + (c2 - c1))),
    Rule(x + c1 < y, x < y - c1, _ovf(x + c1, y - c1)),
    Rule(x - c1 < y, x < y + c1, _ovf(x - c1, y + c1)),
    Rule(x < y + 1, x <= y, _ovf(y + 1)),
    Rule(x * c1 < c2, lambda m: ops.lt(m.x, ops.const(_ceil_div(m.c2, m.c1), m.dtype)),
         lambda m: m.c1 > 0 and m.no_overflow(x * c1)),
    Rule(c2 < x * c1, lambda m: ops.lt(ops.const(m.c2 // m.c1, m.dtype), m.x),
         lambda m: m.c1 > 0 and m.no_overflow(x * c1)),
    Rule(x * c1 < y * c1, x < y, lambda m: m.c1 > 0 and m.no_overflow(x * c1, y * c1)),
    Rule(x * c1 < y * c1, y < x, lambda m: m.c1 < 0 and m.no_overflow(x * c1, y * c1)),
    Rule(x // c1 < c2, x < c2 * c1, lambda m: m.c1 > 0 and m.fits(m.c2 * m.c1)),
    Rule(c2 < x // c1, (c2 + 1) * c1 - 1 < x, lambda m: m.c1 > 0 and m.fits((m.c2 + 1) * m.c1 - 1)),
    Rule(x + y < x + z, y < z, _ovf(x + y, x + z)),
    Rule(y + x < z + x, y < z, _ovf(y + x, z + x)),
    Rule(x - y < x - z, z < y, _ovf(x - y, x - z)),
    Rule(y - x < z - x, y < z, _ovf(y - x, z - x)),
    Rule(min_(x, y) < x, y < x),
    Rule(min_(y, x) < x, y < x),
    Rule(x < max_(x, y), x < y),
    Rule(x < max_(y, x), x < y),
]

LE = [
    FnRule(decide_cmp),
    Rule(x <= x, True),
    Rule(x + c1 <= c2, x <= c2 - c1, lambda m: m.no_overflow(x + c1) and m.fits(m.c2 - m.c1)),
    Rule(x - c1 <= c2, x <= c2 + c1, lambda m: m.no_overflow(x - c1) and m.fits(m.c2 + m.c1)),
    Rule(c1 <= x + c2, c1 - c2 <= x, lambda m: m.no_overflow(x + c2) and m.fits(m.c1 - m.c2)),
    Rule(c1 <= x - c2, c1 + c2 <= x, lambda m: m.no_overflow(x - c2) and m.fits(m.c1 + m.c2)),
    Rule(x + c1 <= y + c2, x <= y + (c2 - c1), _ovf(x + c1, y + c2, y + (c2 - c1))),
    Rule(x + c1 <= y, x <= y - c1, _ovf(x + c1, y - c1)),
    Rule(x - c1 <= y, x <= y + c1, _ovf(x - c1, y + c1)),
    Rule(x <= y - 1, x < y, _ovf(y - 1)),
    Rule(x * c1 <= c2, lambda m: ops.le(m.x, ops.const(m.c2 // m.c1, m.dtype)),
         lambda m: m.c1 > 0 and m.no_overflow(x * c1)),
    Rule(c2 <= x * c1, lambda m: ops.le(ops.const(_ceil_div(m.c2, m.c1), m.dtype), m.x),
         lambda m: m.c1 > 0 and m.no_overflow(x * c1)),
    Rule(x * c1 <= y * c1, x <= y, lambda m: m.c1 > 0 and m.no_overflow(x * c1, y * c1)),
    Rule(x * c1 <= y * c1, y <= x, lambda m: m.c1 < 0 and m.no_overflow(x * c1, y * c1)),
    Rule(x // c1 <= c2, x <= (c2 + 1) * c1 - 1, lambda m: m.c1 > 0 and m.fits((m.c2 + 1) * m.c1 - 1)),
    Rule(c2 <= x // c1, c2 * c1 <= x, lambda m: m.c1 > 0 and m.fits(m.c2 * m.c1)),
    Rule(x + y <= x + z, y <= z, _ovf(x + y, x + z)),
    Rule(y + x <= z + x, y <= z, _ovf(y + x, z + x)),
    Rule(x - y <= x - z, z <= y, _ovf(x - y, x - z)),
    Rule(y - x <= z - x, y <= z, _ovf(y - x, z - x)),
    Rule(x <= min_(x, y), x <= y),
    Rule(x <= min_(y, x), x <= y),
    Rule(max_(x, y) <= x, y <= x),
    Rule(max_(y, x) <= x, y <= x),
]


def _eq_rules(op, build):
    """``==`` and ``!=`` share their (ring-exact) rules; ``build`` makes the node."""
    return [
        FnRule(decide_cmp),
        Rule(op(c1, x), op(x, c1)),
        Rule(op(x + c1, c2), op(x, c2 - c1)),
        Rule(op(x - c1, c2), op(x, c2 + c1)),
        Rule(op(c1 - x, c2), op(x, c1 - c2)),
        Rule(op(x + c1, y + c2), op(x, y + (c2 - c1))),
        Rule(op(x - y, 0), op(x, y)),
        Rule(op(x + y, x + z), op(y, z)),
        Rule(op(y + x, z + x), op(y, z)),
        Rule(op(x + y, z + x), op(y, z)),
        Rule(op(y + x, x + z), op(y, z)),
        Rule(op(x - y, x - z), op(y, z)),
        Rule(op(x * c1, c2), lambda m: build(m.x, ops.const(m.c2 // m.c1, m.dtype)),
             lambda m: m.c1 != 0 and m.c2 % m.c1 == 0 and m.fits(m.c2 // m.c1) and m.no_overflow(x * c1)),
    ]


EQ = _eq_rules(lambda a, b: a == b, ops.eq) + [
    Rule(x == x, True),
    Rule(x * c1 == c2, False, lambda m: m.c1 != 0 and m.c2 % m.c1 != 0 and m.no_overflow(x * c1)),
]
NE = _eq_rules(lambda a, b: a != b, ops.ne) + [
    Rule(x != x, False),
    Rule(x * c1 != c2, True, lambda m: m.c1 != 0 and m.c2 % m.c1 != 0 and m.no_overflow(x * c1)),
]

CMP_RULES: dict[type, list[Any]] = {
    E.LT: LT, E.LE: LE, E.EQ: EQ, E.NE: NE,
    E.GT: [Rule(x > y, y < x)],
    E.GE: [Rule(x >= y, y <= x)],
}


# ---------------------------------------------------------------------------
# Logic and select: bool operands, so these apply whatever the compared dtype,
# except where a rule says ``m.is_int`` (NaN breaks trichotomy for floats).


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
    Rule((x < y) & (y < x), False),
    Rule((x < y) & (y <= x), False),
    Rule((x <= y) & (y < x), False),
    Rule((x <= y) & (y <= x), x == y),
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
    Rule((x < y) | (y <= x), True, _int(x)),
    Rule((x <= y) | (y < x), True, _int(x)),
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
