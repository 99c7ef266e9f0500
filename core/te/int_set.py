"""Symbolic integer intervals for bound inference (classic TVM's ``IntSet``).

An :class:`IntervalSet` is ``[min, max]`` (both inclusive) where each end is an
expression or ``None`` for an unbounded end.  :func:`eval_set` evaluates an
index expression with some variables ranging over intervals, by interval
arithmetic; the other variables stay symbolic.

>>> import loom
>>> from loom.arith import Analyzer
>>> i, j = loom.var("i"), loom.var("j")
>>> s = eval_set(i * 4 + j, {j: IntervalSet.from_range(loom.ir.Range.from_min_extent(0, 4))}, Analyzer())
>>> str(s.min), str(s.max)
('i * 4', 'i * 4 + 3')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import collect

__all__ = ["IntervalSet", "eval_set", "union", "cover_range"]

Bound = Optional[E.PrimExpr]


@dataclass(frozen=True, eq=False)
class IntervalSet:
    """``[min, max]``; a ``None`` end is unbounded."""

    min: Bound
    max: Bound

    @staticmethod
    def point(e: E.PrimExpr) -> IntervalSet:
        return IntervalSet(e, e)

    @staticmethod
    def everything() -> IntervalSet:
        return IntervalSet(None, None)

    @staticmethod
    def from_range(r: E.Range) -> IntervalSet:
        if isinstance(r.extent, E.IntImm) and r.extent.value == 1:
            return IntervalSet.point(r.min)
        return IntervalSet(r.min, r.min + r.extent - 1)

    @property
    def is_point(self) -> bool:
        return self.min is not None and self.min is self.max


def _end(e: Bound) -> E.PrimExpr:
    """An end known to be bounded: a point's, or one checked above."""
    assert e is not None
    return e


def _lo(a: Bound, b: Bound, an: Any) -> Bound:
    if a is None or b is None:
        return None
    if a is b or an.can_prove(a <= b):
        return a
    if an.can_prove(b <= a):
        return b
    return an.simplify(ops.minimum(a, b))


def _hi(a: Bound, b: Bound, an: Any) -> Bound:
    if a is None or b is None:
        return None
    if a is b or an.can_prove(a >= b):
        return a
    if an.can_prove(b >= a):
        return b
    return an.simplify(ops.maximum(a, b))


def union(sets: list[IntervalSet], an: Any) -> Optional[IntervalSet]:
    """The smallest interval holding every set (None for no sets)."""
    if not sets:
        return None
    lo, hi = sets[0].min, sets[0].max
    for s in sets[1:]:
        lo, hi = _lo(lo, s.min, an), _hi(hi, s.max, an)
    return IntervalSet(lo, hi)


def cover_range(s: Optional[IntervalSet], default: E.Range, an: Any) -> E.Range:
    """The Range of ``s``, or ``default`` where ``s`` is unbounded."""
    if s is None or s.min is None or s.max is None:
        return default
    mn = an.simplify(s.min)
    if s.is_point:
        return E.Range(mn, ops.const(1, mn.dtype))
    # An empty interval (max < min: a region read only by iterations a guard skips) covers
    # nothing; its extent is 0, never negative (it sizes allocations).
    extent = s.max - s.min + 1
    return E.Range(mn, an.simplify(ops.maximum(extent, ops.const(0, extent.dtype))))


def _sign(e: E.PrimExpr, an: Any) -> int:
    """1 if provably >= 0, -1 if provably <= 0, else 0."""
    b = an.const_int_bound(e)
    return 1 if b.min_value >= 0 else -1 if b.max_value <= 0 else 0


def _map(s: IntervalSet, fn: Callable[[E.PrimExpr], E.PrimExpr]) -> IntervalSet:
    if s.is_point:
        return IntervalSet.point(fn(_end(s.min)))
    return IntervalSet(None if s.min is None else fn(s.min), None if s.max is None else fn(s.max))


def _add(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    if a.is_point and b.is_point:
        return IntervalSet.point(_end(a.min) + _end(b.min))
    lo = None if a.min is None or b.min is None else a.min + b.min
    hi = None if a.max is None or b.max is None else a.max + b.max
    return IntervalSet(lo, hi)


def _sub(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    if a.is_point and b.is_point:
        return IntervalSet.point(_end(a.min) - _end(b.min))
    lo = None if a.min is None or b.max is None else a.min - b.max
    hi = None if a.max is None or b.min is None else a.max - b.min
    return IntervalSet(lo, hi)


def _scale(s: IntervalSet, p: E.PrimExpr, an: Any, fn: Callable[[Any, Any], E.PrimExpr]) -> IntervalSet:
    """``fn(x, p)`` for x in s, with fn monotone in x: increasing for p >= 0, decreasing for p <= 0."""
    sign = _sign(p, an)
    if sign == 0:
        return IntervalSet.everything()
    lo = None if s.min is None else fn(s.min, p)
    hi = None if s.max is None else fn(s.max, p)
    return IntervalSet(lo, hi) if sign > 0 else IntervalSet(hi, lo)


def _mul(a: IntervalSet, b: IntervalSet, an: Any) -> IntervalSet:
    if a.is_point and b.is_point:
        return IntervalSet.point(_end(a.min) * _end(b.min))
    if b.is_point:
        return _scale(a, _end(b.min), an, lambda x, p: x * p)
    if a.is_point:
        return _scale(b, _end(a.min), an, lambda x, p: p * x)
    ends = [e for e in (a.min, a.max, b.min, b.max) if isinstance(e, E.IntImm)]
    if len(ends) == 4:
        prods = [x.value * y.value for x in ends[:2] for y in ends[2:]]
        return IntervalSet(ops.const(min(prods), ends[0].dtype), ops.const(max(prods), ends[0].dtype))
    return IntervalSet.everything()


def _div(a: IntervalSet, b: IntervalSet, an: Any, fn: Callable[[Any, Any], E.PrimExpr]) -> IntervalSet:
    if a.is_point and b.is_point:
        return IntervalSet.point(fn(a.min, b.min))
    if not b.is_point or an.can_prove_equal(b.min, 0):
        return IntervalSet.everything()
    # floor and truncated division are monotone in x: non-decreasing for a positive divisor
    return _scale(a, _end(b.min), an, fn)


def _mod(a: IntervalSet, b: IntervalSet, an: Any, floor: bool) -> IntervalSet:
    fn = ops.floormod if floor else ops.truncmod
    if a.is_point and b.is_point:
        return IntervalSet.point(fn(a.min, b.min))
    if not b.is_point or _sign(_end(b.min), an) <= 0 or an.can_prove_equal(b.min, 0):
        return IntervalSet.everything()
    d = _end(b.min)
    nonneg = a.min is not None and an.can_prove(a.min >= 0)
    if a.min is not None and a.max is not None and (floor or nonneg) \
            and an.can_prove_equal(ops.floordiv(a.min, d), ops.floordiv(a.max, d)):
        return IntervalSet(fn(a.min, d), fn(a.max, d))  # the whole interval lies in one period
    if floor or nonneg:
        return IntervalSet(ops.const(0, d.dtype), d - 1)
    return IntervalSet(ops.const(1, d.dtype) - d, d - 1)


class _Evaluator:
    def __init__(self, dom_map: dict[E.Var, IntervalSet], an: Any) -> None:
        self.dom_map, self.an = dict(dom_map), an

    def __call__(self, e: E.PrimExpr) -> IntervalSet:
        if not collect(e, lambda n: isinstance(n, E.Var) and n in self.dom_map):
            return IntervalSet.point(e)
        rule = getattr(self, f"_{type(e).__name__}", None)
        return rule(e) if rule is not None else IntervalSet.everything()

    def _Var(self, e: E.Var) -> IntervalSet:
        return self.dom_map.get(e, IntervalSet.point(e))

    _SizeVar = _Var

    def _Add(self, e: E.Add) -> IntervalSet:
        return _add(self(e.a), self(e.b))

    def _Sub(self, e: E.Sub) -> IntervalSet:
        return _sub(self(e.a), self(e.b))

    def _Mul(self, e: E.Mul) -> IntervalSet:
        return _mul(self(e.a), self(e.b), self.an)

    def _FloorDiv(self, e: E.FloorDiv) -> IntervalSet:
        return _div(self(e.a), self(e.b), self.an, ops.floordiv)

    def _Div(self, e: E.Div) -> IntervalSet:
        return _div(self(e.a), self(e.b), self.an, ops.truncdiv)

    def _FloorMod(self, e: E.FloorMod) -> IntervalSet:
        return _mod(self(e.a), self(e.b), self.an, True)

    def _Mod(self, e: E.Mod) -> IntervalSet:
        return _mod(self(e.a), self(e.b), self.an, False)

    def _Min(self, e: E.Min) -> IntervalSet:
        a, b = self(e.a), self(e.b)
        lo = None if a.min is None or b.min is None else ops.minimum(a.min, b.min)
        hi = b.max if a.max is None else a.max if b.max is None else ops.minimum(a.max, b.max)
        return IntervalSet(lo, hi)

    def _Max(self, e: E.Max) -> IntervalSet:
        a, b = self(e.a), self(e.b)
        lo = b.min if a.min is None else a.min if b.min is None else ops.maximum(a.min, b.min)
        hi = None if a.max is None or b.max is None else ops.maximum(a.max, b.max)
        return IntervalSet(lo, hi)

    def _Select(self, e: E.Select) -> IntervalSet:
        both = union([self(e.true_value), self(e.false_value)], self.an)
        assert both is not None  # None only for no sets
        return both

    def _Cast(self, e: E.Cast) -> IntervalSet:
        src = e.value.dtype
        if not (src.is_integer and e.dtype.is_integer and e.dtype.bits >= src.bits):
            return IntervalSet.everything()
        return _map(self(e.value), lambda x: ops.cast(x, e.dtype))

    def _Let(self, e: E.Let) -> IntervalSet:
        self.dom_map[e.var] = self(e.value)
        return self(e.body)


def eval_set(expr: E.PrimExpr, dom_map: dict[E.Var, IntervalSet], analyzer: Any) -> IntervalSet:
    """The interval of ``expr`` when each variable of ``dom_map`` ranges over its set."""
    s = _Evaluator(dom_map, analyzer)(expr)
    if s.is_point:
        return IntervalSet.point(analyzer.simplify(s.min))
    simp = (lambda x: None if x is None else analyzer.simplify(x))
    return IntervalSet(simp(s.min), simp(s.max))
