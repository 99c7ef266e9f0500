"""``InjectVirtualThread``: expand ``virtual_thread`` regions into interleaved code.

A region ``AttrStmt(iv, "virtual_thread", n, body)`` means: run ``body`` once for
each ``iv.var`` in ``range(n)``, the copies being independent.  As in classic
TVM, the loop over the virtual thread is pushed down to the innermost
statements that depend on it, so independent work of the virtual threads is
interleaved (instruction-level parallelism on one real thread):

- a variable is *touched* when it depends on ``iv.var``: a let whose value uses
  a touched variable, a buffer stored to with a touched index or value;
- an ``Allocate`` inside the region whose buffer is touched gets a new leading
  dimension of ``n`` (one copy per virtual thread), every access indexed with
  ``iv.var`` first; a ``tvm_access_ptr`` into it (``B.access_ptr(...)``) moves by
  one copy per thread, and passing its bare address to a call is an error (the
  callee would see thread 0's copy);
- a statement that uses a touched variable is replaced by its ``n`` copies
  (unrolled when it holds no loop and ``n < 16``, else a serial loop over a new
  ``<var>.s``); a loop or condition whose bounds are touched is copied whole;
- statements that do not depend on the virtual thread run once.  For
  ``vthread`` IterVars that is the point (their work is shared); a store that
  reads its own buffer, or a call with side effects, is not idempotent and is
  copied anyway.  Other thread tags (``cthread``) share nothing.

>>> import loom
>>> from loom.ir import AttrStmt, BufferStore, IterVar, PrimFunc
>>> A = loom.decl_buffer((2,), "int32", name="A")
>>> vt = IterVar(None, loom.var("vt"), "thread_index", "vthread")
>>> f = PrimFunc([A.data], AttrStmt(vt, "virtual_thread", 2, BufferStore(A, vt.var, [vt.var])), buffer_map={A.data: A})
>>> print(InjectVirtualThread()(f).body)
A[0] = 0
A[1] = 1
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr_ops import const
from ..ir.functor import Mutator, Visitor, collect, substitute
from ..ir.op import Op
from ._util import body_pass, const_int, renew_defs
from ._util2 import add_leading_dim
from .pass_base import Pass

__all__ = ["InjectVirtualThread", "inject_virtual_thread"]

#: Fewer virtual threads than this, around loop-free code, are unrolled.
UNROLL_LIMIT = 16


class _Uses(Visitor):
    """The ids of every Var an expression mentions (buffer data vars of loads included)."""

    def __init__(self) -> None:
        self.ids: set[int] = set()

    def visit_Var(self, v: E.Var) -> None:
        self.ids.add(id(v))


def _uses(*nodes: Any) -> set[int]:
    u = _Uses()
    for n in nodes:
        u.visit(n)
    return u.ids


def touched_vars(body: S.Stmt, var: E.Var) -> set[int]:
    """Ids of the variables (lets, buffer data) whose value depends on ``var``."""
    edges: list[tuple[int, set[int]]] = []

    class _Edges(Visitor):
        def visit_LetStmt(self, s: S.LetStmt) -> None:
            edges.append((id(s.var), _uses(s.value)))
            self.generic_visit(s)

        def visit_Let(self, e: E.Let) -> None:
            edges.append((id(e.var), _uses(e.value)))
            self.generic_visit(e)

        def visit_BufferStore(self, s: S.BufferStore) -> None:
            edges.append((id(s.buffer.data), _uses(s.value, *s.indices)))
            self.generic_visit(s)

    _Edges().visit(body)
    touched = {id(var)}
    changed = True
    while changed:
        changed = False
        for dst, srcs in edges:
            if dst not in touched and srcs & touched:
                touched.add(dst)
                changed = True
    return touched


def _impure_call(e: Any) -> bool:
    return isinstance(e, E.Call) and (not isinstance(e.op, Op) or not e.op.info.pure)


class _Injector(Mutator):
    """Rewrites one region's body (see the module docstring)."""

    def __init__(self, var: E.Var, n: int, touched: set[int], allow_share: bool, expand: set[int]) -> None:
        self.var, self.n, self.touched, self.allow_share, self.expand = var, n, touched, allow_share, expand
        self.seen = False  # a touched variable was used since the last injection
        self.trigger = False  # a statement must be copied although it uses nothing touched
        self.injected = False  # inside a statement already being copied
        self.buffers: dict[int, Any] = {}
        self.extents: dict[int, tuple[E.PrimExpr, ...]] = {}

    # -- dispatch: every statement may become the injection point ------------------
    def visit(self, node: Any) -> Any:
        out = super().visit(node)
        if isinstance(node, S.Stmt) and (self.seen or self.trigger):
            if not self.injected:
                return self._inject(out, before_mutation=False)
            self.seen = self.trigger = False
        return out

    def _inject(self, stmt: S.Stmt, before_mutation: bool) -> S.Stmt:
        self.seen = self.trigger = False
        self.injected = True
        if before_mutation:
            stmt = super().visit(stmt)
        self.injected = False
        self.seen = self.trigger = False
        has_loop = bool(collect(stmt, lambda x: isinstance(x, (S.For, S.While))))
        if not has_loop and self.n < UNROLL_LIMIT:
            return S.seq(*(renew_defs(stmt, {self.var: const(k, self.var.dtype)}) for k in range(self.n)))
        idx = E.Var(f"{self.var.name}.s", self.var.dtype)
        return S.For(idx, const(0, idx.dtype), const(self.n, idx.dtype), "serial", substitute(stmt, {self.var: idx}))

    def _header(self, s: S.Stmt, *fields: str) -> tuple[dict[str, Any], bool]:
        """Mutate a statement's header fields; also say whether they use the virtual thread."""
        new = {}
        for f in fields:
            old = getattr(s, f)
            new[f] = tuple(self.visit(x) for x in old) if isinstance(old, tuple) else self.visit(old)
        return new, self.seen and not self.injected

    # -- expressions ----------------------------------------------------------
    def visit_Var(self, v: E.Var) -> E.Var:
        if id(v) in self.touched:
            self.seen = True
        return v

    def _buffer(self, buf: Any) -> Any:
        if id(buf.data) in self.touched:
            self.seen = True
        if id(buf.data) not in self.expand:
            return buf
        new = self.buffers.get(id(buf))
        if new is None:
            new = self.buffers[id(buf)] = add_leading_dim(buf, self.n, self.extents[id(buf.data)])
        return new

    def _indices(self, buf: Any, old: Any, indices: tuple[E.PrimExpr, ...]) -> tuple[E.PrimExpr, ...]:
        if buf is old:
            return indices
        t = buf.shape[0].dtype
        return (self.var if self.var.dtype == t else E.Cast(t, self.var), *indices)

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        indices = tuple(self.visit(i) for i in e.indices)
        buf = self._buffer(e.buffer)
        if buf is e.buffer and all(a is b for a, b in zip(indices, e.indices)):
            return e
        return E.BufferLoad(buf, self._indices(buf, e.buffer, indices))

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        out = self.generic_visit(e)
        if isinstance(e.op, Op) and e.op.name == "tir.tvm_access_ptr":
            data = e.args[1]
            if isinstance(data, E.Var) and id(data) in self.expand:
                return self._shift_access_ptr(out, data)
            return out
        for a in e.args:
            if isinstance(a, E.Var) and id(a) in self.expand:
                name = getattr(e.op, "name", e.op)
                raise LoomValueError(f"virtual thread {self.var.name}: the address of {a.name}, of which each virtual "
                                     f"thread has its own copy, is passed to {name}; pass {a.name}.access_ptr(...) "
                                     "or address_of(...) instead, which point into the thread's copy")
        return out

    def _shift_access_ptr(self, call: E.Call, data: E.Var) -> E.PrimExpr:
        """``tvm_access_ptr`` into the virtual thread's copy: the offset moves by one copy per thread."""
        self.seen = True
        annotation, _, offset, extent, mask = call.args
        span: E.PrimExpr = const(1, offset.dtype)
        for x in self.extents[id(data)]:
            span = span * (x if x.dtype == offset.dtype else E.Cast(offset.dtype, x))
        lanes = annotation.dtype.lanes
        if lanes > 1:  # offsets count elements of the annotation's (vector) type
            span = E.FloorDiv(span, const(lanes, offset.dtype))
        thread = self.var if self.var.dtype == offset.dtype else E.Cast(offset.dtype, self.var)
        return E.Call(call.dtype, call.op, [annotation, data, offset + thread * span, extent, mask])

    # -- statements -----------------------------------------------------------
    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        value = self.visit(s.value)
        indices = tuple(self.visit(i) for i in s.indices)
        buf = self._buffer(s.buffer)
        own_read = any(x.buffer.data is s.buffer.data for x in collect(s.value, lambda x: isinstance(x, E.BufferLoad)))
        self.trigger |= not self.allow_share or own_read or bool(collect(s.value, _impure_call))
        if buf is s.buffer and value is s.value and all(a is b for a, b in zip(indices, s.indices)):
            return s
        return S.BufferStore(buf, value, self._indices(buf, s.buffer, indices))

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        out = self.generic_visit(s)
        self.trigger |= not self.allow_share or bool(collect(s.value, _impure_call))
        return out

    def _wrapper(self, s: S.For | S.While | S.LetStmt | S.AssertStmt | S.AttrStmt, *fields: str) -> S.Stmt:
        """A statement with a header and one body: copied whole when the header is touched."""
        new, touched = self._header(s, *fields)
        if touched:
            return self._inject(s, before_mutation=True)
        return s.with_(**new, body=self.visit(s.body))

    def visit_For(self, s: S.For) -> S.Stmt:
        return self._wrapper(s, "min", "extent")

    def visit_While(self, s: S.While) -> S.Stmt:
        return self._wrapper(s, "condition")

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        return self._wrapper(s, "value")

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        return self._wrapper(s, "condition", "message")

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        return self._wrapper(s, "value")

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        new, touched = self._header(s, "condition")
        if touched:
            return self._inject(s, before_mutation=True)
        other = self.visit(s.else_case) if s.else_case is not None else None
        return s.with_(**new, then_case=self.visit(s.then_case), else_case=other)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        new, touched = self._header(s, "extents", "condition")
        if touched:
            return self._inject(s, before_mutation=True)
        if id(s.buffer_var) in self.expand:
            self.extents[id(s.buffer_var)] = new["extents"]
            new["extents"] = (const(self.n, s.extents[0].dtype if s.extents else "int32"), *new["extents"])
        return s.with_(**new, body=self.visit(s.body))


class _Regions(Mutator):
    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)  # inner regions first
        if s.attr_key != "virtual_thread" or not isinstance(s.node, E.IterVar):
            return s.with_(body=body)
        iv = s.node
        n = const_int(s.value)
        if n is None or n < 1:
            raise LoomValueError(f"virtual thread {iv.var.name}: the extent must be a positive constant, got {s.value}")
        touched = touched_vars(body, iv.var)
        allocs = {id(a.buffer_var) for a in collect(body, lambda x: isinstance(x, S.Allocate))}
        injector = _Injector(iv.var, n, touched, iv.thread_tag.startswith("vthread"), touched & allocs)
        return injector.visit(body)


def inject_virtual_thread(stmt: S.Stmt) -> S.Stmt:
    """Expand every ``virtual_thread`` region of ``stmt`` (see the module docstring)."""
    return _Regions().visit(stmt)


def InjectVirtualThread() -> Pass:  # noqa: N802 - classic factory name
    """The pass: :func:`inject_virtual_thread` on every PrimFunc's body."""
    return body_pass("InjectVirtualThread", lambda body, ctx: inject_virtual_thread(body))
