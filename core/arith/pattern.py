"""A small pattern language for rewrite rules, in the style of Halide's ``rewrite(...)``.

Patterns are built with the same operators as IR expressions::

    x, y = pvars("x y")
    c1, c2 = pconsts("c1 c2")
    Rule((x * c1 + y) // c1, x + y // c1, lambda m: m.c1 > 0 and m.no_overflow(x * c1 + y))

``PVar`` matches any expression (a second occurrence must be structurally
equal to the first); ``PConst`` matches an integer constant and binds its
value; plain ints are literal constants.  A rule's condition receives the
:class:`Match`, whose attributes are the bindings (constants as ints).

Wrap-around: ``m.no_overflow(p)`` evaluates pattern ``p`` over exact
intervals (the bounds of what the variables matched) and is True when no
intermediate result can leave the dtype.  Then the IR value of ``p`` is its
mathematical value, which is what most algebraic identities need.  An analyzer
that assumes signed arithmetic never overflows answers True for signed dtypes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.dtype import DataType
from ._exprkey import expr_equal
from ._intmath import Interval, exact_interval, fits, iv_add, iv_div, iv_mul, iv_sub, trunc_div

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = [
    "Pattern", "PVar", "PConst", "Match", "Rule", "FnRule", "pvars", "pconsts",
    "min_", "max_", "select", "tdiv", "tmod", "bcast", "ramp", "not_",
]


class Match:
    """The bindings of one successful match, plus helpers for conditions."""

    __slots__ = ("vals", "an", "dtype")

    def __init__(self, an: Analyzer, root: E.PrimExpr) -> None:
        self.vals: dict[str, Any] = {}
        self.an = an
        operand = root.a if isinstance(root, E.CmpOp) else root
        self.dtype: DataType = operand.dtype.element_of()

    def __getattr__(self, name: str) -> Any:
        try:
            return self.vals[name]
        except KeyError:
            raise AttributeError(name) from None

    def no_overflow(self, *pats: Pattern) -> bool:
        """True when evaluating each pattern can never wrap around."""
        return all(p.interval(self) is not None for p in pats)

    def fits(self, *values: int) -> bool:
        """True when each value is representable in the matched dtype."""
        return all(fits(v, v, self.dtype) for v in values)

    def bound(self, p: Pattern) -> Optional[Interval]:
        """The exact interval of pattern ``p``, or None when it may wrap."""
        return p.interval(self)

    def is_int(self, p: PVar) -> bool:
        """True when the expression bound to ``p`` has an integer dtype."""
        t = self.vals[p.name].dtype
        return t.code in ("int", "uint")


class Pattern:
    """Base of pattern nodes; operators build ``POp`` patterns."""

    __slots__ = ()
    __hash__ = object.__hash__

    def match(self, e: Any, m: Match) -> bool:
        raise NotImplementedError

    def build(self, m: Match, hint: Optional[DataType]) -> Any:
        raise NotImplementedError

    def interval(self, m: Match) -> Optional[Interval]:
        return None

    def __bool__(self) -> bool:
        raise LoomTypeError("a pattern has no truth value; use & | ~ to combine conditions")

    def __add__(self, o: Any) -> POp: return POp(E.Add, self, _lift(o))
    def __radd__(self, o: Any) -> POp: return POp(E.Add, _lift(o), self)
    def __sub__(self, o: Any) -> POp: return POp(E.Sub, self, _lift(o))
    def __rsub__(self, o: Any) -> POp: return POp(E.Sub, _lift(o), self)
    def __mul__(self, o: Any) -> POp: return POp(E.Mul, self, _lift(o))
    def __rmul__(self, o: Any) -> POp: return POp(E.Mul, _lift(o), self)
    def __floordiv__(self, o: Any) -> POp: return POp(E.FloorDiv, self, _lift(o))
    def __mod__(self, o: Any) -> POp: return POp(E.FloorMod, self, _lift(o))
    def __lt__(self, o: Any) -> POp: return POp(E.LT, self, _lift(o))
    def __le__(self, o: Any) -> POp: return POp(E.LE, self, _lift(o))
    def __gt__(self, o: Any) -> POp: return POp(E.GT, self, _lift(o))
    def __ge__(self, o: Any) -> POp: return POp(E.GE, self, _lift(o))
    def __eq__(self, o: Any) -> POp: return POp(E.EQ, self, _lift(o))  # type: ignore[override]
    def __ne__(self, o: Any) -> POp: return POp(E.NE, self, _lift(o))  # type: ignore[override]
    def __and__(self, o: Any) -> POp: return POp(E.And, self, _lift(o))
    def __or__(self, o: Any) -> POp: return POp(E.Or, self, _lift(o))
    def __invert__(self) -> POp: return POp(E.Not, self)


class PVar(Pattern):
    """Matches any expression (or, in a lanes position, any lane count)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def match(self, e: Any, m: Match) -> bool:
        seen = m.vals.get(self.name)
        if seen is None:
            m.vals[self.name] = e
            return True
        return expr_equal(seen, e)

    def build(self, m: Match, hint: Optional[DataType]) -> Any:
        return m.vals[self.name]

    def interval(self, m: Match) -> Optional[Interval]:
        return m.an._interval(m.vals[self.name])


class PConst(Pattern):
    """Matches a scalar integer constant and binds its value (an int)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def match(self, e: Any, m: Match) -> bool:
        if not isinstance(e, E.IntImm) or e.dtype.is_bool:
            return False
        seen = m.vals.get(self.name)
        if seen is None:
            m.vals[self.name] = e.value
            m.vals["_t_" + self.name] = e.dtype
            return True
        return seen == e.value

    def build(self, m: Match, hint: Optional[DataType]) -> E.PrimExpr:
        return E.IntImm(m.vals["_t_" + self.name], m.vals[self.name])

    def interval(self, m: Match) -> Interval:
        v = m.vals[self.name]
        return v, v


class PInt(Pattern):
    """A literal constant: matches that value, builds it in the dtype of its context."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = int(value)

    def match(self, e: Any, m: Match) -> bool:
        return isinstance(e, E.IntImm) and e.value == self.value

    def build(self, m: Match, hint: Optional[DataType]) -> E.PrimExpr:
        return ops.const(self.value, hint if hint is not None else m.dtype)

    def interval(self, m: Match) -> Interval:
        return self.value, self.value


def _lift(o: Any) -> Pattern:
    if isinstance(o, Pattern):
        return o
    if isinstance(o, (bool, int)):
        return PInt(o)
    raise LoomTypeError(f"cannot use {type(o).__name__} in a pattern")


_FIELDS = {
    E.Not: ("a",), E.Select: ("condition", "true_value", "false_value"),
    E.Broadcast: ("value", "lanes"), E.Ramp: ("base", "stride", "lanes"),
}


def _division(node: type, build: Callable[..., E.PrimExpr]) -> Callable[..., E.PrimExpr]:
    """The folding builder, except that a division by the constant zero stays a node
    (the builders reject it, but an undefined input may legitimately contain one)."""

    def make(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        if _is_zero(b) or (isinstance(b, E.Broadcast) and _is_zero(b.value)):
            return node(a, b)
        return build(a, b)

    return make


def _is_zero(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


_BUILD: dict[type, Callable[..., E.PrimExpr]] = {
    E.Add: ops.add, E.Sub: ops.sub, E.Mul: ops.mul,
    E.FloorDiv: _division(E.FloorDiv, ops.floordiv), E.FloorMod: _division(E.FloorMod, ops.floormod),
    E.Div: _division(E.Div, ops.truncdiv), E.Mod: _division(E.Mod, ops.truncmod),
    E.Min: ops.minimum, E.Max: ops.maximum,
    E.EQ: ops.eq, E.NE: ops.ne, E.LT: ops.lt, E.LE: ops.le, E.GT: ops.gt, E.GE: ops.ge,
    E.And: ops.logical_and, E.Or: ops.logical_or, E.Not: ops.logical_not, E.Select: ops.select,
    E.Broadcast: E.Broadcast, E.Ramp: E.Ramp,
}
_ARITH = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max)
_BOOL = DataType.of("bool")
_IV_DIV = {E.FloorDiv: lambda a, b: a // b, E.Div: trunc_div}


class POp(Pattern):
    """Matches one node type whose fields match the child patterns."""

    __slots__ = ("op", "kids", "fields")

    def __init__(self, op: type, *kids: Pattern) -> None:
        self.op, self.kids = op, kids
        self.fields = _FIELDS.get(op, ("a", "b"))

    def match(self, e: Any, m: Match) -> bool:
        if type(e) is not self.op:
            return False
        return all(k.match(getattr(e, f), m) for f, k in zip(self.fields, self.kids))

    def build(self, m: Match, hint: Optional[DataType]) -> E.PrimExpr:
        op = self.op
        if op in (E.And, E.Or, E.Not):
            return _BUILD[op](*(k.build(m, _BOOL) for k in self.kids))
        if op is E.Select:
            cond = self.kids[0].build(m, _BOOL)
            return _BUILD[op](cond, *_build_siblings(self.kids[1:], m, hint))
        if op in (E.Broadcast, E.Ramp):
            elem = hint.element_of() if hint is not None else None
            return _BUILD[op](*_build_siblings(self.kids[:-1], m, elem), self.kids[-1].build(m, None))
        return _BUILD[op](*_build_siblings(self.kids, m, hint if op in _ARITH else None))

    def interval(self, m: Match) -> Optional[Interval]:
        op = self.op
        if op not in _ARITH:
            return None
        a, b = self.kids[0].interval(m), self.kids[1].interval(m)
        if a is None or b is None:
            return None
        if op is E.Add:
            r: Optional[Interval] = iv_add(a, b)
        elif op is E.Sub:
            r = iv_sub(a, b)
        elif op is E.Mul:
            r = iv_mul(a, b)
        elif op is E.Min:
            r = min(a[0], b[0]), min(a[1], b[1])
        elif op is E.Max:
            r = max(a[0], b[0]), max(a[1], b[1])
        elif op in _IV_DIV:
            r = iv_div(a, b, _IV_DIV[op])
        elif b[0] > 0 and (op is E.FloorMod or a[0] >= 0):  # a remainder by a positive divisor
            r = 0, min(b[1] - 1, a[1]) if a[0] >= 0 else b[1] - 1
        else:
            r = None
        return None if r is None else exact_interval(r[0], r[1], m.dtype, m.an.assume_no_overflow)


def _build_siblings(kids: tuple[Pattern, ...], m: Match, hint: Optional[DataType]) -> list[Any]:
    """Build children; literals take the dtype of ``hint`` or of a built sibling."""
    out: list[Any] = [None if isinstance(k, PInt) else k.build(m, hint) for k in kids]
    if hint is None:
        hint = next((x.dtype for x in out if isinstance(x, E.PrimExpr)), None)
    return [k.build(m, hint) if x is None else x for k, x in zip(kids, out)]


class Rule:
    """``lhs -> rhs`` when ``when(match)`` holds.  ``rhs`` may be a function of the match."""

    __slots__ = ("lhs", "rhs", "when", "_root", "_kinds")

    def __init__(self, lhs: Pattern, rhs: Union[Pattern, int, Callable[[Match], Any]],
                 when: Optional[Callable[[Match], bool]] = None) -> None:
        self.lhs = lhs
        self.rhs = rhs if callable(rhs) and not isinstance(rhs, Pattern) else _lift(rhs)
        self.when = when
        # The node type each operand must have (an op pattern's, a constant's IntImm): most rules tried
        # fail on an operand's type, which this checks before a Match is made.
        self._root: Optional[type] = lhs.op if isinstance(lhs, POp) else None
        self._kinds: tuple[tuple[str, type], ...] = ()
        if isinstance(lhs, POp):
            self._kinds = tuple((f, k.op if isinstance(k, POp) else E.IntImm) for f, k in zip(lhs.fields, lhs.kids)
                                if isinstance(k, (POp, PConst, PInt)))

    def apply(self, e: E.PrimExpr, an: Analyzer) -> Optional[E.PrimExpr]:
        if self._kinds:
            if type(e) is not self._root:
                return None
            for field, kind in self._kinds:
                if type(getattr(e, field)) is not kind:
                    return None
        m = Match(an, e)
        if not self.lhs.match(e, m) or (self.when is not None and not self.when(m)):
            return None
        if isinstance(self.rhs, Pattern):
            return self.rhs.build(m, e.dtype)
        return self.rhs(m)


class FnRule:
    """A rule written as a function ``fn(expr, analyzer) -> expr or None``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Analyzer], Optional[E.PrimExpr]]) -> None:
        self.fn = fn

    def apply(self, e: E.PrimExpr, an: Analyzer) -> Optional[E.PrimExpr]:
        return self.fn(e, an)


def pvars(names: str) -> tuple[PVar, ...]:
    return tuple(PVar(n) for n in names.split())


def pconsts(names: str) -> tuple[PConst, ...]:
    return tuple(PConst(n) for n in names.split())


def min_(a: Any, b: Any) -> POp: return POp(E.Min, _lift(a), _lift(b))
def max_(a: Any, b: Any) -> POp: return POp(E.Max, _lift(a), _lift(b))
def tdiv(a: Any, b: Any) -> POp: return POp(E.Div, _lift(a), _lift(b))
def tmod(a: Any, b: Any) -> POp: return POp(E.Mod, _lift(a), _lift(b))
def not_(a: Any) -> POp: return POp(E.Not, _lift(a))
def select(c: Any, t: Any, f: Any) -> POp: return POp(E.Select, _lift(c), _lift(t), _lift(f))
def bcast(v: Any, lanes: PVar) -> POp: return POp(E.Broadcast, _lift(v), lanes)
def ramp(base: Any, stride: Any, lanes: PVar) -> POp: return POp(E.Ramp, _lift(base), _lift(stride), lanes)
