"""Simplify every expression of a statement, using what the statement implies.

Inside ``for i in range(lo, lo + n)`` the analyzer knows ``lo <= i < lo + n``;
inside ``if c`` it knows ``c`` (and ``not c`` in the ``else``); inside an
allocation of the function's memory, that each extent is not negative; a ``let``
variable has the bounds of its value; a thread axis (``thread_extent``
attribute) ranges over ``[0, extent)``.  An ``if`` whose condition becomes a
constant is replaced by the branch that runs.  A ``let`` bound to a constant or
to a (non-handle) variable is substituted into its body and dropped, as TVM's
Simplify did, unless a declaration (a buffer's shape, an IterVar's range)
names its variable: declarations keep their identity, so the let stays.

>>> import loom
>>> from loom.ir import For, IfThenElse, BufferStore
>>> A = loom.decl_buffer((16,), "int32", name="A")
>>> i = loom.var("i")
>>> loop = For(i, 0, 16, "serial", IfThenElse(i < 16, BufferStore(A, i // 16, [i])))
>>> print(loom.arith.simplify(loop))
for i in range(16):
    A[i] = 0
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import LoomTypeError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.function import IRModule, PrimFunc
from ..ir.functor import Mutator, collect, substitute
from ._exprkey import uses_var
from .analyzer import Analyzer
from .canonical import inlinable_let_value

__all__ = ["simplify", "StmtSimplifier"]

_THREAD_ATTRS = ("thread_extent", "virtual_thread")


class StmtSimplifier(Mutator):
    """A mutator that simplifies expressions under the facts of their context."""

    def __init__(self, analyzer: Optional[Analyzer] = None, inline_unit_loops: bool = False) -> None:
        self.an = analyzer if analyzer is not None else Analyzer()
        # Replace a serial/unrolled loop of one iteration by its body (the Simplify pass).
        self.inline_unit_loops = inline_unit_loops

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return self.an.simplify(e)

    def visit_Buffer(self, b: Any) -> Any:
        return b  # buffers are declarations: their identity must survive

    def visit_For(self, s: S.For) -> S.Stmt:
        mn, ext = self.an.simplify(s.min), self.an.simplify(s.extent)
        if self.inline_unit_loops and _is_unit_loop(s, ext):
            return self.visit(substitute(s.body, {s.loop_var: mn}))
        with self.an._range_scope(s.loop_var, mn, ext):
            body = self.visit(s.body)
        return s.with_(min=mn, extent=ext, body=body)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.an.simplify(s.value)
        if inlinable_let_value(value) and not _declares_with(s.body, s.var):
            return self.visit(substitute(s.body, {s.var: value}))
        with self.an._let_scope(s.var, value):
            body = self.visit(s.body)
        return s.with_(value=value, body=body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        value = self.visit(s.value)
        iv = s.node
        if s.attr_key in _THREAD_ATTRS and isinstance(iv, E.IterVar) and value.dtype == iv.var.dtype:
            with self.an._range_scope(iv.var, E.IntImm(iv.var.dtype, 0), value):
                body = self.visit(s.body)
        else:
            body = self.visit(s.body)
        return s.with_(value=value, body=body)

    def visit_IfThenElse(self, s: S.IfThenElse) -> Optional[S.Stmt]:
        cond = self.an.simplify(s.condition)
        if isinstance(cond, E.IntImm):
            taken = s.then_case if cond.value else s.else_case
            return self.visit(taken) if taken is not None else S.no_op()
        with self.an._assume(cond):
            then_case = self.visit(s.then_case)
        else_case = s.else_case
        if else_case is not None:
            with self.an._assume(self.an._rewrite.negate(cond)):
                else_case = self.visit(else_case)
        return s.with_(condition=cond, then_case=then_case, else_case=else_case)

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        cond = self.an.simplify(s.condition)
        with self.an._assume(cond):
            body = self.visit(s.body)
        return s.with_(condition=cond, body=body)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        extents = tuple(self.an.simplify(x) for x in s.extents)
        cond = self.an.simplify(s.condition)
        # Memory of the function's own (not a kernel's shared or local): every backend fails
        # on a negative extent before the body runs, as the interpreter raises, so the body
        # may take each extent to be non-negative (``n + 1 >= 0``: n + 1 does not wrap).
        facts = [ops.ge(x, ops.const(0, x.dtype)) for x in extents
                 if not isinstance(x, E.IntImm) and x.dtype.is_int and x.dtype.lanes == 1]
        if facts and s.scope in ("global", "") and isinstance(cond, E.IntImm) and cond.value:
            with self.an._assume(self.an.simplify(ops.all(*facts))):
                body = self.visit(s.body)
        else:
            body = self.visit(s.body)
        return s.with_(extents=extents, condition=cond, body=body)

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        stmts = [self.visit(x) for x in s.seq]
        if all(a is b for a, b in zip(stmts, s.seq)):
            return s
        return S.seq(*stmts)


def _declares_with(body: S.Stmt, var: E.Var) -> bool:
    """True when ``var`` occurs in a declaration (a Buffer, an IterVar: nodes with their own
    identity, which a substitution would copy) or is the node of an attribute in ``body``."""
    def names_var(n: Any) -> bool:
        if isinstance(n, S.AttrStmt):
            return n.node is var
        return type(n).binding_identity and not isinstance(n, E.Var) and uses_var(n, var)
    return bool(collect(body, names_var))


def _is_unit_loop(s: S.For, ext: E.PrimExpr) -> bool:
    # Parallel, vectorized and thread-bound loops say how the body runs, and
    # annotations (pragmas, pipelining) name the loop: those loops stay.
    return (isinstance(ext, E.IntImm) and ext.value == 1 and not s.annotations
            and s.kind in (S.ForKind.SERIAL, S.ForKind.UNROLLED))


def simplify(node: Any, analyzer: Optional[Analyzer] = None) -> Any:
    """Simplify an expression, a statement, a PrimFunc or every PrimFunc of an IRModule.

    Integer arithmetic is put in canonical form and rewritten with bounds
    from loops, lets and conditions; floats only have their constants folded.

    >>> import loom
    >>> x, y = loom.var("x"), loom.var("y")
    >>> str(loom.arith.simplify((x + y) - x))
    'y'
    """
    an = analyzer if analyzer is not None else Analyzer()
    if isinstance(node, (int, float, bool, E.PrimExpr)):
        return an.simplify(node)
    if isinstance(node, S.Stmt):
        return StmtSimplifier(an).visit(node)
    if isinstance(node, PrimFunc):
        return node.with_body(StmtSimplifier(an).visit(node.body))
    if isinstance(node, IRModule):
        return node.with_(functions={k: simplify(f, an) if isinstance(f, PrimFunc) else f
                                     for k, f in node.functions.items()})
    raise LoomTypeError(f"simplify expects a PrimExpr, Stmt, PrimFunc or IRModule, got {type(node).__name__}")
