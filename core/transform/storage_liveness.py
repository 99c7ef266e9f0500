"""When each allocation of one attach scope is live, for :mod:`loom.transform.storage_rewrite`.

The scope's body is walked in execution order and cut into *units*: a loop, a
conditional, a store, an evaluation, a nested attach scope, and the header of
a let, assert, attribute or allocation each form one.  Units nest (a store
inside a loop is a unit inside the loop's unit) and every unit has a begin and
an end on one clock, so two units are either disjoint or one holds the other.

A touch of an allocation counts for the unit that holds it at the allocation's
own *level*: the unit directly inside the block the ``Allocate`` stands in.  A
buffer allocated at the top of the scope and used inside a loop is therefore
live for the whole loop (the loop runs its body many times); a buffer
allocated inside a loop's body is only live from its first to its last use in
that body, since each iteration starts it afresh.  So two buffers allocated in
one loop body and used in two sibling inner loops can share memory, as can
two buffers in the two branches of a conditional.

>>> import loom
>>> from loom.ir import Allocate, BufferStore, For, seq
>>> T1 = loom.decl_buffer((4,), "float32", name="T1"); T2 = loom.decl_buffer((4,), "float32", name="T2")
>>> i, j, k = loom.var("i"), loom.var("j"), loom.var("k")
>>> body = For(i, 0, 8, "serial", seq(
...     Allocate(T1.data, "float32", [4], True, For(j, 0, 4, "serial", BufferStore(T1, 1.0, [j]))),
...     Allocate(T2.data, "float32", [4], True, For(k, 0, 4, "serial", BufferStore(T2, 2.0, [k])))))
>>> live = Liveness.of(body)
>>> [(c.alloc.buffer_var.name, c.level, c.first.begin, c.last.end) for c in live]
[('T1', 1, 3, 6), ('T2', 1, 9, 12)]
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import attrs

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Visitor, collect
from ._util2 import const_product, extent_product, free_vars, is_thread_attr
from .split_devices import DEVICE_SCOPE

__all__ = ["Unit", "Candidate", "Liveness", "OWN_MEMORY_LOOPS", "opens_scope"]

#: Loops whose iterations each need memory of their own: they are attach scopes.
OWN_MEMORY_LOOPS = ("parallel", "vectorized", "thread_binding")


def opens_scope(s: Any) -> bool:
    """Whether ``s`` opens an attach scope (its body is planned on its own)."""
    return is_thread_attr(s) or (isinstance(s, S.For) and s.kind.value in OWN_MEMORY_LOOPS)


@attrs.define(eq=False)
class Unit:
    """One unit of execution: ``stmt`` (None for a header) between ``begin`` and ``end`` on the clock."""

    begin: int
    stmt: Optional[S.Stmt]
    end: int = -1


@attrs.define(eq=False)
class Candidate:
    """An allocation the planner may move and share: its size in elements (an int, or an
    expression of the scope's free variables) and the units of its first and last use."""

    alloc: S.Allocate
    size: Union[int, E.PrimExpr]
    level: int
    first: Optional[Unit] = None
    last: Optional[Unit] = None
    escapes: bool = False
    home: Optional[str] = None  # in a heterogeneous program, the device scope of its first use (where it lives)

    @property
    def used(self) -> bool:
        return self.first is not None

    def dead_before(self, unit: Unit) -> bool:
        """Whether this candidate's last use ends before ``unit`` begins."""
        return self.last is not None and self.last.end < unit.begin


class Liveness(Visitor):
    """Collects one scope's candidates and the units of their first and last uses.

    A candidate is an ``Allocate`` of this scope (not inside a nested attach
    scope) with a true condition and a size that is a constant, or, for an
    allocation that runs exactly once per entry of the scope (not inside a
    loop or conditional), an expression of variables free at the scope's top.
    """

    def __init__(self, scope_free: set[int]) -> None:
        self.cands: dict[int, Candidate] = {}
        self.unsafe: set[int] = set()  # allocated twice, or shadowed
        self.chain: list[Unit] = []  # the open units, outermost first
        self.clock = 0
        self.nested = 0  # depth inside nested attach scopes (planned on their own)
        self.scope_free = scope_free
        self.device: Optional[str] = None  # the enclosing "loom.device_scope", if any

    @staticmethod
    def of(body: S.Stmt) -> list[Candidate]:
        """The candidates of the scope whose body is ``body``."""
        live = Liveness({id(v) for v in free_vars(body)})
        live.visit(body)
        return [c for k, c in live.cands.items() if k not in live.unsafe]

    # -- units ----------------------------------------------------------------
    def _unit(self, stmt: Optional[S.Stmt], fn: Callable[[], Any]) -> None:
        u = Unit(self.clock, stmt)
        self.clock += 1
        self.chain.append(u)
        fn()
        self.chain.pop()
        u.end = self.clock
        self.clock += 1

    def _header_then_body(self, headers: tuple[Any, ...], body: S.Stmt) -> None:
        self._unit(None, lambda: [self.visit(h) for h in headers])
        self.visit(body)

    def generic_visit(self, node: Any) -> None:
        if isinstance(node, S.Stmt):
            self._unit(node, lambda: Visitor.generic_visit(self, node))
        else:
            Visitor.generic_visit(self, node)

    def _nested(self, s: S.Stmt) -> None:
        self.nested += 1
        Visitor.generic_visit(self, s)
        self.nested -= 1

    # -- touches --------------------------------------------------------------
    def _touch(self, var: E.Var, escape: bool) -> None:
        c = self.cands.get(id(var))
        if c is None:
            return
        if len(self.chain) <= c.level:  # not inside the allocation's body: be safe
            c.escapes = True
            return
        unit = self.chain[c.level]
        if c.first is None:
            c.first, c.home = unit, self.device
        c.last = unit
        c.escapes |= escape

    def visit_Var(self, v: E.Var) -> None:
        self._touch(v, escape=True)

    def visit_Buffer(self, b: Any) -> None:
        self._touch(b.data, escape=False)
        for e in (*b.shape, *b.strides, b.elem_offset):
            self.visit(e)

    # -- statements -------------------------------------------------------------
    def visit_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.visit(x)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if is_thread_attr(s):
            self._unit(s, lambda: self._nested(s))
            return
        if isinstance(s.node, E.Var):
            self._unit(None, lambda: self._touch(s.node, escape=False))
        if s.attr_key != DEVICE_SCOPE:
            self._header_then_body((s.value,), s.body)
            return
        outer, self.device = self.device, str(s.node)
        self._header_then_body((s.value,), s.body)
        self.device = outer

    def visit_For(self, s: S.For) -> None:
        self._unit(s, lambda: self._nested(s) if opens_scope(s) else Visitor.generic_visit(self, s))

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self._header_then_body((s.value,), s.body)

    def visit_AssertStmt(self, s: S.AssertStmt) -> None:
        self._header_then_body((s.condition, s.message), s.body)

    def visit_Allocate(self, s: S.Allocate) -> None:
        key = id(s.buffer_var)
        if key in self.cands or key in self.unsafe:
            self.cands.pop(key, None)
            self.unsafe.add(key)
        elif not self.nested and isinstance(s.condition, E.IntImm) and s.condition.value:
            size = self._size(s)
            if size is not None:
                self.cands[key] = Candidate(s, size, len(self.chain))
        self._header_then_body((*s.extents, s.condition), s.body)

    def _size(self, s: S.Allocate) -> Union[int, E.PrimExpr, None]:
        size = const_product(s.extents)
        if size is not None:
            return size
        # A symbolic size moves to the scope's top only from where it runs exactly once
        # (moving it out of a loop or a branch could allocate a size the program never asks for).
        used = [v for e in s.extents for v in collect(e, lambda n: isinstance(n, E.Var))]
        if self.chain or not all(id(v) in self.scope_free for v in used):
            return None
        return Analyzer().simplify(extent_product(s.extents))
