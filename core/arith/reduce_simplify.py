"""Simplifying a ``Reduce`` expression with what its axes and condition imply.

A reduction evaluates its sources once per point of its axes' domains where
its condition holds, combining each into an accumulator that starts at
``init`` (or the combiner's identity).  So:

- inside the sources and the condition, each axis variable lies in its range;
- the sources are only evaluated where the condition holds (they may assume it);
- a condition that is always false leaves the starting value;
- no axes means one point: the result is ``combine(start, source)``;
- tuple elements the requested one does not depend on are dropped, unless
  their sources call something with side effects.

>>> import loom
>>> k = loom.reduce_axis((0, 10), "k")
>>> A = loom.placeholder((10,), name="A", dtype="int32")
>>> e = loom.sum(loom.select(k < 12, A[k], 0), axis=k)
>>> str(loom.arith.Analyzer().canonical_simplify(e)) == str(loom.sum(A[k], axis=k))
True
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Callable

from ..ir import expr as E
from ..ir.functor import collect
from ..ir.op import Op
from ..ir.reduce import CommReducer, Reduce
from ._exprkey import uses_var

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["simplify_reduce"]


def simplify_reduce(e: Reduce, an: Analyzer, visit: Callable[[E.PrimExpr], E.PrimExpr]) -> E.PrimExpr:
    """``e`` with its parts simplified by ``visit`` under the facts above (see the module docstring)."""
    with ExitStack() as stack:
        for iv in e.axis:
            dom = iv.dom
            if dom is not None:
                stack.enter_context(an._range_scope(iv.var, an.simplify(dom.min), an.simplify(dom.extent)))
        cond = visit(e.condition)
        if isinstance(cond, E.IntImm) and not cond.value:
            start = e.init if e.init else e.combiner.identity_element
            return visit(start[e.value_index])
        if not isinstance(cond, E.IntImm):
            stack.enter_context(an._assume(cond))
        source = tuple(visit(s) for s in e.source)
    init = tuple(visit(v) for v in e.init)
    combiner = _simplify_combiner(e.combiner, visit)
    if not e.axis and isinstance(cond, E.IntImm):  # one point, always combined
        start = init if init else combiner.identity_element
        return visit(combiner(start, source)[e.value_index])
    keep = _needed(combiner, e.value_index, source)
    if len(keep) < len(source):
        pick = lambda xs: tuple(xs[i] for i in keep)  # noqa: E731
        combiner = CommReducer(pick(combiner.lhs), pick(combiner.rhs), pick(combiner.result),
                               pick(combiner.identity_element))
        source, init = pick(source), pick(init) if init else ()
        return Reduce(combiner, source, e.axis, cond, keep.index(e.value_index), init)
    same = cond is e.condition and combiner is e.combiner and all(p is q for p, q in zip(source, e.source)) \
        and all(p is q for p, q in zip(init, e.init))
    return e if same else Reduce(combiner, source, e.axis, cond, e.value_index, init)


def _simplify_combiner(c: CommReducer, visit: Callable[[E.PrimExpr], E.PrimExpr]) -> CommReducer:
    result = tuple(visit(r) for r in c.result)
    ident = tuple(visit(v) for v in c.identity_element)
    if all(p is q for p, q in zip(result, c.result)) and all(p is q for p, q in zip(ident, c.identity_element)):
        return c
    return CommReducer(c.lhs, c.rhs, result, ident)


def _needed(c: CommReducer, index: int, source: tuple[E.PrimExpr, ...]) -> list[int]:
    """The tuple elements element ``index`` depends on, and those with side effects (sorted)."""
    n = len(source)
    need = {index} | {i for i in range(n) if _has_side_effects(source[i])}
    todo = list(need)
    while todo:
        i = todo.pop()
        for j in range(n):
            if j not in need and (uses_var(c.result[i], c.lhs[j]) or uses_var(c.result[i], c.rhs[j])):
                need.add(j)
                todo.append(j)
    return sorted(need)


def _has_side_effects(e: E.PrimExpr) -> bool:
    calls = collect(e, lambda n: isinstance(n, E.Call))
    return any(not (isinstance(call.op, Op) and call.op.info.pure) for call in calls)

