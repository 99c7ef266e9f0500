"""Rewrite rules for integer ``min`` and ``max``, written once for ``min``.

``max`` gets the mirror image (``mn``/``mx`` swapped, comparisons reversed).
Lattice identities (absorption, distribution) hold for any values; rules
that move arithmetic into or out of a ``min`` need the mathematical values
(``m.no_overflow``), since wrap-around breaks monotonicity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ._exprkey import expr_equal
from .pattern import FnRule, PVar, Rule, max_, min_, pconsts, pvars, select, tdiv

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["MIN", "MAX"]

x, y, z, w = pvars("x y z w")
c1, c2 = pconsts("c1 c2")
cond = PVar("cond")


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


def _leaves(e: E.PrimExpr, op: type) -> list[E.PrimExpr]:
    """The operands of a chain of ``op`` (``min(min(a, b), c)`` -> ``[a, b, c]``)."""
    out: list[E.PrimExpr] = []
    todo: list[Any] = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, E.BinaryOp) and type(n) is op:
            todo += [n.b, n.a]
        else:
            out.append(n)
    return out


def _absorb(e: E.BinaryOp, an: Analyzer) -> Optional[E.PrimExpr]:
    """``min(min(min(x, y), z), y)`` is ``min(min(x, y), z)``: ``y`` is already in the chain."""
    op = type(e)
    for chain, other in ((e.a, e.b), (e.b, e.a)):
        if type(chain) is op and any(expr_equal(leaf, other) for leaf in _leaves(chain, op)):
            return chain
    return None


def _const_quotient(mk: Callable[..., Any], flip: Callable[..., Any]) -> Callable[[Any], E.PrimExpr]:
    """``min(x * c1, c2)`` -> ``min(x, c2 / c1) * c1`` (``max`` when ``c1 < 0``)."""
    def build(m: Any) -> E.PrimExpr:
        k = ops.const(m.c2 // m.c1, m.dtype)
        inner = mk(m.x, k) if m.c1 > 0 else flip(m.x, k)
        return ops.mul(inner, ops.const(m.c1, m.dtype))
    return build


def _divides(m: Any) -> bool:
    return m.c1 != 0 and m.c2 % m.c1 == 0 and m.no_overflow(x * c1)


def _minmax_rules(mn: Callable[..., Any], mx: Callable[..., Any], build_mn: Callable[..., Any],
                  build_mx: Callable[..., Any], is_min: bool) -> list[Any]:
    """Min rules written once; Max gets the mirror image (``mn``/``mx`` swapped)."""
    # Rounding x up to a multiple of c2 (c1 >= c2 - 1) is >= x; rounding down is <= x.
    up = (lambda m: m.c2 > 0 and m.c1 >= m.c2 - 1 and m.no_overflow((x + c1) // c2 * c2))
    down = (lambda m: m.c2 > 0 and m.no_overflow(x // c2 * c2))
    picked = x if is_min else (x + c1) // c2 * c2
    return [
        FnRule(_minmax_by_bounds),
        FnRule(_absorb),
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
        # min(max(x, y), min(x, y)) is min(x, y); min distributes over max.
        Rule(mn(mx(x, y), mn(x, y)), mn(x, y)),
        Rule(mn(mx(x, y), mn(y, x)), mn(x, y)),  # either order; TVM's spelling
        Rule(mn(mn(x, y), mx(x, y)), mn(x, y)),
        Rule(mn(mn(x, y), mx(y, x)), mn(x, y)),
        Rule(mn(mx(x, y), mx(x, z)), mx(mn(y, z), x)),
        Rule(mn(mx(x, y), mx(z, x)), mx(mn(y, z), x)),
        Rule(mn(mx(y, x), mx(x, z)), mx(mn(y, z), x)),
        Rule(mn(mx(y, x), mx(z, x)), mx(mn(y, z), x)),
        Rule(mn(x + c1, x + c2), x + mn(c1, c2), lambda m: m.no_overflow(x + c1, x + c2)),
        Rule(mn(x + c1, x), x + mn(c1, 0), lambda m: m.no_overflow(x + c1)),
        Rule(mn(x, x + c1), x + mn(c1, 0), lambda m: m.no_overflow(x + c1)),
        Rule(mn(x + c1, y + c1), mn(x, y) + c1, lambda m: m.no_overflow(x + c1, y + c1)),
        Rule(mn(x + y, x + z), mn(y, z) + x, lambda m: m.no_overflow(x + y, x + z)),
        Rule(mn(y + x, z + x), mn(y, z) + x, lambda m: m.no_overflow(y + x, z + x)),
        Rule(mn(x + y, z + x), mn(y, z) + x, lambda m: m.no_overflow(x + y, z + x)),
        Rule(mn(y + x, x + z), mn(y, z) + x, lambda m: m.no_overflow(y + x, x + z)),
        Rule(mn(x - y, x - z), x - mx(y, z), lambda m: m.no_overflow(x - y, x - z)),
        Rule(mn(y - x, z - x), mn(y, z) - x, lambda m: m.no_overflow(y - x, z - x)),
        Rule(mn(c1 - x, c2), lambda m: ops.sub(ops.const(m.c1, m.dtype), build_mx(m.x, ops.const(m.c1 - m.c2, m.dtype))),
             lambda m: m.no_overflow(c1 - x) and m.fits(m.c1 - m.c2)),
        Rule(mn(x * c1, y * c1), mn(x, y) * c1, lambda m: m.c1 > 0 and m.no_overflow(x * c1, y * c1)),
        Rule(mn(x * c1, y * c1), mx(x, y) * c1, lambda m: m.c1 < 0 and m.no_overflow(x * c1, y * c1)),
        Rule(mn(x * c1, c2), _const_quotient(build_mn, build_mx), _divides),
        Rule(mn(x // c1, y // c1), mn(x, y) // c1, lambda m: m.c1 > 0),
        Rule(mn(x // c1, y // c1), mx(x, y) // c1, lambda m: m.c1 < -1),  # // -1 can wrap
        Rule(mn(tdiv(x, c1), tdiv(y, c1)), tdiv(mn(x, y), c1), lambda m: m.c1 > 0),
        Rule(mn(tdiv(x, c1), tdiv(y, c1)), tdiv(mx(x, y), c1), lambda m: m.c1 < -1),
        Rule(mn((x + c1) // c2 * c2, x), picked, up),
        Rule(mn(x, (x + c1) // c2 * c2), picked, up),
        Rule(mn(x // c2 * c2, x), x // c2 * c2 if is_min else x, down),
        Rule(mn(x, x // c2 * c2), x // c2 * c2 if is_min else x, down),
        Rule(mn(select(cond, x, y), select(cond, z, w)), select(cond, mn(x, z), mn(y, w))),
    ]


MIN = _minmax_rules(min_, max_, ops.minimum, ops.maximum, True)
MAX = _minmax_rules(max_, min_, ops.maximum, ops.minimum, False)
