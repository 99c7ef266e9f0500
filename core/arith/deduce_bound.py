"""The interval of a variable on which a comparison holds (classic TVM's ``arith.DeduceBound``).

:func:`deduce_bound` solves a comparison for one variable that occurs once in
it, peeling the ``+``, ``-`` and ``*`` around the variable like an equation
solved by hand: the other side collects what is peeled, a multiplication by a
term of known sign (the hint map's intervals tell) divides it, and flips the
comparison where the term is negative.  Relaxed variables are first replaced
by their worst-case ends (interval arithmetic over the relax map), so the
answer holds for every value they take.

The division rounds down (floor division), as TVM v0.6's: a ``<=`` bound is then
exact, and a ``>=`` bound adds 1 where the quotient is not provably exact, which
is exact unless the division happens to leave no remainder, and then still
safe (the answer never admits a value that fails).  Like TVM, the arithmetic is that of mathematical
integers: the comparison is taken not to wrap around.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import collect
from .analyzer import Analyzer
from .detect_linear import linear_form
from .int_set import IntervalSet, domain_map, eval_set

__all__ = ["deduce_bound"]

_GE, _LE, _EQ = ">=", "<=", "=="
_REVERSE = {_GE: _LE, _LE: _GE, _EQ: _EQ}


def _domains(dom: Optional[Mapping[Any, Any]], name: str) -> dict[E.Var, IntervalSet]:
    return domain_map(dom, f"deduce_bound: {name}")


def _uses(e: E.PrimExpr, var: E.Var) -> bool:
    return bool(collect(e, lambda n: n is var))


def _orient(cond: E.CmpOp, var: E.Var) -> tuple[E.PrimExpr, E.PrimExpr, str]:
    """``(side, rest, op)``: ``cond <=> side op rest`` with ``var`` in ``side``."""
    one = ops.const(1, cond.a.dtype)
    left = _uses(cond.a, var)
    side, rest = (cond.a, cond.b) if left else (cond.b, cond.a)
    if isinstance(cond, E.EQ):
        return side, rest, _EQ
    if isinstance(cond, (E.LT, E.LE)):  # a < b  <=>  a <= b - 1  <=>  b >= a + 1
        op = _LE if left else _GE
    else:
        op = _GE if left else _LE
    if isinstance(cond, (E.LT, E.GT)):
        rest = rest - one if op == _LE else rest + one
    return side, rest, op


def _relax(e: E.PrimExpr, relax: dict[E.Var, IntervalSet], end: str, an: Analyzer) -> Optional[E.PrimExpr]:
    """``e``'s smallest (``end`` "min"), largest ("max") or only ("point") value over ``relax``."""
    if not any(_uses(e, v) for v in relax):
        return e  # nothing to relax: kept as written, so that the answer reads like the condition
    s = eval_set(e, relax, an)
    if s.is_nothing():
        return None
    if end == "point":
        if s.min is None or s.max is None:
            return None
        return s.min if s.is_point or an.can_prove_equal(s.min, s.max) else None
    return s.min if end == "min" else s.max  # None when unbounded there


def _sign(e: E.PrimExpr, hints: dict[E.Var, IntervalSet], an: Analyzer) -> int:
    """1 if ``e`` is provably positive over the hints, -1 if provably negative, else 0."""
    s = eval_set(e, hints, an)
    if not s.is_nothing() and s.min is not None and an.can_prove(s.min > 0):
        return 1
    if not s.is_nothing() and s.max is not None and an.can_prove(s.max < 0):
        return -1
    return 0


def _exact_quotient(num: E.PrimExpr, den: E.PrimExpr, an: Analyzer) -> Optional[E.PrimExpr]:
    """``num / den`` when ``den`` provably divides ``num`` as mathematical integers, else None.

    As in TVM, only a constant divisor divides anything but 0 (``b*a == b``
    deduces nothing).  The simplifier's proofs keep wrap-around semantics
    (``n * 3 + 3`` need not be a multiple of 3 once it wraps), so the linear
    form of ``num`` is also tried: every coefficient and the constant a multiple.
    """
    if an.can_prove(num == 0):
        return ops.const(0, num.dtype)
    if not isinstance(den, E.IntImm) or den.value == 0:
        return None
    if an.can_prove(ops.truncmod(num, den) == 0):
        return ops.truncdiv(num, den)
    free = list({id(v): v for v in collect(num, lambda n: isinstance(n, E.Var))}.values())
    form = linear_form(num, free)
    if form is None:
        return None
    ints = [an.simplify(x) for x in form[0] + [form[1]]]
    values = [x.value for x in ints if isinstance(x, E.IntImm) and x.value % den.value == 0]
    if len(values) != len(ints):
        return None
    out = ops.const(values[-1] // den.value, num.dtype)
    for v, k in zip(free, values):
        out = out + v * ops.const(k // den.value, num.dtype)
    return out


def _solve(side: E.PrimExpr, rest: E.PrimExpr, op: str, var: E.Var,
           hints: dict[E.Var, IntervalSet], an: Analyzer) -> Optional[tuple[E.PrimExpr, str]]:
    """Peel ``side op rest`` down to ``var op bound``; None where a step cannot be taken."""
    while side is not var:
        if not isinstance(side, (E.Add, E.Sub, E.Mul)):
            return None
        in_a, in_b = _uses(side.a, var), _uses(side.b, var)
        if in_a == in_b:
            return None  # the variable on both sides of one node (relaxation may duplicate it)
        inner, other = (side.a, side.b) if in_a else (side.b, side.a)
        if isinstance(side, E.Add):
            rest = rest - other
        elif isinstance(side, E.Sub):
            if in_a:
                rest = rest + other
            else:  # other - x op rest  <=>  x rev(op) other - rest
                rest, op = other - rest, _REVERSE[op]
        else:
            sign = _sign(other, hints, an)
            if sign == 0:
                return None
            if sign < 0:
                op = _REVERSE[op]
            quotient = _exact_quotient(rest, other, an)
            if quotient is not None:
                rest = quotient
            elif op == _EQ:
                return None  # no integer solution, or none that can be shown
            else:
                rest = ops.floordiv(rest, other)
                if op == _GE:  # x >= 3.5 is x >= 4: floor, then up by one
                    rest = rest + 1
        side = inner
    return rest, op


def deduce_bound(var: E.Var, cond: Any, hint_map: Optional[Mapping[E.Var, Any]] = None,
                 relax_map: Optional[Mapping[E.Var, Any]] = None) -> IntervalSet:
    """The interval of ``var`` on which ``cond`` holds for every value of the relaxed variables.

    ``cond`` is a comparison (``<, <=, >, >=, ==``) in which ``var`` occurs
    once, on either side, under ``+``, ``-`` and ``*``.  ``hint_map`` gives
    the intervals (``IntervalSet`` or ``Range``) that fix the sign of the
    terms ``var`` is multiplied by; ``relax_map`` the intervals of the
    variables the answer must hold across.  The answer's other variables are
    symbolic.  ``IntervalSet.nothing()`` means that no bound could be
    deduced: not a comparison, ``var`` absent or twice, a factor of unknown
    sign, an ``==`` whose solution is not a provably exact quotient, a
    relaxed side that is unbounded or (for ``==``) not a single value.

    >>> import loom
    >>> from loom.arith.int_set import IntervalSet
    >>> i, j, n = loom.var("i"), loom.var("j"), loom.var("n")
    >>> s = deduce_bound(i, i * 4 + j < n, {}, {j: IntervalSet(0, 3)})
    >>> s.min_value, str(s.max_value)
    (neg_inf, '(n - 4) // 4')
    >>> str(deduce_bound(i, 3 * i - 1 == n * 3 + 2, {}, {}).min_value)
    'n + 1'
    """
    if not isinstance(var, E.Var):
        raise LoomTypeError(f"deduce_bound: var must be a Var, got {type(var).__name__} {var!r}")
    hints, relax = _domains(hint_map, "hint_map"), _domains(relax_map, "relax_map")
    if not isinstance(cond, (E.EQ, E.LT, E.LE, E.GT, E.GE)) or not cond.a.dtype.is_integer \
            or cond.a.dtype.lanes != 1 or len(collect(cond, lambda n: n is var)) != 1:
        return IntervalSet.nothing()
    side, rest, op = _orient(cond, var)
    an = Analyzer()
    # side op rest for every relaxed value: compare side's worst end with rest's.
    side_end, rest_end = {_GE: ("min", "max"), _LE: ("max", "min"), _EQ: ("point", "point")}[op]
    relaxed_side, relaxed_rest = _relax(side, relax, side_end, an), _relax(rest, relax, rest_end, an)
    if relaxed_side is None or relaxed_rest is None:
        return IntervalSet.nothing()
    solved = _solve(relaxed_side, relaxed_rest, op, var, hints, an)
    if solved is None:
        return IntervalSet.nothing()
    bound = an.simplify(solved[0])
    if solved[1] == _EQ:
        return IntervalSet.point(bound)
    return IntervalSet(bound, None) if solved[1] == _GE else IntervalSet(None, bound)
