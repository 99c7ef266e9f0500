"""Device planning for a schedule whose stages run on different devices (seed 004's PlanDevices).

``s[T].on_device(where)`` records a placement; :func:`plan_devices` gives every
stage a canonical :class:`~loom.target.VirtualDevice` of the build's
:class:`~loom.target.CompilationConfig`:

* a placed stage gets its placement (``where`` is a VirtualDevice, a Target,
  a target string or a device), canonicalized through the config: a device
  without a target takes the config's most general target for its type, and a
  placement the config has no target for is an error;
* a stage attached into another (``compute_at``) runs where that stage runs, and
  an inlined stage where its consumers run; an explicit placement that differs is
  an error naming the stage and both devices;
* any other stage runs on ``default_primitive_virtual_device``;
* a placeholder lives on its placement, else on ``host_virtual_device`` (where
  the caller's arrays are); so do output arguments.

:func:`resolve_config` turns ``build``'s ``target``/``target_host`` (one target,
a list, ``{kind: target}`` or a CompilationConfig) into the config.

>>> import loom
>>> A = loom.placeholder((4,), name="A")
>>> B = loom.compute((4,), lambda i: A[i] + 1.0, name="B")
>>> s = loom.create_schedule(B.op)
>>> s[B].on_device("interp")
>>> cfg = resolve_config(s, "interp", None)
>>> plan = plan_devices(s, cfg)
>>> str(plan.stage(B.op).target.without_host()), plan.stage(A.op) is cfg.host_virtual_device
('interp', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..errors import LoomValueError, TargetError
from ..target import CompilationConfig, Device, Target, VirtualDevice, device_type_name, list_kinds
from ..target.compilation_config import _default_host
from ..target.devices import _ALIASES
from ..target.kind import find_kind
from ..target.target import target_key
from ..transform.split_devices import describe_device
from ..transform.pass_base import PassContext

__all__ = ["DevicePlan", "PlacementError", "plan_devices", "resolve_config", "is_heterogeneous", "describe_device"]

_CPU = 1


class PlacementError(LoomValueError):
    """An impossible placement: it names the stage and the devices involved."""


def _placed(sch: Any) -> list[Any]:
    return [st for st in sch.stages if st.device is not None]


def is_heterogeneous(sch: Any, target: Any) -> bool:
    """Whether a build of ``sch`` for ``target`` needs device planning: a stage is placed, or there are
    several targets (a list of two or more, a dict, or a heterogeneous CompilationConfig)."""
    if any(st.device is not None for st in getattr(sch, "stages", ())):
        return True
    if isinstance(target, CompilationConfig):
        return target.optional_homogeneous_target is None
    if isinstance(target, Mapping):
        return len(target) > 1
    return isinstance(target, (list, tuple)) and len(target) > 1


def _target_of(where: Any) -> Target | None:
    """The target a placement names (None for a bare device or device type)."""
    if isinstance(where, Target):
        return where
    if isinstance(where, VirtualDevice):
        return where.target
    if isinstance(where, str):
        name = where.strip().split(" ", 1)[0].lower()
        if name in _ALIASES and find_kind(name) is None:
            return None  # a device name ("gpu", "cuda" without the backend)
        return Target(where)
    return None


def _device_type_of(where: Any) -> int | None:
    if isinstance(where, Device):
        return where.device_type
    if isinstance(where, VirtualDevice):
        return where.device_type
    if isinstance(where, str):
        return _ALIASES.get(where.strip().split(" ", 1)[0].lower())
    return None


def _placements(st: Any) -> list[Any]:
    return list(getattr(st, "placements", [st.device]))


def _placement_target(where: Any) -> Target | None:
    """The target a placement names, or the installed kind of a bare non-CPU device (None for the CPU)."""
    t = _target_of(where)
    if t is not None:
        return t
    dt = _device_type_of(where)
    return None if dt is None or dt == _CPU else _kind_for_device(dt)


def _kind_for_device(device_type: int) -> Target:
    """The installed target kind that compiles for ``device_type`` (named after the device first)."""
    kinds = [k for k in (find_kind(n) for n in list_kinds()) if k is not None and k.device_type == device_type]
    if not kinds:
        raise TargetError(f"no installed target kind compiles for device {device_type_name(device_type)}; "
                          f"installed kinds: {', '.join(list_kinds())}")
    kinds.sort(key=lambda k: k.name != device_type_name(device_type))
    return Target(kinds[0].name)


def _raw_targets(target: Any) -> list[Any]:
    if isinstance(target, Mapping):
        out = []
        for key, value in target.items():
            t = value if isinstance(value, Target) else Target(value)
            if not isinstance(key, str) or key not in (t.kind_name, device_type_name(t.device_type)):
                raise TargetError(f"build(): the targets dict maps {key!r} to {t}; key each target by its kind "
                                  f"({t.kind_name!r}) or its device ({device_type_name(t.device_type)!r})")
            out.append(t)
        return out
    if isinstance(target, (list, tuple)):
        if not target:
            raise TargetError("build(): the list of targets is empty")
        return list(target)
    return [target]


def resolve_config(sch: Any, target: Any, target_host: Any) -> CompilationConfig:
    """The CompilationConfig of a build of ``sch`` for ``target`` (and ``target_host``).

    With ``target=None`` the targets are the current target (or the default host)
    plus the target of every placement, so ``loom.lower`` and a plain ``loom.build``
    of a placed schedule need no list; given targets are taken as they are.
    """
    if isinstance(target, CompilationConfig):
        if target_host is not None:
            raise TargetError("build(): a CompilationConfig carries its host target; do not give target_host too")
        return target
    if target is None:
        placed = [t for t in map(_placement_target, (w for st in _placed(sch) for w in _placements(st)))
                  if t is not None]
        raw: list[Any] = [Target.current() or next((t for t in placed if t.device_type == _CPU), None)
                          or _default_host()]
        for t in placed:  # one target per device type: the first placement's
            if all(t.device_type != r.device_type for r in raw):
                raw.append(t)
    else:
        raw = [t if isinstance(t, Target) else Target(t) for t in _raw_targets(target)]
    if target_host is not None:
        raw = [t.with_host(target_host) for t in raw]
    return CompilationConfig(PassContext.current(), raw)


@attrs.frozen
class DevicePlan:
    """Where each operation of a schedule runs, and where its arguments live.

    :param config: the build's configuration (every VirtualDevice here is canonical in it).
    :param devices: ``id(op) -> VirtualDevice`` for every stage that runs code or is a placeholder.
    :param names: ``id(op) -> name``, for messages.
    """

    config: CompilationConfig
    devices: Mapping[int, VirtualDevice]
    names: Mapping[int, str]

    def stage(self, op: Any) -> VirtualDevice:
        """The device of operation ``op`` (a placeholder's: where its array lives)."""
        return self.devices[id(op)]

    def argument(self, arg: Any) -> VirtualDevice:
        """Where argument ``arg`` (a Tensor, Buffer or Var) lives: a placed placeholder's device, else the host."""
        from ..te.tensor import PlaceholderOp, Tensor

        if isinstance(arg, Tensor) and isinstance(arg.op, PlaceholderOp) and id(arg.op) in self.devices:
            return self.devices[id(arg.op)]
        return self.config.host_virtual_device

    def lines(self) -> list[str]:
        """One line per stage: ``B: ext_dev(0) [ext_dev]``."""
        return [f"{self.names[k]}: {describe_device(vd)}" for k, vd in self.devices.items()]


def _known_target(cfg: CompilationConfig, t: Target) -> Target | None:
    """The config's own object for ``t``: structurally equal, or equal but for the host ``t`` leaves open."""
    found = cfg.canonical_target(t)
    if any(found is k for k in (cfg.host_target, *cfg.primitive_targets)):
        return found
    if t.host is None:
        key = target_key(t)
        return next((p for p in cfg.primitive_targets if target_key(p.without_host()) == key), None)
    return None


def _canonical(where: Any, cfg: CompilationConfig, stage: str) -> VirtualDevice:
    """``where`` as a canonical VirtualDevice of ``cfg``; a PlacementError when the config lacks its target."""
    try:
        if isinstance(where, VirtualDevice):
            vd = where
        elif isinstance(where, Device):
            vd = VirtualDevice(where.device_type, where.device_id)
        else:
            t = _target_of(where)
            vd = VirtualDevice(target=t) if t is not None else VirtualDevice(_device_type_of(where), 0)
        if vd.target is not None:
            target = _known_target(cfg, vd.target)
            if target is None:
                have = ", ".join(str(t.without_host()) for t in cfg.primitive_targets)
                raise PlacementError(f"stage {stage} is placed on {vd.target.without_host()}, which is not a target of "
                                     f"this build (targets: {have}); add it to build(..., target=[...])")
            vd = vd.with_(target=target)
        elif vd.device_type == _CPU and all(t.device_type != _CPU for t in cfg.primitive_targets):
            vd = vd.with_(target=cfg.host_target)  # the host compiles CPU code when no primitive target does
        return cfg.canonical_virtual_device(vd)
    except PlacementError:
        raise
    except TargetError as err:
        raise PlacementError(f"stage {stage} is placed on {where}, which this build cannot compile for: {err}") \
            from None


def _same(a: VirtualDevice, b: VirtualDevice) -> bool:
    """One device and one target (an open device id is device 0)."""
    return (a.device_type, a.virtual_device_id or 0, a.target is None or target_key(a.target)) == \
        (b.device_type, b.virtual_device_id or 0, b.target is None or target_key(b.target))


def plan_devices(sch: Any, cfg: CompilationConfig) -> DevicePlan:
    """Every stage's device (see the module docstring)."""
    from ..te.tensor import PlaceholderOp

    devices: dict[int, VirtualDevice] = {}
    names: dict[int, str] = {}
    default = _canonical(cfg.default_primitive_virtual_device, cfg, "(default)")
    consumers: dict[int, list[Any]] = {}
    for st in sch.stages:
        for t in getattr(st.op, "input_tensors", []):
            consumers.setdefault(id(t.op), []).append(st)

    def explicit(st: Any) -> VirtualDevice | None:
        return None if st.device is None else _canonical(st.device, cfg, st.op.name)

    resolving: set[int] = set()

    def resolve(st: Any) -> VirtualDevice | None:
        key = id(st.op)
        if key in devices:
            return devices[key]
        if key in resolving:
            return None
        resolving.add(key)
        own = explicit(st)
        if st.attach_type == "scope":
            parent = resolve(st.attach_stage)
            if own is not None and parent is not None and not _same(own, parent):
                raise PlacementError(f"stage {st.op.name} is placed on {describe_device(own)} but computed inside "
                                     f"stage {st.attach_stage.op.name}, which runs on {describe_device(parent)}; "
                                     "a stage attached with compute_at runs on its parent's device")
            vd = parent
        elif st.attach_type == "inline":
            users = [(c, resolve(c)) for c in consumers.get(key, [])]
            if own is not None:
                for c, dev in users:
                    if dev is not None and not _same(dev, own):
                        raise PlacementError(f"stage {st.op.name} is placed on {describe_device(own)} but inlined "
                                             f"into stage {c.op.name}, which runs on {describe_device(dev)}; an "
                                             "inlined stage runs where its consumers run")
            vd = own
        else:
            vd = own or default
        resolving.discard(key)
        if vd is not None:
            devices[key] = vd
            names[key] = st.op.name
        return vd

    for st in sch.stages:
        if isinstance(st.op, PlaceholderOp):
            placements = [_canonical(w, cfg, st.op.name) for w in getattr(st, "placements", ())]  # none: the host
            for other in placements[1:]:
                if not _same(other, placements[0]):
                    raise PlacementError(f"placeholder {st.op.name} is placed on {describe_device(placements[0])} "
                                         f"and on {describe_device(other)}; the caller's array lives on one device")
            devices[id(st.op)] = placements[0] if placements else cfg.host_virtual_device
            names[id(st.op)] = st.op.name
        else:
            resolve(st)
    return DevicePlan(cfg, devices, names)
