"""``ThreadSync``: insert memory barriers between threads that communicate through memory.

In device code (the body of a device kernel, or of an outermost
``thread_extent`` region) a barrier
``Evaluate(Call(int32, tir.tvm_storage_sync, ["shared"]))`` is placed before a
statement that reads a buffer of the scope that an earlier statement wrote
since the last barrier (read after write), or writes one that was read (write
after read).  The planner is classic TVM's, conservative: two accesses of one
buffer conflict unless both have the very same index expressions and those
use every thread index of the kernel (each thread touching an element of its
own; an element every thread reads, such as a value thread 0 stored for the
block, does conflict); around a loop, the end of an iteration conflicts with
the start of the next whatever the indices.

Sequences are planned innermost first; a statement with barriers inside
exposes only its accesses before its first barrier and after its last.  A
barrier is never put under a condition that depends on a thread index (not
every thread would reach it): that is an error.

``ThreadSync("global")`` does the same for global memory between thread blocks
when ``tir.detect_global_barrier`` is on, inserting ``"global"`` barriers.

>>> import loom
>>> from loom.ir import Allocate, AttrStmt, BufferStore, IterVar, PrimFunc, seq
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> S_ = loom.decl_buffer((4,), "float32", name="S", scope="shared")
>>> tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
>>> body = AttrStmt(tx, "thread_extent", 4, Allocate(S_.data, "float32", [4], True, seq(
...     BufferStore(S_, A[tx.var], [tx.var]), BufferStore(A, S_[3 - tx.var], [tx.var])), "shared"))
>>> print(ThreadSync("shared")(PrimFunc([A.data], body, buffer_map={A.data: A})).body)
with attr(iter_var(tx, None, 'thread_index', 'threadIdx.x'), 'thread_extent', 4):
    S = allocate([4], 'float32', 'shared')
    S[tx] = A[tx]
    tvm_storage_sync('shared', dtype='int32')
    A[tx] = S[3 - tx]
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from ..errors import LoomError, LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Visitor
from ..ir.op import Op, list_ops, register_op
from ..ir.structural import structural_equal
from ._util import is_op_call, uses_vars
from ._util2 import is_thread_attr
from .pass_base import Pass, PassContext, prim_func_pass

__all__ = ["ThreadSync", "thread_sync", "storage_sync"]

if "tir.tvm_storage_sync" not in list_ops():
    register_op("tir.tvm_storage_sync", -1, lambda *args: 0, pure=False,
                doc="a memory barrier among the threads sharing a storage scope (a no-op when run serially)")


def storage_sync(scope: str) -> S.Stmt:
    """The barrier statement for ``scope``."""
    return S.Evaluate(E.Call("int32", Op.get("tir.tvm_storage_sync"), [E.StringImm(scope)]))


@attrs.frozen
class _Access:
    var: E.Var
    indices: tuple[E.PrimExpr, ...] | None  # None: unknown (the pointer itself was used)
    write: bool
    #: ``(thread tag, value)`` of each thread index that conditions around the access pin
    #: (``if threadIdx.x == 0``): only that thread makes it.
    pins: frozenset[tuple[str, int]] = frozenset()


@attrs.frozen
class _Summary:
    """What a planned statement exposes: accesses before its first / after its last barrier."""

    head: tuple[_Access, ...] = ()
    tail: tuple[_Access, ...] = ()
    synced: bool = False


def _conflict(prev: list[_Access], acc: _Access, loop_carry: bool, varying: set[int] | None = None,
              threads: _Threads | None = None) -> bool:
    """Whether ``acc`` conflicts with an access in ``prev``.

    The very same index expressions, using (or made under a condition pinning to the same
    value on both sides) a variable of every thread tag that tells apart the threads
    sharing the buffer (``threads``), mean
    the same thread touching the same element, no conflict; across a loop's
    iterations only when the indices use no variable that changes from one
    iteration to the next (``varying``: None means any may).
    """
    for x in prev:
        if x.var is not acc.var or not (x.write or acc.write):  # two reads never conflict
            continue
        if x.indices is not None and acc.indices is not None and len(x.indices) == len(acc.indices) \
                and all(structural_equal(a, b) for a, b in zip(x.indices, acc.indices)) \
                and (threads is None or all(any(uses_vars(i, vs) for i in x.indices)
                                            or any(pin[0] == tag and pin in acc.pins for pin in x.pins)
                                            for tag, vs in threads.sharing(x.var))):
            if not loop_carry:
                continue
            if varying is not None and not any(uses_vars(i, lambda v: id(v) in varying) for i in x.indices):
                continue
        return True
    return False


def _bound_inside(s: S.Stmt) -> set[int]:
    """Ids of the variables bound inside ``s`` (loop and let variables): they may change every iteration."""
    out: set[int] = set()

    def visit(n: Any) -> None:
        if isinstance(n, S.For):
            out.add(id(n.loop_var))
        elif isinstance(n, (S.LetStmt, E.Let)):
            out.add(id(n.var))

    from ..ir.functor import post_order_visit

    post_order_visit(s, visit)
    return out


class _Accesses(Visitor):
    """The accesses of one expression or leaf statement to buffers of the scope, reads first."""

    def __init__(self, in_scope: Callable[[E.Var, str], bool]) -> None:
        self.in_scope = in_scope
        self.out: list[_Access] = []

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        for i in e.indices:
            self.visit(i)
        if self.in_scope(e.buffer.data, e.buffer.scope):
            self.out.append(_Access(e.buffer.data, e.indices, False))

    def visit_Buffer(self, b: Any) -> None:
        pass

    def visit_Var(self, v: E.Var) -> None:
        if v.dtype.is_handle and self.in_scope(v, ""):  # the raw pointer: anything may happen
            self.out += [_Access(v, None, False), _Access(v, None, True)]


class _Planner:
    def __init__(self, scope: str, scopes: dict[int, str], threads: _Threads | None = None) -> None:
        self.scope, self.scopes = scope, scopes
        self.threads = threads
        self.pins: list[tuple[str, int]] = []  # of the conditions around the statement being planned
        self.thread_vars: list[E.Var] = []
        self.inserted = 0

    def in_scope(self, var: E.Var, buf_scope: str) -> bool:
        found = self.scopes.get(id(var)) or buf_scope or "global"
        return found == self.scope

    def _leaf(self, *nodes: Any) -> list[_Access]:
        v = _Accesses(self.in_scope)
        for n in nodes:
            if n is not None:
                v.visit(n)
        if self.pins:
            pins = frozenset(self.pins)
            return [attrs.evolve(a, pins=pins) for a in v.out]
        return v.out

    # -- statements -------------------------------------------------------------
    def plan(self, s: S.Stmt, loop: bool = False, varying: set[int] | None = None) -> tuple[S.Stmt, _Summary]:
        items = list(s.seq) if isinstance(s, S.SeqStmt) else [s]
        planned = [self.stmt(x) for x in items]
        stmts, sums = [p[0] for p in planned], [p[1] for p in planned]
        before = self._linear(sums, loop, varying)
        out: list[S.Stmt] = []
        for k, st in enumerate(stmts):
            if before[k]:
                out.append(storage_sync(self.scope))
            out.append(st)
        new = s if not any(before) and all(a is b for a, b in zip(stmts, items)) else S.seq(*out)
        return new, _summarize(sums, before)

    def _linear(self, sums: list[_Summary], loop: bool, varying: set[int] | None = None) -> list[bool]:
        before = [False] * len(sums)
        reads: list[_Access] = []
        writes: list[_Access] = []
        for k, sm in enumerate(sums):
            if any(_conflict(writes if not a.write else reads, a, False, None, self.threads) for a in sm.head):
                before[k] = True
                reads, writes = [], []
            for a in (sm.tail if sm.synced else sm.head):
                (writes if a.write else reads).append(a)
            if sm.synced:
                reads = [a for a in sm.tail if not a.write]
                writes = [a for a in sm.tail if a.write]
        if loop and (reads or writes):
            for k, sm in enumerate(sums):  # the next iteration's start against this one's end
                if before[k]:
                    break
                if any(_conflict(writes if not a.write else reads, a, True, varying, self.threads) for a in sm.head):
                    before[k] = True
                    break
                if sm.synced:
                    break
        self.inserted += sum(before)
        return before

    def stmt(self, s: S.Stmt) -> tuple[S.Stmt, _Summary]:
        if isinstance(s, S.SeqStmt):
            return self.plan(s)
        if isinstance(s, S.Evaluate) and is_op_call(s.value, "tir.tvm_storage_sync") \
                and isinstance(s.value.args[0], E.StringImm) and s.value.args[0].value == self.scope:
            return s, _Summary(synced=True)
        if isinstance(s, (S.For, S.While)):
            is_for = isinstance(s, S.For)
            bounds: tuple[E.PrimExpr, ...] = (s.min, s.extent) if isinstance(s, S.For) else (s.condition,)
            header = self._leaf(*bounds)
            count = self.inserted
            varying = {id(s.loop_var)} | _bound_inside(s.body) if isinstance(s, S.For) else None
            body, sm = self.plan(s.body, loop=True, varying=varying)
            if self.inserted != count and any(uses_vars(b, self.thread_vars) for b in bounds):
                what = f"for {s.loop_var.name} in range({s.min}, {s.min} + {s.extent})" if isinstance(s, S.For) \
                    else f"while {s.condition}"
                raise LoomError(f"ThreadSync: a {self.scope} barrier is needed inside `{what}`, whose trip count "
                                "depends on a thread index, so not every thread would reach it as often")
            return s.with_(body=body), _prefix(header, sm, repeat=not is_for)
        if isinstance(s, S.IfThenElse):
            return self._if(s)
        if isinstance(s, (S.LetStmt, S.AssertStmt, S.AttrStmt, S.Allocate)):
            header = self._header(s)
            thread = s.node.var if is_thread_attr(s, ("thread_extent",)) else None
            if thread is not None:
                self.thread_vars.append(thread)
            body, sm = self.plan(s.body)
            if thread is not None:
                self.thread_vars.pop()
            return s.with_(body=body), _prefix(header, sm)
        if isinstance(s, S.BufferStore):
            accesses = self._leaf(s.value, *s.indices)
            if self.in_scope(s.buffer.data, s.buffer.scope):
                accesses.append(_Access(s.buffer.data, s.indices, True, frozenset(self.pins)))
        else:
            accesses = self._leaf(s)
        return s, _Summary(tuple(accesses), tuple(accesses))

    def _header(self, s: S.LetStmt | S.AssertStmt | S.AttrStmt | S.Allocate) -> list[_Access]:
        if isinstance(s, S.LetStmt):
            return self._leaf(s.value)
        if isinstance(s, S.AssertStmt):
            return self._leaf(s.condition)
        if isinstance(s, S.Allocate):
            return self._leaf(*s.extents, s.condition)
        return self._leaf(s.value)

    def _if(self, s: S.IfThenElse) -> tuple[S.Stmt, _Summary]:
        count = self.inserted
        tag_of = self.threads.tag_of if self.threads is not None else {}
        pinned = [(tag_of[v], c) for v, c in _pins(s.condition) if v in tag_of]
        self.pins += pinned
        try:
            then, st = self.plan(s.then_case)
        finally:
            del self.pins[len(self.pins) - len(pinned):]
        other, so = self.plan(s.else_case) if s.else_case is not None else (None, _Summary())
        if self.inserted != count and uses_vars(s.condition, self.thread_vars):
            raise LoomError(f"ThreadSync: a {self.scope} barrier is needed inside `if {s.condition}`, which "
                            "depends on a thread index, so not every thread would reach it")
        cond = self._leaf(s.condition)
        both_sync = st.synced and so.synced
        if both_sync:
            sm = _Summary(tuple(cond) + st.head + so.head, st.tail + so.tail, True)
        else:
            everything = tuple(cond) + _all(st) + _all(so)
            sm = _Summary(everything, everything)
        return s.with_(then_case=then, else_case=other), sm


def _all(sm: _Summary) -> tuple[_Access, ...]:
    return sm.head + sm.tail if sm.synced else sm.head


def _prefix(header: list[_Access], sm: _Summary, repeat: bool = False) -> _Summary:
    head = tuple(header) + sm.head
    if not sm.synced:
        return _Summary(head, head)
    return _Summary(head, sm.tail + (tuple(header) if repeat else ()), True)


def _summarize(sums: list[_Summary], before: list[bool]) -> _Summary:
    head: list[_Access] = []
    tail: list[_Access] = []
    synced = False
    for sm, sync in zip(sums, before):
        if sync:
            synced, tail = True, []
        if not synced:
            head += sm.head
            if sm.synced:
                synced, tail = True, list(sm.tail)
        elif sm.synced:
            tail = list(sm.tail)
        else:
            tail += sm.head
    return _Summary(tuple(head), tuple(tail), synced) if synced else _Summary(tuple(head), tuple(head))


class _Threads:
    """Which thread indices tell apart the threads sharing a buffer of ``scope`` memory in ``s``.

    ``threadIdx.*`` (and ``blockIdx.*`` for global memory) of extent above 1, one
    list of binding variables per tag; an allocation of global memory inside
    the binding of a tag is private to each of its values (every thread runs
    the Allocate), so that tag does not tell sharers apart (shared memory is per
    block wherever it is allocated).
    """

    def __init__(self, s: S.Stmt, scope: str) -> None:
        prefixes = ("threadIdx.", "blockIdx.") if scope == "global" else ("threadIdx.",)
        self.tags: dict[str, list[E.Var]] = {}
        self.private: dict[int, set[str]] = {}
        bound: list[str] = []

        def visit(n: Any) -> None:
            if isinstance(n, S.AttrStmt) and n.attr_key == "thread_extent" and isinstance(n.node, E.IterVar) \
                    and n.node.thread_tag.startswith(prefixes):
                if not (isinstance(n.value, E.IntImm) and n.value.value == 1):
                    self.tags.setdefault(n.node.thread_tag, []).append(n.node.var)
                bound.append(n.node.thread_tag)
                visit(n.body)
                bound.pop()
                return
            if isinstance(n, S.Allocate) and scope == "global" and bound:
                self.private[id(n.buffer_var)] = set(bound)
            for child in _children(n):
                visit(child)

        visit(s)
        #: The tag of each binding variable, by ``id``.
        self.tag_of = {id(v): tag for tag, vs in self.tags.items() for v in vs}

    def sharing(self, var: E.Var) -> list[tuple[str, list[E.Var]]]:
        """Each tag telling apart the threads that share ``var``'s memory, with the variables binding it."""
        private = self.private.get(id(var), set())
        return [(tag, vs) for tag, vs in self.tags.items() if tag not in private]


def _pins(cond: Any) -> list[tuple[int, int]]:
    """``(id(var), value)`` for each ``var == constant`` conjunct of ``cond`` (through ``likely``)."""
    if isinstance(cond, E.Call) and getattr(cond.op, "name", "") == "tir.likely":
        return _pins(cond.args[0])
    if isinstance(cond, E.And):
        return _pins(cond.a) + _pins(cond.b)
    if isinstance(cond, E.EQ):
        for v, c in ((cond.a, cond.b), (cond.b, cond.a)):
            if isinstance(v, E.Var) and isinstance(c, E.IntImm):
                return [(id(v), c.value)]
    return []


def _children(n: Any) -> list[Any]:
    if isinstance(n, S.SeqStmt):
        return list(n.seq)
    if isinstance(n, S.IfThenElse):
        return [n.then_case] + ([n.else_case] if n.else_case is not None else [])
    body = getattr(n, "body", None)
    return [body] if isinstance(body, S.Stmt) else []


class _Scopes(Visitor):
    def __init__(self) -> None:
        self.scopes: dict[int, str] = {}

    def visit_Allocate(self, s: S.Allocate) -> None:
        self.scopes[id(s.buffer_var)] = s.scope or "global"
        self.generic_visit(s)


def thread_sync(stmt: S.Stmt, scope: str = "shared", whole_kernel: bool = False) -> S.Stmt:
    """Insert ``scope`` barriers in the device code of ``stmt`` (all of it when ``whole_kernel``)."""
    found = _Scopes()
    found.visit(stmt)
    if whole_kernel:
        return _Planner(scope, found.scopes, _Threads(stmt, scope)).plan(stmt)[0]

    def rewrite(s: S.Stmt) -> S.Stmt:
        if is_thread_attr(s, ("thread_extent",)):
            return _Planner(scope, found.scopes, _Threads(s, scope)).plan(s)[0]
        if isinstance(s, S.SeqStmt):
            parts = [rewrite(x) for x in s.seq]
            return s if all(a is b for a, b in zip(parts, s.seq)) else S.seq(*parts)
        body = getattr(s, "body", None)
        if isinstance(body, S.Stmt):
            new = rewrite(body)
            s = s if new is body else s.with_(body=new)
        if isinstance(s, S.IfThenElse):
            then = rewrite(s.then_case)
            other = rewrite(s.else_case) if s.else_case is not None else None
            s = s.with_(then_case=then, else_case=other)
        return s

    return rewrite(stmt)


def ThreadSync(scope: str = "shared") -> Pass:  # noqa: N802 - classic factory name
    """The pass for ``scope`` (``shared``, ``warp``, ``global``...).

    ``global`` barriers are inserted only while ``tir.detect_global_barrier`` is on.
    """
    if not isinstance(scope, str) or not scope:
        raise LoomValueError(f"ThreadSync needs a storage scope name such as 'shared', got {scope!r}")

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        if scope == "global" and not ctx.get_config("tir.detect_global_barrier"):
            return func
        kernel = func.attrs.get("calling_conv") == "device_kernel"
        body = thread_sync(func.body, scope, whole_kernel=kernel)
        return func if body is func.body else func.with_body(body)

    return prim_func_pass(run, name="ThreadSync")
