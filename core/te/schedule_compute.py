"""Placement and storage primitives of a stage: compute_at/inline/root, scope, alignment, double buffering."""

from __future__ import annotations

from typing import Any

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.reduce import Reduce
from .tensor import ComputeOp, Tensor
from .tensor_compute import TensorComputeOp
from .schedule_group import check_group_placement
from .schedule_loops import check_leaf

__all__ = ["compute_at", "compute_inline", "compute_root", "set_scope", "storage_align", "double_buffer", "on_device"]


def _parent_stage(stage: Any, parent: Any) -> Any:
    if isinstance(parent, Tensor):
        raise LoomTypeError(f"compute_at on {stage.op.name}: pass the consumer's stage (s[{parent.name}]), "
                            f"not the tensor {parent.name}")
    if not hasattr(parent, "leaf_iter_vars"):
        raise LoomTypeError(f"compute_at on {stage.op.name}: expected a Stage, got {type(parent).__name__}")
    return parent


def compute_at(stage: Any, parent: Any, scope: E.IterVar) -> None:
    """Attach ``stage`` inside ``parent``'s loop ``scope``; see :meth:`loom.te.schedule.Stage.compute_at`."""
    parent = _parent_stage(stage, parent)
    if parent is stage:
        raise LoomValueError(f"compute_at on {stage.op.name}: a stage cannot be computed inside its own loops")
    if stage.is_output:
        raise LoomValueError(f"compute_at on {stage.op.name}: it is an output of the schedule; outputs are "
                             f"computed at the root")
    if stage.attach_type == "inline":
        raise LoomValueError(f"compute_at on {stage.op.name}: the stage was inlined; call compute_root() first "
                             f"to undo compute_inline")
    if parent.attach_type == "inline":
        raise LoomValueError(f"compute_at on {stage.op.name}: the consumer {parent.op.name} is inlined and has "
                             f"no loops to attach to")
    if not isinstance(stage.op, (ComputeOp, TensorComputeOp)):
        raise LoomValueError(f"compute_at on {stage.op.name}: only compute operations can be attached "
                             f"(this is a {type(stage.op).__name__})")
    check_group_placement(stage.op.name, stage.group, parent)
    check_leaf(parent, scope, f"compute_at({stage.op.name})")
    stage.attach_type, stage.attach_stage, stage.attach_ivar = "scope", parent, scope
    stage.follows_group = False


def compute_inline(stage: Any) -> None:
    """Mark ``stage`` inlined; see :meth:`loom.te.schedule.Stage.compute_inline`."""
    if stage.is_output:
        raise LoomValueError(f"compute_inline on {stage.op.name}: it is an output of the schedule and must be "
                             f"stored")
    if not isinstance(stage.op, ComputeOp):
        raise LoomValueError(f"compute_inline on {stage.op.name}: only compute operations can be inlined "
                             f"(this is a {type(stage.op).__name__})")
    if stage.op.reduce_axis or any(isinstance(b, Reduce) for b in stage.op.body):
        raise LoomValueError(f"compute_inline on {stage.op.name}: it is a reduction; a reduction cannot be "
                             f"inlined into its consumers")
    stage.attach_type, stage.attach_stage, stage.attach_ivar = "inline", None, None
    stage.follows_group = False


def compute_root(stage: Any) -> None:
    """Compute ``stage`` at the top level; see :meth:`loom.te.schedule.Stage.compute_root`.

    A member of a group goes back to following its group's placement.
    """
    stage.attach_type, stage.attach_stage, stage.attach_ivar = "root", None, None
    if stage.group is not None:
        from .schedule_group import apply_group_placements

        stage.follows_group = True
        apply_group_placements(stage.group.schedule)


def set_scope(stage: Any, scope: str) -> None:
    """Set the storage scope; see :meth:`loom.te.schedule.Stage.set_scope`."""
    if not isinstance(scope, str):
        raise LoomTypeError(f"set_scope on {stage.op.name}: the scope must be a string, got {scope!r}")
    stage.scope = scope


def storage_align(stage: Any, axis: E.IterVar, factor: int, offset: int) -> None:
    """Align a storage dimension; see :meth:`loom.te.schedule.Stage.storage_align`."""
    axes = list(stage.op.axis) if isinstance(stage.op, ComputeOp) else []
    if not any(a is axis for a in axes):
        raise LoomValueError(f"storage_align on {stage.op.name}: {getattr(getattr(axis, 'var', None), 'name', axis)} "
                             f"is not one of the operation's axes {[a.var.name for a in axes]}")
    for name, v in (("factor", factor), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise LoomTypeError(f"storage_align on {stage.op.name}: {name} must be an int, got {v!r}")
    if factor <= 0 or offset < 0:
        raise LoomValueError(f"storage_align on {stage.op.name}: need factor > 0 and offset >= 0, "
                             f"got factor={factor}, offset={offset}")
    stage.storage_aligns[axis] = (factor, offset)


def double_buffer(stage: Any) -> None:
    """Request double buffering; see :meth:`loom.te.schedule.Stage.double_buffer`."""
    if stage.is_output:
        raise LoomValueError(f"double_buffer on {stage.op.name}: an output cannot be double-buffered")
    stage.double_buffer_ = True


def on_device(stage: Any, where: Any) -> None:
    """Record where ``stage`` runs; see :meth:`loom.te.schedule.Stage.on_device`.

    A placeholder names where the caller's array lives: placing one on two
    different devices is an error naming both when the schedule is built.
    """
    from ..target import Device, Target, VirtualDevice
    from .tensor import PlaceholderOp

    if not isinstance(where, (VirtualDevice, Target, Device, str)):
        raise LoomTypeError(f"on_device on {stage.op.name}: expected a VirtualDevice, a Target, a target string or a "
                            f"device (loom.cuda(0)), got {type(where).__name__} {where!r}")
    if isinstance(where, str) and not where.strip():
        raise LoomValueError(f"on_device on {stage.op.name}: the target string is empty")
    if isinstance(stage.op, PlaceholderOp):
        # Every placement is kept: loom.build resolves them and refuses two different devices.
        stage.placements = [*getattr(stage, "placements", ()), where]
    stage.device = where
