"""Stage groups: ``Schedule.create_group`` schedules a sub-graph of stages as one.

A group's ``compute_at`` places every member that has no placement of its own
(the members that were computed at the root when the group was made, or that
were reset with ``compute_root``) inside the consumer's loop, so a whole
producer chain moves at once.  Groups nest: a group made over members of
another group becomes that group's parent.  The placement is applied to the
member stages as it is made, so the lowering sees ordinary ``compute_at``
stages.

A scan's update is a group from the start (TVM's scan group): the stages on a
path from its state placeholders (or its ``inputs``) to its updates run inside
the scan's loop, one row per step.  A member of a group is computed only
inside a stage of its group (or, for a scan's step, at the scan's axis).

>>> import loom
>>> x = loom.compute((4, 4), lambda i, j: i + j, name="x")
>>> x1 = loom.compute((4, 4), lambda i, j: x[i, j] + 1, name="x1")
>>> x2 = loom.compute((4, 4), lambda i, j: x1[i, j] * 2, name="x2")
>>> s = loom.create_schedule(x2.op)
>>> g = s.create_group(outputs=x1, inputs=x, include_inputs=True)
>>> g.compute_at(s[x2], x2.op.axis[0])
>>> g.num_child_stages, s[x].attach_stage is s[x2], s[x1].attach_ivar is x2.op.axis[0]
(2, True, True)
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from .scan import ScanOp, update_body
from .schedule_loops import check_leaf
from .tensor import Operation, PlaceholderOp, Tensor

__all__ = ["StageGroup", "create_group", "make_scan_groups", "check_group_placement", "SCAN_UPDATE"]

#: The attach type of a scan's update group: its members run inside the scan's loop.
SCAN_UPDATE = "scan_update"


class StageGroup:
    """Stages (and nested groups) scheduled together; made by :meth:`Schedule.create_group`."""

    def __init__(self, sch: Any) -> None:
        self.schedule = sch
        self.group: Optional[StageGroup] = None  # the enclosing group
        self.attach_type = "root"
        self.attach_stage: Any = None
        self.attach_ivar: Optional[E.IterVar] = None

    def __repr__(self) -> str:
        return f"group({', '.join(s.op.name for s in self.member_stages())})"

    @property
    def num_child_stages(self) -> int:
        """The stages and groups directly inside this group."""
        sch = self.schedule
        return (sum(1 for s in sch.stages if getattr(s, "group", None) is self)
                + sum(1 for g in sch.groups if g.group is self))

    def member_stages(self) -> list[Any]:
        """Every stage inside this group, nested groups included."""
        return [s for s in self.schedule.stages if self._contains(getattr(s, "group", None))]

    def _contains(self, g: Optional[StageGroup]) -> bool:
        while g is not None:
            if g is self:
                return True
            g = g.group
        return False

    def _check_movable(self, what: str) -> None:
        if self.attach_type == SCAN_UPDATE:
            raise LoomValueError(f"{self!r}.{what}: this is the update of scan {self.attach_stage.op.name}, which "
                                 f"runs inside the scan's loop; place its stages within it instead")

    def compute_at(self, parent: Any, scope: E.IterVar) -> None:
        """Compute the group's members inside ``parent``'s loop ``scope``."""
        if isinstance(parent, Tensor) or not hasattr(parent, "leaf_iter_vars"):
            raise LoomTypeError(f"{self!r}.compute_at expects a Stage (s[T]), got {type(parent).__name__}")
        self._check_movable("compute_at")
        if self._contains(getattr(parent, "group", None)):
            raise LoomValueError(f"{self!r}.compute_at: {parent.op.name} is inside the group itself")
        check_group_placement(repr(self), self.group, parent)
        check_leaf(parent, scope, f"compute_at({self!r})")
        self.attach_type, self.attach_stage, self.attach_ivar = "scope", parent, scope
        apply_group_placements(self.schedule)

    def compute_root(self) -> None:
        """Compute the group's members at the root again."""
        self._check_movable("compute_root")
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None
        apply_group_placements(self.schedule)


def check_group_placement(name: str, group: Optional[StageGroup], parent: Any) -> None:
    """Raise unless ``parent`` is a place a member of ``group`` may be computed at (TVM's rule).

    That is a stage inside ``group`` (nested groups included) or, for a step of
    a scan, the scan itself: ``compute_at(s[S], S.op.scan_axis)`` is where the
    step runs anyway.
    """
    if group is None:
        return
    g = getattr(parent, "group", None)
    while g is not None and g is not group:
        g = g.group
    if g is group:
        return
    scan: Optional[StageGroup] = group
    while scan is not None and scan.attach_type != SCAN_UPDATE:
        scan = scan.group
    if scan is not None:
        if parent is scan.attach_stage:
            return
        raise LoomValueError(f"{name} is a step of scan {scan.attach_stage.op.name} (it reads the state), computed "
                             f"inside the scan's loop; compute_at({parent.op.name}) would put it outside the scan's "
                             f"loop: compute it at a stage of the step, or at the scan's axis")
    raise LoomValueError(f"{name} belongs to {group!r}; it can only be computed inside a stage of that group, "
                         f"not at {parent.op.name} (use the group's compute_at to move the group)")


def _placement(group: Optional[StageGroup]) -> tuple[str, Any, Optional[E.IterVar]]:
    """The innermost placement a group (or, when it has none, its enclosing groups) gives."""
    while group is not None:
        if group.attach_type == SCAN_UPDATE:  # at the "root" of the step: inside the scan's loop (scan_bound)
            return "root", None, None
        if group.attach_type != "root":
            return group.attach_type, group.attach_stage, group.attach_ivar
        group = group.group
    return "root", None, None


def apply_group_placements(sch: Any) -> None:
    """Place each member that follows its group where the group is placed."""
    for s in sch.stages:
        if getattr(s, "follows_group", False):
            s.attach_type, s.attach_stage, s.attach_ivar = _placement(s.group)


def _ops(x: Any, what: str) -> list[Operation]:
    items = x if isinstance(x, (list, tuple)) else [] if x is None else [x]
    out = []
    for t in items:
        op = t.op if isinstance(t, Tensor) else t
        if not isinstance(op, Operation):
            raise LoomTypeError(f"create_group: {what} must be tensors or operations, got {type(t).__name__}")
        out.append(op)
    return out


def _common_group(groups: list[Optional[StageGroup]]) -> Optional[StageGroup]:
    def chain(g: Optional[StageGroup]) -> list[Optional[StageGroup]]:
        out: list[Optional[StageGroup]] = []
        while g is not None:
            out.append(g)
            g = g.group
        return out + [None]
    common = chain(groups[0])
    for g in groups[1:]:
        seen = chain(g)
        common = [c for c in common if any(c is s for s in seen)]
    return common[0]


def create_group(sch: Any, outputs: Any, inputs: Any, include_inputs: bool = False) -> StageGroup:
    """The group of stages computing ``outputs`` from ``inputs``; see :meth:`Schedule.create_group`."""
    out_ops, in_ops = _ops(outputs, "outputs"), _ops(inputs, "inputs")
    if not out_ops:
        raise LoomValueError("create_group: give at least one output")
    members: list[Operation] = []
    seen: set[int] = set()
    stack = list(out_ops)
    while stack:  # every operation between the inputs and the outputs
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        is_input = any(op is i for i in in_ops)
        if is_input and not include_inputs:
            continue
        if not isinstance(op, PlaceholderOp):
            members.append(op)
        if not is_input:
            stack.extend(t.op for t in sch[op].op.input_tensors)
    stages = [sch[op] for op in members]
    if not stages:
        raise LoomValueError("create_group: no stage lies between the inputs and the outputs")
    return _install(sch, stages, StageGroup(sch))


def _install(sch: Any, stages: list[Any], group: StageGroup) -> StageGroup:
    """Make ``group`` the group of ``stages``, nested inside the innermost group they share."""
    parent = _common_group([getattr(s, "group", None) for s in stages])
    group.group = parent
    for s in stages:
        g = getattr(s, "group", None)
        if g is parent:
            s.group = group
            if s.attach_type == "root":
                s.follows_group = True
            continue
        while g is not None and g.group is not parent:
            g = g.group
        if g is not None:
            g.group = group
    sch.groups.append(group)
    apply_group_placements(sch)
    return group


def make_scan_groups(sch: Any) -> None:
    """Give each scan of a new schedule its update group (TVM's scan group; see the module's docstring)."""
    for stage in list(sch.stages):
        if isinstance(stage.op, ScanOp):
            members = [sch.stage_map[op] for op in update_body(stage.op)
                       if op in sch.stage_map and not isinstance(op, PlaceholderOp)]
            if members:
                group = StageGroup(sch)
                group.attach_type, group.attach_stage = SCAN_UPDATE, stage
                _install(sch, members, group)
