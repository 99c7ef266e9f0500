"""TVM's classic ``tvm.schedule`` namespace: schedules, stages, groups and whole-schedule helpers.

The same objects as :mod:`loom.te` (and :class:`~loom.ir.Buffer`, :class:`~loom.ir.IterVar`
as TVM's namespace had them); ``InferBound`` and ``ScheduleOps`` expose
the two halves of lowering a schedule (bounds, then the loop nest) for tests
and tools that look at them separately.

>>> import loom
>>> A = loom.placeholder((8, 8), name="A")
>>> B = loom.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
>>> s = loom.create_schedule(B.op)
>>> xo, xi = s[B].split(B.op.axis[0], factor=4)
>>> bounds = loom.schedule.InferBound(s)
>>> int(bounds[xi].extent), int(bounds[xo].extent)
(4, 2)
>>> stmt = loom.schedule.ScheduleOps(s, bounds)
"""

from __future__ import annotations

from typing import Any

from .ir.buffer import Buffer
from .ir.container import Map
from .ir.expr import IterVar
from .ir.stmt import Stmt
from .te.auto_inline import AutoInlineElemWise, AutoInlineInjective
from .te.bound import infer_bound
from .te.schedule import Schedule, Stage, create_schedule
from .te.schedule_group import StageGroup
from .te.schedule_ops import schedule_to_stmt

__all__ = [
    "Schedule", "Stage", "StageGroup", "create_schedule", "InferBound", "ScheduleOps",
    "AutoInlineElemWise", "AutoInlineInjective", "Buffer", "IterVar",
]


def InferBound(sch: Schedule) -> Map:  # noqa: N802 (TVM's name)
    """A :class:`loom.ir.Map` ``{IterVar: Range}`` of every loop of ``sch`` (see :func:`loom.te.bound.infer_bound`)."""
    return Map(dict(infer_bound(sch)))


def ScheduleOps(sch: Schedule, bounds: Any = None) -> Stmt:  # noqa: N802 (TVM's name)
    """The loop nest computing ``sch``, before storage flattening.

    ``bounds`` (from :func:`InferBound`) is accepted as TVM's signature has it;
    the bounds are inferred again from ``sch``, which gives the same ranges.
    """
    return schedule_to_stmt(sch)
