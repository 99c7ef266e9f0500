"""Target kinds and their registry.

A :class:`TargetKind` names a code generator (``llvm``, ``cuda``, ``c``...),
the DLPack device type it compiles for, and the schema of the attributes a
:class:`~loom.target.Target` of that kind accepts.  Kinds are contributed by
plugins through the ``loom_target_kinds`` hook; the registry asks the plugin
manager lazily, on first use, so importing ``loom`` never loads a backend.
Tests and notebooks may add kinds directly with :func:`register_target_kind`
or swap the whole registry with :func:`override_kinds`.

>>> kind = TargetKind("toy", "cpu", {"lanes": AttrSpec(int, 4)}, default_keys=("cpu",))
>>> with override_kinds(kind):
...     list_kinds(), get_kind("toy").schema["lanes"].default
(['toy'], 4)
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from ..errors import TargetError
from .devices import device_type_name, device_type_of

__all__ = [
    "AttrSpec", "TargetKind", "list_kinds", "get_kind", "find_kind", "register_target_kind",
    "unregister_target_kind", "reset_kind_cache", "override_kinds", "kind_origin",
]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_ATTR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Names the target syntax itself uses; no schema may declare them.
RESERVED_ATTRS = frozenset({"kind", "host", "keys"})

# ---------------------------------------------------------------------------
# Attribute specs


def _normalize_type(t: Any) -> type:
    """The attribute types: str, int, bool, float, and list (a list of str)."""
    if t in (str, int, bool, float):
        return t
    if t in (list, tuple) or str(t) in ("list[str]", "tuple[str, ...]"):
        return list
    raise TargetError(f"an attribute type must be str, int, bool, float or list[str], got {t!r}")


_TYPE_NAMES = {str: "str", int: "int", bool: "bool", float: "float", list: "list[str]"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@attrs.frozen
class AttrSpec:
    """The type and default of one target attribute.

    ``type`` is ``str``, ``int``, ``bool``, ``float`` or ``list`` (a list of
    strings, written ``-mattr=+avx2,+fma`` and stored as a tuple).  A default
    of None means the attribute is simply absent unless given.

    >>> AttrSpec(list).coerce("+avx2,+fma", "mattr")
    ('+avx2', '+fma')
    """

    type: type = attrs.field(converter=_normalize_type)
    default: Any = None
    doc: str = ""

    def __attrs_post_init__(self) -> None:
        if self.default is not None:
            object.__setattr__(self, "default", self.coerce(self.default, "default"))

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES[self.type]

    def coerce(self, value: Any, where: str) -> Any:
        """Check and normalise ``value``; strings are parsed as the target syntax writes them.

        ``where`` names the attribute in error messages.
        """
        t = self.type
        try:
            if isinstance(value, str) and t is not str:
                return self._parse(value)
            if t is str and isinstance(value, str):
                return value
            if t is int and isinstance(value, int) and not isinstance(value, bool):
                return int(value)
            if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if t is bool and (isinstance(value, bool) or value in (0, 1)):
                return bool(value)
            if t is list and isinstance(value, (list, tuple)):
                return self._list(value)
        except ValueError as err:
            raise TargetError(f"attribute {where!r} expects {self.type_name}, got {value!r} ({err})") from None
        raise TargetError(f"attribute {where!r} expects {self.type_name}, got {type(value).__name__} {value!r}")

    def _parse(self, text: str) -> Any:
        if self.type is int:
            return int(text.strip(), 10)
        if self.type is float:
            return float(text)
        if self.type is bool:
            low = text.strip().lower()
            if low in _TRUE or low in _FALSE:
                return low in _TRUE
            raise ValueError("write true/false or 1/0")
        return self._list([x for x in text.split(",") if x])

    @staticmethod
    def _list(items: Any) -> tuple[str, ...]:
        for x in items:
            if not isinstance(x, str):
                raise ValueError(f"elements must be str, got {type(x).__name__}")
            if not x or "," in x:
                raise ValueError(f"elements must be non-empty and free of ',', got {x!r}")
        return tuple(items)

    def format(self, value: Any) -> str:
        """The text the target syntax uses for ``value`` (parses back with :meth:`coerce`)."""
        if self.type is bool:
            return "true" if value else "false"
        if self.type is list:
            return ",".join(value)
        if self.type is float:
            return repr(value)
        return str(value)


# ---------------------------------------------------------------------------
# Target kinds

#: Options every kind takes, as in TVM's classic target strings: ``-model`` names the
#: device model (for tuning logs), ``-libs`` the vendor libraries the build may call,
#: and ``-device`` a device name that also becomes the target's first key
#: (``llvm -device=arm_cpu`` has keys ``arm_cpu, cpu``).
GENERIC_ATTRS: dict[str, AttrSpec] = {"device": AttrSpec(str), "libs": AttrSpec(list), "model": AttrSpec(str)}


def _schema(value: Any) -> dict[str, AttrSpec]:
    if not isinstance(value, Mapping):
        raise TargetError(f"a target kind schema must map attribute names to AttrSpec, got {type(value).__name__}")
    out: dict[str, AttrSpec] = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not _ATTR_NAME.match(name) or name in RESERVED_ATTRS:
            raise TargetError(
                f"invalid target attribute name {name!r}: use letters, digits and '_' and avoid "
                f"{sorted(RESERVED_ATTRS)}"
            )
        out[name] = spec if isinstance(spec, AttrSpec) else AttrSpec(spec)
    return dict(sorted(out.items()))


def _keys(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    keys = tuple(value)
    if not all(isinstance(k, str) and k for k in keys):
        raise TargetError(f"target keys must be non-empty strings, got {keys!r}")
    return keys


def _check_name(_inst: Any, _attr: Any, name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise TargetError(f"a target kind name must match {_NAME.pattern}, got {name!r}")


@attrs.frozen(eq=False, repr=False)
class TargetKind:
    """A kind of target: a name, a device type, and an attribute schema.

    Parameters
    ----------
    name:
        The kind name used in target strings (``"llvm"``).
    device_type:
        DLPack device type (int or name: ``"cpu"`` = 1, ``"cuda"`` = 2).
    schema:
        ``{attr_name: AttrSpec}`` (a bare type stands for ``AttrSpec(type)``).
    default_keys:
        Keys every target of this kind carries (``("cuda", "gpu")``).
    default_attrs:
        Optional ``fn(given_attrs) -> {name: value}`` for defaults that depend on
        the machine or on other attributes (e.g. ``mcpu`` from the host CPU).
        It runs on every construction; it should cache expensive probes itself.
    is_external_codegen:
        True for a kind that compiles only some operators for a device whose
        general kind is another one; such targets follow the general target of
        their device in a :class:`~loom.target.CompilationConfig`.

    >>> TargetKind("cuda", "cuda", {"arch": AttrSpec(str)}, default_keys=("cuda", "gpu"))
    TargetKind('cuda', device=cuda, attrs=[arch])
    """

    name: str = attrs.field(validator=_check_name)
    device_type: int = attrs.field(converter=device_type_of)
    schema: dict[str, AttrSpec] = attrs.field(factory=dict, converter=_schema)
    default_keys: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    default_attrs: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    is_external_codegen: bool = False
    doc: str = ""

    def __repr__(self) -> str:
        ext = ", external codegen" if self.is_external_codegen else ""
        return (f"TargetKind({self.name!r}, device={device_type_name(self.device_type)}, "
                f"attrs=[{', '.join(self.schema)}]{ext})")

    def spec(self, attr: str) -> AttrSpec:
        """The spec of ``attr``, or a TargetError listing the attributes this kind allows."""
        found = self.schema.get(attr) or GENERIC_ATTRS.get(attr)
        if found is None:
            allowed = ", ".join(self.schema) or "none"
            raise TargetError(f"target kind {self.name!r} has no attribute {attr!r}; allowed: {allowed} "
                              f"(plus the generic {', '.join(GENERIC_ATTRS)}, keys, host)")
        return found


# ---------------------------------------------------------------------------
# The registry


class _Registry:
    """Kinds from plugins (asked lazily, then cached) plus kinds registered directly."""

    def __init__(self, use_plugins: bool) -> None:
        self.use_plugins = use_plugins
        self.plugin_kinds: dict[str, tuple[TargetKind, str]] | None = None if use_plugins else {}
        self.manual: dict[str, TargetKind] = {}
        self.merged: dict[str, TargetKind] | None = None  # plugin kinds shadowed by manual ones

    def invalidate(self, plugins: bool = False) -> None:
        self.merged = None
        if plugins and self.use_plugins:
            self.plugin_kinds = None

    def load(self) -> dict[str, tuple[TargetKind, str]]:
        """``{name: (kind, plugin name)}`` from the plugin manager, asked once."""
        if self.plugin_kinds is None:
            from ..plugins import collect_target_kinds  # lazy: loading plugins imports backends

            self.plugin_kinds = dict(collect_target_kinds())
        return self.plugin_kinds

    def all(self) -> dict[str, TargetKind]:
        if self.merged is None:
            merged = {name: kind for name, (kind, _) in self.load().items()}
            merged.update(self.manual)
            self.merged = merged
        return self.merged


_LOCK = threading.RLock()
_STATE = _Registry(use_plugins=True)


def _kinds() -> dict[str, TargetKind]:
    with _LOCK:
        return _STATE.all()


def list_kinds() -> list[str]:
    """The names of every installed target kind, sorted."""
    return sorted(_kinds())


def find_kind(name: str) -> TargetKind | None:
    """The kind called ``name``, or None when none is installed."""
    return _kinds().get(name)


def get_kind(name: str) -> TargetKind:
    """The kind called ``name``; a TargetError listing the installed kinds when unknown."""
    kind = find_kind(name)
    if kind is None:
        installed = ", ".join(list_kinds()) or "none"
        hint = "".join(f"\n  note: plugin {p.name!r} failed: {p.error}" for p in _broken_plugins())
        raise TargetError(
            f"unknown target kind {name!r}; installed kinds: {installed}. A backend package "
            f"(e.g. loom-llvm, loom-cuda, loom-c) contributes its kind when installed.{hint}"
        )
    return kind


def kind_origin(name: str) -> str | None:
    """Who installed kind ``name``: ``"plugin"`` (the hook), ``"manual"`` (register_target_kind or
    override_kinds, which shadow plugins), or None when no such kind is installed.

    >>> kind_origin("interp")
    'plugin'
    """
    with _LOCK:
        if name in _STATE.manual:
            return "manual"
        return "plugin" if name in _STATE.load() else None


def _broken_plugins() -> list[Any]:
    """Plugins that failed to load (their kinds are missing), when plugins are in use."""
    if not _STATE.use_plugins:
        return []
    from ..plugins import broken_plugins

    return broken_plugins()


def register_target_kind(kind: TargetKind, *, override: bool = False) -> TargetKind:
    """Register ``kind`` directly (tests, notebooks); plugins use the hook instead.

    A name already installed is an error unless ``override`` is true, in which
    case ``kind`` shadows the installed one until :func:`unregister_target_kind`.
    """
    if not isinstance(kind, TargetKind):
        raise TargetError(f"register_target_kind expects a TargetKind, got {type(kind).__name__}")
    with _LOCK:
        if not override:
            plugin = _STATE.load().get(kind.name)
            if plugin is not None or kind.name in _STATE.manual:
                origin = f"plugin {plugin[1]!r}" if plugin else "register_target_kind"
                raise TargetError(f"target kind {kind.name!r} is already installed (by {origin}); "
                                  f"pass override=True to shadow it")
        _STATE.manual[kind.name] = kind
        _STATE.invalidate()
    return kind


def unregister_target_kind(name: str) -> None:
    """Remove a kind added by :func:`register_target_kind` (plugin kinds stay)."""
    with _LOCK:
        if _STATE.manual.pop(name, None) is None:
            raise TargetError(f"target kind {name!r} was not added by register_target_kind")
        _STATE.invalidate()


def reset_kind_cache() -> None:
    """Forget the kinds read from plugins; the next lookup asks the plugin manager again."""
    with _LOCK:
        _STATE.invalidate(plugins=True)


@contextlib.contextmanager
def override_kinds(*kinds: TargetKind, plugins: bool = False) -> Iterator[None]:
    """Temporarily replace the registry with ``kinds`` (plus plugin kinds when ``plugins``).

    Tests use it so their kinds never collide with installed backends; the
    previous registry is restored on exit.  The swap is process-wide, not
    per thread.
    """
    global _STATE
    fresh = _Registry(use_plugins=plugins)
    for kind in kinds:
        if not isinstance(kind, TargetKind):
            raise TargetError(f"override_kinds expects TargetKind objects, got {type(kind).__name__}")
        fresh.manual[kind.name] = kind
    with _LOCK:
        saved, _STATE = _STATE, fresh
    try:
        yield
    finally:
        with _LOCK:
            _STATE = saved
