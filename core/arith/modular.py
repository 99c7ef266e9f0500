"""Modular set analysis: every value of an expression is ``coeff * k + base``.

``coeff == 0`` means the expression is the constant ``base``; ``coeff == 1``
says nothing.  Otherwise ``0 <= base < coeff``.  The simplifier uses it to
prove divisibility (``floormod(x * 8 + 4, 4) == 0``).

Wrap-around: a value computed modulo ``2**bits`` keeps its residue modulo any
divisor of ``2**bits``.  So when bounds cannot rule out overflow, the
coefficient is reduced to its greatest common divisor with ``2**bits``
(unless the analyzer assumes that signed arithmetic never overflows).

>>> import loom
>>> from loom.arith import Analyzer
>>> x = loom.var("x")
>>> an = Analyzer()
>>> an.bind(x, loom.ir.Range.from_min_extent(0, 100))
>>> an.modular_set(x * 8 + 4)
ModularSet(coeff=8, base=4)
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Optional

import attrs

from ..ir import expr as E
from ._intmath import Interval, exact_interval, is_int_type, iv_add, iv_mul, iv_sub, wrap

__all__ = ["ModularSet", "ModularSetAnalyzer"]


@attrs.frozen
class ModularSet:
    """The set ``{coeff * k + base}``; see the module docstring."""

    coeff: int
    base: int

    @staticmethod
    def make(coeff: int, base: int) -> ModularSet:
        coeff = abs(coeff)
        return ModularSet(coeff, base % coeff if coeff else base)

    @staticmethod
    def everything() -> ModularSet:
        return ModularSet(1, 0)

    @property
    def is_const(self) -> bool:
        return self.coeff == 0

    def __iter__(self) -> Iterator[int]:
        """``coeff, base = modular_set`` unpacks the pair."""
        return iter((self.coeff, self.base))

    def union(self, other: ModularSet) -> ModularSet:
        return ModularSet.make(math.gcd(self.coeff, other.coeff, abs(self.base - other.base)), self.base)

    def intersect(self, other: ModularSet) -> Optional[ModularSet]:
        """The values in both sets (Chinese remaindering), or None when there are none.

        >>> ModularSet(4, 1).intersect(ModularSet(3, 1))
        ModularSet(coeff=12, base=1)
        """
        (m1, r1), (m2, r2) = self, other
        if m1 == 0 or m2 == 0:  # a constant: in the other set, or nowhere
            const, rest = (r1, other) if m1 == 0 else (r2, self)
            inside = const == rest.base if rest.coeff == 0 else const % rest.coeff == rest.base
            return ModularSet(0, const) if inside else None
        g = math.gcd(m1, m2)
        if (r2 - r1) % g:
            return None
        lcm = m1 // g * m2
        # r1 + m1 * t == r2 (mod m2): t == (r2 - r1) / g * inverse(m1 / g) (mod m2 / g)
        t = (r2 - r1) // g * pow(m1 // g, -1, m2 // g) if m2 // g > 1 else 0
        return ModularSet.make(lcm, r1 + m1 * t)

    def divisible_by(self, c: int) -> bool:
        """True when every value is a multiple of ``c``."""
        return self.coeff % c == 0 and self.base % c == 0 if c else False


_ANY = ModularSet(1, 0)


class ModularSetAnalyzer:
    """Bottom-up modular analysis; ``interval(e)`` supplies bounds to detect overflow."""

    def __init__(self, lookup: Callable[[E.Var], Optional[ModularSet]],
                 interval: Callable[[E.PrimExpr], Interval], assume_no_overflow: bool = False) -> None:
        self._lookup = lookup
        self._interval = interval
        self.assume_no_overflow = assume_no_overflow
        self._let: dict[E.Var, ModularSet] = {}

    def __call__(self, e: E.PrimExpr) -> ModularSet:
        if not is_int_type(e.dtype):
            return _ANY
        handler = _HANDLERS.get(type(e))
        return handler(self, e) if handler is not None else _ANY

    def _wrapped(self, m: ModularSet, exact: Interval, e: E.PrimExpr, arith: bool = True) -> ModularSet:
        """``m`` for the exact result; weakened when the result may wrap.

        ``arith``: ``e`` is arithmetic (which may be assumed not to overflow), not a conversion."""
        t = e.dtype.element_of()
        if exact_interval(exact[0], exact[1], t, arith and self.assume_no_overflow) is not None:
            return m
        if m.coeff == 0:
            return ModularSet(0, wrap(m.base, t))
        return ModularSet.make(math.gcd(m.coeff, 1 << t.bits), m.base)

    def _int(self, e: E.IntImm) -> ModularSet:
        return ModularSet(0, e.value)

    def _var(self, e: E.Var) -> ModularSet:
        if e in self._let:
            return self._let[e]
        lo, hi = self._interval(e)
        if lo == hi:  # a fact such as x == 4 pinned it down
            return ModularSet(0, lo)
        return self._lookup(e) or _ANY

    def _add(self, e: E.Add) -> ModularSet:
        a, b = self(e.a), self(e.b)
        m = ModularSet.make(math.gcd(a.coeff, b.coeff), a.base + b.base)
        return self._wrapped(m, iv_add(self._interval(e.a), self._interval(e.b)), e)

    def _sub(self, e: E.Sub) -> ModularSet:
        a, b = self(e.a), self(e.b)
        m = ModularSet.make(math.gcd(a.coeff, b.coeff), a.base - b.base)
        return self._wrapped(m, iv_sub(self._interval(e.a), self._interval(e.b)), e)

    def _mul(self, e: E.Mul) -> ModularSet:
        a, b = self(e.a), self(e.b)
        m = ModularSet.make(math.gcd(a.coeff * b.coeff, a.coeff * b.base, b.coeff * a.base), a.base * b.base)
        return self._wrapped(m, iv_mul(self._interval(e.a), self._interval(e.b)), e)

    def _const_divisor(self, e: E.BinaryOp) -> Optional[int]:
        if isinstance(e.b, E.IntImm) and e.b.value > 0:
            if isinstance(e, (E.FloorDiv, E.FloorMod)) or self._interval(e.a)[0] >= 0:
                return e.b.value  # truncation equals flooring for a >= 0
        return None

    def _div(self, e: E.BinaryOp) -> ModularSet:
        c = self._const_divisor(e)
        return _ANY if c is None else self._floordiv(self(e.a), c)

    @staticmethod
    def _floordiv(a: ModularSet, c: int) -> ModularSet:
        """The residues of ``floor(v / c)`` for ``v`` in ``a`` (``c > 0``)."""
        if a.coeff == 0:
            return ModularSet(0, a.base // c)
        if a.coeff % c == 0:
            return ModularSet.make(a.coeff // c, a.base // c)
        return _ANY

    def _mod(self, e: E.BinaryOp) -> ModularSet:
        c = self._const_divisor(e)
        if c is None:
            return _ANY
        a = self(e.a)
        g = math.gcd(a.coeff, c)
        return ModularSet(0, a.base % c) if g == c else ModularSet.make(g, a.base)

    def _call(self, e: E.Call) -> ModularSet:
        """``x >> n`` is ``x // 2**n`` (arithmetic shift); ``x << n`` is ``x * 2**n``, wrapping."""
        name, args = getattr(e.op, "name", None), e.args
        if name not in ("tir.shift_right", "tir.shift_left") or not isinstance(args[1], E.IntImm):
            return _ANY
        n = args[1].value
        if not 0 <= n < e.dtype.bits:
            return _ANY
        a = self(args[0])
        if name == "tir.shift_right":
            return self._floordiv(a, 1 << n)
        m = ModularSet.make(a.coeff << n, a.base << n)
        return self._wrapped(m, iv_mul(self._interval(args[0]), (1 << n, 1 << n)), e)

    def _union2(self, e: E.BinaryOp) -> ModularSet:
        return self(e.a).union(self(e.b))

    def _select(self, e: E.Select) -> ModularSet:
        return self(e.true_value).union(self(e.false_value))

    def _cast(self, e: E.Cast) -> ModularSet:
        if not is_int_type(e.value.dtype):
            return _ANY
        return self._wrapped(self(e.value), self._interval(e.value), e, arith=False)

    def _let_expr(self, e: E.Let) -> ModularSet:
        saved = self._let.get(e.var)
        self._let[e.var] = self(e.value)
        try:
            return self(e.body)
        finally:
            if saved is None:
                del self._let[e.var]
            else:
                self._let[e.var] = saved

    def _broadcast(self, e: E.Broadcast) -> ModularSet:
        return self(e.value)

    def _ramp(self, e: E.Ramp) -> ModularSet:
        base, stride = self(e.base), self(e.stride)
        m = ModularSet.make(math.gcd(base.coeff, stride.coeff, stride.base), base.base)
        steps = iv_mul(self._interval(e.stride), (0, e.lanes - 1))
        return self._wrapped(m, iv_add(self._interval(e.base), steps), e)


# Each handler takes the node type of its key.
_HANDLERS: dict[type, Callable[[ModularSetAnalyzer, Any], ModularSet]] = {
    E.IntImm: ModularSetAnalyzer._int,
    E.Var: ModularSetAnalyzer._var,
    E.SizeVar: ModularSetAnalyzer._var,
    E.Add: ModularSetAnalyzer._add,
    E.Sub: ModularSetAnalyzer._sub,
    E.Mul: ModularSetAnalyzer._mul,
    E.FloorDiv: ModularSetAnalyzer._div,
    E.Div: ModularSetAnalyzer._div,
    E.FloorMod: ModularSetAnalyzer._mod,
    E.Mod: ModularSetAnalyzer._mod,
    E.Min: ModularSetAnalyzer._union2,
    E.Max: ModularSetAnalyzer._union2,
    E.Select: ModularSetAnalyzer._select,
    E.Cast: ModularSetAnalyzer._cast,
    E.Let: ModularSetAnalyzer._let_expr,
    E.Broadcast: ModularSetAnalyzer._broadcast,
    E.Ramp: ModularSetAnalyzer._ramp,
    E.Call: ModularSetAnalyzer._call,
}
