"""``VirtualDevice``: where a value lives or an operator runs, possibly partly unknown.

Each field is a constraint that may be left open: a device type, a virtual
device id (which of several devices of that type), a target to compile for,
and a memory scope.  Device planning fills the open fields; a
:class:`~loom.target.CompilationConfig` turns them into canonical, shared
objects.

>>> from loom.target import VirtualDevice
>>> VirtualDevice.fully_unconstrained().is_fully_unconstrained
True
>>> VirtualDevice("cuda", 0)
VirtualDevice(device_type=cuda, virtual_device_id=0)
"""

from __future__ import annotations

from typing import Any

from ..errors import TargetError
from ..ir.node import Node, child, register_object, value
from .devices import device_type_name, device_type_of
from .target import Target, target_key

__all__ = ["VirtualDevice", "virtual_device_key"]


def _opt_device_type(v: Any) -> int | None:
    return None if v is None else device_type_of(v)


@register_object("target.VirtualDevice")
class VirtualDevice(Node):
    """A (possibly partial) placement: device type, virtual device id, target, memory scope.

    ``device_type`` may be an int or a name (``"cuda"``); when only ``target``
    is given the device type is the target's.  A device type that disagrees
    with the target's is a TargetError.  ``None`` (``""`` for the memory
    scope) means unconstrained.
    """

    device_type: int | None = value(int, optional=True, default=None, converter=_opt_device_type)
    virtual_device_id: int | None = value(int, optional=True, default=None)
    target: Target | None = child(Target, optional=True, default=None)
    memory_scope: str = value(str, default="")

    def __attrs_post_init__(self) -> None:
        if self.virtual_device_id is not None and (isinstance(self.virtual_device_id, bool)
                                                   or self.virtual_device_id < 0):
            raise TargetError(f"a virtual device id must be a non-negative int or None, got {self.virtual_device_id!r}")
        if self.target is None:
            return
        target_type = self.target.device_type
        if self.device_type is None:
            object.__setattr__(self, "device_type", target_type)
        elif self.device_type != target_type:
            raise TargetError(
                f"VirtualDevice device_type {device_type_name(self.device_type)} conflicts with target "
                f"{self.target!r}, which compiles for {device_type_name(target_type)}"
            )

    # -- constructors -----------------------------------------------------
    @staticmethod
    def fully_unconstrained() -> VirtualDevice:
        """The virtual device with no constraint at all (one shared object)."""
        return _FULLY_UNCONSTRAINED

    @staticmethod
    def for_device_type(device_type: Any, virtual_device_id: int | None = None) -> VirtualDevice:
        return VirtualDevice(device_type, virtual_device_id)

    @staticmethod
    def for_target(target: Target) -> VirtualDevice:
        return VirtualDevice(target=target)

    @staticmethod
    def for_memory_scope(memory_scope: str) -> VirtualDevice:
        return VirtualDevice(memory_scope=memory_scope)

    # -- predicates -------------------------------------------------------
    @property
    def is_fully_unconstrained(self) -> bool:
        """True when no field is constrained."""
        return (self.device_type is None and self.virtual_device_id is None and self.target is None
                and not self.memory_scope)

    @property
    def is_fully_constrained(self) -> bool:
        """True when every field (device type, id, target, memory scope) is constrained."""
        return (self.device_type is not None and self.virtual_device_id is not None
                and self.target is not None and bool(self.memory_scope))

    # -- lattice ----------------------------------------------------------
    def join(self, other: VirtualDevice) -> VirtualDevice | None:
        """The virtual device satisfying both constraints, or None when they conflict."""
        out: dict[str, Any] = {}
        for name in ("device_type", "virtual_device_id", "memory_scope"):
            a, b = getattr(self, name), getattr(other, name)
            if a in (None, "") or b in (None, "") or a == b:
                out[name] = a if a not in (None, "") else b
            else:
                return None
        ta, tb = self.target, other.target
        if ta is not None and tb is not None and target_key(ta) != target_key(tb):
            return None
        out["target"] = ta if ta is not None else tb
        try:
            return VirtualDevice(**out)
        except TargetError:  # e.g. a device type from one side, a target of another type from the other
            return None

    def default(self, other: VirtualDevice) -> VirtualDevice:
        """Fill the unconstrained fields of ``self`` from ``other`` where consistent."""
        device_type = self.device_type if self.device_type is not None else other.device_type
        vid = self.virtual_device_id if self.virtual_device_id is not None else other.virtual_device_id
        target = self.target
        if target is None and other.target is not None and other.target.device_type == device_type:
            target = other.target
        scope = self.memory_scope or other.memory_scope
        return VirtualDevice(device_type, vid, target, scope)

    def __repr__(self) -> str:
        parts = []
        if self.device_type is not None:
            parts.append(f"device_type={device_type_name(self.device_type)}")
        if self.virtual_device_id is not None:
            parts.append(f"virtual_device_id={self.virtual_device_id}")
        if self.target is not None:
            parts.append(f"target={self.target!r}")
        if self.memory_scope:
            parts.append(f"memory_scope={self.memory_scope!r}")
        return f"VirtualDevice({', '.join(parts)})"

    __str__ = __repr__


_FULLY_UNCONSTRAINED = VirtualDevice()


def virtual_device_key(vd: VirtualDevice) -> tuple[Any, ...]:
    """A hashable value equal for two virtual devices exactly when they are structurally equal."""
    target = None if vd.target is None else target_key(vd.target)
    return (vd.device_type, vd.virtual_device_id, target, vd.memory_scope)
