"""``Target``: what to compile for: a kind, its attributes, keys and a host.

Syntax of a target string (what ``str(target)`` prints and ``Target(text)`` reads)::

    <kind> [-<attr>=<value>]... [-keys=<k1>,<k2>] [-host=<target string>]

Tokens are split like a shell command line, so a value with spaces is quoted
(``c -flags='-O3 -fPIC'``) and a host with attributes is quoted as a whole
(``cuda -arch=sm_90 -host='llvm -mcpu=znver4'``).  Booleans print as
``true``/``false`` (a bare ``-openmp`` means true); lists are comma-separated
(``-mattr=+avx2,+fma``).  The canonical string lists the attributes sorted by
name, leaves out those equal to the defaults the kind fills in (schema defaults,
and the host-dependent ones of ``TargetKind.default_attrs``), and prints
``-keys`` only when they differ from the kind's default keys, so
``Target(str(t))`` is structurally equal to ``t`` on the same machine
(``llvm`` means "the host CPU" as in TVM).  For a record that means the same
on every machine, use :meth:`Target.export` or ``loom.save_json``.

A target's ``attrs`` hold every attribute it has, explicit or defaulted, so
``Target("llvm")`` and ``Target({"kind": "llvm", "opt_level": 3})`` are
structurally equal.  Targets are nodes: ``==`` is identity; compare by value
with :meth:`Target.same_config` or :func:`loom.structural_equal`.

>>> import loom
>>> from loom.target import AttrSpec, TargetKind, override_kinds
>>> cuda = TargetKind("cuda", "cuda", {"arch": AttrSpec(str)}, default_keys=("cuda", "gpu"))
>>> with override_kinds(cuda, TargetKind("llvm", "cpu", {"mcpu": AttrSpec(str)})):
...     t = Target("cuda -arch=sm_90", host="llvm -mcpu=znver4")
...     str(t), t.kind.name, t.keys, t.host.attrs
("cuda -arch=sm_90 -host='llvm -mcpu=znver4'", 'cuda', ('cuda', 'gpu'), {'mcpu': 'znver4'})
"""

from __future__ import annotations

import shlex
import threading
import types
from collections.abc import Mapping
from typing import Any, Union

import attrs

from ..errors import TargetError
from ..ir.node import DictOf, Node, child, mapping, register_object, value
from .devices import DeviceType, device_type_name
from .kind import TargetKind, find_kind, get_kind

__all__ = ["Target", "TargetLike", "target_key"]

TargetLike = Union["Target", str, Mapping[str, Any]]

_FLAG = object()  # "-openmp" written without a value
_CURRENT = threading.local()


def _stack() -> list[Target]:
    stack = getattr(_CURRENT, "stack", None)
    if stack is None:
        stack = _CURRENT.stack = []
    return stack


@register_object("target.Target")
@attrs.define(frozen=True, eq=False, repr=False, slots=True, weakref_slot=False, init=False)
class Target(Node):
    """A compilation target.

    Parameters
    ----------
    target:
        A target string (``"llvm -mcpu=znver4 -mattr=+avx512f"``), a dict
        (``{"kind": "cuda", "arch": "sm_90", "host": "llvm"}``) or a Target
        (copied).
    host:
        The host target (string, dict or Target), replacing any host that
        ``target`` names.  A host must be a CPU target without a host itself.

    Fields (reflected like any node): ``kind_name``, ``host``, ``attrs``, ``keys``.
    The field form ``Target(kind_name=..., host=..., attrs=..., keys=...)``
    (used by ``with_`` and ``load_json``) is checked against the schema too.

    >>> from loom.target import AttrSpec, TargetKind, override_kinds
    >>> llvm = TargetKind("llvm", "cpu", {"mattr": AttrSpec(list), "opt_level": AttrSpec(int, 3)})
    >>> with override_kinds(llvm):
    ...     Target("llvm -mattr=+avx2,+fma").attrs
    {'mattr': ('+avx2', '+fma'), 'opt_level': 3}
    """

    kind_name: str = value(str)
    host: Target | None = child(lambda: Target, optional=True, default=None)
    attrs: DictOf[str, Any] = mapping()
    keys: tuple[str, ...] = value(tuple, default=())

    def __init__(self, target: TargetLike | None = None, host: TargetLike | None = None,
                 attrs: Mapping[str, Any] | None = None, keys: Any = None, *,
                 kind_name: str | None = None) -> None:
        if kind_name is not None or attrs is not None or keys is not None:
            name = kind_name if kind_name is not None else target
            if not isinstance(name, str):
                raise TargetError(f"Target(kind_name=...) expects a kind name (str), got {type(name).__name__}")
            if attrs is not None and not isinstance(attrs, Mapping):
                raise TargetError(f"Target(attrs=...) expects a mapping, got {type(attrs).__name__}")
            given = dict(attrs or {})
        elif isinstance(target, Target):
            name, given, keys = target.kind_name, dict(target.attrs), target.keys
            host = target.host if host is None else host
        elif isinstance(target, str):
            name, given, keys, text_host = _parse_str(target)
            host = text_host if host is None else host
        elif isinstance(target, Mapping):
            name, given, keys, dict_host = _parse_dict(target)
            host = dict_host if host is None else host
        else:
            raise TargetError(
                "Target() expects a target string ('llvm -mcpu=znver4'), a dict ({'kind': 'cuda', ...}) "
                f"or a Target, got {type(target).__name__} {target!r}"
            )
        kind = get_kind(name)
        set_field = object.__setattr__
        set_field(self, "kind_name", kind.name)
        set_field(self, "host", _as_host(host))
        resolved = _resolve_attrs(kind, given)
        set_field(self, "attrs", resolved)
        set_field(self, "keys", _resolve_keys(kind, keys, resolved.get("device")))

    # -- views -----------------------------------------------------------
    @property
    def kind(self) -> TargetKind:
        """The :class:`TargetKind` (``t.kind.name``, ``t.kind.device_type``)."""
        return get_kind(self.kind_name)

    @property
    def device_type(self) -> int:
        """The DLPack device type this target compiles for (cpu=1, cuda=2)."""
        return self.kind.device_type

    def get_attr(self, name: str, default: Any = None) -> Any:
        """``attrs[name]`` or ``default`` when this target does not have it."""
        return self.attrs.get(name, default)

    def with_host(self, host: TargetLike | None) -> Target:
        """A copy with ``host`` (``self`` when ``host`` is already its host object)."""
        return self.with_(host=_as_host(host))

    def without_host(self) -> Target:
        return self.with_(host=None)

    def same_config(self, other: TargetLike) -> bool:
        """Value equality: same kind, attrs, keys and (recursively) host.

        Agrees with :func:`loom.structural_equal` on targets.
        """
        other_t = other if isinstance(other, Target) else Target(other)
        return self is other_t or target_key(self) == target_key(other_t)

    def export(self) -> dict[str, Any]:
        """The dict form; ``Target(t.export())`` is structurally equal to ``t``."""
        out: dict[str, Any] = {"kind": self.kind_name}
        out.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.attrs.items()})
        out["keys"] = list(self.keys)
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    # -- text --------------------------------------------------------------
    def __str__(self) -> str:
        kind = find_kind(self.kind_name)  # may be gone if the registry changed since
        parts = [self.kind_name]
        parts += [_option(name, _format(v)) for name, v in _printed_attrs(kind, self.attrs).items()]
        if kind is None or self.keys != _resolve_keys(kind, None, self.attrs.get("device")):
            parts.append(_option("keys", ",".join(self.keys)))
        if self.host is not None:
            parts.append(_option("host", str(self.host)))
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    # -- TVM's generic options ------------------------------------------------
    @property
    def model(self) -> str:
        """The ``-model`` option (``"unknown"`` when not given, as in TVM)."""
        return str(self.attrs.get("model", "unknown"))

    @property
    def libs(self) -> tuple[str, ...]:
        """The ``-libs`` option: vendor libraries the build may call (``("cblas",)``)."""
        return tuple(self.attrs.get("libs", ()))

    @property
    def device_name(self) -> str:
        """The ``-device`` option (``""`` when not given)."""
        return str(self.attrs.get("device", ""))

    # -- scope -------------------------------------------------------------
    def __enter__(self) -> Target:
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _stack()
        if not stack or stack[-1] is not self:
            raise TargetError(f"target scopes exited out of order: {self!r} is not the innermost target")
        stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The innermost target entered with ``with Target(...):``.

        With ``allow_none=False`` a missing target is a TargetError.
        """
        stack = _stack()
        if stack:
            return stack[-1]
        if not allow_none:
            raise TargetError("no target is in scope; enter one with `with loom.target.Target('llvm'):`")
        return None


# ---------------------------------------------------------------------------
# Parsing and resolution


def _parse_str(text: str) -> tuple[str, dict[str, Any], Any, Any]:
    try:
        tokens = shlex.split(text)
    except ValueError as err:
        raise TargetError(f"cannot split target string {text!r}: {err}") from None
    if not tokens or tokens[0].startswith("-"):
        raise TargetError(f"a target string starts with a kind name, as in 'llvm -mcpu=znver4'; got {text!r}")
    name, given, keys, host = tokens[0], {}, None, None
    seen: set[str] = set()
    for tok in tokens[1:]:
        attr, eq, val = tok[1:].partition("=")
        if not tok.startswith("-") or not attr:
            raise TargetError(f"expected '-name=value' in target string {text!r}, got {tok!r}")
        if attr in seen:
            raise TargetError(f"attribute '-{attr}' is given twice in target string {text!r}")
        seen.add(attr)
        if attr in ("keys", "host") and not eq:
            raise TargetError(f"'-{attr}' needs a value ('-{attr}=...') in target string {text!r}")
        if attr == "keys":
            keys = val
        elif attr == "host":
            host = val
        else:
            given[attr] = val if eq else _FLAG
    return name, given, keys, host


def _parse_dict(d: Mapping[str, Any]) -> tuple[str, dict[str, Any], Any, Any]:
    given = dict(d)
    name = given.pop("kind", None)
    if not isinstance(name, str):
        raise TargetError(f"a target dict needs a 'kind' entry naming the kind (str), got {d!r}")
    for k in given:
        if not isinstance(k, str):
            raise TargetError(f"target dict keys must be attribute names (str), got {k!r}")
    return name, given, given.pop("keys", None), given.pop("host", None)


def _resolve_attrs(kind: TargetKind, given: Mapping[str, Any]) -> dict[str, Any]:
    """Explicit attributes, then the kind's computed defaults, then schema defaults; sorted."""
    out: dict[str, Any] = {}
    try:
        for name, v in given.items():
            spec = kind.spec(name)
            if v is _FLAG:
                if spec.type is not bool:
                    raise TargetError(f"attribute '-{name}' needs a value: -{name}=<{spec.type_name}>")
                v = True
            out[name] = spec.coerce(v, name)
        if kind.default_attrs is not None:
            computed = kind.default_attrs(types.MappingProxyType(dict(out)))
            for name, v in (computed or {}).items():
                if name not in out:
                    out[name] = kind.spec(name).coerce(v, name)
    except TargetError as err:
        raise TargetError(f"target kind {kind.name!r}: {err}") from None
    for name, spec in kind.schema.items():
        if name not in out and spec.default is not None:
            out[name] = spec.default
    return dict(sorted(out.items()))


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _printed_attrs(kind: TargetKind | None, attrs: dict[str, Any]) -> dict[str, Any]:
    """The fewest attributes whose resolution gives back ``attrs``: defaults are left out.

    Computed defaults may depend on the explicit attributes, so a first guess
    (everything that differs from the defaults of a bare target) is checked by
    resolving it, and attributes that come back different are printed too.
    """
    if kind is None:
        return attrs
    try:
        bare = _resolve_attrs(kind, {})
    except TargetError:  # the computed defaults need explicit attributes
        bare = {n: s.default for n, s in kind.schema.items() if s.default is not None}
    printed = {k: v for k, v in attrs.items() if not _same(bare.get(k, _FLAG), v)}
    if kind.default_attrs is None:
        return printed  # static defaults only: the guess is exact
    for _ in range(len(attrs) + 1):
        try:
            resolved = _resolve_attrs(kind, printed)
        except TargetError:
            return attrs
        wrong = {k: v for k, v in attrs.items() if k not in printed and not _same(resolved.get(k, _FLAG), v)}
        if not wrong:
            return dict(sorted(printed.items()))
        printed.update(wrong)
    return attrs


def _resolve_keys(kind: TargetKind, keys: Any, device: str | None = None) -> tuple[str, ...]:
    """User keys first, then the ``-device`` name, then the kind's default keys not already there."""
    if keys is None:
        user: tuple[str, ...] = ()
    elif isinstance(keys, str):
        user = tuple(k for k in keys.split(",") if k)
    elif isinstance(keys, (list, tuple)) and all(isinstance(k, str) and k and "," not in k for k in keys):
        user = tuple(keys)
    else:
        raise TargetError(f"target keys must be a list of non-empty strings without ',', got {keys!r}")
    named = (device,) if device else ()
    return tuple(dict.fromkeys(user + named + kind.default_keys))


def _as_host(host: TargetLike | None) -> Target | None:
    if host is None:
        return None
    t = host if isinstance(host, Target) else Target(host)
    if t.host is not None:
        raise TargetError(f"a host target cannot have a host of its own; got host {t!r}")
    if t.device_type != DeviceType.CPU:
        raise TargetError(
            f"a host target must compile for the CPU; got {t!r} (device {device_type_name(t.device_type)})"
        )
    return t


def _format(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _option(name: str, text: str) -> str:
    return f"-{name}={shlex.quote(text)}"


def target_key(t: Target) -> tuple[Any, ...]:
    """A hashable value that is equal for two targets exactly when they are structurally equal."""
    attrs_key = tuple((k, type(v).__name__, v) for k, v in t.attrs.items())
    return (t.kind_name, attrs_key, t.keys, None if t.host is None else target_key(t.host))
