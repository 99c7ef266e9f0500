"""``InjectDoubleBuffer``: overlap producing the next iteration's data with using this one's.

``AttrStmt(node=B_data, "double_buffer_scope", 1, producer)`` inside a loop
``for i`` marks ``producer`` as filling buffer ``B`` for iteration ``i``.  The
pass (classic TVM semantics):

- doubles ``B``'s allocation (a new leading dimension of 2), hoisting the
  Allocate out of the loop when it was inside;
- runs the producer for the first iteration before the loop (the prologue);
- in iteration ``i`` produces iteration ``i + 1`` into half ``(i + 1) % 2``
  (guarded by ``i + 1 < extent``) while the rest of the body reads half ``i % 2``.

With ``tir.double_buffer_split_loop = k > 0`` the loop is split by ``k`` and the
inner ``k`` iterations unrolled, so the halves become constants and the guard
disappears from the main loop; a guarded tail runs the last iterations.

A scope is left as plain code (the attribute dropped) when double buffering
would not be sound: no enclosing serial loop, the producer under a condition or
let inside the loop, the buffer used outside the loop, or an allocation whose
size depends on the loop.

>>> import loom
>>> from loom.ir import Allocate, AttrStmt, BufferStore, For, PrimFunc, seq
>>> A = loom.decl_buffer((4,), "float32", name="A"); C = loom.decl_buffer((4,), "float32", name="C")
>>> B = loom.decl_buffer((1,), "float32", name="B", scope="shared")
>>> i = loom.var("i")
>>> body = Allocate(B.data, "float32", [1], True, seq(
...     AttrStmt(B.data, "double_buffer_scope", 1, BufferStore(B, A[i], [0])), BufferStore(C, B[0], [i])), "shared")
>>> f = PrimFunc([A.data, C.data], For(i, 0, 4, "serial", body), buffer_map={A.data: A, C.data: C})
>>> print(InjectDoubleBuffer(split_loop=0)(f).body)
B = allocate([2, 1], 'float32', 'shared')
B[0, 0] = A[0]
for i in range(4):
    if i + 1 < 4:
        B[(i + 1) % 2, 0] = A[i + 1]
    C[i] = B[i % 2, 0]
"""

from __future__ import annotations

from typing import Any

import attrs

from ..arith import simplify
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.expr_ops import const, floormod, truncdiv
from ..ir.functor import Mutator, Visitor, collect, substitute
from ._util import const_int, is_no_op, renew_defs, uses_vars
from ._util2 import add_leading_dim
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["InjectDoubleBuffer", "inject_double_buffer"]

_KEY = "double_buffer_scope"
_LOOP_KINDS = ("serial", "unrolled")


@attrs.define
class _Entry:
    loop: S.For
    hoist: bool  # the Allocate sits inside the loop and moves out of it
    switch: E.Var  # the half written by the producer (substituted per copy)
    extents: tuple[E.PrimExpr, ...] = ()


class _Detect(Visitor):
    """Finds the double-buffered variables whose transformation is sound."""

    def __init__(self) -> None:
        self.loops: list[S.For] = []
        self.clean = True  # nothing but Seq/Allocate/Attr between the innermost loop and here
        self.allocs: dict[int, list[tuple[S.Allocate, tuple[S.For, ...]]]] = {}
        self.scopes: dict[int, list[tuple[tuple[S.For, ...], bool]]] = {}
        self.access: dict[int, list[tuple[S.For, ...]]] = {}

    def _dirty(self, visit_rest: Any) -> None:
        saved, self.clean = self.clean, False
        visit_rest()
        self.clean = saved

    def visit_For(self, s: S.For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        saved, self.clean = self.clean, True
        self.loops.append(s)
        self.visit(s.body)
        self.loops.pop()
        self.clean = saved

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        self._dirty(lambda: self.generic_visit(s))

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self._dirty(lambda: self.generic_visit(s))

    def visit_AssertStmt(self, s: S.AssertStmt) -> None:
        self._dirty(lambda: self.generic_visit(s))

    def visit_While(self, s: S.While) -> None:
        self._dirty(lambda: self.generic_visit(s))

    def visit_Allocate(self, s: S.Allocate) -> None:
        self.allocs.setdefault(id(s.buffer_var), []).append((s, tuple(self.loops)))
        for x in (*s.extents, s.condition, s.body):  # not buffer_var: its binding is no access
            self.visit(x)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key == _KEY and isinstance(s.node, E.Var):
            self.scopes.setdefault(id(s.node), []).append((tuple(self.loops), self.clean))
            self.visit(s.body)
        else:
            self.generic_visit(s)

    def visit_Var(self, v: E.Var) -> None:
        self.access.setdefault(id(v), []).append(tuple(self.loops))

    def eligible(self) -> dict[int, _Entry]:
        out: dict[int, _Entry] = {}
        for key, scopes in self.scopes.items():
            allocs = self.allocs.get(key, [])
            if len(scopes) != 1 or len(allocs) != 1:
                continue
            loops, clean = scopes[0]
            if not loops or not clean or loops[-1].kind.value not in _LOOP_KINDS:
                continue
            loop = loops[-1]
            alloc, alloc_loops = allocs[0]
            if any(loop not in where for where in self.access.get(key, [])):
                continue  # used outside the loop: which half would it read?
            hoist = loop in alloc_loops
            if hoist and uses_vars(alloc.extents + (alloc.condition,), _bound_inside(loop)):
                continue
            out[key] = _Entry(loop, hoist, E.Var(f"{loop.loop_var.name}.db", loop.loop_var.dtype))
        return out


_BINDERS = {S.For: "loop_var", S.LetStmt: "var", E.Let: "var", S.Allocate: "buffer_var"}


def _bound_inside(loop: S.For) -> list[E.Var]:
    """The loop var and every variable bound in the loop's body."""
    inner = collect(loop.body, lambda x: type(x) in _BINDERS)
    return [loop.loop_var, *(getattr(x, _BINDERS[type(x)]) for x in inner)]


class _Rewrite(Mutator):
    def __init__(self, entries: dict[int, _Entry], split: int) -> None:
        self.entries, self.split = entries, split
        self.producing: set[int] = set()
        self.prologue: dict[int, list[S.Stmt]] = {}
        self.hoisted: dict[int, list[S.Allocate]] = {}
        self.buffers: dict[int, Any] = {}

    def _access(self, buf: Any, indices: tuple[E.PrimExpr, ...], write: bool) -> tuple[Any, tuple[E.PrimExpr, ...]]:
        entry = self.entries.get(id(buf.data))
        if entry is None:
            return buf, indices
        new = self.buffers.get(id(buf))
        if new is None:
            new = self.buffers[id(buf)] = add_leading_dim(buf, 2, entry.extents)
        if write or id(buf.data) in self.producing:
            half: E.PrimExpr = entry.switch
        else:
            loop = entry.loop
            half = floormod(loop.loop_var - loop.min, const(2, loop.loop_var.dtype))
        t = new.shape[0].dtype
        return new, (half if half.dtype == t else E.Cast(t, half), *indices)

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        indices = tuple(self.visit(i) for i in e.indices)
        buf, indices = self._access(e.buffer, indices, False)
        return e if buf is e.buffer and all(a is b for a, b in zip(indices, e.indices)) else E.BufferLoad(buf, indices)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        value = self.visit(s.value)
        indices = tuple(self.visit(i) for i in s.indices)
        buf, indices = self._access(s.buffer, indices, True)
        if buf is s.buffer and value is s.value and all(a is b for a, b in zip(indices, s.indices)):
            return s
        return S.BufferStore(buf, value, indices)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        entry = self.entries.get(id(s.buffer_var))
        if entry is None:
            return self.generic_visit(s)
        entry.extents = s.extents
        body = self.visit(s.body)
        extents = (const(2, s.extents[0].dtype if s.extents else "int32"), *s.extents)
        if entry.hoist:
            self.hoisted.setdefault(id(entry.loop), []).append(s.with_(extents=extents, body=S.no_op()))
            return body
        return s.with_(extents=extents, body=body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.attr_key != _KEY:
            return self.generic_visit(s)
        entry = self.entries.get(id(s.node))
        if entry is None:
            return self.visit(s.body)  # not double-buffered: plain code
        self.producing.add(id(s.node))
        body = self.visit(s.body)
        self.producing.discard(id(s.node))
        loop = entry.loop
        i, t = loop.loop_var, loop.loop_var.dtype
        self.prologue.setdefault(id(loop), []).append(renew_defs(body, {i: loop.min, entry.switch: const(0, t)}))
        nxt = i + const(1, t)
        ahead = substitute(body, {i: nxt, entry.switch: floormod(nxt - loop.min, const(2, t))})
        return S.IfThenElse(nxt < loop.min + loop.extent, ahead)

    def visit_For(self, s: S.For) -> S.Stmt:
        out = self.generic_visit(s)
        pre = self.prologue.pop(id(s), None)
        if pre is not None:
            first = S.seq(*pre)
            if not (const_int(s.extent) or 0) > 0:
                first = S.IfThenElse(s.extent > const(0, s.extent.dtype), first)
            out = S.seq(first, _split(out, self.split) if self.split > 0 else out)
        for alloc in reversed(self.hoisted.pop(id(s), [])):
            out = alloc.with_(body=out)
        return out


def _split(loop: S.For, k: int) -> S.Stmt:
    """``loop`` as a loop over blocks of ``k`` unrolled iterations plus a guarded tail."""
    i, t = loop.loop_var, loop.loop_var.dtype
    kc = const(k, t)
    outer_ext = simplify(truncdiv(loop.extent - const(1, t), kc))
    outer = E.Var(f"{i.name}.outer", t)
    main = S.For(outer, const(0, t), outer_ext, loop.kind,
                 S.seq(*(renew_defs(loop.body, {i: loop.min + outer * kc + const(j, t)}) for j in range(k))))
    base = outer_ext * kc
    tail = [S.IfThenElse(base + const(j, t) < loop.extent, renew_defs(loop.body, {i: loop.min + base + const(j, t)}))
            for j in range(k)]
    parts = [simplify(x) for x in (main, *tail)]
    return S.seq(*(x for x in parts if not is_no_op(x)))


def inject_double_buffer(stmt: S.Stmt, split_loop: int = 2) -> S.Stmt:
    """Apply double buffering to every sound ``double_buffer_scope`` in ``stmt``."""
    detect = _Detect()
    detect.visit(stmt)
    return _Rewrite(detect.eligible(), split_loop).visit(stmt)


def InjectDoubleBuffer(split_loop: int | None = None) -> Pass:  # noqa: N802 - classic factory name
    """The pass; ``split_loop`` defaults to ``tir.double_buffer_split_loop`` at run time."""

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        k = split_loop if split_loop is not None else ctx.get_config("tir.double_buffer_split_loop")
        if k < 0:
            raise LoomValueError(f"double_buffer_split_loop must be >= 0, got {k}")
        body = inject_double_buffer(func.body, k)
        return func if body is func.body else func.with_body(body)

    return prim_func_pass(run, name="InjectDoubleBuffer")
