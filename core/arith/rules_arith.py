"""Rewrite rules for integer arithmetic, one per line, grouped by node kind.

Reading guide (Halide's ``Simplify_*.cpp`` style): ``Rule(before, after,
condition)``.  Ring identities (``+ - *`` only) hold with wrap-around and need
no condition.  Anything that relies on ordering or on division needs the
operands' *mathematical* values, which ``m.no_overflow(...)`` guarantees.
Rules that drop a division are fine (the original was undefined where it
divided by zero); no rule introduces a division by a new divisor.

These tables apply to integer dtypes only (vector rules live in
:mod:`loom.arith.rules_vector`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from ._intmath import exact_interval, iv_sub
from .canonical import SumForm
from .pattern import FnRule, PVar, Rule, max_, min_, pconsts, pvars, select, tdiv, tmod
from .rules_divmod import DIVMOD_SUB, FLOORDIV, FLOORMOD, TRUNCDIV, TRUNCMOD
from .rules_minmax import MAX, MIN

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["INT_RULES"]

x, y, z, w = pvars("x y z w")
c1, c2, c3 = pconsts("c1 c2 c3")
cond = PVar("cond")


# ---------------------------------------------------------------------------
# Rules that need the analyzer directly.


def _exact_div_times(e: E.Mul, an: Analyzer) -> Optional[E.PrimExpr]:
    """``(x // c) * c`` is ``x`` when ``x`` is a multiple of ``c`` (the division is exact)."""
    q, c = e.a, e.b
    if isinstance(q, (E.FloorDiv, E.Div)) and isinstance(c, E.IntImm) and c.value != 0:
        if isinstance(q.b, E.IntImm) and q.b.value == c.value and an.modular_set(q.a).divisible_by(c.value):
            return q.a
    return None


def _exact_diff(an: Analyzer, p: E.PrimExpr, q: E.PrimExpr) -> bool:
    """True when ``p - q`` of the actual values fits the dtype (so it is not a wrapped value)."""
    return exact_interval(*iv_sub(an._interval(p), an._interval(q)), p.dtype, an.assume_no_overflow) is not None


def _same_sum(p: SumForm, q: SumForm) -> bool:
    return p.const == q.const and p.terms.keys() == q.terms.keys() and all(
        k == q.terms[key][1] for key, (_, k) in p.terms.items())


def _minmax_diff(e: E.Sub, an: Analyzer) -> Optional[E.PrimExpr]:
    """``min(s1 + d, s2 + d) - min(s1, s2)`` is ``d`` (``max`` too).

    ``b1 - s1`` and ``b2 - s2`` have the same canonical sum, so they are equal
    modulo ``2**bits``; when both actual differences fit the dtype they are
    equal, and shifting both operands of a min by ``d`` shifts the min by ``d``.
    """
    a, b = e.a, e.b
    if not isinstance(a, (E.Min, E.Max)) or type(b) is not type(a) or a.dtype.lanes != 1:
        return None
    assert isinstance(b, (E.Min, E.Max))
    canon = an._canonical
    for s1, s2 in ((b.a, b.b), (b.b, b.a)):
        d1, d2 = canon.to_sum(E.Sub(a.a, s1)), canon.to_sum(E.Sub(a.b, s2))
        if _same_sum(d1, d2) and _exact_diff(an, a.a, s1) and _exact_diff(an, a.b, s2):
            return canon.render(d1)
    return None


def _factor(m) -> bool:
    """``x*y + x*z`` is ``x*(y + z)`` (a ring identity); a constant ``x`` stays
    distributed, the canonical form of ``(y + z) * 3``."""
    return not isinstance(m.x, E.IntImm)


# ---------------------------------------------------------------------------

ADD = [
    Rule(x + 0, x),
    Rule(0 + x, x),
    Rule(c1 + x, x + c1),
    Rule((x + c1) + c2, x + (c1 + c2)),
    Rule((x - c1) + c2, x + (c2 - c1)),
    Rule((c1 - x) + c2, (c1 + c2) - x),
    Rule((x + c1) + y, (x + y) + c1),
    Rule(x + (y + c1), (x + y) + c1),
    Rule((x - c1) + y, (x + y) - c1),
    Rule(x + (y - c1), (x + y) - c1),
    Rule(x + (c1 - y), (x - y) + c1),
    Rule((c1 - x) + y, (y - x) + c1),
    Rule(x + x, x * 2),
    Rule(x * c1 + x, x * (c1 + 1)),
    Rule(x + x * c1, x * (c1 + 1)),
    Rule(x * c1 + x * c2, x * (c1 + c2)),
    Rule(x * y + x * z, x * (y + z), _factor),
    Rule(y * x + x * z, x * (y + z), _factor),
    Rule(x * y + z * x, x * (y + z), _factor),
    Rule(y * x + z * x, x * (y + z), _factor),
    Rule(x + (y - x), y),
    Rule((y - x) + x, y),
    Rule((x - y) + (y - z), x - z),
    Rule((x - y) + (z - x), z - y),
    Rule(x + (0 - y), x - y),
    Rule((0 - x) + y, y - x),
    Rule(x + y * -1, x - y),
    Rule(min_(x, y) + max_(x, y), x + y),
    Rule(min_(x, y) + max_(y, x), x + y),
    Rule(max_(x, y) + min_(x, y), x + y),
    Rule(max_(x, y) + min_(y, x), x + y),
    Rule((x // y) * y + x % y, x),
    Rule(x % y + (x // y) * y, x),
    Rule(tdiv(x, y) * y + tmod(x, y), x),
    Rule(tmod(x, y) + tdiv(x, y) * y, x),
    Rule(y * (x // y) + x % y, x),
    Rule(x % y + y * (x // y), x),
    Rule(y * tdiv(x, y) + tmod(x, y), x),
    Rule(tmod(x, y) + y * tdiv(x, y), x),
    Rule(select(cond, x, y) + select(cond, z, w), select(cond, x + z, y + w)),
    # Adding into a min/max whose operand cancels: the other operand must not wrap.
    Rule(min_(x, y - z) + z, min_(x + z, y), lambda m: m.no_overflow(x + z, y - z)),
    Rule(min_(y - z, x) + z, min_(y, x + z), lambda m: m.no_overflow(x + z, y - z)),
    Rule(max_(x, y - z) + z, max_(x + z, y), lambda m: m.no_overflow(x + z, y - z)),
    Rule(max_(y - z, x) + z, max_(y, x + z), lambda m: m.no_overflow(x + z, y - z)),
    Rule(z + min_(x, y - z), min_(x + z, y), lambda m: m.no_overflow(x + z, y - z)),
    Rule(z + min_(y - z, x), min_(y, x + z), lambda m: m.no_overflow(x + z, y - z)),
    Rule(z + max_(x, y - z), max_(x + z, y), lambda m: m.no_overflow(x + z, y - z)),
    Rule(z + max_(y - z, x), max_(y, x + z), lambda m: m.no_overflow(x + z, y - z)),
    Rule(min_(x + c1, y) + c2, min_(x, y + c2), lambda m: m.c1 + m.c2 == 0 and m.no_overflow(y + c2, x + c1)),
    Rule(min_(y, x + c1) + c2, min_(y + c2, x), lambda m: m.c1 + m.c2 == 0 and m.no_overflow(y + c2, x + c1)),
    Rule(max_(x + c1, y) + c2, max_(x, y + c2), lambda m: m.c1 + m.c2 == 0 and m.no_overflow(y + c2, x + c1)),
    Rule(max_(y, x + c1) + c2, max_(y + c2, x), lambda m: m.c1 + m.c2 == 0 and m.no_overflow(y + c2, x + c1)),
    Rule(x + c1, x - (0 - c1), lambda m: m.c1 < 0 and m.fits(-m.c1)),  # print x - 3, not x + -3
]

SUB = [
    Rule(x - 0, x),
    Rule(x - x, 0),
    Rule((x + y) - x, y),
    Rule((x + y) - y, x),
    Rule(x - (x + y), 0 - y),
    Rule(x - (y + x), 0 - y),
    Rule((x - y) - x, 0 - y),
    Rule(x - (x - y), y),
    Rule((x + y) - (x + z), y - z),
    Rule((x + y) - (z + x), y - z),
    Rule((y + x) - (x + z), y - z),
    Rule((y + x) - (z + x), y - z),
    Rule((x + c1) - c2, x + (c1 - c2)),
    Rule((x - c1) - c2, x - (c1 + c2)),
    Rule((c1 - x) - c2, (c1 - c2) - x),
    Rule(c1 - (x + c2), (c1 - c2) - x),
    Rule(c1 - (x - c2), (c1 + c2) - x),
    Rule(c1 - (c2 - x), x + (c1 - c2)),
    Rule((x + c1) - (y + c2), (x - y) + (c1 - c2)),
    Rule((x + c1) - y, (x - y) + c1),
    Rule(x - (y + c1), (x - y) - c1),
    Rule(x * c1 - x, x * (c1 - 1)),
    Rule(x - x * c1, x * (1 - c1)),
    Rule(x * c1 - x * c2, x * (c1 - c2)),
    Rule(x * y - x * z, x * (y - z), _factor),
    Rule(y * x - x * z, x * (y - z), _factor),
    Rule(x * y - z * x, x * (y - z), _factor),
    Rule(y * x - z * x, x * (y - z), _factor),
    Rule(x - y * -1, x + y),
    Rule(x - (x // y) * y, x % y),
    Rule(x - tdiv(x, y) * y, tmod(x, y)),
    Rule(x - y * (x // y), x % y),
    Rule(x - y * tdiv(x, y), tmod(x, y)),
    *DIVMOD_SUB,
    Rule(select(cond, x, y) - select(cond, z, w), select(cond, x - z, y - w)),
    Rule(select(cond, x, y) - x, select(cond, 0, y - x)),
    Rule(select(cond, x, y) - y, select(cond, x - y, 0)),
    Rule(x - select(cond, x, y), select(cond, 0, x - y)),
    Rule(x - select(cond, y, x), select(cond, x - y, 0)),
    Rule(min_(x, y) - min_(y, x), 0),
    Rule(max_(x, y) - max_(y, x), 0),
    FnRule(_minmax_diff),
    # min(x, y) - x is min(0, y - x), exact when y - x cannot wrap.
    Rule(min_(x, y) - x, min_(0, y - x), lambda m: m.no_overflow(y - x)),
    Rule(min_(x, y) - y, min_(x - y, 0), lambda m: m.no_overflow(x - y)),
    Rule(max_(x, y) - x, max_(0, y - x), lambda m: m.no_overflow(y - x)),
    Rule(max_(x, y) - y, max_(x - y, 0), lambda m: m.no_overflow(x - y)),
    Rule(x - min_(x, y), max_(0, x - y), lambda m: m.no_overflow(x - y)),
    Rule(y - min_(x, y), max_(y - x, 0), lambda m: m.no_overflow(y - x)),
    Rule(x - max_(x, y), min_(0, x - y), lambda m: m.no_overflow(x - y)),
    Rule(y - max_(x, y), min_(y - x, 0), lambda m: m.no_overflow(y - x)),
    Rule(min_(x + y, z) - x, min_(y, z - x), lambda m: m.no_overflow(z - x, x + y)),
    Rule(min_(y + x, z) - x, min_(y, z - x), lambda m: m.no_overflow(z - x, x + y)),
    Rule(min_(z, x + y) - x, min_(z - x, y), lambda m: m.no_overflow(z - x, x + y)),
    Rule(min_(z, y + x) - x, min_(z - x, y), lambda m: m.no_overflow(z - x, x + y)),
    Rule(max_(x + y, z) - x, max_(y, z - x), lambda m: m.no_overflow(z - x, x + y)),
    Rule(max_(y + x, z) - x, max_(y, z - x), lambda m: m.no_overflow(z - x, x + y)),
    Rule(max_(z, x + y) - x, max_(z - x, y), lambda m: m.no_overflow(z - x, x + y)),
    Rule(max_(z, y + x) - x, max_(z - x, y), lambda m: m.no_overflow(z - x, x + y)),
    Rule(x - min_(x + y, z), max_(0 - y, x - z), lambda m: m.no_overflow(0 - y, x - z, x + y)),
    Rule(x - min_(y + x, z), max_(0 - y, x - z), lambda m: m.no_overflow(0 - y, x - z, x + y)),
    Rule(x - min_(z, x + y), max_(x - z, 0 - y), lambda m: m.no_overflow(0 - y, x - z, x + y)),
    Rule(x - min_(z, y + x), max_(x - z, 0 - y), lambda m: m.no_overflow(0 - y, x - z, x + y)),
    # (x + c1) // c2 - (x + c3) // c2: only the residue of x + c3 matters.
    Rule((x + c1) // c2 - x // c2, (x % c2 + c1) // c2, lambda m: m.c2 > 0 and m.no_overflow(x + c1, x % c2 + c1)),
    Rule((x + c1) // c2 - (x + c3) // c2, ((x + c3) % c2 + (c1 - c3)) // c2,
         lambda m: m.c2 > 0 and m.fits(m.c1 - m.c3) and m.no_overflow(x + c1, x + c3, (x + c3) % c2 + (m.c1 - m.c3))),
    Rule(x - c1, x + (0 - c1), lambda m: m.c1 < 0 and m.fits(-m.c1)),
]

MUL = [
    FnRule(_exact_div_times),
    Rule(x * 0, 0),
    Rule(0 * x, 0),
    Rule(x * 1, x),
    Rule(1 * x, x),
    Rule(c1 * x, x * c1),
    Rule((x * c1) * c2, x * (c1 * c2)),
    Rule((x + c1) * c2, x * c2 + c1 * c2),
    Rule((x - c1) * c2, x * c2 - c1 * c2),
    Rule((x - y) * c1, (y - x) * (0 - c1), lambda m: m.c1 < 0 and m.fits(-m.c1)),  # a ring identity: wraps alike
    Rule(x * (y * c1), (x * y) * c1),
    Rule((x * c1) * y, (x * y) * c1),
    Rule(min_(x, y) * max_(x, y), x * y),  # the same two values, multiplied
    Rule(min_(x, y) * max_(y, x), x * y),
    Rule(max_(x, y) * min_(x, y), x * y),
    Rule(max_(x, y) * min_(y, x), x * y),
]

INT_RULES: dict[type, list[Any]] = {
    E.Add: ADD, E.Sub: SUB, E.Mul: MUL, E.FloorDiv: FLOORDIV, E.FloorMod: FLOORMOD,
    E.Div: TRUNCDIV, E.Mod: TRUNCMOD, E.Min: MIN, E.Max: MAX,
}
