"""Symbolic integer intervals for bound inference (classic TVM's ``IntSet``).

An :class:`IntervalSet` is ``[min, max]`` (both inclusive) where each end is an
expression or ``None`` for an unbounded end.  :func:`eval_set` evaluates an
index expression with some variables ranging over intervals, by interval
arithmetic; the other variables stay symbolic.  The public entry points are
:func:`intset_interval`, :func:`intset_vector` and ``Analyzer.int_set``.

Index sets are reasoned about in the integers: comparing two ends (for a
union, a min or a max) may decide by their difference in ℤ, so
``max(i + 1, i + 2)`` is ``i + 2`` even though ``i + 2`` could wrap around
where ``i + 1`` does not.  An index that wraps is out of bounds anyway.  This
is done narrowly: only when both ends are polynomials (``+ - *`` of variables
and constants, so their difference is the same in ℤ as in the IR's ring) and
that difference is a constant.  It never reaches the simplifier, which keeps
the IR's wrap-around semantics (``Analyzer.simplify(max(x + 1, x + 2))`` stays
unchanged for a free ``x``).

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

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import collect

__all__ = ["IntervalSet", "NEG_INF", "POS_INF", "eval_set", "union", "cover_range",
           "intset_interval", "intset_vector", "int_set"]

Bound = Optional[E.PrimExpr]


#: What an unbounded end reads as through :attr:`IntervalSet.min_value` / ``max_value``
#: (TVM's symbolic limits, printed ``neg_inf`` / ``pos_inf``).
NEG_INF = E.Var("neg_inf", "handle")
POS_INF = E.Var("pos_inf", "handle")


@dataclass(frozen=True, eq=False)
class IntervalSet:
    """``[min, max]``, both inclusive; a ``None`` end is unbounded.

    Ends given as Python ints become int32 constants.  :meth:`nothing` is the
    empty set (``empty=True``; its ends are meaningless).

    >>> s = IntervalSet(2, 3)
    >>> s.min_value.value, s.max_value.value
    (2, 3)
    >>> str(IntervalSet(0, None).max_value), IntervalSet.nothing().is_nothing()
    ('pos_inf', True)
    """

    min: Bound
    max: Bound
    empty: bool = False

    def __post_init__(self) -> None:
        for name in ("min", "max"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, E.PrimExpr):
                object.__setattr__(self, name, ops.convert_expr(v))

    @staticmethod
    def point(e: E.PrimExpr) -> IntervalSet:
        return IntervalSet(e, e)

    @staticmethod
    def everything() -> IntervalSet:
        return IntervalSet(None, None)

    @staticmethod
    def nothing() -> IntervalSet:
        """The empty set."""
        return IntervalSet(None, None, empty=True)

    @staticmethod
    def from_range(r: E.Range) -> IntervalSet:
        if isinstance(r.extent, E.IntImm) and r.extent.value == 1:
            return IntervalSet.point(r.min)
        return IntervalSet(r.min, r.min + r.extent - 1)

    @property
    def is_point(self) -> bool:
        return self.min is not None and self.min is self.max and not self.empty

    def is_nothing(self) -> bool:
        return self.empty

    def is_everything(self) -> bool:
        return not self.empty and self.min is None and self.max is None

    @property
    def min_value(self) -> E.PrimExpr:
        """The lower end; :data:`NEG_INF` when unbounded (:data:`POS_INF` for the empty set)."""
        if self.empty:
            return POS_INF
        return NEG_INF if self.min is None else self.min

    @property
    def max_value(self) -> E.PrimExpr:
        """The upper end; :data:`POS_INF` when unbounded (:data:`NEG_INF` for the empty set)."""
        if self.empty:
            return NEG_INF
        return POS_INF if self.max is None else self.max

    def __repr__(self) -> str:
        if self.empty:
            return "IntervalSet(nothing)"
        return f"IntervalSet[{self.min_value}, {self.max_value}]"


def _end(e: Bound) -> E.PrimExpr:
    """An end known to be bounded: a point's, or one checked above."""
    assert e is not None
    return e


_MAX_TERMS = 64  # a polynomial growing past this many monomials is not compared in ℤ

Poly = dict[tuple[int, ...], int]  # sorted ids of a monomial's variables -> coefficient


def _poly(e: E.PrimExpr) -> Optional[Poly]:
    """``e`` as an exact polynomial over ℤ, or None unless it is ``+ - *`` of variables and constants."""
    if isinstance(e, E.IntImm):
        return {(): e.value} if e.value else {}
    if isinstance(e, E.Var):
        return {(id(e),): 1}
    if not isinstance(e, (E.Add, E.Sub, E.Mul)):
        return None
    a, b = _poly(e.a), _poly(e.b)
    if a is None or b is None:
        return None
    out: Poly = dict(a)
    if isinstance(e, E.Mul):
        out = {}
        for ma, ka in a.items():
            for mb, kb in b.items():
                m = tuple(sorted(ma + mb))
                out[m] = out.get(m, 0) + ka * kb
    else:
        sign = 1 if isinstance(e, E.Add) else -1
        for m, k in b.items():
            out[m] = out.get(m, 0) + sign * k
    out = {m: k for m, k in out.items() if k}
    return out if len(out) <= _MAX_TERMS else None


def _z_diff(a: E.PrimExpr, b: E.PrimExpr) -> Optional[int]:
    """``b - a`` in ℤ when it is a constant (both being polynomials), else None."""
    if not all(t.is_scalar and t.is_integer for t in (a.dtype, b.dtype)):
        return None
    try:
        pa, pb = _poly(a), _poly(b)
    except RecursionError:
        return None
    if pa is None or pb is None:
        return None
    for m, k in pa.items():
        pb[m] = pb.get(m, 0) - k
    rest = {m: k for m, k in pb.items() if k}
    return None if set(rest) - {()} else rest.get((), 0)


def _le(a: E.PrimExpr, b: E.PrimExpr, an: Any) -> Optional[bool]:
    """Whether ``a <= b``: True, False (then ``b <= a``), or None when undecided.

    Polynomial ends a constant apart are compared in ℤ (see the module
    docstring); others only when the analyzer proves it.
    """
    if a is b:
        return True
    d = _z_diff(a, b)
    if d is not None:
        return d >= 0
    if an.can_prove(a <= b):
        return True
    return False if an.can_prove(b <= a) else None


def _lo(a: Bound, b: Bound, an: Any) -> Bound:
    """The smaller end (None: unbounded below)."""
    if a is None or b is None:
        return None
    le = _le(a, b, an)
    return a if le else b if le is False else an.simplify(ops.minimum(a, b))


def _hi(a: Bound, b: Bound, an: Any) -> Bound:
    """The larger end (None: unbounded above)."""
    if a is None or b is None:
        return None
    le = _le(b, a, an)
    return a if le else b if le is False else an.simplify(ops.maximum(a, b))


def union(sets: list[IntervalSet], an: Any) -> Optional[IntervalSet]:
    """The smallest interval holding every set (None for no sets)."""
    if not sets:
        return None
    lo, hi = sets[0].min, sets[0].max
    for s in sets[1:]:
        lo, hi = _lo(lo, s.min, an), _hi(hi, s.max, an)
    return IntervalSet(lo, hi)


def cover_range(s: Optional[IntervalSet], default: E.Range, an: Any) -> E.Range:
    """The Range of ``s``, or ``default`` (an axis's domain) where ``s`` is unbounded or is all of it.

    An interval spanning the whole domain gets the domain itself, unclamped:
    ``[0, n - 1]`` of an axis over ``range(n)`` is extent ``n``, not
    ``max(n, 0)``.  A tensor's shape is never negative: an output's is an
    array's, and a tensor allocated with a negative extent is an error when the
    program runs (the reference interpreter refuses it), as it already is for
    a stage computed whole at the root.
    """
    if s is None or s.min is None or s.max is None:
        return default
    mn = an.simplify(s.min)
    if s.is_point:
        return E.Range(mn, ops.const(1, mn.dtype))
    if an.can_prove_equal(mn, default.min) and an.can_prove_equal(s.max, default.min + default.extent - 1):
        return default
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
    """Interval arithmetic over ``dom_map``; with ``lanes``, a vector expression's set is its lanes' values."""

    def __init__(self, dom_map: dict[E.Var, IntervalSet], an: Any, lanes: bool = False) -> None:
        self.dom_map, self.an, self.lanes = dict(dom_map), an, lanes

    def __call__(self, e: E.PrimExpr) -> IntervalSet:
        vector = self.lanes and e.dtype.lanes > 1
        if not vector and not collect(e, lambda n: isinstance(n, E.Var) and n in self.dom_map):
            return IntervalSet.point(e)
        rule = getattr(self, f"_{type(e).__name__}", None)
        return rule(e) if rule is not None else IntervalSet.everything()

    def _Var(self, e: E.Var) -> IntervalSet:
        if e.dtype.lanes > 1 and e not in self.dom_map:
            return IntervalSet.everything()  # a vector variable: its lanes are unknown
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
        hi = b.max if a.max is None else a.max if b.max is None else _lo(a.max, b.max, self.an)
        return IntervalSet(_lo(a.min, b.min, self.an), hi)

    def _Max(self, e: E.Max) -> IntervalSet:
        a, b = self(e.a), self(e.b)
        lo = b.min if a.min is None else a.min if b.min is None else _hi(a.min, b.min, self.an)
        return IntervalSet(lo, _hi(a.max, b.max, self.an))

    def _Select(self, e: E.Select) -> IntervalSet:
        both = union([self(e.true_value), self(e.false_value)], self.an)
        assert both is not None  # None only for no sets
        return both

    def _Cast(self, e: E.Cast) -> IntervalSet:
        src = e.value.dtype
        if not (src.is_integer and e.dtype.is_integer and e.dtype.bits >= src.bits):
            return IntervalSet.everything()
        return _map(self(e.value), lambda x: ops.cast(x, e.dtype.element_of()))

    def _Let(self, e: E.Let) -> IntervalSet:
        self.dom_map[e.var] = self(e.value)
        return self(e.body)

    def _Broadcast(self, e: E.Broadcast) -> IntervalSet:
        return self(e.value) if self.lanes else IntervalSet.everything()

    def _Ramp(self, e: E.Ramp) -> IntervalSet:
        """``base + stride * k`` for lanes k: from ``base`` to ``base + stride * (lanes - 1)``."""
        stride = self(e.stride)
        if not self.lanes or not stride.is_point:
            return IntervalSet.everything()
        last = _end(stride.min) * (e.lanes - 1)
        zero = ops.const(0, last.dtype)
        sign = _sign(last, self.an)
        steps = IntervalSet(zero, last) if sign > 0 else IntervalSet(last, zero) if sign < 0 \
            else IntervalSet(ops.minimum(zero, last), ops.maximum(zero, last))
        return _add(self(e.base), steps)


def eval_set(expr: E.PrimExpr, dom_map: dict[E.Var, IntervalSet], analyzer: Any,
             lanes: bool = False) -> IntervalSet:
    """The interval of ``expr`` when each variable of ``dom_map`` ranges over its set.

    With ``lanes``, a vector expression's set is the set of its lanes' values.
    """
    s = _Evaluator(dom_map, analyzer, lanes)(expr)
    if s.is_nothing():
        return s
    if s.is_point:
        return IntervalSet.point(analyzer.simplify(s.min))
    simp = (lambda x: None if x is None else analyzer.simplify(x))
    return IntervalSet(simp(s.min), simp(s.max))


def intset_interval(min_value: Any, max_value: Any) -> IntervalSet:
    """The interval ``[min_value, max_value]`` (TVM's ``arith.intset_interval``); ints become int32 constants.

    >>> s = intset_interval(2, 3)
    >>> s.min_value.value, s.max_value.value
    (2, 3)
    """
    return IntervalSet(min_value, max_value)


def intset_vector(vec: Any) -> IntervalSet:
    """The interval holding every lane of ``vec`` (TVM's ``arith.intset_vector``).

    A ``Ramp(base, stride, lanes)`` gives ``[base, base + stride * (lanes - 1)]``
    (the ends swapped for a negative stride), a ``Broadcast`` or a scalar its
    value; arithmetic on them is evaluated lane-wise.

    >>> import loom
    >>> s = intset_vector(loom.ir.expr.Ramp(10, 3, 4))
    >>> s.min_value.value, s.max_value.value
    (10, 19)
    """
    from .analyzer import Analyzer  # the analyzer module imports this one

    return int_set(vec, {}, Analyzer(), "intset_vector")


def domain_map(dom_map: Any, where: str) -> dict[E.Var, IntervalSet]:
    """``dom_map`` (Var -> IntervalSet or Range, or None) as intervals; anything else is an error naming the entry."""
    sets: dict[E.Var, IntervalSet] = {}
    for var, dom in (dom_map or {}).items():
        if not isinstance(var, E.Var):
            raise LoomTypeError(f"{where}: the domain map's keys must be Vars, got {type(var).__name__} {var!r}")
        if isinstance(dom, E.Range):
            dom = IntervalSet.from_range(dom)
        if not isinstance(dom, IntervalSet):
            raise LoomTypeError(f"{where}: the domain of {var.name} must be an IntervalSet or a Range, "
                                f"got {type(dom).__name__} {dom!r}")
        sets[var] = dom
    return sets


def int_set(expr: Any, dom_map: Any, analyzer: Any, where: str = "int_set") -> IntervalSet:
    """``Analyzer.int_set``: the interval of an integer ``expr`` (a vector's lanes) over ``dom_map``.

    ``dom_map`` maps a Var to an :class:`IntervalSet` or a ``Range``; the
    analyzer's facts about other variables bound the arithmetic.
    """
    e = ops.convert_expr(expr)
    if not isinstance(e, E.PrimExpr) or not e.dtype.is_integer:
        raise LoomTypeError(f"{where} expects an integer expression, got {getattr(e, 'dtype', type(e).__name__)}: {e}")
    sets = domain_map(dom_map, where)
    empty = [v for v, s in sets.items() if s.is_nothing()]
    if empty and collect(e, lambda n: any(n is v for v in empty)):
        return IntervalSet.nothing()  # a variable with no values: the expression has none either
    return eval_set(e, sets, analyzer, lanes=True)
