"""The ``Analyzer``: what is known about variables, and the simplifiers that use it.

An analyzer holds facts about variables (a range from ``bind``, a bound from
``update``, constraints inside ``constraint_scope``) and answers questions
about expressions under those facts: bounds, residues, simplified forms,
provable conditions.

>>> import loom
>>> from loom.arith import Analyzer
>>> from loom.ir import Range
>>> x, n = loom.var("x"), loom.size_var("n")
>>> an = Analyzer()
>>> an.bind(x, Range.from_min_extent(0, 8))
>>> an.can_prove(x < 10), str(an.simplify(loom.floordiv(x, 8)))
(True, '0')
>>> with an.constraint_scope(n > 4):
...     an.can_prove(n >= 5)
True
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Optional, Union

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ._exprkey import expr_equal, uses_var
from ._intmath import Interval, exact_interval, int_range, is_int_type, iv_add
from .bound import ConstIntBound, ConstIntBoundAnalyzer
from .canonical import CanonicalSimplifier
from .int_set import IntervalSet, int_set
from .modular import ModularSet, ModularSetAnalyzer
from .rewrite import RewriteSimplifier

__all__ = ["Analyzer"]

_NEGATED = {E.LT: (E.LE, True), E.LE: (E.LT, True), E.GT: (E.LE, False), E.GE: (E.LT, False),
            E.EQ: (E.NE, False), E.NE: (E.EQ, False)}


def _negated_cmp(e: E.CmpOp) -> E.PrimExpr:
    op, swap = _NEGATED[type(e)]
    return op(e.b, e.a) if swap else op(e.a, e.b)


class Analyzer:
    """Integer analysis and simplification under known facts about variables.

    - ``bind(var, Range | expr)`` / ``update(var, ConstIntBound)``: what a variable is.
    - ``const_int_bound``, ``modular_set``: what an expression can be.
    - ``rewrite_simplify``, ``canonical_simplify``, ``simplify``: equal, simpler forms.
    - ``can_prove``, ``can_prove_equal``: True only when proven.
    - ``constraint_scope(cond)``: facts that hold inside a ``with`` block.

    ``assume_no_overflow``: take signed integer arithmetic never to overflow, as TVM
    does for index expressions (C's rule for signed ints); unsigned arithmetic and
    conversions still wrap. None (the default) reads the current PassContext's
    ``"arith.assume_no_overflow"`` option, which is False unless set.

    >>> import loom
    >>> x = loom.var("x")
    >>> str(Analyzer().simplify(loom.min(x + 1, x + 10)))   # x + 10 may wrap
    'min(x + 1, x + 10)'
    >>> str(Analyzer(assume_no_overflow=True).simplify(loom.min(x + 1, x + 10)))
    'x + 1'
    """

    def __init__(self, assume_no_overflow: Optional[bool] = None) -> None:
        if assume_no_overflow is None:
            assume_no_overflow = _configured_no_overflow()
        elif not isinstance(assume_no_overflow, bool):
            raise LoomTypeError(f"Analyzer(assume_no_overflow=...) expects a bool, "
                                f"got {type(assume_no_overflow).__name__}")
        self.assume_no_overflow: bool = assume_no_overflow
        self._bounds: dict[E.Var, ConstIntBound] = {}
        self._modular: dict[E.Var, ModularSet] = {}
        self._subst: dict[E.Var, E.PrimExpr] = {}
        self._facts: list[E.PrimExpr] = []
        self._bound = ConstIntBoundAnalyzer(self._bounds.get, assume_no_overflow)
        self._mod = ModularSetAnalyzer(self._modular.get, self._interval, assume_no_overflow)
        self._canonical = CanonicalSimplifier(self)
        self._rewrite = RewriteSimplifier(self)

    # -- telling the analyzer things -------------------------------------------
    def bind(self, var: E.Var, value: Union[E.Range, E.PrimExpr, int], allow_override: bool = False) -> None:
        """Bind ``var`` to a range of values (a loop) or to an expression (a let).

        A range makes ``var``'s bounds known; an expression makes ``var`` equal
        to it, so the simplifiers substitute it.

        >>> import loom
        >>> x, y = loom.var("x"), loom.var("y")
        >>> an = Analyzer()
        >>> an.bind(x, y + 1)
        >>> str(an.simplify(x - y))
        '1'
        """
        _check_var(var)
        if isinstance(value, E.Range):
            mn, ext = (self.simplify(ops.cast(v, var.dtype)) for v in (value.min, value.extent))
            self._check_override(var, allow_override, bound=self._range_bound(var, mn, ext))
            self._bind_range(var, mn, ext)
        else:
            expr = self.simplify(ops.convert_expr(value, var.dtype))
            if expr.dtype != var.dtype:
                raise LoomTypeError(f"bind({var.name}): the value is {expr.dtype} but the variable is {var.dtype}")
            self._check_override(var, allow_override, expr=expr)
            self._subst[var] = expr
            if is_int_type(var.dtype):
                self._bounds[var] = self.const_int_bound(expr)
                self._modular[var] = self.modular_set(expr)
        self._changed()

    def update(self, var: E.Var, bound: ConstIntBound, override: bool = False, *,
               allow_override: bool = False) -> None:
        """Declare that ``var`` lies in ``bound``; a different bound than the one known needs ``override``.

        ``override`` is TVM's keyword; ``allow_override`` (as :meth:`bind` spells it) is the same.

        >>> import loom
        >>> x = loom.var("x")
        >>> an = Analyzer()
        >>> an.update(x, ConstIntBound(0, 4))
        >>> an.update(x, ConstIntBound(0, 9), override=True)
        >>> an.const_int_bound(x + 1)
        ConstIntBound(min_value=1, max_value=10)
        """
        _check_var(var)
        if not isinstance(bound, ConstIntBound):
            raise LoomTypeError(f"update({var.name}) expects a ConstIntBound, got {type(bound).__name__}")
        old = self._bounds.get(var)
        if old is not None and old != bound and not (override or allow_override):
            raise LoomValueError(f"{var.name} is already known to be in {old}; pass override=True to replace it")
        self._bounds[var] = bound
        self._changed()

    @contextmanager
    def constraint_scope(self, cond: Any) -> Iterator[Analyzer]:
        """Assume ``cond`` (a bool expression) inside the ``with`` block.

        >>> import loom
        >>> i, n = loom.var("i"), loom.var("n")
        >>> an = Analyzer()
        >>> with an.constraint_scope(loom.all(i >= 0, i < n)):
        ...     an.can_prove(i < n), an.can_prove(i >= 0)
        (True, True)
        """
        cond = ops.convert_expr(cond)
        if not cond.dtype.is_bool:
            raise LoomTypeError(f"constraint_scope expects a bool condition, got {cond.dtype}: {cond}")
        with self._assume(self.simplify(cond)):
            yield self

    # -- asking questions ------------------------------------------------------
    # An expression nested too deeply for Python's stack gets the answer that
    # claims nothing (its own unchanged form, the full range) instead of an error.

    def const_int_bound(self, expr: Any) -> ConstIntBound:
        """The ``[min, max]`` of ``expr``'s values (see :mod:`loom.arith.bound`)."""
        e = ops.convert_expr(expr)
        try:
            return self._bound(e)
        except RecursionError:
            return ConstIntBound.everything(e.dtype)

    def modular_set(self, expr: Any) -> ModularSet:
        """``(coeff, base)`` such that ``expr`` is always ``coeff * k + base``."""
        try:
            return self._mod(ops.convert_expr(expr))
        except RecursionError:
            return ModularSet.everything()

    def rewrite_simplify(self, expr: Any) -> E.PrimExpr:
        """Simplify with constant folding and the rule tables only."""
        e = ops.convert_expr(expr)
        try:
            return self._rewrite(e)
        except RecursionError:
            return e

    def canonical_simplify(self, expr: Any) -> E.PrimExpr:
        """Put integer arithmetic into canonical sum-of-terms form."""
        e = ops.convert_expr(expr)
        try:
            out = self._canonical(e)
        except RecursionError:
            return e
        return e if expr_equal(out, e) else out

    def simplify(self, expr: Any, steps: int = 4) -> E.PrimExpr:
        """Canonical form then rewriting, repeated until nothing changes.

        >>> import loom
        >>> x = loom.var("x")
        >>> str(Analyzer().simplify(x * 4 + 2 * x - 6 * x))
        '0'
        """
        start = e = ops.convert_expr(expr)
        try:
            for _ in range(steps):
                n = self._rewrite(self._canonical(e))
                if n is e or expr_equal(n, e):
                    break
                e = n
            return start if expr_equal(e, start) else e  # unchanged input: the same object
        except RecursionError:
            return start

    def can_prove(self, cond: Any) -> bool:
        """True when ``cond`` holds for every value the variables can take."""
        cond = ops.convert_expr(cond)
        if not cond.dtype.is_bool:
            raise LoomTypeError(f"can_prove expects a bool condition, got {cond.dtype}: {cond}")
        r = self.simplify(cond)
        if isinstance(r, E.Broadcast):
            r = r.value
        return isinstance(r, E.IntImm) and r.value == 1

    def int_set(self, expr: Any, dom_map: Optional[Mapping[E.Var, Any]] = None) -> IntervalSet:
        """The interval of ``expr``'s values when each Var of ``dom_map`` ranges over its
        :class:`IntervalSet` (or ``Range``), under what the analyzer knows of the others.

        >>> import loom
        >>> from loom.arith import ConstIntBound, IntervalSet
        >>> x, y = loom.var("x"), loom.var("y")
        >>> an = Analyzer()
        >>> an.update(y, ConstIntBound(1, 100))
        >>> an.int_set(x * y, {x: IntervalSet(0, 10)})
        IntervalSet[0, y * 10]
        """
        return int_set(expr, dom_map, self)

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        """True when ``a`` and ``b`` always have the same value."""
        eq = ops.eq(a, b)  # brings both sides to one dtype
        if isinstance(eq, E.IntImm):
            return bool(eq.value)
        assert isinstance(eq, E.EQ)
        a, b = eq.a, eq.b
        if is_int_type(a.dtype) and a.dtype.lanes == 1 and self._always_equal(a, b):
            return True
        if not is_int_type(a.dtype):
            return expr_equal(self.simplify(a), self.simplify(b))
        return self.can_prove(eq)

    # -- helpers for the simplifiers and rules -----------------------------------
    def _interval(self, e: E.PrimExpr) -> Interval:
        return self._bound.interval(e)

    def _changed(self) -> None:
        self._bound.reset()
        self._rewrite.reset()

    def _diff_interval(self, a: E.PrimExpr, b: E.PrimExpr) -> Optional[Interval]:
        """The exact interval of ``a - b`` (actual values), or None when unknown.

        ``a - b`` in canonical form cancels common terms; its sum is the true
        difference when that difference and the sum both fit the dtype (two
        numbers congruent modulo 2**bits, both in range, are equal).
        """
        (alo, ahi), (blo, bhi) = self._interval(a), self._interval(b)
        diff = exact_interval(alo - bhi, ahi - blo, a.dtype, self.assume_no_overflow)
        if diff is None:
            return None
        lo, hi = diff
        if a.dtype.lanes != 1:
            return lo, hi
        canon = self._canonical
        s = canon.to_sum(E.Sub(a, b))
        # (x + 3) // 4 * 4 - x is 3 - (x + 3) % 4 once the quotient is expanded.
        for form in (s, canon.expand_divs(s)) if canon._has_div_term(s) else (s,):
            iv = canon._sum_interval(form)
            if iv is not None:
                lo, hi = max(lo, iv[0]), min(hi, iv[1])
        return lo, hi

    def _always_equal(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        s = self._canonical.to_sum(E.Sub(a, b))
        return s.is_const and s.const == 0

    def _never_equal(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """True when the wrapped difference ``a - b`` can never be zero."""
        s = self._canonical.to_sum(E.Sub(a, b))
        if s.is_const:
            return s.const != 0
        iv = self._canonical._sum_interval(s)
        if iv is not None and (iv[0] > 0 or iv[1] < 0):
            return True
        return self.modular_set(self._canonical.render(s)).base != 0  # base is reduced mod coeff

    def _lookup_fact(self, e: E.PrimExpr) -> Optional[E.PrimExpr]:
        if not self._facts:
            return None
        neg = _negated_cmp(e) if isinstance(e, E.CmpOp) and type(e) in _NEGATED else None
        for f in self._facts:
            if expr_equal(f, e):
                return E.IntImm("bool", 1)
            if neg is not None and expr_equal(f, neg):
                return E.IntImm("bool", 0)
        return None

    # -- scoped state ------------------------------------------------------------
    def _save(self) -> tuple[Any, ...]:
        return dict(self._bounds), dict(self._modular), dict(self._subst), list(self._facts)

    def _restore(self, saved: tuple[Any, ...]) -> None:
        lives: tuple[dict[Any, Any], ...] = (self._bounds, self._modular, self._subst)
        for live, old in zip(lives, saved):
            live.clear()
            live.update(old)
        self._facts[:] = saved[3]
        self._changed()

    @contextmanager
    def _assume(self, cond: E.PrimExpr) -> Iterator[None]:
        """Assume an already simplified condition inside the block."""
        saved = self._save()
        try:
            for c in _conjuncts(cond):
                if not isinstance(c, E.IntImm) and c.dtype.lanes == 1:
                    self._facts.append(c)
                    self._learn(c)
                    self._changed()
            yield
        finally:
            self._restore(saved)

    @contextmanager
    def _let_scope(self, var: E.Var, value: E.PrimExpr) -> Iterator[None]:
        saved = self._save()
        try:
            self._subst.pop(var, None)
            if is_int_type(var.dtype):
                self._bounds[var] = self.const_int_bound(value)
                self._modular[var] = self.modular_set(value)
            self._changed()
            yield
        finally:
            self._restore(saved)

    @contextmanager
    def _range_scope(self, var: E.Var, mn: E.PrimExpr, ext: E.PrimExpr) -> Iterator[None]:
        """``var`` ranges over ``[mn, mn + ext)`` inside the block (a loop)."""
        saved = self._save()
        try:
            self._subst.pop(var, None)
            self._bind_range(var, mn, ext)
            self._changed()
            yield
        finally:
            self._restore(saved)

    def _range_bound(self, var: E.Var, mn: E.PrimExpr, ext: E.PrimExpr) -> Optional[ConstIntBound]:
        if not is_int_type(var.dtype):
            return None
        (mlo, mhi), (_, ehi) = self._interval(mn), self._interval(ext)
        tlo, thi = int_range(var.dtype)
        lo, hi = max(mlo, tlo), min(mhi + ehi - 1, thi)
        return ConstIntBound(lo, max(lo, hi))  # an empty loop never runs its body

    def _bind_range(self, var: E.Var, mn: E.PrimExpr, ext: E.PrimExpr) -> None:
        bound = self._range_bound(var, mn, ext)
        if bound is None:
            return
        self._bounds[var] = bound
        self._facts[:] = [f for f in self._facts if not uses_var(f, var)]
        if not isinstance(mn, E.IntImm):
            self._facts.append(E.LE(mn, var))
        if not isinstance(ext, E.IntImm) and exact_interval(
                *iv_add(self._interval(mn), self._interval(ext)), var.dtype, self.assume_no_overflow) is not None:
            self._facts.append(E.LT(var, self.simplify(E.Add(mn, ext))))

    def _learn(self, c: E.PrimExpr) -> None:
        """Narrow variable bounds (and residues) from one comparison."""
        if isinstance(c, E.EQ) and isinstance(c.a, (E.FloorMod, E.Mod)) and isinstance(c.a.a, E.Var):
            # x % m == r (floored or truncated): x is r modulo |m|, whatever its sign.
            m, r, v = c.a.b, c.b, c.a.a
            if isinstance(m, E.IntImm) and isinstance(r, E.IntImm) and m.value != 0:
                old = self._modular.get(v, ModularSet(1, 0))
                both = old.intersect(ModularSet.make(m.value, r.value))
                if both is not None:  # None: contradictory facts, the code is unreachable
                    self._modular[v] = both
        if not isinstance(c, (E.LT, E.LE, E.GT, E.GE, E.EQ)) or not is_int_type(c.a.dtype) or c.a.dtype.lanes != 1:
            return
        a, b = (c.b, c.a) if isinstance(c, (E.GT, E.GE)) else (c.a, c.b)
        upper = -1 if isinstance(c, (E.LT, E.GT)) else 0
        lower = 0 if isinstance(c, E.EQ) else None
        # A variable compared with anything: a <= b + upper (and a >= b for ==).
        (alo, ahi), (blo, bhi) = self._interval(a), self._interval(b)
        if isinstance(a, E.Var):
            self._narrow(a, blo if lower is not None else None, bhi + upper)
        if isinstance(b, E.Var):
            self._narrow(b, alo - upper, ahi if lower is not None else None)
        if isinstance(b, E.IntImm):  # a in [b, b + upper] (== ) or [min, b + upper]
            self._learn_offset(a, b.value if lower is not None else None, b.value + upper)
        elif isinstance(a, E.IntImm):
            self._learn_offset(b, a.value - upper, a.value if lower is not None else None)
        if exact_interval(alo - bhi, ahi - blo, a.dtype, self.assume_no_overflow) is None:
            return
        # a - b lies in [lower, upper]; the canonical sum is exactly a - b when it fits.
        s = self._canonical.to_sum(E.Sub(a, b))
        if self._canonical._sum_interval(s) is None:
            return
        terms = [(atom, k, self._interval(atom)) for atom, k in s.terms.values()]
        for i, (atom, k, _) in enumerate(terms):
            if not isinstance(atom, E.Var):
                continue
            rlo = rhi = s.const  # the interval of the other terms
            for j, (_, kj, (tlo, thi)) in enumerate(terms):
                if j != i:
                    rlo, rhi = rlo + min(kj * tlo, kj * thi), rhi + max(kj * tlo, kj * thi)
            # k*v <= upper - rlo, and k*v >= lower - rhi for an equality
            if k > 0:
                hi = (upper - rlo) // k
                lo = -((rhi - lower) // k) if lower is not None else None
            else:
                lo = -((upper - rlo) // -k)
                hi = (rhi - lower) // -k if lower is not None else None
            self._narrow(atom, lo, hi)

    def _learn_offset(self, e: E.PrimExpr, lo: Optional[int], hi: Optional[int]) -> None:
        """Bound ``x`` from ``x + c`` (or ``x - c``) lying in ``[lo, hi]`` (None: the dtype's limit) after
        wrapping: ``n + 1 >= 0`` puts n in ``[-1, INT_MAX - 1]``, since ``INT_MAX + 1`` wraps negative."""
        if isinstance(e, (E.Add, E.Sub)) and isinstance(e.a, E.Var) and isinstance(e.b, E.IntImm):
            x, c = e.a, (e.b.value if isinstance(e, E.Add) else -e.b.value)
        else:
            return
        tmin, tmax = int_range(x.dtype)
        lo, hi, span = tmin if lo is None else lo, tmax if hi is None else hi, tmax - tmin + 1
        xlo, xhi = self._interval(x)
        # x + c wraps at most once either way: x + c - k * 2**bits lies in [lo, hi] for one k in -1, 0, 1
        # (only k = 0 when signed arithmetic is assumed not to overflow).
        wraps = (0,) if self.assume_no_overflow and x.dtype.is_int else (-1, 0, 1)
        parts = [(max(xlo, lo - c + k * span), min(xhi, hi - c + k * span)) for k in wraps]
        parts = [(p, q) for p, q in parts if p <= q]
        if parts:
            self._narrow(x, min(p for p, _ in parts), max(q for _, q in parts))

    def _narrow(self, var: E.Var, lo: Optional[int], hi: Optional[int]) -> None:
        """Intersect ``var``'s bound with ``[lo, hi]`` (None: no limit on that side)."""
        vlo, vhi = self._interval(var)
        if lo is not None:
            vlo = max(vlo, lo)
        if hi is not None:
            vhi = min(vhi, hi)
        self._bounds[var] = ConstIntBound(vlo, max(vlo, vhi))  # empty: the code is unreachable
        self._changed()

    def _check_override(self, var: E.Var, allow: bool, bound: Any = None, expr: Any = None) -> None:
        """Rebinding a variable to something else needs ``allow_override``."""
        old_expr, old_bound = self._subst.get(var), self._bounds.get(var)
        same = expr_equal(old_expr, expr) if old_expr is not None else old_bound is None or old_bound == bound
        if not same and not allow:
            old = old_expr if old_expr is not None else old_bound
            raise LoomValueError(f"{var.name} is already bound to {old}; pass allow_override=True to rebind it")
        self._subst.pop(var, None)
        self._facts[:] = [f for f in self._facts if not uses_var(f, var)]


def _configured_no_overflow() -> bool:
    """The current PassContext's ``arith.assume_no_overflow`` option."""
    global _current_context
    if _current_context is None:
        from ..transform.pass_base import PassContext  # imported late: the passes build on arith

        _current_context = PassContext.current
    return bool(_current_context().get_config("arith.assume_no_overflow"))


_current_context: Optional[Callable[[], Any]] = None


def _check_var(var: Any) -> None:
    if not isinstance(var, E.Var):
        raise LoomTypeError(f"expected a Var to bind, got {type(var).__name__}")


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]
