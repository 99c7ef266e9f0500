"""``RemoveNoOp``: delete statements that have no effect.

Removed: evaluations of constants and of side-effect-free expressions, loops
whose body does nothing or whose extent is provably zero, ``if`` statements
with empty branches, attributes, lets and allocations around nothing, and
stores of a value into the place it was just read from (``A[i] = A[i]``).
An assertion of the constant True is replaced by its body; other assertions
stay (their failure is an effect), and so do ``while`` loops (they may not
terminate).

>>> import loom
>>> from loom.ir import For, Evaluate, PrimFunc
>>> i = loom.var("i")
>>> f = PrimFunc([], For(i, 0, 4, "serial", Evaluate(loom.const(0))))
>>> print(RemoveNoOp()(f).body)
pass
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Mutator
from ..ir.structural import structural_equal
from ._util import body_pass, const_int, has_side_effect, is_no_op
from .pass_base import Pass

__all__ = ["RemoveNoOp", "remove_no_op"]


def _effect_of(*exprs: E.PrimExpr) -> S.Stmt:
    """What must survive of statements whose only remaining work is evaluating ``exprs``."""
    kept = [S.Evaluate(e) for e in exprs if has_side_effect(e)]
    return S.seq(*kept)


class _RemoveNoOp(Mutator):
    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e  # statements only

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        return s if has_side_effect(s.value) or is_no_op(s) else S.no_op()

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        v = s.value
        if isinstance(v, E.BufferLoad) and v.buffer is s.buffer and structural_equal(v.indices, s.indices):
            return S.no_op()  # x = x
        return s

    def visit_For(self, s: S.For) -> S.Stmt:
        ext = const_int(s.extent)
        if ext is not None and ext <= 0:
            return _effect_of(s.min, s.extent)
        body = self.visit(s.body)
        if is_no_op(body):
            return _effect_of(s.min, s.extent)
        return s if body is s.body else s.with_(body=body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        then_case = self.visit(s.then_case)
        else_case = self.visit(s.else_case) if s.else_case is not None else None
        if is_no_op(else_case):
            else_case = None
        if is_no_op(then_case):
            if else_case is None:
                return _effect_of(s.condition)
            return S.IfThenElse(E.Not(s.condition), else_case, None)
        if then_case is s.then_case and else_case is s.else_case:
            return s
        return s.with_(then_case=then_case, else_case=else_case)

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        body = self.visit(s.body)
        cond = const_int(s.condition)
        if cond is not None and cond != 0:
            return body  # cannot fail
        return s if body is s.body else s.with_(body=body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return _effect_of(s.value)
        return s if body is s.body else s.with_(body=body)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return _effect_of(s.value)
        return s if body is s.body else s.with_(body=body)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        if is_no_op(body):
            return _effect_of(*s.extents)
        return s if body is s.body else s.with_(body=body)

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        stmts = [self.visit(x) for x in s.seq]
        kept = [x for x in stmts if not is_no_op(x)]
        if len(kept) == len(s.seq) and all(a is b for a, b in zip(kept, s.seq)):
            return s
        return S.seq(*kept)


def remove_no_op(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` without the statements that do nothing (see the module docstring)."""
    return _RemoveNoOp().visit(stmt)


def RemoveNoOp() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The no-op removal pass (see the module docstring)."""
    return body_pass("RemoveNoOp", lambda body, ctx: remove_no_op(body))


