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
from ..ir import expr_ops as ops
from ._intmath import divides_wrap, fits, iv_div, trunc_div
from .pattern import FnRule, PVar, Rule, bcast, max_, min_, pconsts, pvars, ramp, select, tdiv, tmod

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["INT_RULES", "VECTOR_RULES"]

x, y, z, w = pvars("x y z w")
c1, c2 = pconsts("c1 c2")
cond, lanes = PVar("cond"), PVar("lanes")


# ---------------------------------------------------------------------------
# Rules that need the analyzer directly.


def _div_by_bounds(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``x // y`` is a constant when the quotient's interval is one point."""
    fn = (lambda a, b: a // b) if isinstance(e, E.FloorDiv) else trunc_div
    q = iv_div(an._interval(e.a), an._interval(e.b), fn)
    if q is not None and q[0] == q[1] and fits(q[0], q[0], e.dtype):
        return ops.const(q[0], e.dtype)
    return None


def _mod_by_bounds(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``x % c`` is ``x - k*c`` when every ``x`` has the same quotient ``k``."""
    lo, hi = an._interval(e.a)
    if isinstance(e.b, E.IntImm) and e.b.value != 0:
        c = e.b.value
        fn = (lambda a: a // c) if isinstance(e, E.FloorMod) else (lambda a: trunc_div(a, c))
        k = fn(lo)
        if k != fn(hi) or not fits(k * c, k * c, e.dtype):
            return None
        return e.a if k == 0 else E.Sub(e.a, E.IntImm(e.dtype, k * c))
    blo, bhi = an._interval(e.b)
    if lo >= 0 and blo > 0 and hi < blo:  # 0 <= x < y
        return e.a
    if isinstance(e, E.Mod) and blo > 0 and hi <= 0 and -lo < blo:  # -y < x <= 0
        return e.a
    return None


def _mod_by_modular(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``x % c`` is a constant when ``x``'s residue modulo ``c`` is known."""
    if not isinstance(e.b, E.IntImm) or e.b.value <= 0:
        return None
    c = e.b.value
    if isinstance(e, E.Mod) and an._interval(e.a)[0] < 0:
        return None
    ms = an.modular_set(e.a)
    if ms.coeff % c == 0:
        return E.IntImm(e.dtype, ms.base % c)
    return None


def _exact_div_times(e: E.Mul, an: Analyzer) -> Optional[E.PrimExpr]:
    """``(x // c) * c`` is ``x`` when ``x`` is a multiple of ``c`` (the division is exact)."""
    q, c = e.a, e.b
    if isinstance(q, (E.FloorDiv, E.Div)) and isinstance(c, E.IntImm) and c.value != 0:
        if isinstance(q.b, E.IntImm) and q.b.value == c.value and an.modular_set(q.a).divisible_by(c.value):
            return q.a
    return None


def _minmax_by_bounds(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``min(a, b)`` is ``a`` when ``a <= b`` is proven (by bounds or by ``a - b``)."""
    (alo, ahi), (blo, bhi) = an._interval(e.a), an._interval(e.b)
    a_first = isinstance(e, E.Min)
    if ahi <= blo:
        return e.a if a_first else e.b
    if bhi <= alo:
        return e.b if a_first else e.a
    d = an._diff_interval(e.a, e.b)
    if d is not None and d[1] <= 0:
        return e.a if a_first else e.b
    if d is not None and d[0] >= 0:
        return e.b if a_first else e.a
    return None


def _pos(m) -> bool:
    return m.c1 > 0 and m.c2 > 0


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
]

FLOORDIV = [
    FnRule(_div_by_bounds),
    Rule(x // 1, x),
    Rule(x // -1, 0 - x),  # INT_MIN // -1 wraps to INT_MIN, and so does 0 - INT_MIN
    Rule(x // x, 1),  # where x == 0 the original is undefined
    Rule((x // c1) // c2, x // (c1 * c2), lambda m: _pos(m) and m.fits(m.c1 * m.c2)),
    Rule((x * c1) // c2, x * (c1 // c2), lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule((x * c1) // c2, x // (c2 // c1), lambda m: _pos(m) and m.c2 % m.c1 == 0 and m.no_overflow(x * c1)),
    Rule((x * c1 + y) // c2, x * (c1 // c2) + y // c2,
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1 + y)),
    Rule((y + x * c1) // c2, y // c2 + x * (c1 // c2),
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(y + x * c1)),
    Rule((x + c1) // c2, x // c2 + c1 // c2, lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x + c1)),
    Rule((x * y) // y, x, lambda m: m.no_overflow(x * y)),
    Rule((y * x) // y, x, lambda m: m.no_overflow(y * x)),
]


def _mod_exact(p):
    """Condition: ``p % c2`` sees the mathematical residue of ``p``."""
    return lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and (divides_wrap(m.c2, m.dtype) or m.no_overflow(p))


FLOORMOD = [
    FnRule(_mod_by_bounds),
    FnRule(_mod_by_modular),
    Rule(x % 1, 0),
    Rule(x % -1, 0),
    Rule(x % x, 0),
    Rule((x % c1) % c2, x % c2, lambda m: _pos(m) and m.c1 % m.c2 == 0),
    Rule((x * c1 + y) % c2, y % c2, _mod_exact(x * c1 + y)),
    Rule((y + x * c1) % c2, y % c2, _mod_exact(y + x * c1)),
    Rule((x + c1) % c2, x % c2, _mod_exact(x + c1)),
    Rule((x * y) % y, 0, lambda m: m.no_overflow(x * y)),
    Rule((y * x) % y, 0, lambda m: m.no_overflow(y * x)),
]


def _nonneg_by_pos(m) -> bool:
    return m.bound(x)[0] >= 0 and m.bound(y)[0] > 0


TRUNCDIV = [
    FnRule(_div_by_bounds),
    Rule(tdiv(x, 1), x),
    Rule(tdiv(x, -1), 0 - x),
    Rule(tdiv(x, x), 1),
    Rule(tdiv(x, y), x // y, _nonneg_by_pos),
]

TRUNCMOD = [
    FnRule(_mod_by_bounds),
    FnRule(_mod_by_modular),
    Rule(tmod(x, 1), 0),
    Rule(tmod(x, -1), 0),
    Rule(tmod(x, x), 0),
    Rule(tmod(x, y), x % y, _nonneg_by_pos),
]


def _minmax_rules(mn, mx):
    """Min rules written once; Max gets the mirror image (``mn``/``mx`` swapped)."""
    return [
        FnRule(_minmax_by_bounds),
        Rule(mn(x, x), x),
        Rule(mn(c1, x), mn(x, c1)),
        Rule(mn(mn(x, c1), c2), mn(x, mn(c1, c2))),
        Rule(mn(mn(x, c1), y), mn(mn(x, y), c1)),
        Rule(mn(mx(x, y), x), x),
        Rule(mn(mx(y, x), x), x),
        Rule(mn(x, mx(x, y)), x),
        Rule(mn(x, mx(y, x)), x),
        Rule(mn(mn(x, y), x), mn(x, y)),
        Rule(mn(mn(y, x), x), mn(y, x)),
        Rule(mn(x, mn(x, y)), mn(x, y)),
        Rule(mn(x, mn(y, x)), mn(y, x)),
        Rule(mn(x + c1, x + c2), x + mn(c1, c2), lambda m: m.no_overflow(x + c1, x + c2)),
        Rule(mn(x + c1, x), x + mn(c1, 0), lambda m: m.no_overflow(x + c1)),
        Rule(mn(x, x + c1), x + mn(c1, 0), lambda m: m.no_overflow(x + c1)),
        Rule(mn(x + y, x + z), x + mn(y, z), lambda m: m.no_overflow(x + y, x + z)),
        Rule(mn(y + x, z + x), mn(y, z) + x, lambda m: m.no_overflow(y + x, z + x)),
        Rule(mn(x - y, x - z), x - mx(y, z), lambda m: m.no_overflow(x - y, x - z)),
        Rule(mn(y - x, z - x), mn(y, z) - x, lambda m: m.no_overflow(y - x, z - x)),
        Rule(mn(x * c1, y * c1), mn(x, y) * c1, lambda m: m.c1 > 0 and m.no_overflow(x * c1, y * c1)),
        Rule(mn(x * c1, y * c1), mx(x, y) * c1, lambda m: m.c1 < 0 and m.no_overflow(x * c1, y * c1)),
        Rule(mn(x // c1, y // c1), mn(x, y) // c1, lambda m: m.c1 > 0),
        Rule(mn(select(cond, x, y), select(cond, z, w)), select(cond, mn(x, z), mn(y, w))),
    ]


MIN = _minmax_rules(min_, max_)
MAX = _minmax_rules(max_, min_)

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

