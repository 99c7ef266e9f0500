"""``InjectPrefetch``: turn ``Stage.prefetch`` into cache hints before storage is flattened.

The schedule leaves ``AttrStmt(tensor, "prefetch_scope", offset)`` as the first
thing inside the prefetching loop.  The region of ``tensor`` that the loop's body
reads in one iteration (its inner loops relaxed over their ranges) is taken at the
loop variable plus ``offset``, clamped to the tensor's storage (its realized
region, or its shape), and fetched one 64-byte cache line at a time: a nest of
``prefetch(T[...])`` calls placed before the body.  A region that cannot be
bounded (an index read from memory, a variable bound inside the body) is logged
as a warning and skipped: a prefetch is only a hint.

As TVM's pass did, the region is a box (the union of every read), and the
innermost dimension is stepped by a cache line's worth of elements.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from ..arith import Analyzer
from ..arith.int_set import IntervalSet
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.dtype import DataType
from ..ir.functor import Mutator, Visitor
from ..ir.op import Op
from ..ir.producer import ProducerLoad, ProducerRealize
from ._util import body_pass, uses_vars
from .pass_base import Pass

__all__ = ["InjectPrefetch", "inject_prefetch", "CACHE_LINE_BYTES"]

_log = logging.getLogger(__name__)

#: The line size prefetches step by (x86-64 and most AArch64 cores).
CACHE_LINE_BYTES = 64


class _Reads(Visitor):
    """The index tuples of every read of ``tensor`` in a body, with the ranges of the body's own variables."""

    def __init__(self, tensor: Any, dom: dict[E.Var, IntervalSet], an: Analyzer) -> None:
        self.tensor, self.an = tensor, an
        self.dom = dom  # the prefetching loop's variable at its shifted point; the body's variables relaxed
        self.inner: set[E.Var] = set()  # variables the body binds: a region naming one is not usable
        self.reads: list[tuple[E.PrimExpr, ...]] = []

    def _bind(self, var: E.Var, lo: E.PrimExpr, hi: E.PrimExpr) -> None:
        self.inner.add(var)
        self.dom[var] = IntervalSet(self.an.int_set(lo, self.dom).min, self.an.int_set(hi, self.dom).max)

    def visit_For(self, s: S.For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        self._bind(s.loop_var, s.min, s.min + s.extent - 1)
        self.visit(s.body)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self.visit(s.value)
        self._bind(s.var, s.value, s.value)
        self.visit(s.body)

    def visit_Let(self, e: E.Let) -> None:
        self.visit(e.value)
        self._bind(e.var, e.value, e.value)
        self.visit(e.body)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            self._bind(s.node.var, ops.const(0, s.node.var.dtype), s.value - 1)
        self.generic_visit(s)

    def visit_ProducerLoad(self, e: ProducerLoad) -> None:
        self.generic_visit(e)
        if e.producer is self.tensor:
            self.reads.append(e.indices)


class _Injector(Mutator):
    def __init__(self) -> None:
        self.binders: list[E.Var] = []  # the enclosing loop (and let) variables, innermost last
        self.realized: dict[Any, tuple[E.Range, ...]] = {}

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def _under(self, var: E.Var, s: S.Stmt) -> S.Stmt:
        self.binders.append(var)
        try:
            return self.generic_visit(s)
        finally:
            self.binders.pop()

    def visit_For(self, s: S.For) -> S.Stmt:
        return self._under(s.loop_var, s)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        return self._under(s.var, s)

    def visit_ProducerRealize(self, s: ProducerRealize) -> S.Stmt:
        old = self.realized.get(s.producer)
        self.realized[s.producer] = s.bounds
        try:
            return self.generic_visit(s)
        finally:
            if old is None:
                del self.realized[s.producer]
            else:
                self.realized[s.producer] = old

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.attr_key != "prefetch_scope":
            return self.generic_visit(s)
        body = self.visit(s.body)
        fetch = self._fetch(s.node, s.value, body)
        return body if fetch is None else S.SeqStmt([fetch, body])

    def _fetch(self, tensor: Any, offset: E.PrimExpr, body: S.Stmt) -> Optional[S.Stmt]:
        if not self.binders:
            _log.warning("prefetch of %s is outside any loop; skipped", tensor.name)
            return None
        var = self.binders[-1]
        an = Analyzer()
        reads = _Reads(tensor, {var: IntervalSet.point(var + ops.cast(offset, var.dtype))}, an)
        reads.visit(body)
        if not reads.reads:
            _log.warning("prefetch of %s in loop %s: the loop does not read it (a cache_read copy is read instead?);"
                         " skipped", tensor.name, var.name)
            return None
        storage = self.realized.get(tensor) or tuple(E.Range.from_min_extent(0, n) for n in tensor.shape)
        box: list[tuple[E.PrimExpr, E.PrimExpr]] = []
        for d, r in enumerate(storage):
            sets = [an.int_set(idx[d], reads.dom) for idx in reads.reads]
            if any(x.min is None or x.max is None for x in sets):
                _log.warning("prefetch of %s in loop %s: dimension %d of the region has no bound; skipped",
                             tensor.name, var.name, d)
                return None
            lo, hi = _union(sets)
            if uses_vars((lo, hi), reads.inner):
                _log.warning("prefetch of %s in loop %s: the region depends on values computed in the loop; skipped",
                             tensor.name, var.name)
                return None
            # Slide the window into the storage rather than shrink it: the last iterations fetch
            # the last rows again (harmless), and a constant extent stays constant.
            dtype = r.min.dtype
            lo = ops.cast(lo, dtype)
            extent = an.simplify(ops.minimum(ops.cast(hi, dtype) - lo + 1, r.extent))
            start = an.simplify(ops.minimum(ops.maximum(lo, r.min), r.min + r.extent - extent))
            box.append((start, extent))
        return _nest(tensor, box, an)


def _union(sets: list[IntervalSet]) -> tuple[E.PrimExpr, E.PrimExpr]:
    """The smallest interval holding every one of ``sets`` (all bounded)."""
    lows = [x.min for x in sets if x.min is not None]
    highs = [x.max for x in sets if x.max is not None]
    lo, hi = lows[0], highs[0]
    for a, b in zip(lows[1:], highs[1:]):
        lo, hi = ops.minimum(lo, a), ops.maximum(hi, b)
    return lo, hi


def _nest(tensor: Any, box: list[tuple[E.PrimExpr, E.PrimExpr]], an: Analyzer) -> S.Stmt:
    """One ``prefetch`` per cache line of the box (``(start, extent)`` per dimension): loops over
    the outer dimensions, the innermost stepped by a line's worth of elements."""
    per_line = max(1, CACHE_LINE_BYTES * 8 // (tensor.dtype.bits * tensor.dtype.lanes))
    loops: list[tuple[E.Var, E.PrimExpr]] = []
    index: list[E.PrimExpr] = []
    for d, (start, extent) in enumerate(box):
        step = per_line if d == len(box) - 1 else 1
        if step > 1:
            extent = an.simplify(ops.floordiv(extent + (step - 1), step))
        if isinstance(extent, E.IntImm) and extent.value == 1:
            index.append(start)
            continue
        v = E.Var(f"{tensor.name}.prefetch{d}", start.dtype)
        index.append(start + v * step if step > 1 else start + v)
        loops.append((v, extent))
    load = ProducerLoad(tensor, [an.simplify(i) for i in index])
    out: S.Stmt = S.Evaluate(E.Call(DataType.of("int32"), Op.get("tir.prefetch"), [load, ops.const(0), ops.const(3)]))
    for v, extent in reversed(loops):
        out = S.For(v, ops.const(0, v.dtype), extent, "serial", out)
    return out


def inject_prefetch(stmt: S.Stmt) -> S.Stmt:
    """``stmt`` with each ``prefetch_scope`` attribute replaced by its prefetches and the body."""
    return _Injector().visit(stmt)


def InjectPrefetch() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """Expand ``Stage.prefetch``'s ``prefetch_scope`` attributes into ``prefetch`` calls."""
    return body_pass("InjectPrefetch", lambda body, ctx: inject_prefetch(body))
