"""``LoopPartition``: split loops at the boundaries of their ``likely`` guards.

Non-divisible splits guard their body with ``if likely(i_o * 4 + i_i < 13)``.
For a loop over ``v`` containing such guards, the pass deduces where each
guard holds, or fails, for *every* iteration of the loops inside (their
variables relaxed to their extremes; :mod:`.loop_partition_deduce`), takes
the interval where all the guards it can decide agree, and splits the loop
into a head, a middle part where those guards are replaced by their value,
and a tail::

    for i_o in range(4):                 for i_o in range(3):
        for i_i in range(4):                 for i_i in range(4):
            if likely(i_o*4 + i_i < 13):  ->      A[i_o*4 + i_i] = ...
                A[i_o*4 + i_i] = ...      A[12] = ...   # the tail i_o = 3, split again on i_i:
                                                        # i_i = 0 runs, i_i in [1, 4) fails the guard

Each piece is partitioned again (the middle part for its other guards, the
head and tail at most ``_MAX_DEPTH`` times), so with constant extents the
tails and the inner loops lose their guards too; a piece of one iteration is
replaced by its body.  A ``likely`` in any expression (a ``Select``, an
``if_then_else``) counts as a guard.

Loops with a symbolic range are always candidates; loops with constant ones
only under ``tir.partition_const_loop``, as in classic TVM.  A ``blockIdx``
scope (``thread_extent``) is partitioned too: its blocks cannot be split into
loops, so the innermost thread scope gets ``if (block in the middle range)
<body without the guards> else <body>``.  ``threadIdx`` variables from outside
a loop are relaxed like inner loops, so every thread of a block splits its
loops at the same points (no divergence around barriers), and nothing is
split around a cross-thread reduction.  The ``likely`` hints that remain are
kept: code generators use them.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import attrs

from ..arith import Analyzer
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.functor import Mutator, collect, substitute
from ._util import body_pass, const_int, is_no_op, is_op_call, renew_defs, uses_vars
from ._util2 import is_thread_attr
from .loop_partition_deduce import Interval, Loop, decide, find_sites, intersect
from .pass_base import Pass

__all__ = ["LoopPartition", "loop_partition"]

#: How many times the head and tail pieces of one loop are split again.
_MAX_DEPTH = 3
_DONE = _MAX_DEPTH + 1  # a depth that is never partitioned again


@attrs.frozen
class _Plan:
    """Replace the ``likely`` calls ``calls`` (by id) with ``value`` where the loop variable is in ``interval``."""

    value: bool
    calls: frozenset[int]
    interval: Interval


class _Fold(Mutator):
    """Replace the ``likely`` calls whose value ``known`` tells and take the branches that decides."""

    def __init__(self, known: Callable[[E.Call], Optional[bool]]) -> None:
        self.known = known

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        value = self.known(e) if is_op_call(e, "tir.likely") else None
        return self.generic_visit(e) if value is None else ops.const(value)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        cond = self.visit(s.condition)
        if isinstance(cond, E.IntImm):
            if cond.value:
                return self.visit(s.then_case)
            return self.visit(s.else_case) if s.else_case is not None else S.no_op()
        return self.generic_visit(s)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        cond = self.visit(e.condition)
        if isinstance(cond, E.IntImm):
            return self.visit(e.true_value if cond.value else e.false_value)
        return self.generic_visit(e)


def _drop(plan: _Plan) -> _Fold:
    """The guards of ``plan`` replaced by their value."""
    return _Fold(lambda call: plan.value if id(call) in plan.calls else None)


def _does_nothing(s: S.Stmt) -> bool:
    """A no-op, or loops around one (a piece whose guards were all false)."""
    if isinstance(s, S.For):
        return _does_nothing(s.body)
    if isinstance(s, S.SeqStmt):
        return all(_does_nothing(x) for x in s.seq)
    return is_no_op(s)


def _has_thread_scope(s: S.Stmt) -> bool:
    return bool(collect(s, lambda x: is_thread_attr(x, ("thread_extent",))))


class _BranchInThreads(Mutator):
    """``if cond: <body without the guards> else: <body>`` inside each innermost thread scope."""

    def __init__(self, cond: E.PrimExpr, drop: _Fold) -> None:
        self.cond, self.drop = cond, drop

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def branch(self, body: S.Stmt) -> S.Stmt:
        if _has_thread_scope(body):
            return self.visit(body)
        fast = self.drop.visit(body)
        return body if fast is body else S.IfThenElse(self.cond, renew_defs(fast), body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if is_thread_attr(s, ("thread_extent",)):
            return s.with_(body=self.branch(s.body))
        return self.generic_visit(s)


class _Partitioner(Mutator):
    def __init__(self, const_loops: bool) -> None:
        self.const_loops = const_loops
        self.an = Analyzer()
        self.outer_relaxed: list[Loop] = []  # thread indices the loops inside must not depend on
        self.depths: dict[int, tuple[S.Stmt, int]] = {}  # pieces already split: (the piece, depth)

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_Buffer(self, b: Any) -> Any:
        return b

    # -- bookkeeping ---------------------------------------------------------------
    def _depth(self, s: S.Stmt) -> int:
        got = self.depths.get(id(s))
        return got[1] if got is not None and got[0] is s else 0

    def _again(self, s: S.Stmt, depth: int) -> S.Stmt:
        """Visit a statement the pass made, remembering how often its loop was split."""
        if isinstance(s, (S.For, S.AttrStmt)):
            self.depths[id(s)] = (s, depth)
        return self.visit(s)

    def _candidate(self, mn: E.PrimExpr, ext: E.PrimExpr, s: S.Stmt) -> bool:
        constant = const_int(mn) is not None and const_int(ext) is not None
        return (self.const_loops or not constant) and self._depth(s) <= _MAX_DEPTH

    # -- loops and thread scopes ---------------------------------------------------
    def visit_For(self, s: S.For) -> S.Stmt:
        bound = s.kind == S.ForKind.THREAD_BINDING
        if not bound and self._candidate(s.min, s.extent, s):
            done = self._partition_loop(s)
            if done is not None:
                return done
        self.an.bind(s.loop_var, E.Range.from_min_extent(s.min, s.extent), allow_override=True)
        if not bound or s.thread_tag.startswith("blockIdx"):
            return self.generic_visit(s)
        return self._relaxed((s.loop_var, s.min, s.extent), s)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if not is_thread_attr(s, ("thread_extent",)):
            return self.generic_visit(s)
        iv = s.node
        block = iv.thread_tag.startswith("blockIdx")
        if block and self._candidate(ops.const(0, iv.var.dtype), s.value, s):
            done = self._partition_blocks(s)
            if done is not None:
                return done
        self.an.bind(iv.var, E.Range.from_min_extent(ops.const(0, iv.var.dtype), s.value), allow_override=True)
        if block:
            return self.generic_visit(s)
        return self._relaxed((iv.var, ops.const(0, iv.var.dtype), s.value), s)

    def _relaxed(self, axis: Loop, s: S.Stmt) -> S.Stmt:
        """Visit a thread scope whose index the loops inside must not split on (threads of a block agree)."""
        self.outer_relaxed.append(axis)
        try:
            return self.generic_visit(s)
        finally:
            self.outer_relaxed.pop()

    # -- choosing the split --------------------------------------------------------
    def _misses(self, iv: Interval, a: E.PrimExpr, end: E.PrimExpr) -> bool:
        """Whether ``iv`` provably has nothing in common with ``[a, end)``."""
        lo, hi, prove = iv[0], iv[1], self.an.can_prove
        return ((hi is not None and prove(hi <= a)) or (lo is not None and prove(lo >= end))
                or (lo is not None and hi is not None and prove(hi <= lo)))

    def _plan(self, v: E.Var, a: E.PrimExpr, end: E.PrimExpr, body: S.Stmt) -> Optional[_Plan]:
        sites, cross_thread = find_sites(body)
        if cross_thread:
            return None
        decided: dict[int, list[Optional[Interval]]] = {}  # per call: [T, F] over all its sites
        for site in sites:
            if not uses_vars(site.call, [v]):
                continue
            found = decide(self.an, site, v, tuple(self.outer_relaxed))
            prev = decided.setdefault(id(site.call), list(found))
            for k in (0, 1):
                mine, seen = found[k], prev[k]
                prev[k] = None if mine is None or seen is None else intersect(self.an, seen, mine)
        for value, k in ((True, 0), (False, 1)):
            picks: list[tuple[int, Interval]] = []
            for cid, ivs in decided.items():
                got = ivs[k]
                if got is not None and not self._misses(got, a, end):
                    picks.append((cid, got))
            if not picks:
                continue
            iv = picks[0][1]
            for _, other in picks[1:]:
                iv = intersect(self.an, iv, other)
            if self._misses(iv, a, end):  # guards decided on disjoint ranges: take the first alone
                return _Plan(value, frozenset([picks[0][0]]), picks[0][1])
            return _Plan(value, frozenset(cid for cid, _ in picks), iv)
        return None

    def _bounds(self, a: E.PrimExpr, end: E.PrimExpr, iv: Interval) -> tuple[Optional[E.PrimExpr], Optional[E.PrimExpr]]:
        """Where the middle part starts and stops (None: at the loop's own start / end)."""
        an, (lo, hi) = self.an, iv
        start = None if lo is None or an.can_prove(lo <= a) else an.simplify(ops.minimum(ops.maximum(a, lo), end))
        first = a if start is None else start
        stop = None if hi is None or an.can_prove(hi >= end) else an.simplify(ops.maximum(first, ops.minimum(end, hi)))
        return start, stop

    # -- splitting a loop ----------------------------------------------------------
    def _constant(self, call: E.Call) -> Optional[bool]:
        cond = self.an.simplify(call.args[0])
        return bool(cond.value) if isinstance(cond, E.IntImm) else None

    def _piece(self, s: S.For, lo: E.PrimExpr, hi: E.PrimExpr, body: S.Stmt, copy: bool) -> Optional[S.Stmt]:
        """``s`` over ``[lo, hi)`` with ``body``; its body alone when it runs once; None when empty."""
        an, v = self.an, s.loop_var
        ext = an.simplify(hi - lo)
        if an.can_prove(ext <= 0) or _does_nothing(body):
            return None
        if an.can_prove(ext == 1) and s.kind in (S.ForKind.SERIAL, S.ForKind.UNROLLED) and not s.annotations:
            once = renew_defs(body, {v: lo}) if copy else substitute(body, {v: lo})
            return _Fold(self._constant).visit(once)  # guards of v alone are now decided
        if copy:
            nv = E.Var(v.name, v.dtype)
            return S.For(nv, lo, ext, s.kind, renew_defs(body, {v: nv}), s.thread_tag, s.annotations)
        return S.For(v, lo, ext, s.kind, body, s.thread_tag, s.annotations)

    def _partition_loop(self, s: S.For) -> Optional[S.Stmt]:
        a, end = s.min, self.an.simplify(s.min + s.extent)
        plan = self._plan(s.loop_var, a, end, s.body)
        if plan is None:
            return None
        body = _drop(plan).visit(s.body)
        start, stop = self._bounds(a, end, plan.interval)
        depth = self._depth(s)
        if start is None and stop is None:  # decided over the whole loop: no split, look again
            if body is s.body:
                return None
            return S.no_op() if _does_nothing(body) else self._again(s.with_(body=body), depth)
        first, last = a if start is None else start, end if stop is None else stop
        if self.an.can_prove(last <= first):
            return None  # no middle part
        # The middle part is split again for its other guards; the head and the tail, which
        # keep these guards, only when their extent is known (else each split would only
        # pile up ranges the simplifier cannot compare).
        head = self._piece(s, a, first, s.body, True) if start is not None else None
        tail = self._piece(s, last, end, s.body, True) if stop is not None else None
        mid = self._piece(s, first, last, body, False)
        out = [self._again(head, self._next_depth(head, depth)) if head is not None else None,
               self._again(mid, depth) if mid is not None else None,
               self._again(tail, self._next_depth(tail, depth)) if tail is not None else None]
        return S.seq(*(p for p in out if p is not None and not _does_nothing(p)))

    def _next_depth(self, piece: S.Stmt, depth: int) -> int:
        known = not isinstance(piece, S.For) or const_int(self.an.simplify(piece.extent)) is not None
        return depth + 1 if known else _DONE

    def _partition_blocks(self, s: S.AttrStmt) -> Optional[S.Stmt]:
        v = s.node.var
        zero = ops.const(0, v.dtype)
        plan = self._plan(v, zero, s.value, s.body)
        if plan is None:
            return None
        drop = _drop(plan)
        start, stop = self._bounds(zero, s.value, plan.interval)
        if start is None and stop is None:
            body = drop.visit(s.body)
            return self._again(s.with_(body=body), self._depth(s)) if body is not s.body else None
        lo, hi = plan.interval
        conds = ([v >= lo] if start is not None else []) + ([v < hi] if stop is not None else [])
        if self.an.can_prove(ops.logical_not(ops.all(*conds))):
            return None
        body = _BranchInThreads(ops.all(*conds), drop).branch(s.body)
        # Blocks are not loops: the scope is not split again.
        return self._again(s.with_(body=body), _DONE) if body is not s.body else None


def loop_partition(stmt: S.Stmt, partition_const_loop: bool = False) -> S.Stmt:
    """``stmt`` with loops split at their ``likely`` guards (see the module docstring).

    >>> import loom
    >>> from loom.ir import For, IfThenElse, BufferStore
    >>> A = loom.decl_buffer((10,), "int32", name="A")
    >>> i = loom.var("i")
    >>> s = For(i, 0, 10, "serial", IfThenElse(loom.likely(i < 7), BufferStore(A, i, [i])))
    >>> print(loop_partition(s, partition_const_loop=True))
    for i in range(7):
        A[i] = i
    """
    if not collect(stmt, lambda x: is_op_call(x, "tir.likely")):
        return stmt  # nothing to partition on: skip the analysis
    return _Partitioner(partition_const_loop).visit(stmt)


def LoopPartition() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The loop-partitioning pass; reads ``tir.partition_const_loop`` when it runs.

    >>> import loom
    >>> LoopPartition().info.name
    'LoopPartition'
    """
    return body_pass("LoopPartition",
                     lambda body, ctx: loop_partition(body, ctx.get_config("tir.partition_const_loop")))
