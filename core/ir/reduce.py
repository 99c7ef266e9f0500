"""Reductions: ``CommReducer`` (a commutative combiner with identities) and ``Reduce``.

A ``Reduce`` expression only appears as the body of a compute operation; the
schedule lowers it to an accumulator loop.

>>> import loom
>>> from loom.ir.reduce import CommReducer
>>> x, y = loom.var("x", "float32"), loom.var("y", "float32")
>>> add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
>>> str(add([loom.const(1.0)], [loom.const(2.0)])[0])
'1.0 + 2.0'
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from ..errors import IRError
from .dtype import DataType
from . import expr as E
from .functor import substitute
from .printer import ATOM, register_expr_printer, register_node_printer
from .node import Node, TupleOf, child, children, register_object
from .node import value as val

__all__ = ["CommReducer", "Reduce"]


@register_object("tir.CommReducer")
class CommReducer(Node):
    """``result(lhs, rhs)`` combines two partial values; ``identity_element`` starts them.

    Several lanes (``lhs``/``rhs`` of length k) make a k-tuple reduction such as argmax.
    """

    lhs: TupleOf[E.Var] = children(E.Var, binds=True)
    rhs: TupleOf[E.Var] = children(E.Var, binds=True)
    result: TupleOf[E.PrimExpr] = children(E.PrimExpr)
    identity_element: TupleOf[E.PrimExpr] = children(E.PrimExpr)

    def __attrs_post_init__(self) -> None:
        n = len(self.lhs)
        if not (len(self.rhs) == len(self.result) == len(self.identity_element) == n) or n == 0:
            raise IRError("CommReducer needs lhs, rhs, result and identity_element of one non-zero length")
        for k in range(n):
            if not (self.lhs[k].dtype == self.rhs[k].dtype == self.result[k].dtype == self.identity_element[k].dtype):
                raise IRError(f"CommReducer element {k}: lhs, rhs, result and identity dtypes differ")

    def __call__(self, a: Sequence[Any], b: Sequence[Any]) -> tuple[E.PrimExpr, ...]:
        """Combine two tuples of values."""
        vmap = {**dict(zip(self.lhs, a)), **dict(zip(self.rhs, b))}
        return tuple(substitute(r, vmap) for r in self.result)


@register_object("tir.Reduce")
class Reduce(E.PrimExpr):
    """Reduce ``source`` over the ``axis`` IterVars with ``combiner`` where ``condition`` holds.

    ``value_index`` picks which element of a tuple reduction this expression is.
    """

    combiner: CommReducer = child(CommReducer)
    source: TupleOf[E.PrimExpr] = children(E.PrimExpr)
    axis: TupleOf[E.IterVar] = children(E.IterVar, binds=True)  # defines its axes, as a For its loop variable
    condition: E.PrimExpr = child(E.PrimExpr)
    value_index: int = val(int, default=0)
    init: TupleOf[E.PrimExpr] = children(E.PrimExpr, default=())
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if len(self.source) != len(self.combiner.lhs):
            raise IRError(f"Reduce has {len(self.source)} sources for a {len(self.combiner.lhs)}-element combiner")
        if not 0 <= self.value_index < len(self.source):
            raise IRError(f"Reduce value_index {self.value_index} out of range")
        if not self.condition.dtype.is_bool:
            raise IRError(f"Reduce condition must be bool, got {self.condition.dtype}")
        if self.init and len(self.init) != len(self.source):
            raise IRError("Reduce init must have one value per source")
        object.__setattr__(self, "dtype", self.source[self.value_index].dtype)


def _reducer_text(p: Any, c: CommReducer) -> str:
    lhs, rhs = ", ".join(p.expr(v) for v in c.lhs), ", ".join(p.expr(v) for v in c.rhs)
    result = ", ".join(p.expr(r) for r in c.result)
    ident = ", ".join(p.expr(r) for r in c.identity_element)
    return f"comm_reducer(lambda {lhs}, {rhs}: ({result}), identity=({ident}))"


def _reduce_text(p: Any, e: Reduce) -> tuple[str, int]:
    src = ", ".join(p.expr(s) for s in e.source)
    axes = ", ".join(p.expr(iv.var) for iv in e.axis)
    where = "" if isinstance(e.condition, E.IntImm) and e.condition.value == 1 else f", where={p.expr(e.condition)}"
    index = f"[{e.value_index}]" if len(e.source) > 1 else ""
    return f"{_reducer_text(p, e.combiner)}({src}, axis=[{axes}]{where}){index}", ATOM


register_expr_printer(Reduce, _reduce_text)
register_node_printer(CommReducer, _reducer_text)
