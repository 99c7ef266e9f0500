"""Rewrite rules for integer division and remainder (floor and truncated).

Rules that drop a division are fine (the original was undefined where it
divided by zero); no rule introduces a division by a new divisor.  Identities
such as ``(x * c1 + y) // c2 == x * (c1 // c2) + y // c2`` hold for the
*mathematical* values, so each rule first proves from bounds that the
operands cannot wrap around (``m.no_overflow``), except remainders modulo a
divisor of ``2**bits``, which survive wrap-around.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ._exprkey import expr_equal
from ._intmath import divides_wrap, exact_interval, fits, iv_add, iv_div, iv_mul, trunc_div
from .pattern import FnRule, Rule, max_, min_, pconsts, pvars, tdiv, tmod

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["FLOORDIV", "FLOORMOD", "TRUNCDIV", "TRUNCMOD", "DIVMOD_SUB"]

x, y, z = pvars("x y z")
c1, c2, c3 = pconsts("c1 c2 c3")


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
    """``x % c`` is a constant when ``x``'s residue modulo ``c`` is known.

    The truncated remainder takes the sign of ``x``: a multiple of ``c`` gives 0
    whatever its sign (``truncmod(x * -10, 2)`` is 0), a non-positive ``x`` with
    residue ``r > 0`` gives ``r - c``.
    """
    if not isinstance(e.b, E.IntImm) or e.b.value <= 0:
        return None
    c = e.b.value
    ms = an.modular_set(e.a)
    if ms.coeff % c != 0:
        return None
    r = ms.base % c
    if isinstance(e, E.Mod) and r != 0:
        lo, hi = an._interval(e.a)
        if lo < 0:
            return E.IntImm(e.dtype, r - c) if hi <= 0 else None
    return E.IntImm(e.dtype, r)


def _split_by_divisor(e: E.BinaryOp, an: Analyzer) -> Optional[tuple[E.PrimExpr, E.PrimExpr, bool]]:
    """``(Q, R, q_first)`` with ``e.a == e.b * Q + R`` exactly, for a divisor that is not a constant.

    The terms of ``e.a`` that are the divisor ``v`` or a product with ``v`` form
    ``v * Q``.  The split holds for the mathematical values when the intervals
    of ``e.a``, ``Q``, ``v * Q``, ``R`` and ``v * Q + R`` all fit the dtype.
    ``q_first``: ``e.a`` starts with a term of ``v * Q`` (results keep that order).
    """
    v = e.b
    if isinstance(v, E.IntImm) or e.dtype.lanes != 1:
        return None
    canon = an._canonical
    s = canon.to_sum(e.a)
    q, r = s.derived(), s.derived(s.const)
    first = next(iter(s.terms.values()), None)
    q_first = first is not None and _cofactor(first[0], v) is not None
    for key, (atom, k) in s.terms.items():
        factor = _cofactor(atom, v)
        if factor is None:
            r.add_term(atom, k, key)
        elif isinstance(factor, E.IntImm):
            q.const += k
        else:
            q.add_term(factor, k)
    if not q.terms and q.const == 0:
        return None
    q_iv, r_iv, s_iv = canon._sum_interval(q), canon._sum_interval(r), canon._sum_interval(s)
    if q_iv is None or r_iv is None or s_iv is None:
        return None
    vq = iv_mul(q_iv, an._interval(v))
    no_wrap = an.assume_no_overflow
    if exact_interval(*vq, e.dtype, no_wrap) is None or exact_interval(*iv_add(vq, r_iv), e.dtype, no_wrap) is None:
        return None
    return canon.render(q), canon.render(r), q_first


def _cofactor(atom: E.PrimExpr, v: E.PrimExpr) -> Optional[E.PrimExpr]:
    """``p`` when ``atom`` is ``p * v`` or ``v * p``; the constant 1 when it is ``v``."""
    if expr_equal(atom, v):
        return E.IntImm(atom.dtype, 1)
    if isinstance(atom, E.Mul):
        if expr_equal(atom.b, v):
            return atom.a
        if expr_equal(atom.a, v):
            return atom.b
    return None


def _div_by_factor(e: E.FloorDiv, an: Analyzer) -> Optional[E.PrimExpr]:
    """``(v * q + r) // v`` is ``q + r // v`` (and ``(x + y) // x`` is ``y // x + 1``)."""
    quot = iv_div(an._interval(e.a), an._interval(e.b), lambda a, b: a // b)
    if quot is None or exact_interval(*quot, e.dtype, an.assume_no_overflow) is None:  # INT_MIN // -1 wraps
        return None
    split = _split_by_divisor(e, an)
    if split is None:
        return None
    quotient, rest = split[0], E.FloorDiv(split[1], e.b)
    if split[2] and not isinstance(quotient, E.IntImm):  # x * z + y: x + y // z; y + x * z: y // z + x
        return ops.add(quotient, rest)
    return ops.add(rest, quotient)


def _mod_by_factor(e: E.FloorMod, an: Analyzer) -> Optional[E.PrimExpr]:
    """``(v * q + r) % v`` is ``r % v``."""
    split = _split_by_divisor(e, an)
    return None if split is None else E.FloorMod(split[1], e.b)


def _pos(m) -> bool:
    return m.c1 > 0 and m.c2 > 0


def _mod_exact(p):
    """Condition: ``p % c2`` sees the mathematical residue of ``p``."""
    return lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and (divides_wrap(m.c2, m.dtype) or m.no_overflow(p))


def _nested_div(m) -> bool:
    """``(x // c1 + c2) // c3`` is ``(x + c1*c2) // (c1*c3)``: positive divisors, no wrap."""
    return m.c1 > 0 and m.c3 > 0 and m.fits(m.c1 * m.c2, m.c1 * m.c3) and m.no_overflow(x + m.c1 * m.c2)


def _scaled_nested(m) -> E.PrimExpr:
    return ops.floordiv(ops.add(m.x, ops.const(m.c1 * m.c2, m.dtype)), ops.const(m.c1 * m.c3, m.dtype))


def _nested_div_sub(m) -> bool:
    """``(x // c1 - c2) // c3`` is ``(x - c1*c2) // (c1*c3)`` (Loom prints ``x + -2`` as ``x - 2``)."""
    return m.c1 > 0 and m.c3 > 0 and m.fits(m.c1 * m.c2, m.c1 * m.c3) and m.no_overflow(x - m.c1 * m.c2)


def _scaled_nested_sub(m) -> E.PrimExpr:
    return ops.floordiv(ops.sub(m.x, ops.const(m.c1 * m.c2, m.dtype)), ops.const(m.c1 * m.c3, m.dtype))


def _exact_split3(m) -> bool:
    """``(x*c1 + y + z) // c2`` splits off ``x*(c1/c2)`` when nothing wraps, ``y + z`` included."""
    return m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1 + y + z, y + z)


def _residue_coeff(m) -> bool:
    """``(x * c1) % c2`` is ``(x * (c1 % c2)) % c2`` (a smaller coefficient, the same residue)."""
    if m.c2 <= 0 or m.c1 % m.c2 in (0, m.c1):
        return False
    smaller = x * (m.c1 % m.c2)
    return divides_wrap(m.c2, m.dtype) or (m.no_overflow(x * c1) and m.no_overflow(smaller))


FLOORDIV = [
    FnRule(_div_by_bounds),
    Rule(x // 1, x),
    Rule(x // -1, 0 - x),  # INT_MIN // -1 wraps to INT_MIN, and so does 0 - INT_MIN
    Rule(x // x, 1),  # where x == 0 the original is undefined
    Rule((x // c1) // c2, x // (c1 * c2), lambda m: _pos(m) and m.fits(m.c1 * m.c2)),
    Rule((x // c1 + c2) // c3, _scaled_nested, _nested_div),
    Rule((x // c1 - c2) // c3, _scaled_nested_sub, _nested_div_sub),
    Rule((x * c1) // c2, x * (c1 // c2), lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule((x * c1) // c2, x // (c2 // c1), lambda m: _pos(m) and m.c2 % m.c1 == 0 and m.no_overflow(x * c1)),
    Rule((x * c1 + y) // c2, x * (c1 // c2) + y // c2,
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1 + y)),
    Rule((y + x * c1) // c2, y // c2 + x * (c1 // c2),
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(y + x * c1)),
    Rule((x * c1 + y + z) // c2, x * (c1 // c2) + (y + z) // c2, _exact_split3),
    Rule((y + x * c1 + z) // c2, x * (c1 // c2) + (y + z) // c2, _exact_split3),
    Rule((x + c1) // c2, x // c2 + c1 // c2, lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x + c1)),
    Rule((x - c1) // c2, x // c2 - c1 // c2, lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x - c1)),
    # Flooring by a positive constant is monotone, so it commutes with min and max.
    Rule(min_(x * c1, y) // c2, min_(x * (c1 // c2), y // c2),
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule(min_(y, x * c1) // c2, min_(y // c2, x * (c1 // c2)),
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule(max_(x * c1, y) // c2, max_(x * (c1 // c2), y // c2),
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule(max_(y, x * c1) // c2, max_(y // c2, x * (c1 // c2)),
         lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule((x * y) // y, x, lambda m: m.no_overflow(x * y)),
    Rule((y * x) // y, x, lambda m: m.no_overflow(y * x)),
    FnRule(_div_by_factor),
]

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
    Rule((x - c1) % c2, x % c2, _mod_exact(x - c1)),
    Rule((x * c1) % c2, lambda m: ops.floormod(ops.mul(m.x, ops.const(m.c1 % m.c2, m.dtype)), ops.const(m.c2, m.dtype)),
         _residue_coeff),
    Rule((x * y) % y, 0, lambda m: m.no_overflow(x * y)),
    Rule((y * x) % y, 0, lambda m: m.no_overflow(y * x)),
    FnRule(_mod_by_factor),
]


def _nonneg_by_pos(m) -> bool:
    return m.bound(x)[0] >= 0 and m.bound(y)[0] >= 0  # y == 0: the original is undefined


TRUNCDIV = [
    FnRule(_div_by_bounds),
    Rule(tdiv(x, 1), x),
    Rule(tdiv(x, -1), 0 - x),
    Rule(tdiv(x, x), 1),
    # Truncating twice by positive divisors truncates once (the sign stays that of x).
    Rule(tdiv(tdiv(x, c1), c2), tdiv(x, c1 * c2), lambda m: _pos(m) and m.fits(m.c1 * m.c2)),
    Rule(tdiv(x * c1, c2), x * (c1 // c2), lambda m: m.c2 > 0 and m.c1 % m.c2 == 0 and m.no_overflow(x * c1)),
    Rule(tdiv(x * c1, c2), tdiv(x, c2 // c1), lambda m: _pos(m) and m.c2 % m.c1 == 0 and m.no_overflow(x * c1)),
    Rule(tdiv(x, y), x // y, _nonneg_by_pos),
]

TRUNCMOD = [
    FnRule(_mod_by_bounds),
    FnRule(_mod_by_modular),
    Rule(tmod(x, 1), 0),
    Rule(tmod(x, -1), 0),
    Rule(tmod(x, x), 0),
    # truncmod(x, c1) has x's sign and residue modulo c2 when c2 divides c1.
    Rule(tmod(tmod(x, c1), c2), tmod(x, c2), lambda m: _pos(m) and m.c1 % m.c2 == 0),
    Rule(tmod(x, y), x % y, _nonneg_by_pos),
    # The truncated remainder takes the sign of the dividend: the divisor's sign does not matter.
    Rule(tmod(x, c1), lambda m: ops.truncmod(m.x, ops.const(-m.c1, m.dtype)), lambda m: m.c1 < -1 and m.fits(-m.c1)),
]


def _divmod_sub(div: Callable[..., Any], mod: Callable[..., Any]) -> list[Any]:
    """Differences that hold ``u - (u // c) * c``: that is ``u % c``, for every ``u`` and ``c``.

    ``(u // c) * c + u % c == u`` is a ring identity (it survives wrap-around),
    so these need no condition beyond ``c3 == c1 * c2``; each saves a multiply.
    """
    def scaled(m: Any) -> bool:
        return m.c1 * m.c2 == m.c3

    return [
        Rule(div(x, c1) * c1 - x, 0 - mod(x, c1)),
        Rule(x - div(x + y, c1) * c1, mod(x + y, c1) - y),
        Rule(div(x + y, c1) * c1 - x, y - mod(x + y, c1)),
        Rule(x - div(x - y, c1) * c1, mod(x - y, c1) + y),
        Rule(div(x - y, c1) * c1 - x, 0 - mod(x - y, c1) - y),
        Rule(x * c2 - div(x, c1) * c3, mod(x, c1) * c2, scaled),
        Rule(div(x, c1) * c3 - x * c2, mod(x, c1) * (0 - c2), scaled),
        Rule(x * c2 - div(x + y, c1) * c3, (mod(x + y, c1) - y) * c2, scaled),
        Rule(x * c2 - div(x - y, c1) * c3, (mod(x - y, c1) + y) * c2, scaled),
        Rule(div(x + y, c1) * c3 - x * c2, (y - mod(x + y, c1)) * c2, scaled),
        Rule(div(x - y, c1) * c3 - x * c2, (0 - mod(x - y, c1) - y) * c2, scaled),
    ]


DIVMOD_SUB = _divmod_sub(lambda a, b: a // b, lambda a, b: a % b) + _divmod_sub(tdiv, tmod)
