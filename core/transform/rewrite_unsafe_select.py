"""``RewriteUnsafeSelect``: selects whose branches read memory become ``if_then_else``.

``select(c, a, b)`` may evaluate both sides; when a side loads from a buffer
(``A[i - 1]`` under ``i > 0``), the untaken side could read out of bounds.
``tir.if_then_else`` evaluates only the taken side, so such selects are
rewritten to it.  Selects over arithmetic stay (they vectorize better).

>>> import loom
>>> A = loom.decl_buffer((8,), "int32", name="A")
>>> i = loom.var("i")
>>> str(rewrite_unsafe_select(loom.select(i > 0, A[i - 1], 0)))
'if_then_else(i > 0, A[i - 1], 0)'
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir.functor import Mutator, collect
from ..ir.op import Op
from ._util import body_pass, has_side_effect
from .pass_base import Pass

__all__ = ["RewriteUnsafeSelect", "rewrite_unsafe_select"]


def _unsafe(e: E.PrimExpr) -> bool:
    return bool(collect(e, lambda n: isinstance(n, E.BufferLoad))) or has_side_effect(e)


class _Rewriter(Mutator):
    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        cond, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if _unsafe(t) or _unsafe(f):
            return E.Call(t.dtype, Op.get("tir.if_then_else"), [cond, t, f])
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)


def rewrite_unsafe_select(node: Any) -> Any:
    """``node`` (an expression or statement) with unsafe selects rewritten."""
    return _Rewriter().visit(node)


def RewriteUnsafeSelect() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The unsafe-select rewriting pass (see the module docstring)."""
    return body_pass("RewriteUnsafeSelect", lambda body, ctx: rewrite_unsafe_select(body))
