"""``CompilationConfig``: the host target, the primitive targets and canonical virtual devices.

It turns the targets a user supplies (``"llvm"``, ``["llvm", "cuda"]``, targets
with or without hosts) into one validated, canonical form, following TVM's
``CompilationConfig``:

* **Host target.**  An explicit host on any raw target wins (all such hosts
  must agree); otherwise the first raw target compiling for the CPU serves as
  host; otherwise a default CPU target: ``llvm`` when installed, else ``c``,
  else ``interp``, else any other installed CPU kind.
* **Primitive targets** are the raw targets, each with exactly the
  ``host_target`` object as its host.  They are unique by kind name.  Targets
  sharing a device type follow the *most general target first* rule: the
  first is a general target and every later one is an external-codegen
  target (``TargetKind.is_external_codegen``) for that device.
* **Homogeneous** when there is one primitive target:
  ``optional_homogeneous_target is primitive_targets[0]``; otherwise None.
* **Canonical virtual devices**: :meth:`CompilationConfig.canonical_virtual_device`
  returns one shared object per structurally distinct virtual device, so
  canonical virtual devices are pointer-equal exactly when structurally equal.

``pass_ctx`` may be None, a mapping, or any object with a ``config`` mapping.
The key ``"loom.fallback_device_type"`` (an int or a device name) picks the
device type of ``default_primitive_virtual_device``; without it that is the
first primitive target's device type.

Construction is idempotent: ``CompilationConfig(ctx, cfg.primitive_targets)``
is structurally equal to ``cfg``.

>>> from loom.target import AttrSpec, TargetKind, override_kinds
>>> kinds = [TargetKind("llvm", "cpu", {"mcpu": AttrSpec(str)}, default_keys=("cpu",)),
...          TargetKind("cuda", "cuda", {"arch": AttrSpec(str)}, default_keys=("cuda", "gpu"))]
>>> with override_kinds(*kinds):
...     cfg = CompilationConfig(None, ["llvm", "cuda -arch=sm_90"])
...     [str(t) for t in cfg.primitive_targets], cfg.optional_homogeneous_target
(['llvm -host=llvm', 'cuda -arch=sm_90 -host=llvm'], None)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..errors import TargetError
from ..ir.node import Node, TupleOf, child, children, register_object
from .devices import DeviceType, device_type_name, device_type_of
from .kind import find_kind, list_kinds
from .target import Target, TargetLike, target_key
from .virtual_device import VirtualDevice, virtual_device_key

__all__ = ["CompilationConfig", "FALLBACK_DEVICE_TYPE_KEY"]

#: Pass-context config key overriding the device type of primitive operators.
FALLBACK_DEVICE_TYPE_KEY = "loom.fallback_device_type"
#: Preferred kinds for a default host, in order; any other CPU kind comes after.
DEFAULT_HOST_KINDS = ("llvm", "c", "interp")


@register_object("target.CompilationConfig")
@attrs.define(frozen=True, eq=False, repr=False, slots=True, weakref_slot=False, init=False)
class CompilationConfig(Node):
    """Targets and distinguished virtual devices for one (possibly heterogeneous) build.

    Parameters
    ----------
    pass_ctx:
        None, a mapping, or an object with a ``config`` mapping (a PassContext).
    raw_targets:
        A target (string, dict or Target) or a sequence of them.

    The field form ``CompilationConfig(host_target=..., primitive_targets=...,
    default_primitive_virtual_device=..., host_virtual_device=...,
    optional_homogeneous_target=...)`` (``with_``, ``load_json``) re-checks
    the invariants.
    """

    host_target: Target = child(Target)
    primitive_targets: TupleOf[Target] = children(Target)
    default_primitive_virtual_device: VirtualDevice = child(VirtualDevice)
    host_virtual_device: VirtualDevice = child(VirtualDevice)
    optional_homogeneous_target: Target | None = child(Target, optional=True, default=None)
    # Not reflected (init=False): the canonical-virtual-device cache, keyed structurally.
    _cache: dict[Any, VirtualDevice] = attrs.field(init=False, factory=dict)
    _lock: Any = attrs.field(init=False, factory=threading.Lock)

    def __init__(self, pass_ctx: Any = None, raw_targets: TargetLike | Sequence[TargetLike] | None = None,
                 **fields: Any) -> None:
        set_field = object.__setattr__
        set_field(self, "_cache", {})
        set_field(self, "_lock", threading.Lock())
        if fields:
            if pass_ctx is not None or raw_targets is not None:
                raise TargetError("CompilationConfig takes either (pass_ctx, raw_targets) or its fields, not both")
            self._init_from_fields(fields)
            return
        targets = _raw_targets(raw_targets)
        host = _choose_host(targets)
        set_field(self, "host_target", host)
        prims = tuple(t.with_host(host) for t in targets)
        _check_primitive_targets(prims)
        set_field(self, "primitive_targets", prims)
        set_field(self, "optional_homogeneous_target", prims[0] if len(prims) == 1 else None)
        set_field(self, "host_virtual_device",
                  self.canonical_virtual_device(VirtualDevice(host.device_type, 0, host)))
        fallback = _config(pass_ctx).get(FALLBACK_DEVICE_TYPE_KEY)
        default_type = prims[0].device_type if fallback is None else device_type_of(fallback)
        set_field(self, "default_primitive_virtual_device",
                  self.canonical_virtual_device(VirtualDevice.for_device_type(default_type)))

    def _init_from_fields(self, fields: dict[str, Any]) -> None:
        names = ("host_target", "primitive_targets", "default_primitive_virtual_device",
                 "host_virtual_device", "optional_homogeneous_target")
        unknown = sorted(set(fields) - set(names))
        missing = [n for n in names[:4] if n not in fields]
        if unknown or missing:
            raise TargetError(f"CompilationConfig fields: unknown {unknown}, missing {missing}; "
                              f"expected {list(names)}")
        host = fields["host_target"]
        if not isinstance(host, Target) or host.host is not None:
            raise TargetError(f"CompilationConfig.host_target must be a Target without a host, got {host!r}")
        prims = fields["primitive_targets"]
        prims = tuple(prims) if isinstance(prims, (list, tuple)) else ()
        if not prims or not all(isinstance(p, Target) and p.host is not None for p in prims):
            raise TargetError("CompilationConfig.primitive_targets must be targets that have a host")
        # A structurally equal host object (e.g. one copied by a serializer) is rebound to host_target.
        prims = tuple(p if p.host is host else _rehost(p, host) for p in prims)
        _check_primitive_targets(prims)
        homogeneous = fields.get("optional_homogeneous_target")
        expected = prims[0] if len(prims) == 1 else None
        if (homogeneous is None) != (expected is None) or (
                expected is not None and homogeneous is not None and target_key(homogeneous) != target_key(expected)):
            raise TargetError("CompilationConfig.optional_homogeneous_target must be the primitive target "
                              f"when there is exactly one, else None; got {homogeneous!r} for {len(prims)} targets")
        set_field = object.__setattr__
        set_field(self, "host_target", host)
        set_field(self, "primitive_targets", prims)
        set_field(self, "optional_homogeneous_target", expected)
        for name in ("host_virtual_device", "default_primitive_virtual_device"):
            vd = fields[name]
            if not isinstance(vd, VirtualDevice):
                raise TargetError(f"CompilationConfig.{name} must be a VirtualDevice, got {type(vd).__name__}")
            set_field(self, name, self.canonical_virtual_device(vd))

    # -- lookups ----------------------------------------------------------
    def find_primitive_target_for_device_or_fail(self, device_type: Any) -> Target:
        """The most general primitive target for ``device_type`` (int or name).

        That is the first primitive target of that device type; a TargetError
        names the configured targets when there is none.
        """
        dt = device_type_of(device_type)
        for t in self.primitive_targets:
            if t.device_type == dt:
                return t
        have = ", ".join(f"{t.kind_name} ({device_type_name(t.device_type)})" for t in self.primitive_targets)
        raise TargetError(
            f"no primitive target for device type {device_type_name(dt)} ({dt}); this configuration "
            f"has: {have}. Add a {device_type_name(dt)} target to the build's targets"
        )

    def find_primitive_target_for_kind(self, kind_name: str) -> Target | None:
        """The primitive target of kind ``kind_name``, or None."""
        return next((t for t in self.primitive_targets if t.kind_name == kind_name), None)

    def canonical_target(self, target: TargetLike) -> Target:
        """``target``, or the host/primitive target object structurally equal to it."""
        t = target if isinstance(target, Target) else Target(target)
        key = target_key(t)
        if key == target_key(self.host_target):
            return self.host_target
        return next((p for p in self.primitive_targets if target_key(p) == key), t)

    def canonical_virtual_device(self, virtual_device: VirtualDevice) -> VirtualDevice:
        """The unique canonical object for ``virtual_device``.

        A device type without a target gets the most general primitive target
        of that type (the one place a target is defaulted from a device type);
        a target is replaced by :meth:`canonical_target`.  Two results are
        pointer-equal exactly when they are structurally equal.
        """
        if not isinstance(virtual_device, VirtualDevice):
            raise TargetError(f"canonical_virtual_device expects a VirtualDevice, got {type(virtual_device).__name__}")
        vd = virtual_device
        if vd.target is not None:
            target: Target | None = self.canonical_target(vd.target)
        elif vd.device_type is not None:
            target = self.find_primitive_target_for_device_or_fail(vd.device_type)
        else:
            target = None
        if target is not vd.target:
            vd = vd.with_(target=target)
        key = virtual_device_key(vd)
        with self._lock:
            return self._cache.setdefault(key, vd)

    # -- text --------------------------------------------------------------
    def __repr__(self) -> str:
        prims = ", ".join(repr(t) for t in self.primitive_targets)
        return (
            "CompilationConfig(\n"
            f"  host_target={self.host_target!r},\n"
            f"  primitive_targets=[{prims}],\n"
            f"  default_primitive_virtual_device={self.default_primitive_virtual_device!r},\n"
            f"  host_virtual_device={self.host_virtual_device!r},\n"
            f"  optional_homogeneous_target={self.optional_homogeneous_target!r})"
        )

    __str__ = __repr__


# ---------------------------------------------------------------------------
# Construction rules


def _config(pass_ctx: Any) -> Mapping[str, Any]:
    if pass_ctx is None:
        return {}
    cfg = pass_ctx if isinstance(pass_ctx, Mapping) else getattr(pass_ctx, "config", None)
    if cfg is None:
        return {}
    if not isinstance(cfg, Mapping):
        raise TargetError(f"pass_ctx.config must be a mapping, got {type(cfg).__name__}")
    return cfg


def _raw_targets(raw: Any) -> list[Target]:
    if raw is None:
        raise TargetError("CompilationConfig needs at least one target, got None")
    items = [raw] if isinstance(raw, (str, Mapping, Target)) else list(raw)
    if not items:
        raise TargetError("CompilationConfig needs at least one target, got an empty list")
    return [t if isinstance(t, Target) else Target(t) for t in items]


def _choose_host(targets: list[Target]) -> Target:
    hosts = [t.host for t in targets if t.host is not None]
    if hosts:
        for h in hosts[1:]:
            if target_key(h) != target_key(hosts[0]):
                raise TargetError(
                    f"the targets name different hosts, {hosts[0]!r} and {h!r}; give every target the same "
                    f"host (or only one of them a host)"
                )
        return hosts[0]
    cpu = next((t for t in targets if t.device_type == DeviceType.CPU and not t.kind.is_external_codegen), None)
    if cpu is not None:
        return cpu
    return _default_host()


def _default_host() -> Target:
    installed = list_kinds()
    cpu_kinds = [n for n in installed
                 if (k := find_kind(n)) is not None and k.device_type == DeviceType.CPU and not k.is_external_codegen]
    for name in (*[n for n in DEFAULT_HOST_KINDS if n in cpu_kinds], *cpu_kinds):
        return Target(name)
    raise TargetError(
        "no CPU target kind is installed to serve as the host target (installed kinds: "
        f"{', '.join(installed) or 'none'}). Install a CPU backend such as loom-llvm or loom-c, "
        "or give a target an explicit host"
    )


def _rehost(target: Target, host: Target) -> Target:
    if target.host is None or target_key(target.host) != target_key(host):
        raise TargetError(f"primitive target {target!r} has host {target.host!r}, not the host target {host!r}")
    return target.with_host(host)


def _check_primitive_targets(prims: tuple[Target, ...]) -> None:
    """Kinds are unique, and each device type lists its general target first."""
    by_kind: dict[str, Target] = {}
    first_of_type: dict[int, Target] = {}
    for t in prims:
        if t.kind_name in by_kind:
            raise TargetError(
                f"two targets of kind {t.kind_name!r}: {_show(by_kind[t.kind_name])} and {_show(t)}; "
                "primitive targets must be unique by kind"
            )
        by_kind[t.kind_name] = t
        external = t.kind.is_external_codegen
        general = first_of_type.get(t.device_type)
        dev = device_type_name(t.device_type)
        if general is None:
            if external:
                raise TargetError(
                    f"external codegen target {_show(t)} is the first {dev} target; the most general {dev} target "
                    f"(e.g. {_general_kinds(t.device_type)}) must come before it"
                )
            first_of_type[t.device_type] = t
        elif not external:
            raise TargetError(
                f"targets {_show(general)} and {_show(t)} both compile for {dev} and neither is external codegen; "
                f"only external codegen targets may follow the most general target of a device type"
            )


def _show(t: Target) -> str:
    """A primitive target without its (shared, already known) host, for messages."""
    return repr(t.without_host())


def _general_kinds(device_type: int) -> str:
    names = [n for n in list_kinds()
             if (k := find_kind(n)) is not None and k.device_type == device_type and not k.is_external_codegen]
    return ", ".join(repr(n) for n in names) or "an installed general kind"
