"""Rewrite rules for integer comparisons, grouped by node kind.

Comparisons on integers are decided first from facts (constraints in scope),
then from bounds, then from the exact difference ``a - b``.  ``==`` and
``!=`` compare residues, so ring rewrites (moving constants across) are exact
even with wrap-around; ``<`` and ``<=`` need ``m.no_overflow``.  Comparisons
of floats are only folded (NaN makes most identities false).

When ``a - b`` cancels terms (``x // 4 * 4 < x + y`` is ``0 < x % 4 + y``) or
has a common factor (``x * 2 >= 3`` is ``2 <= x``), the comparison is
rewritten from that difference, as TVM's canonical comparison does, once
bounds prove that neither ``a - b`` nor the new sides can wrap around.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ._intmath import exact_interval, fits, is_int_type
from .canonical import SumForm
from .pattern import FnRule, Rule, max_, min_, pconsts, pvars, tdiv

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["CMP_RULES", "decide_cmp"]

x, y, z = pvars("x y z")
c1, c2 = pconsts("c1 c2")

_TRUE, _FALSE = E.IntImm("bool", 1), E.IntImm("bool", 0)


def _side(an: Analyzer, s: SumForm, terms: list[tuple[E.PrimExpr, int]], const: int) -> Optional[E.PrimExpr]:
    """The sum ``terms + const`` rendered, or None when it may wrap around."""
    side = s.derived(const)
    for atom, k in terms:
        side.add_term(atom, k)
    if side.const != const or an._canonical._sum_interval(side) is None:
        return None
    return an._canonical.render(side)


def _cmp_by_canonical(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``a < b`` rewritten from the canonical ``a - b`` when that cancels terms or
    has a common factor ``g``: ``g*t + c < 0`` is ``t < ceil(-c / g)``."""
    a, b = e.a, e.b
    if not is_int_type(a.dtype) or a.dtype.lanes != 1:
        return None
    (alo, ahi), (blo, bhi) = an._interval(a), an._interval(b)
    if exact_interval(alo - bhi, ahi - blo, a.dtype, an.assume_no_overflow) is None:
        return None  # a - b may wrap: its sign says nothing about a < b
    canon = an._canonical
    s = canon.to_sum(E.Sub(a, b))
    if canon._has_div_term(s):  # x // 4 * 4 - x is 0 - x % 4
        expanded = canon.expand_divs(s)
        s = expanded if len(expanded.terms) < len(s.terms) else s
    if not s.terms or canon._sum_interval(s) is None:
        return None
    g = math.gcd(*(k for _, k in s.terms.values()))
    if len(s.terms) >= len(canon.to_sum(a).terms) + len(canon.to_sum(b).terms) and g == 1:
        return None
    # t = P - N, with s == g*t + c; a < b is t < k, a <= b is t <= k.
    k = -(s.const // g) if isinstance(e, E.LT) else (-s.const) // g
    pos = [(atom, c // g) for atom, c in s.terms.values() if c > 0]
    neg = [(atom, -c // g) for atom, c in s.terms.values() if c < 0]
    lhs, rhs = (_side(an, s, pos, 0), _side(an, s, neg, k)) if k >= 0 else (_side(an, s, pos, -k), _side(an, s, neg, 0))
    if lhs is None or rhs is None:
        return None
    out = E.LT(lhs, rhs) if isinstance(e, E.LT) else E.LE(lhs, rhs)
    return None if _same_cmp(out, e) else out


def _same_cmp(p: E.PrimExpr, q: E.PrimExpr) -> bool:
    return str(p) == str(q) and type(p) is type(q)


def _cmp_minmax(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``a < max(p, q)`` is ``a < p or a < q``: when one of them is decided, the other is the answer."""
    mk = type(e)
    a, b = e.a, e.b
    if isinstance(b, (E.Min, E.Max)):
        parts, either = (mk(a, b.a), mk(a, b.b)), isinstance(b, E.Max)
    elif isinstance(a, (E.Min, E.Max)):
        parts, either = (mk(a.a, b), mk(a.b, b)), isinstance(a, E.Min)
    else:
        return None
    p, q = (an._rewrite.visit(c) for c in parts)
    for known, other in ((p, q), (q, p)):
        if isinstance(known, E.IntImm):
            if bool(known.value) == either:  # true in an or / false in an and decides it
                return known
            return other
    return None


def _tdiv_lt(k: int, c: int) -> int:
    """``truncdiv(x, c) < k`` (``c > 0``) is ``x < _tdiv_lt(k, c)``."""
    return k * c if k > 0 else (k - 1) * c + 1


def _tdiv_fits(m: Any, k: int) -> bool:
    return m.c1 > 0 and m.fits(_tdiv_lt(k, m.c1))


def _tdiv_rules(strict: bool) -> list[Any]:
    """``truncdiv(x, c1) < c2`` and friends as comparisons of ``x`` (``c1 > 0``)."""
    bump = 0 if strict else 1  # t <= k is t < k + 1;  k < t is not t < k + 1;  k <= t is not t < k
    return [
        Rule(tdiv(x, c1) < c2 if strict else tdiv(x, c1) <= c2,
             lambda m: ops.lt(m.x, ops.const(_tdiv_lt(m.c2 + bump, m.c1), m.dtype)),
             lambda m: _tdiv_fits(m, m.c2 + bump)),
        Rule(c2 < tdiv(x, c1) if strict else c2 <= tdiv(x, c1),
             lambda m: ops.le(ops.const(_tdiv_lt(m.c2 + 1 - bump, m.c1), m.dtype), m.x),
             lambda m: _tdiv_fits(m, m.c2 + 1 - bump)),
    ]



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
    FnRule(_cmp_minmax),
    Rule(x < x, False),
    Rule(x + c1 < c2, x < c2 - c1, lambda m: m.no_overflow(x + c1) and m.fits(m.c2 - m.c1)),
    Rule(x - c1 < c2, x < c2 + c1, lambda m: m.no_overflow(x - c1) and m.fits(m.c2 + m.c1)),
    Rule(c1 < x + c2, c1 - c2 < x, lambda m: m.no_overflow(x + c2) and m.fits(m.c1 - m.c2)),
    Rule(c1 < x - c2, c1 + c2 < x, lambda m: m.no_overflow(x - c2) and m.fits(m.c1 + m.c2)),
    Rule(c1 < c2 - x, x < c2 - c1, lambda m: m.no_overflow(c2 - x) and m.fits(m.c2 - m.c1)),
    Rule(c1 - x < c2, c1 - c2 < x, lambda m: m.no_overflow(c1 - x) and m.fits(m.c1 - m.c2)),
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
    *_tdiv_rules(strict=True),
    FnRule(_cmp_by_canonical),
]

LE = [
    FnRule(decide_cmp),
    FnRule(_cmp_minmax),
    Rule(x <= x, True),
    Rule(x + c1 <= c2, x <= c2 - c1, lambda m: m.no_overflow(x + c1) and m.fits(m.c2 - m.c1)),
    Rule(x - c1 <= c2, x <= c2 + c1, lambda m: m.no_overflow(x - c1) and m.fits(m.c2 + m.c1)),
    Rule(c1 <= x + c2, c1 - c2 <= x, lambda m: m.no_overflow(x + c2) and m.fits(m.c1 - m.c2)),
    Rule(c1 <= x - c2, c1 + c2 <= x, lambda m: m.no_overflow(x - c2) and m.fits(m.c1 + m.c2)),
    Rule(c1 <= c2 - x, x <= c2 - c1, lambda m: m.no_overflow(c2 - x) and m.fits(m.c2 - m.c1)),
    Rule(c1 - x <= c2, c1 - c2 <= x, lambda m: m.no_overflow(c1 - x) and m.fits(m.c1 - m.c2)),
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
    *_tdiv_rules(strict=False),
    FnRule(_cmp_by_canonical),
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
    Rule(x * y == 0, (x == 0) | (y == 0), lambda m: m.no_overflow(x * y)),  # 65536 * 65536 wraps to 0
    Rule(x * c1 == c2, False, lambda m: m.c1 != 0 and m.c2 % m.c1 != 0 and m.no_overflow(x * c1)),
]
NE = _eq_rules(lambda a, b: a != b, ops.ne) + [
    Rule(x != x, False),
    Rule(x * y != 0, (x != 0) & (y != 0), lambda m: m.no_overflow(x * y)),
    Rule(x * c1 != c2, True, lambda m: m.c1 != 0 and m.c2 % m.c1 != 0 and m.no_overflow(x * c1)),
]

CMP_RULES: dict[type, list[Any]] = {
    E.LT: LT, E.LE: LE, E.EQ: EQ, E.NE: NE,
    E.GT: [Rule(x > y, y < x)],
    E.GE: [Rule(x >= y, y <= x)],
}


