"""Constant integer bounds: the smallest ``[min, max]`` known to hold an expression.

Bounds describe the *actual* value an expression computes, wrap-around
included.  Every rule here is exact interval arithmetic followed by a check
that the result fits the dtype: when it does, no evaluation can overflow and
the interval is the answer; when it does not, the answer is the dtype's full
range (the wrapped value could be anything).  Rewrite rules that are valid
only without overflow ask exactly this question.  An analyzer that assumes
signed arithmetic never overflows (TVM's index assumption) cuts such an
interval to the dtype instead.

Infinity: an integer expression is always within its dtype, so its bounds are
ordinary ints and never infinite: the ends of its dtype's range say "nothing
known", and a bound's ``NEG_INF``/``POS_INF`` are those ends.  Only non-integer
expressions (floats, handles) get the sentinels ``ConstIntBound.NEG_INF`` and
``ConstIntBound.POS_INF``, ints far outside every dtype.

>>> import loom
>>> from loom.arith import Analyzer
>>> x = loom.var("x")
>>> an = Analyzer()
>>> an.bind(x, loom.ir.Range.from_min_extent(0, 8))
>>> an.const_int_bound(x * 4 + 3)
ConstIntBound(min_value=3, max_value=31)
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Iterator, Optional

import attrs

from ..ir import expr as E
from ..ir.dtype import DataType
from ._intmath import (
    Interval, exact_interval, int_range, is_int_type, iv_add, iv_div, iv_mul, iv_sub, trunc_div,
)

__all__ = ["ConstIntBound", "ConstIntBoundAnalyzer"]


class _Unbounded:
    """``bound.POS_INF`` / ``bound.NEG_INF``: an end of the bound's dtype, or the sentinel.

    On the class (``ConstIntBound.POS_INF``), and on a bound of no integer dtype, the
    sentinel: an int far outside every dtype. On the bound of an integer expression,
    the end of its dtype's range, which is where Loom's bounds say "nothing known" (an
    integer value never leaves its dtype), so TVM's test ``bd.max_value == bd.POS_INF``
    asks the question it asks in TVM.
    """

    def __init__(self, sign: int) -> None:
        self._sign = sign

    def __get__(self, bound: Optional[ConstIntBound], owner: type) -> int:
        if bound is None or bound.dtype is None:
            return self._sign << 256
        return int_range(bound.dtype)[self._sign > 0]


@attrs.frozen
class ConstIntBound:
    """The closed interval ``[min_value, max_value]`` of an expression's values.

    ``dtype`` is the element dtype of the expression it bounds (None for a bound
    made by hand); it is not compared, and only ``POS_INF``/``NEG_INF`` read it.

    >>> import loom
    >>> bd = loom.arith.Analyzer().const_int_bound(loom.var("x", "int8") * 2)   # may wrap: anything
    >>> bd.min_value == bd.NEG_INF, bd.max_value == bd.POS_INF, bd.POS_INF
    (True, True, 127)
    """

    min_value: int
    max_value: int
    dtype: Optional[DataType] = attrs.field(default=None, eq=False, repr=False, kw_only=True)

    POS_INF: ClassVar[_Unbounded] = _Unbounded(1)
    NEG_INF: ClassVar[_Unbounded] = _Unbounded(-1)

    @staticmethod
    def everything(dtype: DataType | str) -> ConstIntBound:
        """The bound that says nothing: the dtype's full range (or infinite)."""
        t = DataType.of(dtype).element_of()
        if is_int_type(t) or t.is_bool:
            return ConstIntBound(*int_range(t), dtype=t)
        return ConstIntBound(-(1 << 256), 1 << 256)

    @property
    def is_const(self) -> bool:
        return self.min_value == self.max_value

    def __iter__(self) -> Iterator[int]:
        """``lo, hi = bound`` unpacks the interval."""
        return iter((self.min_value, self.max_value))

    def __contains__(self, value: int) -> bool:
        return self.min_value <= value <= self.max_value

    def intersect(self, other: ConstIntBound) -> ConstIntBound:
        return ConstIntBound(max(self.min_value, other.min_value), min(self.max_value, other.max_value),
                             dtype=self._common_dtype(other))

    def union(self, other: ConstIntBound) -> ConstIntBound:
        return ConstIntBound(min(self.min_value, other.min_value), max(self.max_value, other.max_value),
                             dtype=self._common_dtype(other))

    def _common_dtype(self, other: ConstIntBound) -> Optional[DataType]:
        """The one dtype the two bounds have (a bound made by hand has none), else None."""
        dtypes = {d for d in (self.dtype, other.dtype) if d is not None}
        return dtypes.pop() if len(dtypes) == 1 else None


_UNBOUNDED: Interval = (-(1 << 256), 1 << 256)
_BOUND_FUNCS = {E.FloorDiv: lambda a, b: a // b, E.Div: trunc_div}


def _full(t: DataType) -> Interval:
    return int_range(t.element_of())


def _checked(iv: Optional[Interval], t: DataType, assume_no_overflow: bool = False) -> Interval:
    """``iv`` when it fits ``t`` (nothing can overflow), else the full range; a signed
    result assumed not to overflow is ``iv`` cut to ``t``."""
    r = None if iv is None else exact_interval(iv[0], iv[1], t.element_of(), assume_no_overflow)
    return _full(t) if r is None else r


class ConstIntBoundAnalyzer:
    """Computes bounds bottom-up, with a memo that the owner clears on changes.

    ``lookup(var)`` gives the bound the owner knows for a variable (or None).
    With ``assume_no_overflow``, signed arithmetic is taken never to overflow
    (see :func:`~loom.arith._intmath.exact_interval`); conversions still wrap.
    """

    def __init__(self, lookup: Callable[[E.Var], Optional[ConstIntBound]],
                 assume_no_overflow: bool = False) -> None:
        self._lookup = lookup
        self.assume_no_overflow = assume_no_overflow
        self._memo: dict[int, tuple[E.PrimExpr, Interval]] = {}
        self._let: dict[E.Var, Interval] = {}

    def reset(self) -> None:
        self._memo.clear()

    def __call__(self, e: E.PrimExpr) -> ConstIntBound:
        t = e.dtype.element_of()
        return ConstIntBound(*self.interval(e), dtype=t if is_int_type(t) or t.is_bool else None)

    def interval(self, e: E.PrimExpr) -> Interval:
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        t = e.dtype
        if not (is_int_type(t) or t.is_bool):
            r = _UNBOUNDED
        else:
            handler = _HANDLERS.get(type(e))
            r = handler(self, e) if handler is not None else _full(t)
        if len(self._memo) > 20000:
            self._memo.clear()
        self._memo[id(e)] = (e, r)
        return r

    # -- leaves ------------------------------------------------------------
    def _int(self, e: E.IntImm) -> Interval:
        return e.value, e.value

    def _var(self, e: E.Var) -> Interval:
        full = _full(e.dtype)
        if e in self._let:
            return self._let[e]
        known = self._lookup(e)
        if known is not None:
            lo, hi = max(known.min_value, full[0]), min(known.max_value, full[1])
            return (lo, hi) if lo <= hi else (lo, lo)
        if isinstance(e, E.SizeVar):
            return max(0, full[0]), full[1]
        return full

    # -- arithmetic --------------------------------------------------------
    def _arith(self, iv: Optional[Interval], t: DataType) -> Interval:
        """The bound of an arithmetic result (not a conversion) whose exact interval is ``iv``."""
        return _checked(iv, t, self.assume_no_overflow)

    def _add(self, e: E.Add) -> Interval:
        return self._arith(iv_add(self.interval(e.a), self.interval(e.b)), e.dtype)

    def _sub(self, e: E.Sub) -> Interval:
        return self._arith(iv_sub(self.interval(e.a), self.interval(e.b)), e.dtype)

    def _mul(self, e: E.Mul) -> Interval:
        return self._arith(iv_mul(self.interval(e.a), self.interval(e.b)), e.dtype)

    def _div(self, e: E.BinaryOp) -> Interval:
        # Division by zero is undefined, so zero is excluded from the divisor;
        # INT_MIN // -1 wraps, which ``_arith`` notices.
        return self._arith(iv_div(self.interval(e.a), self.interval(e.b), _BOUND_FUNCS[type(e)]), e.dtype)

    def _floormod(self, e: E.FloorMod) -> Interval:
        (alo, ahi), (blo, bhi) = self.interval(e.a), self.interval(e.b)
        if blo > 0:  # result in [0, b): equal to a when 0 <= a < b
            if alo >= 0:
                return (alo, ahi) if ahi < blo else (0, min(ahi, bhi - 1))
            return 0, bhi - 1
        if bhi < 0:  # result in (b, 0]
            if ahi <= 0:
                return (alo, ahi) if alo > bhi else (max(alo, blo + 1), 0)
            return blo + 1, 0
        return min(blo + 1, 0), max(bhi - 1, 0)

    def _truncmod(self, e: E.Mod) -> Interval:
        (alo, ahi), (blo, bhi) = self.interval(e.a), self.interval(e.b)
        if blo == bhi == 0:
            return _full(e.dtype)
        mmax = max(abs(blo), abs(bhi))
        mmin = blo if blo > 0 else -bhi if bhi < 0 else 1
        # The sign follows a, and |result| < |b|, |result| <= |a|.
        if alo >= 0:
            return (alo, ahi) if ahi < mmin else (0, min(ahi, mmax - 1))
        if ahi <= 0:
            return (alo, ahi) if -alo < mmin else (max(alo, 1 - mmax), 0)
        return max(alo, 1 - mmax), min(ahi, mmax - 1)

    def _min(self, e: E.Min) -> Interval:
        (alo, ahi), (blo, bhi) = self.interval(e.a), self.interval(e.b)
        return min(alo, blo), min(ahi, bhi)

    def _max(self, e: E.Max) -> Interval:
        (alo, ahi), (blo, bhi) = self.interval(e.a), self.interval(e.b)
        return max(alo, blo), max(ahi, bhi)

    def _select(self, e: E.Select) -> Interval:
        c = self.interval(e.condition)
        if c == (1, 1):
            return self.interval(e.true_value)
        if c == (0, 0):
            return self.interval(e.false_value)
        (alo, ahi), (blo, bhi) = self.interval(e.true_value), self.interval(e.false_value)
        return min(alo, blo), max(ahi, bhi)

    def _cast(self, e: E.Cast) -> Interval:
        src, t = e.value.dtype, e.dtype
        if not (is_int_type(src) or src.is_bool):
            return _full(t)  # float -> int wraps; nothing to say
        lo, hi = self.interval(e.value)
        if t.is_bool:
            return (0, 0) if (lo, hi) == (0, 0) else (1, 1) if lo > 0 or hi < 0 else (0, 1)
        return _checked((lo, hi), t)

    def _let_expr(self, e: E.Let) -> Interval:
        if not (is_int_type(e.var.dtype) or e.var.dtype.is_bool):
            return self.interval(e.body)
        saved = self._let.get(e.var)
        self._let[e.var] = self.interval(e.value)
        self._memo.clear()  # the body's bounds depend on this binding
        try:
            return self.interval(e.body)
        finally:
            if saved is None:
                del self._let[e.var]
            else:
                self._let[e.var] = saved
            self._memo.clear()

    # -- vectors and calls -------------------------------------------------
    def _broadcast(self, e: E.Broadcast) -> Interval:
        return self.interval(e.value)

    def _ramp(self, e: E.Ramp) -> Interval:
        steps = iv_mul(self.interval(e.stride), (0, e.lanes - 1))
        return self._arith(iv_add(self.interval(e.base), steps), e.dtype)

    def _call(self, e: E.Call) -> Interval:
        name = getattr(e.op, "name", None)
        if name == "tir.likely" and e.args:
            return self.interval(e.args[0])
        if name == "tir.shift_right":
            s_lo, s_hi = self.interval(e.args[1])
            if 0 <= s_lo and s_hi < e.dtype.bits:
                # x >> s floors x / 2**s: monotone in x, and toward 0 (or -1) as s grows.
                lo, hi = self.interval(e.args[0])
                return min(lo >> s_lo, lo >> s_hi), max(hi >> s_lo, hi >> s_hi)
        if name == "tir.bitwise_and":
            # An operand that is never negative clears the sign and bounds the result: [0, its max].
            highs = [hi for lo, hi in map(self.interval, e.args) if lo >= 0]
            if highs:
                return 0, min(highs)
        return _full(e.dtype)


# Each handler takes the node type of its key.
_HANDLERS: dict[type, Callable[[ConstIntBoundAnalyzer, Any], Interval]] = {
    E.IntImm: ConstIntBoundAnalyzer._int,
    E.Var: ConstIntBoundAnalyzer._var,
    E.SizeVar: ConstIntBoundAnalyzer._var,
    E.Add: ConstIntBoundAnalyzer._add,
    E.Sub: ConstIntBoundAnalyzer._sub,
    E.Mul: ConstIntBoundAnalyzer._mul,
    E.FloorDiv: ConstIntBoundAnalyzer._div,
    E.Div: ConstIntBoundAnalyzer._div,
    E.FloorMod: ConstIntBoundAnalyzer._floormod,
    E.Mod: ConstIntBoundAnalyzer._truncmod,
    E.Min: ConstIntBoundAnalyzer._min,
    E.Max: ConstIntBoundAnalyzer._max,
    E.Select: ConstIntBoundAnalyzer._select,
    E.Cast: ConstIntBoundAnalyzer._cast,
    E.Let: ConstIntBoundAnalyzer._let_expr,
    E.Broadcast: ConstIntBoundAnalyzer._broadcast,
    E.Ramp: ConstIntBoundAnalyzer._ramp,
    E.Call: ConstIntBoundAnalyzer._call,
}
