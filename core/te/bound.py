"""Bound inference: the range of every loop variable of every stage (classic TVM's ``InferBound``).

Stages are visited consumers first.  An output computes its whole domain; any
other stage computes the union of what its consumers read.  Each consumer's
reads are evaluated over the consumer's loops as seen from the producer's
attach point: loops enclosing the attach point are fixed (their variables stay
symbolic), loops inside it are relaxed over their whole range.  Thread loops
follow the memory scope instead: memory shared by a thread group is filled for
the whole group.  The ranges then flow down each stage's relations to its
split and fused loops.

>>> import loom
>>> from loom.te.operation import placeholder, compute
>>> from loom.te.schedule import create_schedule
>>> A = placeholder((10,), name="A")
>>> B = compute((10,), lambda i: A[i] + 1.0, name="B")
>>> C = compute((10,), lambda i: B[i] * 2.0, name="C")
>>> s = create_schedule(C.op)
>>> xo, xi = s[C].split(C.op.axis[0], factor=4)
>>> s[B].compute_at(s[C], xo)
>>> bounds = infer_bound(s)
>>> str(bounds[xo].extent), str(bounds[B.op.axis[0]].extent)
('3', '4')
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..errors import LoomError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import Visitor
from ..ir.producer import ProducerLoad
from ..target.memory_info import base_scope
from .graph import attach_paths, bind_map, consumer_graph, inline_bodies, read_graph
from ..arith.int_set import IntervalSet, cover_range, eval_set, union
from .relations import Fuse, Rebase, Split, pass_down_domain
from .schedule import data_axes, root_iter_vars
from .operation import HybridOp
from .scan import ScanOp
from .scan_bound import prepare_scans, scan_reads
from .tensor import ComputeOp
from .tensor_compute import TensorComputeOp, tensor_compute_reads

__all__ = ["infer_bound", "InferBoundResult", "thread_rank", "storage_rank"]

_STORAGE_RANKS = {"global": 0, "shared": 1, "warp": 2, "local": 3}


def thread_rank(tag: str) -> int:
    """0 for a block index, 1 for a thread index or virtual thread (TVM's ThreadScope rank)."""
    return 0 if tag.startswith("blockIdx") else 1


def storage_rank(scope: str) -> int:
    """0 global, 1 shared, 2 warp, 3 local, by the base a scope starts with (a tagged scope such
    as ``"local.L0A"`` or ``"local_acc"`` has its base's rank); unknown scopes count as global."""
    base = base_scope(scope)
    return _STORAGE_RANKS[base] if base is not None else 0


class InferBoundResult(dict):
    """``{IterVar: Range}`` plus the facts lowering reuses (inlined bodies, attach paths)."""

    bodies: dict[Any, tuple[E.PrimExpr, ...]]
    paths: dict[Any, list[E.IterVar]]
    schedule: Any


class _Context:
    def __init__(self, sch: Any) -> None:
        self.sch = sch
        self.bodies = inline_bodies(sch)
        self.reads = read_graph(sch, self.bodies)
        self.consumers = consumer_graph(sch, self.reads)
        self.paths = attach_paths(sch)
        self.binds = bind_map(sch)

    def tag_of(self, iv: E.IterVar) -> str:
        bound = self.binds.get(iv)
        return bound.thread_tag if bound is not None else iv.thread_tag

    def scope_rank(self, stage: Any) -> int:
        if stage.scope:
            return storage_rank(stage.scope)
        ranks = [thread_rank(t) for t in map(self.tag_of, self.paths[stage]) if t]
        return {-1: 0, 0: 1}.get(max(ranks, default=-1), 3)  # no thread: global; block: shared; thread: local

    def need_relax(self, iv: E.IterVar, found_attach: bool, rank: int) -> bool:
        tag = self.tag_of(iv)
        if not tag:
            return not found_attach
        if rank == _STORAGE_RANKS["warp"] and tag == "threadIdx.x":
            return True  # warp memory is shared by the threads of a warp: threadIdx.x indexes within it
        return rank <= thread_rank(tag)


def _check_placement(ctx: _Context, stage: Any) -> None:
    """A stage computed inside a loop is only visible to consumers inside that loop."""
    if stage.attach_type != "scope":
        return
    for consumer in ctx.consumers[stage]:
        if consumer is stage.attach_stage:
            continue
        if not any(iv is stage.attach_ivar for iv in ctx.paths[consumer]):
            raise LoomError(f"{stage.op.name} is computed at {stage.attach_stage.op.name}.{stage.attach_ivar.var.name} "
                            f"but its consumer {consumer.op.name} runs outside that loop")


def _fused_range_up(rel: Fuse, fused: IntervalSet, ranges: dict[E.IterVar, E.Range], matches: Any,
                    an: Analyzer) -> tuple[IntervalSet, IntervalSet]:
    """The rows and columns a range of fused values touches.

    The rows run from the first value's row to the last one's.  The columns are
    tight when the range cannot cross a row (its extent divides the row length
    and it starts at a multiple of its extent, as a split of the fused loop
    gives), and the whole row otherwise.
    """
    full = IntervalSet.from_range(ranges[rel.outer]), IntervalSet.from_range(ranges[rel.inner])
    if fused.min is None or fused.max is None or matches(fused, ranges[rel.fused]):
        return full
    factor = ranges[rel.inner].extent
    t_out, t_in = rel.outer.var.dtype, rel.inner.var.dtype
    rows = IntervalSet(an.simplify(ops.cast(ops.floordiv(fused.min, factor), t_out) + ranges[rel.outer].min),
                       an.simplify(ops.cast(ops.floordiv(fused.max, factor), t_out) + ranges[rel.outer].min))
    extent = an.simplify(fused.max - fused.min + 1)
    if an.can_prove(ops.floormod(factor, extent) == 0) and an.can_prove(ops.floormod(fused.min, extent) == 0):
        cols = IntervalSet(an.simplify(ops.cast(ops.floormod(fused.min, factor), t_in) + ranges[rel.inner].min),
                           an.simplify(ops.cast(ops.floormod(fused.max, factor), t_in) + ranges[rel.inner].min))
        return rows, cols
    return rows, full[1]


def _pass_up_domain(stage: Any, ranges: dict[E.IterVar, E.Range], state: dict[E.IterVar, IntervalSet],
                    an: Analyzer) -> None:
    def matches(s: IntervalSet, r: E.Range) -> bool:
        full = IntervalSet.from_range(r)
        return s.min is not None and s.max is not None and an.can_prove_equal(s.min, full.min) \
            and an.can_prove_equal(s.max, full.max)

    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            outer, inner = state[rel.outer], state[rel.inner]
            if matches(outer, ranges[rel.outer]) and matches(inner, ranges[rel.inner]):
                state[rel.parent] = IntervalSet.from_range(ranges[rel.parent])
                continue
            expr = rel.outer.var * ranges[rel.inner].extent + rel.inner.var + ranges[rel.parent].min
            state[rel.parent] = eval_set(expr, {rel.outer.var: outer, rel.inner.var: inner}, an)
        elif isinstance(rel, Fuse):
            fused = state[rel.fused]
            if fused.is_point and not matches(fused, ranges[rel.fused]):
                factor = ranges[rel.inner].extent
                row, col = ops.floordiv(fused.min, factor), ops.floormod(fused.min, factor)
                row, col = ops.cast(row, rel.outer.var.dtype), ops.cast(col, rel.inner.var.dtype)  # int64 fused
                state[rel.outer] = IntervalSet.point(an.simplify(row + ranges[rel.outer].min))
                state[rel.inner] = IntervalSet.point(an.simplify(col + ranges[rel.inner].min))
            else:
                state[rel.outer], state[rel.inner] = _fused_range_up(rel, fused, ranges, matches, an)
        elif isinstance(rel, Rebase):
            expr = rel.rebased.var + ranges[rel.parent].min
            state[rel.parent] = eval_set(expr, {rel.rebased.var: state[rel.rebased]}, an)


class _ReadRegions(Visitor):
    """Collect, per tensor dimension, the set of indices a body reads."""

    def __init__(self, targets: dict[Any, list[list[IntervalSet]]], dom_map: dict[E.Var, IntervalSet],
                 an: Analyzer) -> None:
        self.targets, self.dom_map, self.an = targets, dom_map, an

    def visit_ProducerLoad(self, node: ProducerLoad) -> None:
        self.generic_visit(node)
        dims = self.targets.get(node.producer)
        if dims is None:
            return
        for k, (index, extent) in enumerate(zip(node.indices, node.producer.shape)):
            s = eval_set(index, self.dom_map, self.an)
            lo, hi = s.min, s.max
            zero = ops.const(0, extent.dtype)
            if lo is None or self.an.can_prove(lo <= zero):
                lo = zero  # never read below the tensor, so never compute below it
            if hi is None or self.an.can_prove(hi >= extent - 1):
                hi = self.an.simplify(extent - 1)
            dims[k].append(IntervalSet(lo, hi))


def _consumer_reads(ctx: _Context, stage: Any, consumer: Any, ranges: dict[E.IterVar, E.Range],
                    targets: dict[Any, list[list[IntervalSet]]]) -> None:
    """Add what ``consumer`` reads of ``stage``'s outputs, seen from ``stage``'s attach point."""
    attach = ctx.paths[stage]
    rank = ctx.scope_rank(stage)
    found = False
    up: dict[E.IterVar, IntervalSet] = {}
    for iv in reversed(consumer.leaf_iter_vars):
        if attach and iv is attach[0]:
            found = True
        r = ranges[iv]
        if isinstance(r.extent, E.IntImm) and r.extent.value == 1:
            up[iv] = IntervalSet.point(r.min)
        elif not ctx.need_relax(iv, found, rank):
            bound = ctx.binds.get(iv)
            up[iv] = IntervalSet.point(bound.var if bound is not None else iv.var)
        else:
            up[iv] = IntervalSet.from_range(r)
    relax: dict[E.Var, IntervalSet] = {}
    for iv in ctx.paths[consumer]:
        if attach and iv is attach[0]:
            found = True
        if ctx.need_relax(iv, found, rank):
            relax[iv.var] = IntervalSet.from_range(ranges[iv])
            bound = ctx.binds.get(iv)
            if bound is not None:
                relax[bound.var] = IntervalSet.from_range(ranges[iv])
    if attach and not found:
        raise LoomError(f"{stage.op.name} is computed at {attach[0].var.name}, but its consumer "
                        f"{consumer.op.name} does not run inside that loop")
    an = Analyzer()
    for iv in consumer.leaf_iter_vars:  # the loops' ranges bound the index arithmetic (no wrap-around)
        if iv in ranges:
            an.bind(iv.var, ranges[iv], allow_override=True)
    _pass_up_domain(consumer, ranges, up, an)
    dom_map: dict[E.Var, IntervalSet] = {}
    for iv in root_iter_vars(consumer.op):
        r = cover_range(up.get(iv), _dom(iv), an)
        if relax:
            corners = union([eval_set(r.min, relax, an), eval_set(r.min + r.extent - 1, relax, an)], an)
            assert corners is not None  # the union of two sets
            dom_map[iv.var] = corners
        else:
            dom_map[iv.var] = IntervalSet.from_range(r)
        an.bind(iv.var, r, allow_override=True)
    if isinstance(consumer.op, ScanOp):  # a step reads one row of each update (scan_bound)
        scan_reads(consumer.op, dom_map, targets)
        return
    if isinstance(consumer.op, TensorComputeOp):  # the regions of its intrinsic call
        tensor_compute_reads(consumer.op, dom_map, targets, an)
        return
    if not isinstance(consumer.op, ComputeOp):  # extern and hybrid operations read their inputs whole
        for t in consumer.op.input_tensors:
            if t in targets:
                for dims, extent in zip(targets[t], t.shape):
                    dims.append(IntervalSet(ops.const(0, extent.dtype), extent - 1))
        return
    visitor = _ReadRegions(targets, dom_map, an)
    for b in ctx.bodies[consumer]:
        visitor.visit(b)


def _infer_root(ctx: _Context, stage: Any, ranges: dict[E.IterVar, E.Range]) -> None:
    op = stage.op
    if isinstance(op, (HybridOp, ScanOp)):  # computes its whole outputs: every loop runs over its own range
        for iv in root_iter_vars(op):
            ranges[iv] = _dom(iv)
        return
    if not isinstance(op, (ComputeOp, TensorComputeOp)):
        return
    if stage.is_output or not ctx.consumers[stage]:
        for iv in root_iter_vars(op):
            ranges[iv] = _dom(iv)
        return
    outputs = [stage.origin_op.output(k) for k in range(op.num_outputs)]
    # every dimension, a tensor compute's intrinsic block too (which it always computes whole)
    targets: dict[Any, list[list[IntervalSet]]] = {t: [[] for _ in t.shape] for t in outputs}
    for consumer in ctx.consumers[stage]:
        _consumer_reads(ctx, stage, consumer, ranges, targets)
    an = Analyzer()
    for k, iv in enumerate(data_axes(op)):
        sets = [s for dims in targets.values() for s in dims[k]]
        ranges[iv] = cover_range(union(sets, an), _dom(iv), an)
    for iv in op.reduce_axis:
        ranges[iv] = _dom(iv)


def _dom(iv: E.IterVar) -> E.Range:
    """The domain of an operation's own axis, which always has one (only schedule-made IterVars may lack it)."""
    assert iv.dom is not None, iv
    return iv.dom


def infer_bound(sch: Any) -> InferBoundResult:
    """``{IterVar: Range}`` for every loop of every stored stage of ``sch``.

    A schedule not made by :meth:`Schedule.normalize` is normalized first (bound
    inference needs every leaf loop to start at zero); the normalized schedule
    is ``result.schedule``.  Ranges of the original axes are keyed by the
    same IterVars either way.
    """
    if not sch.is_normalized:
        sch = sch.normalize()
    prepare_scans(sch)  # places the stages of each scan's update inside its loop
    ctx = _Context(sch)
    ranges: dict[E.IterVar, E.Range] = {}
    an = Analyzer()
    for stage in reversed(sch.stages):
        if stage.attach_type == "inline":
            continue
        _check_placement(ctx, stage)
        _infer_root(ctx, stage, ranges)
        for iv in root_iter_vars(stage.op):
            if iv in ranges:
                an.bind(iv.var, ranges[iv], allow_override=True)
        pass_down_domain(stage, ranges, an)
    result = InferBoundResult({iv: E.Range(an.simplify(r.min), an.simplify(r.extent)) for iv, r in ranges.items()})
    result.bodies, result.paths = ctx.bodies, ctx.paths
    result.schedule = sch
    return result
