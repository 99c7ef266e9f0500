"""Small helpers shared by the lowering passes."""

from __future__ import annotations

from typing import Any, Callable, Iterable, TypeGuard

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.function import PrimFunc
from ..ir.functor import Mutator, Visitor
from ..ir.op import Op
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["body_pass", "const_int", "uses_vars", "renew_defs", "is_op_call", "has_side_effect", "is_no_op"]


def body_pass(name: str, rewrite: Callable[[S.Stmt, PassContext], S.Stmt], opt_level: int = 0) -> Pass:
    """A PrimFunc pass applying ``rewrite(body, ctx)``; the function is kept when nothing changed."""

    def run(func: PrimFunc, mod: Any, ctx: PassContext) -> PrimFunc:
        body = rewrite(func.body, ctx)
        return func if body is func.body else func.with_body(body)

    return prim_func_pass(run, opt_level=opt_level, name=name)


def const_int(e: Any) -> int | None:
    """The value of an integer constant expression, else None."""
    return e.value if isinstance(e, E.IntImm) else None


def is_op_call(e: Any, name: str) -> TypeGuard[E.Call]:
    """Whether ``e`` is a Call of the intrinsic ``name`` (``"tir.likely"``)."""
    return isinstance(e, E.Call) and isinstance(e.op, Op) and e.op.name == name


def is_no_op(s: S.Stmt | None) -> bool:
    """Whether ``s`` does nothing: None, an Evaluate of a constant, an empty sequence."""
    if s is None:
        return True
    if isinstance(s, S.Evaluate):
        return isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm))
    return isinstance(s, S.SeqStmt) and all(is_no_op(x) for x in s.seq)


def _impure(node: Any) -> bool:
    if not isinstance(node, E.Call):
        return False
    return not isinstance(node.op, Op) or not node.op.info.pure  # global calls may do anything


def has_side_effect(e: Any) -> bool:
    """Whether evaluating ``e`` may do more than read memory (an impure or global call)."""
    from ..ir.functor import collect

    return bool(collect(e, _impure))


class _UsesVars(Visitor):
    class Found(Exception):
        pass

    def __init__(self, pred: Callable[[E.Var], bool]) -> None:
        self.pred = pred

    def visit_Var(self, v: E.Var) -> None:
        if self.pred(v):
            raise self.Found

    def visit_Buffer(self, b: Any) -> None:
        self.visit(b.data)  # shapes and strides are not uses inside the body


def uses_vars(node: Any, variables: Iterable[E.Var] | Callable[[E.Var], bool]) -> bool:
    """Whether ``node`` mentions any of ``variables`` (by identity) or any Var satisfying a predicate."""
    if callable(variables):
        pred = variables
    else:
        ids = {id(v) for v in variables}
        if not ids:
            return False
        pred = lambda v: id(v) in ids  # noqa: E731
    try:
        _UsesVars(pred).visit(node)
    except _UsesVars.Found:
        return True
    return False


class _RenewDefs(Mutator):
    """Give every variable bound inside a statement a fresh Var (loops, lets, allocations).

    Copying a statement (unrolling, loop partitioning) must not bind one Var at
    two sites: the verifier's SSA rule.  Buffers whose data var is renewed are
    rebuilt once per copy by the Mutator's identity memo.
    """

    def __init__(self, vmap: dict[E.Var, E.PrimExpr]) -> None:
        self.vmap = dict(vmap)

    def _fresh(self, v: E.Var) -> E.Var:
        new = type(v)(v.name, v.dtype)
        self.vmap[v] = new
        return new

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.vmap.get(v, v)

    def visit_For(self, s: S.For) -> S.Stmt:
        mn, ext = self.visit(s.min), self.visit(s.extent)
        var = self._fresh(s.loop_var)
        return s.with_(loop_var=var, min=mn, extent=ext, body=self.visit(s.body))

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.visit(s.value)
        var = self._fresh(s.var)
        return s.with_(var=var, value=value, body=self.visit(s.body))

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        var = self._fresh(e.var)
        return E.Let(var, value, self.visit(e.body))

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        extents = tuple(self.visit(x) for x in s.extents)
        cond = self.visit(s.condition)
        var = self._fresh(s.buffer_var)
        return s.with_(buffer_var=var, extents=extents, condition=cond, body=self.visit(s.body))


def renew_defs(stmt: S.Stmt, vmap: dict[E.Var, E.PrimExpr] | None = None) -> S.Stmt:
    """A copy of ``stmt`` with ``vmap`` substituted and every bound variable replaced by a fresh one."""
    return _RenewDefs(vmap or {}).visit(stmt)
