"""JSON save and load of a :class:`~loom.te.schedule.Schedule`, as TVM's ``save_json(s)`` did.

A schedule is plain Python state around the operation graph, so it is saved
as a record node (``te.ScheduleRecord``) that holds the operations, each
stage's loops, relations, loop annotations and placement (stages and groups
refer to each other by index), and is turned back into a ``Schedule`` by
:func:`loom.load_json`.

>>> import loom
>>> A = loom.placeholder((16,), name="A")
>>> B = loom.compute((16,), lambda i: A[i] * 2.0, name="B")
>>> s = loom.create_schedule(B.op)
>>> xo, xi = s[B].split(B.op.axis[0], factor=4)
>>> s[B].vectorize(xi)
>>> s2 = loom.load_json(loom.save_json(s))
>>> [str(iv.var) for iv in s2[s2.outputs[0]].leaf_iter_vars]
['i.outer', 'i.inner']
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import SerializationError
from ..ir import expr as E
from ..ir.node import Node, TupleOf, child, children, register_object, value
from .relations import Fuse, IterVarAttr, Rebase, Singleton, Split
from .tensor import Operation, Tensor
from .tensorize import REQUEST_ATTR as TENSORIZE_REQUEST

__all__ = ["ScheduleRecord", "StageRecord", "RelationRecord", "LoopAttrRecord", "GroupRecord", "schedule_record"]


@register_object("te.RelationRecord")
class RelationRecord(Node):
    """One loop relation: ``kind`` is split, fuse, rebase or singleton; ``ivars`` in the relation's order."""

    kind: str = value(str)
    ivars: TupleOf[E.IterVar] = children(E.IterVar)
    factor: Optional[E.PrimExpr] = child(E.PrimExpr, optional=True, default=None)
    nparts: Optional[E.PrimExpr] = child(E.PrimExpr, optional=True, default=None)


@register_object("te.LoopAttrRecord")
class LoopAttrRecord(Node):
    """What the schedule says about one loop (:class:`~loom.te.relations.IterVarAttr`)."""

    ivar: E.IterVar = child(E.IterVar)
    iter_type: str = value(str)
    bind_thread: Optional[E.IterVar] = child(E.IterVar, optional=True, default=None)
    pragma_keys: tuple[str, ...] = value(tuple, default=())
    pragma_values: TupleOf[E.PrimExpr] = children(E.PrimExpr, default=())
    prefetch_data: TupleOf[Tensor] = children(Tensor, default=())
    prefetch_offset: TupleOf[E.PrimExpr] = children(E.PrimExpr, default=())


@register_object("te.StageRecord")
class StageRecord(Node):
    """One stage; ``attach_stage`` and ``group`` are indices (-1: none)."""

    op: Operation = child(Operation)
    origin_op: Operation = child(Operation)
    all_iter_vars: TupleOf[E.IterVar] = children(E.IterVar)
    leaf_iter_vars: TupleOf[E.IterVar] = children(E.IterVar)
    relations: TupleOf[RelationRecord] = children(RelationRecord)
    loop_attrs: TupleOf[LoopAttrRecord] = children(LoopAttrRecord)
    attach_type: str = value(str)
    attach_stage: int = value(int)
    scope: str = value(str)
    is_output: bool = value(bool)
    attach_ivar: Optional[E.IterVar] = child(E.IterVar, optional=True, default=None)
    align_axes: TupleOf[E.IterVar] = children(E.IterVar, default=())
    align_factors: tuple[Any, ...] = value(tuple, default=())
    double_buffer: bool = value(bool, default=False)
    group: int = value(int, default=-1)
    follows_group: bool = value(bool, default=False)
    device: str = value(str, default="")
    store_predicate: Optional[E.PrimExpr] = child(E.PrimExpr, optional=True, default=None)
    map_keys: TupleOf[Operation] = children(Operation, default=())  # the operations s[...] finds this stage by


@register_object("te.GroupRecord")
class GroupRecord(Node):
    """One stage group; ``parent`` and ``attach_stage`` are indices (-1: none)."""

    parent: int = value(int)
    attach_type: str = value(str)
    attach_stage: int = value(int)
    attach_ivar: Optional[E.IterVar] = child(E.IterVar, optional=True, default=None)


_REL_KINDS = {Split: "split", Fuse: "fuse", Rebase: "rebase", Singleton: "singleton"}


def _relation_record(rel: Any) -> RelationRecord:
    if isinstance(rel, Split):
        return RelationRecord("split", (rel.parent, rel.outer, rel.inner), rel.factor, rel.nparts)
    if isinstance(rel, Fuse):
        return RelationRecord("fuse", (rel.outer, rel.inner, rel.fused))
    if isinstance(rel, Rebase):
        return RelationRecord("rebase", (rel.parent, rel.rebased))
    return RelationRecord("singleton", (rel.iter,))


def _relation(rec: RelationRecord) -> Any:
    arity = {"split": 3, "fuse": 3, "rebase": 2, "singleton": 1}
    if arity.get(rec.kind) != len(rec.ivars):
        raise SerializationError(f"load_json: a {rec.kind!r} relation with {len(rec.ivars)} loop variables")
    if rec.kind == "split":
        parent, outer, inner = rec.ivars
        return Split(parent, outer, inner, factor=rec.factor, nparts=rec.nparts)
    if rec.kind == "fuse":
        return Fuse(rec.ivars[0], rec.ivars[1], rec.ivars[2])
    return Rebase(rec.ivars[0], rec.ivars[1]) if rec.kind == "rebase" else Singleton(rec.ivars[0])


@register_object("te.ScheduleRecord")
class ScheduleRecord(Node):
    """A saved schedule; :func:`loom.load_json` returns it as a :class:`~loom.te.schedule.Schedule`."""

    outputs: TupleOf[Operation] = children(Operation)
    stages: TupleOf[StageRecord] = children(StageRecord)
    groups: TupleOf[GroupRecord] = children(GroupRecord, default=())

    def restore_object(self) -> Any:
        """The :class:`~loom.te.schedule.Schedule` this record describes."""
        from .schedule import Schedule, Stage
        from .schedule_group import StageGroup

        sch = Schedule.__new__(Schedule)
        sch.outputs, sch.is_normalized = list(self.outputs), False
        sch.stages, sch.stage_map, sch.groups = [], {}, []

        def index(i: int, n: int, what: str) -> int:
            if not -1 <= i < n:
                raise SerializationError(f"load_json: {what} index {i} is out of range")
            return i

        for r in self.stages:
            st = Stage(r.op, r.is_output)
            st.origin_op = r.origin_op
            st.all_iter_vars, st.leaf_iter_vars = list(r.all_iter_vars), list(r.leaf_iter_vars)
            st.relations = [_relation(x) for x in r.relations]
            st.iter_var_attrs = {a.ivar: IterVarAttr(a.iter_type, a.bind_thread, list(zip(a.pragma_keys, a.pragma_values)),
                                                     prefetch=list(zip(a.prefetch_data, a.prefetch_offset)))
                                 for a in r.loop_attrs}
            st.attach_type, st.attach_ivar, st.scope = r.attach_type, r.attach_ivar, r.scope
            st.storage_aligns = {iv: (int(f), int(o)) for iv, (f, o) in zip(r.align_axes, r.align_factors)}
            st.double_buffer_, st.follows_group, st.device = r.double_buffer, r.follows_group, r.device or None
            st.store_predicate = r.store_predicate
            sch.stages.append(st)
            for key in r.map_keys or (r.origin_op,):
                sch.stage_map[key] = st
        n = len(sch.stages)
        for g in self.groups:
            grp = StageGroup(sch)
            grp.attach_type, grp.attach_ivar = g.attach_type, g.attach_ivar
            sch.groups.append(grp)
        for grp, g in zip(sch.groups, self.groups):
            p = index(g.parent, len(sch.groups), "group")
            grp.group = None if p < 0 else sch.groups[p]
            a = index(g.attach_stage, n, "stage")
            grp.attach_stage = None if a < 0 else sch.stages[a]
        for st, r in zip(sch.stages, self.stages):
            a = index(r.attach_stage, n, "stage")
            st.attach_stage = None if a < 0 else sch.stages[a]
            gi = index(r.group, len(sch.groups), "group")
            st.group = None if gi < 0 else sch.groups[gi]
        return sch


def schedule_record(sch: Any) -> ScheduleRecord:
    """The record :func:`loom.save_json` writes for ``sch``."""
    stage_ix = {id(s): k for k, s in enumerate(sch.stages)}
    group_ix = {id(g): k for k, g in enumerate(sch.groups)}

    def ix(table: dict[int, int], obj: Any) -> int:
        return -1 if obj is None else table[id(obj)]

    keys: dict[int, list[Operation]] = {}
    for op, st in sch.stage_map.items():
        keys.setdefault(id(st), []).append(op)
    stages = []
    for s in sch.stages:
        if getattr(s, TENSORIZE_REQUEST, None) is not None:
            raise SerializationError(f"save_json of a schedule: stage {s.op.name} is tensorized, and a tensor "
                                     f"intrinsic is Python code that JSON does not hold; save the schedule before "
                                     f"tensorize and call tensorize again after loading")
        if s.device is not None and not isinstance(s.device, str):
            raise SerializationError(f"save_json of a schedule: stage {s.op.name} is placed on {s.device!r}; "
                                     f"only placements written as strings ('cuda', 'ext_dev') can be saved")
        attrs_ = tuple(LoopAttrRecord(iv, a.iter_type, a.bind_thread, tuple(k for k, _ in a.pragmas),
                                      tuple(v for _, v in a.pragmas), tuple(t for t, _ in a.prefetch),
                                      tuple(o for _, o in a.prefetch)) for iv, a in s.iter_var_attrs.items())
        stages.append(StageRecord(
            s.op, s.origin_op, tuple(s.all_iter_vars), tuple(s.leaf_iter_vars),
            tuple(_relation_record(r) for r in s.relations), attrs_, s.attach_type, ix(stage_ix, s.attach_stage),
            s.scope, bool(s.is_output), s.attach_ivar, tuple(s.storage_aligns), tuple(s.storage_aligns.values()),
            bool(s.double_buffer_), ix(group_ix, s.group), bool(s.follows_group), s.device or "",
            s.store_predicate, tuple(keys.get(id(s), ()))))
    groups = tuple(GroupRecord(ix(group_ix, g.group), g.attach_type, ix(stage_ix, g.attach_stage), g.attach_ivar)
                   for g in sch.groups)
    return ScheduleRecord(tuple(sch.outputs), tuple(stages), groups)
