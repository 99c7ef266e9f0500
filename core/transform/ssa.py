"""Static single assignment on statements and expressions: check it, restore it, and ask what uses a variable.

Every pass may assume that no variable is bound at two binding sites (``For``
loops, ``LetStmt``/``Let``, ``Allocate``; :func:`loom.verify_well_formed` checks
it on whole functions).  IR written by hand, or pasted together from copies,
can break the rule; :func:`convert_ssa` gives each repeated binding site a
fresh variable, leaving the first one as it was.  (A thread variable bound by
the ``thread_extent`` of two sibling kernels is allowed, and left alone.)

>>> import loom
>>> from loom.ir import Evaluate, Let
>>> x, y = loom.var("x"), loom.var("y")
>>> twice = Evaluate(Let(x, 1, x + 1) + Let(x, 2, x + y))
>>> verify_ssa(twice)
False
>>> fixed = convert_ssa(twice)
>>> verify_ssa(fixed), uses_var(fixed, y), uses_var(fixed.value.b, x)
(True, True, False)
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Mutator, Visitor
from ._util import renew_defs, uses_vars

__all__ = ["verify_ssa", "convert_ssa", "uses_var"]


def _bound_var(node: Any) -> E.Var | None:
    if isinstance(node, S.For):
        return node.loop_var
    if isinstance(node, (S.LetStmt, E.Let)):
        return node.var
    if isinstance(node, S.Allocate):
        return node.buffer_var
    return None


class _Sites(Visitor):
    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.repeated = False

    def _site(self, node: Any) -> None:
        var = _bound_var(node)
        self.repeated |= id(var) in self.seen
        self.seen.add(id(var))
        self.generic_visit(node)

    visit_For = visit_LetStmt = visit_Let = visit_Allocate = _site


def verify_ssa(node: Any) -> bool:
    """Whether no variable of ``node`` (a statement or an expression) is bound at two sites
    (TVM's ``ir_pass.VerifySSA``)."""
    sites = _Sites()
    sites.visit(node)
    return not sites.repeated


class _ConvertSSA(Mutator):
    def __init__(self) -> None:
        self.seen: set[int] = set()

    def _site(self, node: Any) -> Any:
        var = _bound_var(node)
        if id(var) in self.seen:
            return renew_defs(node)  # fresh variables for this site and every site inside it
        self.seen.add(id(var))
        return self.generic_visit(node)

    visit_For = visit_LetStmt = visit_Let = visit_Allocate = _site


def convert_ssa(node: Any) -> Any:
    """``node`` with a fresh variable at every binding site that rebinds an already bound one
    (TVM's ``ir_pass.ConvertSSA``); the same object when it already is in SSA form."""
    return _ConvertSSA().visit(node)


def uses_var(node: Any, var: E.Var) -> bool:
    """Whether ``node`` uses ``var`` (TVM's ``ir_pass.ExprUseVar``); a buffer's data variable counts,
    its shape and strides do not."""
    return uses_vars(node, [var])
