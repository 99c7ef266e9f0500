"""Rewrite rules for integer arithmetic, one per line, grouped by node kind.

Reading guide (Halide's ``Simplify_*.cpp`` style): ``Rule(before, after,
condition)``.  Ring identities (``+ - *`` only) hold with wrap-around and need
no condition.  Anything that relies on ordering or on division needs the
operands' *mathematical* values, which ``m.no_overflow(...)`` guarantees.
Rules that drop a division are fine (the original was undefined where it
divided by zero); no rule introduces a division by a new divisor.

These tables apply to integer dtypes only; ``VECTOR_RULES`` apply to every
dtype because lane-wise identities are exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir import expr as E
from .pattern import FnRule, PVar, Rule, bcast, max_, min_, pconsts, pvars, ramp, select, tdiv, tmod
from .rules_divmod import FLOORDIV, FLOORMOD, TRUNCDIV, TRUNCMOD
from .rules_minmax import MAX, MIN

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["INT_RULES", "VECTOR_RULES"]

x, y, z, w = pvars("x y z w")
c1, c2, c3 = pconsts("c1 c2 c3")
cond, lanes = PVar("cond"), PVar("lanes")


# ---------------------------------------------------------------------------
# Rules that need the analyzer directly.


def _exact_div_times(e: E.Mul, an: Analyzer) -> Optional[E.PrimExpr]:
    """``(x // c) * c`` is ``x`` when ``x`` is a multiple of ``c`` (the division is exact)."""
    q, c = e.a, e.b
    if isinstance(q, (E.FloorDiv, E.Div)) and isinstance(c, E.IntImm) and c.value != 0:
        if isinstance(q.b, E.IntImm) and q.b.value == c.value and an.modular_set(q.a).divisible_by(c.value):
            return q.a
    return None


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
    Rule(x + (y - x), y),
    Rule((y - x) + x, y),
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
    Rule(x - y * -1, x + y),
    Rule(x - (x // y) * y, x % y),
    Rule(x - tdiv(x, y) * y, tmod(x, y)),
    Rule(x - y * (x // y), x % y),
    Rule(x - y * tdiv(x, y), tmod(x, y)),
    Rule(select(cond, x, y) - select(cond, z, w), select(cond, x - z, y - w)),
    Rule(select(cond, x, y) - x, select(cond, 0, y - x)),
    Rule(select(cond, x, y) - y, select(cond, x - y, 0)),
    Rule(x - select(cond, x, y), select(cond, 0, x - y)),
    Rule(x - select(cond, y, x), select(cond, x - y, 0)),
    Rule(min_(x, y) - min_(y, x), 0),
    Rule(max_(x, y) - max_(y, x), 0),
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


# ---------------------------------------------------------------------------
# Vectors: lane-wise identities.  Ramp rules regroup sums, so they are for ints.


def _int_ramp(m) -> bool:
    return m.is_int(x)


def _lanewise(op) -> list:
    return [Rule(op(bcast(x, lanes), bcast(y, lanes)), bcast(op(x, y), lanes))]


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
    E.FloorDiv: _lanewise(lambda a, b: a // b),
    E.FloorMod: _lanewise(lambda a, b: a % b),
    E.Div: _lanewise(tdiv),
    E.Mod: _lanewise(tmod),
    E.Min: _lanewise(min_),
    E.Max: _lanewise(max_),
    E.Ramp: [Rule(ramp(x, 0, lanes), bcast(x, lanes), _int_ramp)],
}

