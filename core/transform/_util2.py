"""Helpers shared by the memory and device passes (virtual threads, double buffers,
storage rewrite, API making, host/device split, thread sync)."""

from __future__ import annotations

from typing import Any, Iterable, TypeGuard

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.buffer import Buffer
from ..ir.expr_ops import const
from ..ir.functor import Visitor

__all__ = [
    "THREAD_ATTRS", "is_thread_attr", "free_vars", "const_product", "extent_product", "add_leading_dim",
]

#: AttrStmt keys whose IterVar node binds its var over ``range(value)`` in the body.
THREAD_ATTRS = ("thread_extent", "virtual_thread")


def is_thread_attr(s: Any, keys: Iterable[str] = THREAD_ATTRS) -> TypeGuard[S.AttrStmt]:
    """Whether ``s`` is an AttrStmt binding an IterVar's var (a thread or virtual thread)."""
    return isinstance(s, S.AttrStmt) and s.attr_key in keys and isinstance(s.node, E.IterVar)


class _FreeVars(Visitor):
    """Variables used but not bound, in order of first use.

    Binding sites: For, LetStmt, Let, Allocate and thread AttrStmts.  A buffer's
    shape, strides and elem_offset count as uses (code indexing the buffer needs
    them); AttrStmt nodes other than thread IterVars are annotations, not uses.
    """

    def __init__(self) -> None:
        self.bound: dict[int, int] = {}
        self.found: dict[int, E.Var] = {}

    def _scoped(self, var: E.Var, body: Any) -> None:
        self.bound[id(var)] = self.bound.get(id(var), 0) + 1
        self.visit(body)
        self.bound[id(var)] -= 1

    def visit_Var(self, v: E.Var) -> None:
        if not self.bound.get(id(v)) and id(v) not in self.found:
            self.found[id(v)] = v

    def visit_For(self, s: S.For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        self._scoped(s.loop_var, s.body)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self.visit(s.value)
        self._scoped(s.var, s.body)

    def visit_Let(self, e: E.Let) -> None:
        self.visit(e.value)
        self._scoped(e.var, e.body)

    def visit_Allocate(self, s: S.Allocate) -> None:
        for x in s.extents:
            self.visit(x)
        self.visit(s.condition)
        self._scoped(s.buffer_var, s.body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        self.visit(s.value)
        if is_thread_attr(s):
            self._scoped(s.node.var, s.body)
        else:
            self.visit(s.body)


def free_vars(node: Any) -> list[E.Var]:
    """The variables ``node`` uses without binding them, in order of first use.

    >>> import loom
    >>> from loom.ir import For, BufferStore
    >>> n, i = loom.var("n"), loom.var("i")
    >>> A = loom.decl_buffer((n,), "float32", name="A")
    >>> [v.name for v in free_vars(For(i, 0, n, "serial", BufferStore(A, A[i], [i])))]
    ['n', 'A']
    """
    fv = _FreeVars()
    fv.visit(node)
    return list(fv.found.values())


def const_product(extents: Iterable[Any]) -> int | None:
    """The product of constant integer extents, else None."""
    out = 1
    for e in extents:
        if not isinstance(e, E.IntImm):
            return None
        out *= e.value
    return out


def extent_product(extents: Iterable[E.PrimExpr]) -> E.PrimExpr:
    """The product of ``extents`` as an int64 expression (an element count that cannot wrap in int32)."""
    out: E.PrimExpr = const(1, "int64")
    for e in extents:
        out = out * (e if e.dtype == "int64" else E.Cast("int64", e))
    return out


def add_leading_dim(buf: Buffer, n: int, alloc_extents: tuple[E.PrimExpr, ...]) -> Buffer:
    """``buf`` with a new outermost dimension of ``n`` copies of its allocation.

    Copy ``k`` starts ``k * prod(alloc_extents)`` elements into the memory.  A
    compact buffer that spans its whole allocation stays compact; otherwise the
    new dimension gets an explicit stride.
    """
    idx_t = buf.shape[0].dtype if buf.shape else "int32"
    size_alloc = const_product(alloc_extents)
    size_buf = const_product(buf.shape)
    if buf.is_compact and size_alloc is not None and size_alloc == size_buf:
        return buf.with_(shape=(const(n, idx_t), *buf.shape))
    span: E.PrimExpr = const(1, idx_t)
    for e in alloc_extents:
        span = span * (e if e.dtype == span.dtype else E.Cast(span.dtype, e))
    return buf.with_(shape=(const(n, idx_t), *buf.shape), strides=(span, *buf.effective_strides()))
