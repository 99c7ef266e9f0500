"""The rewrite simplifier: bottom-up, constant folding, then rule tables.

Each node's operands are simplified first; then constants fold with the IR's
wrap-around semantics, and the first matching rule of the node's table fires.
The result is simplified again (rules only ever shrink or normalize, and a
depth limit guards against a cycle).  ``select`` branches are simplified under
their condition, the right side of ``and``/``or`` under the left side.

Floats: only constants fold.  Reassociating, cancelling or comparing floats
symbolically would change results (rounding, NaN, infinities).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

import numpy as np

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import substitute
from ..ir.reduce import Reduce
from ._exprkey import map_operands, uses_var
from ._intmath import fold_int, is_int_type
from .canonical import inlinable_let_value, taken_branch
from .rules_arith import INT_RULES
from .rules_cmp import CMP_RULES
from .reduce_simplify import simplify_reduce
from .rules_logic import LOGIC_RULES
from .rules_vector import VECTOR_RULES

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["RewriteSimplifier"]

_MAX_DEPTH = 32
_DIVISIONS = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)
_CMP_FOLD: dict[type, Callable[[Any, Any], bool]] = {
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b,
}
_FLOAT_FOLD: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.Div: lambda a, b: a / b, E.Min: lambda a, b: min(a, b), E.Max: lambda a, b: max(a, b),
}


def fold_constants(e: E.PrimExpr) -> Optional[E.PrimExpr]:
    """The constant value of ``e`` when all its operands are constants, else None."""
    if isinstance(e, E.Call):
        # ``likely`` is only a hint: once its condition is known the hint says nothing.
        if getattr(e.op, "name", None) == "tir.likely" and isinstance(e.args[0], E.IntImm):
            return e.args[0]
        return taken_branch(e)
    if isinstance(e, (E.And, E.Or)):
        if isinstance(e.a, E.IntImm) or isinstance(e.b, E.IntImm):
            return ops.logical_and(e.a, e.b) if isinstance(e, E.And) else ops.logical_or(e.a, e.b)
        return None
    if isinstance(e, E.Not):
        return E.IntImm(e.dtype, 1 - e.a.value) if isinstance(e.a, E.IntImm) else None
    if not isinstance(e, E.BinaryOp):
        return None
    a, b = e.a, e.b
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        if type(e) in _CMP_FOLD:
            return E.IntImm("bool", int(_CMP_FOLD[type(e)](a.value, b.value)))
        v = fold_int(type(e), a.value, b.value, e.dtype)
        return None if v is None else E.IntImm(e.dtype, v)
    if isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm):
        return _fold_float(e, a, b)
    return None


def _fold_float(e: E.BinaryOp, a: E.FloatImm, b: E.FloatImm) -> Optional[E.PrimExpr]:
    scalar = a.dtype.numpy().type
    x, y = scalar(a.value), scalar(b.value)
    if type(e) in _CMP_FOLD:
        return E.IntImm("bool", int(bool(_CMP_FOLD[type(e)](x, y))))
    fn = _FLOAT_FOLD.get(type(e))
    if fn is None or (type(e) in (E.Min, E.Max) and (math.isnan(a.value) or math.isnan(b.value))):
        return None
    with np.errstate(all="ignore"):
        r = scalar(fn(x, y))
    return E.FloatImm(e.dtype, float(r))


class RewriteSimplifier:
    """Simplifies with rule tables; owned by an :class:`Analyzer`."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.an = analyzer
        self._memo: dict[int, tuple[E.PrimExpr, E.PrimExpr]] = {}
        self._depth = 0
        self._tables: dict[tuple[type, bool], list[Any]] = {}
        self._bases: list[tuple[Any, ...]] = []  # analyzer states before local assumptions

    def reset(self) -> None:
        """Forget cached results (the analyzer's facts changed)."""
        self._memo.clear()

    def __call__(self, e: E.PrimExpr) -> E.PrimExpr:
        return self.visit(e)

    def visit(self, e: E.PrimExpr) -> E.PrimExpr:
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        fn = _VISIT.get(type(e), RewriteSimplifier._generic)
        out = fn(self, e)
        if len(self._memo) > 20000:
            self._memo.clear()
        self._memo[id(e)] = (e, out)
        self._memo[id(out)] = (out, out)
        return out

    # -- the rule engine -----------------------------------------------------
    def _rules(self, e: E.PrimExpr) -> list[Any]:
        ints = isinstance(e, E.BinaryOp) and is_int_type(e.a.dtype)
        key = (type(e), ints)
        table = self._tables.get(key)
        if table is None:
            table = list(VECTOR_RULES.get(type(e), ()))
            if ints:
                table += INT_RULES.get(type(e), CMP_RULES.get(type(e), []))
            table += LOGIC_RULES.get(type(e), [])
            self._tables[key] = table
        return table

    def _post(self, e: E.PrimExpr) -> E.PrimExpr:
        folded = fold_constants(e)
        if folded is not None:
            return folded
        for rule in self._rules(e):
            out = rule.apply(e, self.an)
            if out is not None and out is not e:
                if self._depth >= _MAX_DEPTH:
                    return out
                self._depth += 1
                try:
                    return self.visit(out)
                finally:
                    self._depth -= 1
        return e

    def negate(self, cond: E.PrimExpr) -> E.PrimExpr:
        """The simplified negation of a (simplified) condition."""
        return self._post(E.Not(cond))

    # -- per node kind -------------------------------------------------------
    # -- local assumptions ---------------------------------------------------
    # A select evaluates both branches, and/or both operands.  A branch may be
    # simplified assuming its condition, since its value matters only then,
    # but it must stay defined where it was: so a divisor is simplified
    # without those local assumptions (else ``select(x == 0, 1 // x, x)``
    # could become ``select(x == 0, 1 // 0, x)``).

    @contextmanager
    def _local(self, cond: E.PrimExpr) -> Iterator[None]:
        self._bases.append(self.an._save())
        try:
            with self.an._assume(cond):
                yield
        finally:
            self._bases.pop()

    def _visit_divisor(self, e: E.PrimExpr, visit: Optional[Callable[[E.PrimExpr], E.PrimExpr]] = None) -> E.PrimExpr:
        """``visit(e)`` (default: this simplifier) without the local assumptions."""
        visit = self.visit if visit is None else visit
        if not self._bases:
            return visit(e)
        here, bases = self.an._save(), self._bases
        self.an._restore(bases[0])
        self._bases = []
        try:
            return visit(e)
        finally:
            self._bases = bases
            self.an._restore(here)

    # -- per node kind -------------------------------------------------------
    def _binary(self, e: E.BinaryOp) -> E.PrimExpr:
        a = self.visit(e.a)
        if isinstance(e, E.And) and not isinstance(a, E.IntImm):
            with self._local(a):
                b = self.visit(e.b)
        elif isinstance(e, E.Or) and not isinstance(a, E.IntImm):
            with self._local(self.negate(a)):
                b = self.visit(e.b)
        elif isinstance(e, _DIVISIONS):
            b = self._visit_divisor(e.b)
        else:
            b = self.visit(e.b)
        node = e if a is e.a and b is e.b else type(e)(a, b)
        return self._post(node)

    def _not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        return self._post(e if a is e.a else E.Not(a))

    def _select(self, e: E.Select) -> E.PrimExpr:
        c = self.visit(e.condition)
        if isinstance(c, E.IntImm):
            return self.visit(e.true_value if c.value else e.false_value)
        with self._local(c):
            t = self.visit(e.true_value)
        with self._local(self.negate(c)):
            f = self.visit(e.false_value)
        return self._post(e.with_(condition=c, true_value=t, false_value=f))

    def _var(self, e: E.Var) -> E.PrimExpr:
        return self.an._subst.get(e, e)

    def _let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        if inlinable_let_value(value):
            return self.visit(substitute(e.body, {e.var: value}))
        with self.an._let_scope(e.var, value):
            body = self.visit(e.body)
        if not uses_var(body, e.var):
            return body
        return e.with_(value=value, body=body)

    def _leaf(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def _reduce(self, e: Reduce) -> E.PrimExpr:
        return simplify_reduce(e, self.an, self.visit)

    def _generic(self, e: E.PrimExpr) -> E.PrimExpr:
        return self._post(map_operands(e, self.visit))


_VISIT: dict[type, Callable[[RewriteSimplifier, Any], E.PrimExpr]] = {
    E.IntImm: RewriteSimplifier._leaf, E.FloatImm: RewriteSimplifier._leaf,
    E.StringImm: RewriteSimplifier._leaf,
    E.Var: RewriteSimplifier._var, E.SizeVar: RewriteSimplifier._var,
    E.Not: RewriteSimplifier._not, E.Select: RewriteSimplifier._select, E.Let: RewriteSimplifier._let,
    Reduce: RewriteSimplifier._reduce,
}
for _cls in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max,
             E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or):
    _VISIT[_cls] = RewriteSimplifier._binary
