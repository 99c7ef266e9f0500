"""The plugin manager: builds the ``loom`` pluggy manager and records what it loaded.

Loading order (pytest's, see STYLE.md 1.2): hookspecs, the core's own built-in
plugin, then every entry point of the group ``loom`` unless
``LOOM_DISABLE_PLUGIN_AUTOLOAD`` is set.  Entry points are loaded one by one so
that a plugin which fails to import, or implements a hook that does not exist,
is *recorded* (name, distribution, error) and skipped while the rest load.

>>> from loom import plugins
>>> [p.name for p in plugins.list_plugins() if p.status == "builtin"]
['builtin']
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import sys
import threading
import traceback
import types
import warnings
from typing import Any, Literal

import attrs
import pluggy

from loom import envvars
from loom.errors import PluginError

from . import hookspecs

__all__ = [
    "BUILTIN_PLUGIN_NAME",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "PluginLoadWarning",
    "broken_plugins",
    "collect_target_kinds",
    "get_plugin_manager",
    "list_plugins",
    "register",
    "reset_plugin_manager",
    "unregister",
]

ENTRY_POINT_GROUP = "loom"
BUILTIN_PLUGIN_NAME = "builtin"
#: The core's distribution name (the import name is ``loom``; PyPI's "loom" is another project).
CORE_DISTRIBUTION = "loom-compiler"

Status = Literal["builtin", "loaded", "failed"]


class PluginLoadWarning(UserWarning):
    """Emitted when an installed plugin could not be loaded (it is skipped)."""


@attrs.frozen
class PluginInfo:
    """What one plugin is and what it contributes, as shown by ``loom plugins``.

    >>> info = next(p for p in list_plugins() if p.name == "builtin")
    >>> info.status, "interp" in info.target_kinds
    ('builtin', True)
    """

    name: str
    version: str | None
    dist: str | None
    module: str | None
    hooks: tuple[str, ...] = ()
    target_kinds: tuple[str, ...] = ()
    error: str | None = None
    status: Status = "loaded"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self).items()}


@attrs.define
class _Meta:
    """Where a registered plugin came from (its contributions are asked live)."""

    dist: str | None
    version: str | None
    module: str | None
    status: Status


@attrs.define
class _State:
    pm: pluggy.PluginManager
    meta: dict[str, _Meta] = attrs.Factory(dict)
    failed: dict[str, PluginInfo] = attrs.Factory(dict)


_lock = threading.RLock()
_state: _State | None = None
_building: _State | None = None  # visible only to the building thread (it holds _lock)


# --------------------------------------------------------------------------- building


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide pluggy manager of the ``loom`` project, built on first use.

    >>> pm = get_plugin_manager()
    >>> pm.project_name
    'loom'
    """
    return _get_state().pm


def _get_state() -> _State:
    state = _state
    if state is not None:
        return state
    with _lock:
        if _state is not None:
            return _state
        if _building is not None:
            # A plugin imported during loading asked for the manager: hand it the
            # one being built rather than recursing into a second build.
            return _building
        return _build()


def _build() -> _State:
    global _state, _building
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    state = _State(pm)
    _building = state
    try:
        from . import builtin

        pm.register(builtin, name=BUILTIN_PLUGIN_NAME)
        state.meta[BUILTIN_PLUGIN_NAME] = _Meta(CORE_DISTRIBUTION, _loom_version(), builtin.__name__, "builtin")
        if not _autoload_disabled():
            _load_entry_points(state)
        pm.check_pending()  # every offender was unregistered above; this is the backstop
    finally:
        _building = None
    _state = state
    return state


def _autoload_disabled() -> bool:
    return envvars.DISABLE_PLUGIN_AUTOLOAD.get()


def _load_entry_points(state: _State) -> None:
    # Sorted, so that loading (and listing) order does not depend on sys.path order.
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
        module = ep.value.partition(":")[0].strip()
        if state.pm.has_plugin(ep.name):
            owner = state.meta.get(ep.name)
            if owner is not None and owner.dist == dist_name:
                continue  # the same distribution seen twice on sys.path
            where = f"distribution {owner.dist!r}" if owner and owner.dist else "the core"
            _record_failure(state, ep.name, dist_name, version, module,
                            f"the plugin name {ep.name!r} is already taken by {where}; "
                            "rename the entry point")
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - any import failure is the plugin's, not ours
            _record_failure(state, ep.name, dist_name, version, module, _describe(exc))
            continue
        try:
            _register_checked(state.pm, plugin, ep.name)
        except PluginError as exc:
            _record_failure(state, ep.name, dist_name, version, module, str(exc))
            continue
        state.meta[ep.name] = _Meta(dist_name, version, module, "loaded")


def _record_failure(state: _State, name: str, dist: str | None, version: str | None,
                    module: str | None, error: str) -> None:
    state.failed[name] = PluginInfo(name=name, version=version, dist=dist, module=module,
                                    error=error, status="failed")
    origin = f" (distribution {dist!r})" if dist else ""
    warnings.warn(f"loom plugin {name!r}{origin} failed to load and was skipped: {error}",
                  PluginLoadWarning, stacklevel=2)


def _describe(exc: BaseException) -> str:
    """``"ImportError: message (at file.py:12)"``: the error and the frame that raised it."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {os.path.basename(last.filename)}:{last.lineno})"
    return text


def _register_checked(pm: pluggy.PluginManager, plugin: object, name: str | None) -> str:
    """Register ``plugin``; undo and raise PluginError if a hook is invalid or unknown."""
    name = name or pm.get_canonical_name(plugin)
    if pm.has_plugin(name):
        raise PluginError(f"a plugin named {name!r} is already registered; "
                          "choose another name or unregister it first")
    if pm.is_registered(plugin):
        raise PluginError(f"{plugin!r} is already registered as {pm.get_name(plugin)!r}")
    try:
        registered = pm.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {name or plugin!r} has an invalid hook: {exc}") from None
    if registered is None:
        raise PluginError(f"plugin name {name!r} is blocked")
    unknown = [hc.name for hc in pm.get_hookcallers(plugin) or ()
               if not hc.has_spec() and any(
                   impl.plugin is plugin and not impl.optionalhook for impl in hc.get_hookimpls())]
    if unknown:
        pm.unregister(plugin)
        raise PluginError("; ".join(_unknown_hook_message(registered, h) for h in sorted(unknown)))
    return registered


def _unknown_hook_message(plugin_name: str, hook: str) -> str:
    known = sorted(n for n in dir(hookspecs) if n.startswith("loom_"))
    close = difflib.get_close_matches(hook, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"the hooks are {', '.join(known)}"
    return f"unknown hook {hook!r} in plugin {plugin_name!r}: {hint}"


def _loom_version() -> str | None:
    try:
        return importlib.metadata.version(CORE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return getattr(sys.modules.get("loom"), "__version__", None)


# --------------------------------------------------------------------------- run time


def register(plugin: object, name: str | None = None) -> str:
    """Register a module or object holding ``@hookimpl`` functions; return its name.

    Used by tests and notebooks.  An unknown or mis-declared hook raises
    :class:`~loom.errors.PluginError` and leaves nothing registered.

    >>> import types
    >>> from loom.plugins import hookimpl
    >>> mod = types.ModuleType("mine")
    >>> mod.loom_target_kinds = hookimpl(lambda: [])
    >>> register(mod)
    'mine'
    >>> unregister("mine") is mod
    True
    """
    with _lock:
        state = _get_state()
        if name is None and isinstance(plugin, types.ModuleType):
            name = plugin.__name__
        registered = _register_checked(state.pm, plugin, name)
        state.failed.pop(registered, None)
        state.meta[registered] = _Meta(None, _version_of(plugin), _module_of(plugin), "loaded")
    _reset_kind_cache()
    return registered


def unregister(name_or_plugin: str | object) -> object:
    """Remove a plugin by name or by object and return it.

    :raises PluginError: when no such plugin is registered.
    """
    with _lock:
        state = _get_state()
        pm = state.pm
        name: str | None
        if isinstance(name_or_plugin, str):
            plugin = pm.get_plugin(name_or_plugin)
            name = name_or_plugin
        else:
            plugin, name = name_or_plugin, pm.get_name(name_or_plugin)
        if plugin is None or name is None:
            names = ", ".join(n for n, _ in pm.list_name_plugin()) or "none"
            raise PluginError(f"no plugin {name_or_plugin!r} is registered; registered: {names}")
        pm.unregister(plugin, name=name)
        state.meta.pop(name, None)
    _reset_kind_cache()
    return plugin


def reset_plugin_manager() -> None:
    """Forget the manager; the next use rebuilds it from entry points (for tests)."""
    global _state
    with _lock:
        _state = None
    _reset_kind_cache()


def _reset_kind_cache() -> None:
    # Only a registry that was already imported can hold a stale cache.
    for modname, fn in (("loom.target.kind", "reset_kind_cache"), ("loom.ir.op", "reset_plugin_rules"),
                        ("loom.backend.stages", "reset_backend_cache"),
                        ("loom.runtime.device_api", "reset_device_apis")):
        reset = getattr(sys.modules.get(modname), fn, None)
        if callable(reset):
            reset()


def _version_of(plugin: object) -> str | None:
    version = getattr(plugin, "__version__", None)
    if version is None:
        top = sys.modules.get((_module_of(plugin) or "").partition(".")[0])
        version = getattr(top, "__version__", None)
    return str(version) if version is not None else None


def _module_of(plugin: object) -> str | None:
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    return getattr(type(plugin), "__module__", None)


# --------------------------------------------------------------------------- queries
#
# Plugin hooks run outside ``_lock``: they build TargetKinds, which may consult
# the target registry and its own lock; holding ours meanwhile could deadlock
# against a registry that is asking us for the manager.


def list_plugins() -> list[PluginInfo]:
    """Every plugin: the built-in one, the loaded ones, then those that failed.

    A plugin whose ``loom_target_kinds`` raises or returns something other than
    a list of :class:`loom.target.TargetKind` is reported as failed and removed.
    """
    state = _get_state()
    rows = []
    for name, plugin, kinds in _contributions(state):
        with _lock:
            meta = state.meta.get(name) or _Meta(None, None, _module_of(plugin), "loaded")
            hooks = sorted(hc.name for hc in state.pm.get_hookcallers(plugin) or ())
        rows.append(PluginInfo(name=name, version=meta.version, dist=meta.dist, module=meta.module,
                               hooks=tuple(hooks), target_kinds=tuple(k.name for k in kinds),
                               status=meta.status))
    with _lock:
        return rows + list(state.failed.values())


def broken_plugins() -> list[PluginInfo]:
    """The plugins that failed to load or broke the hook contract, with their errors."""
    return [p for p in list_plugins() if p.status == "failed"]


def collect_target_kinds() -> dict[str, tuple[Any, str]]:
    """All contributed target kinds as ``{kind_name: (TargetKind, plugin_name)}``.

    A kind name belongs to the built-in plugin when it contributes it, then to
    the plugin of that name (the ``llvm`` plugin owns ``llvm``, whatever else
    declares it), else to the first
    plugin that contributes it (the built-in plugin, then entry points in name
    order, then plugins registered at run time); another plugin contributing it
    too is reported broken and ignored, so the owner keeps working (see
    :func:`broken_plugins`).

    >>> kinds = collect_target_kinds()
    >>> kinds["interp"][1]
    'builtin'
    """
    state = _get_state()
    return {kind.name: (kind, name) for name, _, kinds in _contributions(state) for kind in kinds}


def _origin(state: _State, name: str) -> str:
    meta = state.meta.get(name)
    if meta is None or not meta.dist:
        return repr(name)
    return f"{name!r} (distribution {' '.join(filter(None, (meta.dist, meta.version)))})"


def _contributions(state: _State) -> list[tuple[str, object, list[Any]]]:
    """``(name, plugin, target_kinds)`` of every registered plugin that honours the contract.

    A plugin whose ``loom_target_kinds`` raises, answers with something that
    is not a list of TargetKind, or contributes a kind name another plugin owns
    (see :func:`_owners`), is moved to the failed list (and unregistered, so its
    other hooks are not trusted either: its backend must not take over the kind).
    """
    with _lock:
        registered = list(state.pm.list_name_plugin())
        impls = list(state.pm.hook.loom_target_kinds.get_hookimpls())
    calls = []
    for name, plugin in registered:
        try:
            kinds = _call_target_kinds([i for i in impls if i.plugin is plugin])
            _check_distinct(kinds)
        except Exception as exc:  # noqa: BLE001 - a plugin bug must not take the others down
            error = str(exc) if isinstance(exc, PluginError) else f"loom_target_kinds raised {_describe(exc)}"
            _quarantine(state, name, plugin, error)
            continue
        calls.append((name, plugin, kinds))
    while True:  # a plugin that loses one kind loses them all, which may hand others a kind: settle
        owners = _owners(calls)
        losers = [(name, plugin, kinds) for name, plugin, kinds in calls
                  if any(owners[k.name] != name for k in kinds)]
        if not losers:
            return calls
        for name, plugin, kinds in losers:
            kind = next(k.name for k in kinds if owners[k.name] != name)
            with _lock:
                first, second = _origin(state, owners[kind]), _origin(state, name)
            _quarantine(state, name, plugin,
                        f"target kind {kind!r} is contributed by two plugins: {first} and {second}; {second} is "
                        f"ignored, {first} keeps the kind: uninstall or unregister one of them")
        calls = [c for c in calls if c not in losers]


def _owners(calls: list[tuple[str, object, list[Any]]]) -> dict[str, str]:
    """Which plugin owns each contributed kind name: the built-in plugin for its own kinds, else the
    plugin of that very name (the ``llvm`` plugin owns ``llvm``), else the first contributor in
    registration order."""

    def rank(plugin: str, kind: str) -> int:
        return 0 if plugin == BUILTIN_PLUGIN_NAME else 1 if plugin == kind else 2

    owners: dict[str, str] = {}
    for name, _, kinds in calls:
        for kind in kinds:
            if kind.name not in owners or rank(name, kind.name) < rank(owners[kind.name], kind.name):
                owners[kind.name] = name
    return owners


def _check_distinct(kinds: list[Any]) -> None:
    """Raise PluginError when one plugin contributes a kind name twice."""
    seen: set[str] = set()
    for kind in kinds:
        if kind.name in seen:
            raise PluginError(f"loom_target_kinds contributes target kind {kind.name!r} twice")
        seen.add(kind.name)


def _call_target_kinds(impls: list[Any]) -> list[Any]:
    kinds: list[Any] = []
    for impl in impls:
        if impl.wrapper or impl.hookwrapper:
            continue
        answer = impl.function()
        if answer is None:
            continue
        if not isinstance(answer, (list, tuple)):
            raise PluginError(f"loom_target_kinds returned {type(answer).__name__}; "
                              "expected a list of loom.target.TargetKind")
        for kind in answer:
            _check_kind(kind)
        kinds.extend(answer)
    return kinds


def _quarantine(state: _State, name: str, plugin: object, error: str) -> None:
    with _lock:
        if state.pm.get_plugin(name) is not plugin:
            return  # another thread got there first
        meta = state.meta.pop(name, None) or _Meta(None, None, _module_of(plugin), "loaded")
        state.pm.unregister(plugin, name=name)
        _record_failure(state, name, meta.dist, meta.version, meta.module, error)


def _check_kind(kind: object) -> None:
    kind_cls = getattr(sys.modules.get("loom.target"), "TargetKind", None)
    ok = isinstance(kind, kind_cls) if isinstance(kind_cls, type) else isinstance(
        getattr(kind, "name", None), str)
    if not ok:
        raise PluginError(f"loom_target_kinds returned {kind!r} ({type(kind).__name__}); "
                          "expected loom.target.TargetKind objects")
