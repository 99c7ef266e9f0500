"""``StorageRewrite``: hoist fixed-size allocations and let dead ones' memory be reused.

The work happens per *attach scope*: the function body, the body of a thread
(``thread_extent``/``virtual_thread``) region, and the body of a parallel,
vectorized or thread-bound loop (each iteration or thread needs memory of its
own, so nothing crosses those boundaries).  Inside one scope:

1. every ``Allocate`` of constant size and a true condition is a candidate;
2. the scope is cut into *units* in execution order: a loop, a conditional, a
   store, a nested scope each count as one unit (a buffer used anywhere inside a
   loop is live for the whole loop); a let's or an assert's header is a unit;
3. a candidate lives from the first to the last unit that touches it.  A
   candidate whose pointer escapes (used other than by loads, stores and
   annotations, e.g. passed to a call or bound by a let) never shares;
4. candidates are visited by first use; one reuses the memory of an earlier
   candidate of the same dtype and storage scope whose life ended before it
   begins (the best fitting one), taking over its data var; the memory grows to
   the largest occupant;
5. candidates are removed where they stood and allocated at the top of the
   scope, which also hoists them out of serial loops.

Reused memory starts with its previous occupant's values instead of garbage; a
correct program never reads memory it has not written, so results do not change.

>>> import loom
>>> from loom.ir import Allocate, BufferStore, PrimFunc, seq
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> T1 = loom.decl_buffer((4,), "float32", name="T1"); T2 = loom.decl_buffer((4,), "float32", name="T2")
>>> body = seq(Allocate(T1.data, "float32", [4], True, seq(BufferStore(T1, A[0], [0]), BufferStore(A, T1[0], [1]))),
...            Allocate(T2.data, "float32", [4], True, seq(BufferStore(T2, A[1], [0]), BufferStore(A, T2[0], [2]))))
>>> out = StorageRewrite()(PrimFunc([A.data], body, buffer_map={A.data: A})).body
>>> print(out)  # buffer T2 now lives in T1's memory
T1 = allocate([4], 'float32', 'global')
T1[0] = A[0]
A[1] = T1[0]
T2[0] = A[1]
A[2] = T2[0]
>>> out.body[2].buffer.data is out.buffer_var
True
"""

from __future__ import annotations

from typing import Any

import attrs

from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr_ops import const
from ..ir.functor import Mutator, Visitor
from ._util import body_pass
from ._util2 import const_product, is_thread_attr
from .pass_base import Pass

__all__ = ["StorageRewrite", "storage_rewrite"]

_OWN_MEMORY_LOOPS = ("parallel", "vectorized", "thread_binding")


def _is_scope(s: Any) -> bool:
    """Whether ``s`` opens an attach scope (its body is planned on its own)."""
    return is_thread_attr(s) or (isinstance(s, S.For) and s.kind.value in _OWN_MEMORY_LOOPS)


@attrs.define
class _Candidate:
    alloc: S.Allocate
    size: int
    first: int = -1
    last: int = -1
    escapes: bool = False


@attrs.define
class _Storage:
    var: E.Var
    members: list[_Candidate]
    size: int
    free_after: int


class _Liveness(Visitor):
    """Collects one scope's candidates and the units that touch them."""

    def __init__(self) -> None:
        self.cands: dict[int, _Candidate] = {}
        self.unsafe: set[int] = set()  # allocated twice, or shadowed
        self.counter = 0
        self.unit: int | None = None  # the unit being visited (None: between units)
        self.nested = 0  # depth inside nested attach scopes (planned on their own)

    # -- touches --------------------------------------------------------------
    def _touch(self, var: E.Var, escape: bool) -> None:
        c = self.cands.get(id(var))
        if c is not None and self.unit is not None:
            c.first = self.unit if c.first < 0 else c.first
            c.last = max(c.last, self.unit)
            c.escapes |= escape

    def visit_Var(self, v: E.Var) -> None:
        self._touch(v, escape=True)

    def visit_Buffer(self, b: Any) -> None:
        self._touch(b.data, escape=False)
        for e in (*b.shape, *b.strides, b.elem_offset):
            self.visit(e)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if isinstance(s.node, E.Var):
            self._in_unit(lambda: self._touch(s.node, escape=False))
        if is_thread_attr(s):
            self._in_unit(lambda: self._nested(s))
        else:
            self._header_then_body((s.value,), s.body)

    def visit_For(self, s: S.For) -> None:
        self._in_unit(lambda: self._nested(s) if _is_scope(s) else Visitor.generic_visit(self, s))

    def _nested(self, s: S.Stmt) -> None:
        self.nested += 1
        Visitor.generic_visit(self, s)
        self.nested -= 1

    # -- units ----------------------------------------------------------------
    def _in_unit(self, fn: Any) -> None:
        if self.unit is not None:
            fn()
            return
        self.unit = self.counter
        self.counter += 1
        fn()
        self.unit = None

    def generic_visit(self, node: Any) -> None:
        if isinstance(node, S.Stmt) and self.unit is None:
            self._in_unit(lambda: Visitor.generic_visit(self, node))
        else:
            Visitor.generic_visit(self, node)

    def visit_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.visit(x)

    def _header_then_body(self, headers: tuple[Any, ...], body: S.Stmt) -> None:
        if self.unit is not None:
            for h in headers:
                self.visit(h)
            self.visit(body)
            return
        self._in_unit(lambda: [self.visit(h) for h in headers])
        self.visit(body)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self._header_then_body((s.value,), s.body)

    def visit_AssertStmt(self, s: S.AssertStmt) -> None:
        self._header_then_body((s.condition, s.message), s.body)

    def visit_Allocate(self, s: S.Allocate) -> None:
        key = id(s.buffer_var)
        if key in self.cands or key in self.unsafe:
            self.cands.pop(key, None)
            self.unsafe.add(key)
        else:
            size = const_product(s.extents)
            if not self.nested and size is not None and isinstance(s.condition, E.IntImm) and s.condition.value:
                self.cands[key] = _Candidate(s, size)
        self._header_then_body((*s.extents, s.condition), s.body)


def _plan(cands: list[_Candidate]) -> list[_Storage]:
    storages: list[_Storage] = []
    for c in sorted(cands, key=lambda c: (c.first, c.last)):
        best = None
        if not c.escapes and c.first >= 0:
            for st in storages:
                m = st.members[0].alloc
                if (m.dtype != c.alloc.dtype or m.scope != c.alloc.scope or st.free_after < 0
                        or st.free_after >= c.first or any(x.escapes for x in st.members)):
                    continue
                if best is None or _fit(st, c) < _fit(best, c):
                    best = st
        if best is None:
            storages.append(_Storage(c.alloc.buffer_var, [c], c.size, c.last))
        else:
            best.members.append(c)
            best.size = max(best.size, c.size)
            best.free_after = c.last
    return storages


def _fit(st: _Storage, c: _Candidate) -> tuple[int, int]:
    """Prefer storage already big enough (the smallest such), else the biggest."""
    return (0, st.size) if st.size >= c.size else (1, -st.size)


class _Remove(Mutator):
    """Drops the planned Allocates (their bodies stay) and renames merged data vars."""

    def __init__(self, removed: set[int], vmap: dict[E.Var, E.Var]) -> None:
        self.removed, self.vmap = removed, vmap

    def visit_Var(self, v: E.Var) -> E.Var:
        return self.vmap.get(v, v)

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        parts = [self.visit(x) for x in s.seq]
        return s if all(a is b for a, b in zip(parts, s.seq)) else S.seq(*parts)  # flattens freed bodies

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        if id(s) in self.removed:
            return self.visit(s.body)
        return self.generic_visit(s)


def _rewrite_scope(body: S.Stmt) -> S.Stmt:
    live = _Liveness()
    live.visit(body)
    cands = [c for k, c in live.cands.items() if k not in live.unsafe]
    if not cands:
        return body
    storages = _plan(cands)
    vmap = {c.alloc.buffer_var: st.var for st in storages for c in st.members if c.alloc.buffer_var is not st.var}
    out = _Remove({id(c.alloc) for c in cands}, vmap).visit(body)
    for st in reversed(storages):
        first = st.members[0].alloc
        extents = first.extents if len(st.members) == 1 else (const(st.size, "int32"),)
        out = S.Allocate(st.var, first.dtype, extents, first.condition, out, first.scope, first.annotations)
    return out


class _Scopes(Mutator):
    """Plans nested scopes first, then hands each scope body to :func:`_rewrite_scope`."""

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        out = self.generic_visit(s)
        return out.with_(body=_rewrite_scope(out.body)) if is_thread_attr(out) else out

    def visit_For(self, s: S.For) -> S.Stmt:
        out = self.generic_visit(s)
        return out.with_(body=_rewrite_scope(out.body)) if _is_scope(out) else out


def storage_rewrite(stmt: S.Stmt) -> S.Stmt:
    """Hoist and share the allocations of ``stmt`` (see the module docstring)."""
    return _rewrite_scope(_Scopes().visit(stmt))


def StorageRewrite() -> Pass:  # noqa: N802 - classic factory name
    """The pass: :func:`storage_rewrite` on every PrimFunc's body."""
    return body_pass("StorageRewrite", lambda body, ctx: storage_rewrite(body))
