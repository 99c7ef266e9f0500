"""The core side of backends: find a target kind's backend and drive its stages.

:func:`build_module` runs ``options -> render -> compile -> load`` for the
lowered functions of one target:

* ``compile``'s output is cached on disk (:class:`~loom.runtime.disk_cache.DiskCache`,
  namespace ``backend-<kind>``), keyed by the sources, the options' digest, the
  backend's version and its compiler identity; a hit skips ``compile`` entirely;
* every stage's output goes to the dump folder when one is active
  (``LOOM_DUMP_DIR``, or ``build_config(dump_pass_ir=True)``);
* a stage that raises something other than a :class:`~loom.errors.LoomError`, or
  returns the wrong kind of value, becomes a :class:`BackendError` naming the
  plugin, the backend and the stage (a LoomError passes through with a note).

:func:`stats` counts compiles and cache hits in this process.

>>> from loom.ir import IRModule
>>> from loom.target import Target
>>> m = build_module(IRModule({}), Target("interp"))
>>> type(m).__name__, m.info.kind
('InterpModule', 'interp')
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import LoomError, PluginError
from ..ir import expr as E
from ..ir.function import GlobalVar, IRModule, PrimFunc
from ..ir.functor import post_order_visit
from ..target import Target, list_kinds
from .base import Artifact, Backend, BackendOptions, ModuleInfo, THREAD_SEMANTICS, signature_of

__all__ = ["BackendError", "get_backend", "build_module", "load_artifact", "load_cached", "stats",
           "reset_backend_cache", "called_functions"]

log = logging.getLogger(__name__)


class BackendError(PluginError):
    """A backend broke the stage contract: it raised, or returned the wrong kind of value.

    ``plugin``, ``kind`` and ``stage`` say where.
    """

    def __init__(self, message: str, plugin: str = "", kind: str = "", stage: str = "") -> None:
        super().__init__(message)
        self.plugin, self.kind, self.stage = plugin, kind, stage


# --------------------------------------------------------------------------- finding backends

_lock = threading.Lock()
_backends: dict[str, tuple[Backend, str]] = {}


def reset_backend_cache() -> None:
    """Forget the backends found so far (after plugins are registered or removed)."""
    with _lock:
        _backends.clear()


def get_backend(kind: str) -> tuple[Backend, str]:
    """The backend of target kind ``kind`` and the name of the plugin that gave it.

    Asks the ``loom_backend`` hook (most recently registered plugin first, as
    pluggy orders firstresult hooks); the answer is cached until plugins change.

    :raises PluginError: when no plugin builds ``kind``, or one breaks the contract.
    """
    with _lock:
        found = _backends.get(kind)
    if found is not None:
        return found
    from ..plugins import get_plugin_manager

    for impl in reversed(get_plugin_manager().hook.loom_backend.get_hookimpls()):
        try:
            backend = impl.function(target_kind=kind)
        except LoomError:
            raise
        except Exception as err:  # noqa: BLE001 - a plugin's bug, named
            raise BackendError(f"plugin {impl.plugin_name!r} raised in loom_backend({kind!r}): "
                               f"{type(err).__name__}: {err}", impl.plugin_name, kind, "loom_backend") from err
        if backend is None:
            continue
        if not isinstance(backend, Backend):
            raise BackendError(f"plugin {impl.plugin_name!r} returned a {type(backend).__name__} from "
                               f"loom_backend({kind!r}); expected a loom.backend.Backend", impl.plugin_name, kind,
                               "loom_backend")
        if backend.thread_semantics not in THREAD_SEMANTICS:
            raise BackendError(f"plugin {impl.plugin_name!r}: the {kind!r} backend's thread_semantics is "
                               f"{backend.thread_semantics!r}; expected one of {THREAD_SEMANTICS}",
                               impl.plugin_name, kind, "loom_backend")
        with _lock:
            _backends[kind] = (backend, impl.plugin_name)
        return backend, impl.plugin_name
    from ..plugins import collect_target_kinds

    owner = collect_target_kinds().get(kind, (None, None))[1]
    if owner is not None:
        raise PluginError(f"no backend can build target kind {kind!r}: plugin {owner!r} contributes the kind but "
                          f"no backend (loom_backend) for it, so it cannot generate code yet")
    raise PluginError(f"no backend can build target kind {kind!r}; installed target kinds: "
                      f"{', '.join(list_kinds()) or 'none'}. Install the backend package for {kind!r} "
                      f"(e.g. loom-llvm, loom-c, loom-cuda) or register a plugin implementing loom_backend for it")


# --------------------------------------------------------------------------- statistics

_stats: Counter[str] = Counter()
_cache_warnings: set[str] = set()  # cache problems already logged as warnings


def stats() -> dict[str, int]:
    """Counts in this process: ``builds``, ``compiles``, ``cache_hits``, ``cache_misses``, ``loads``.

    A build whose artifact came from the disk cache counts a hit and no compile.
    """
    with _lock:
        return {k: _stats[k] for k in ("builds", "compiles", "cache_hits", "cache_misses", "loads")}


def _count(key: str) -> None:
    with _lock:
        _stats[key] += 1


# --------------------------------------------------------------------------- running stages


class _Stages:
    """Calls one backend's stages with checks, errors naming the stage, and dumps."""

    def __init__(self, backend: Backend, plugin: str) -> None:
        self.backend, self.plugin, self.kind = backend, plugin, backend.kind

    def run(self, stage: str, fn: Callable[..., Any], *args: Any, check: Callable[[Any], str | None]) -> Any:
        start = time.perf_counter()
        try:
            out = fn(*args)
        except LoomError as err:
            note = f"(raised by the {stage} stage of the {self.kind!r} backend, plugin {self.plugin!r})"
            if hasattr(err, "add_note"):
                err.add_note(note)
            else:  # Python 3.10: the same list, which tracebacks do not print there
                setattr(err, "__notes__", [*getattr(err, "__notes__", ()), note])
            raise
        except Exception as err:  # noqa: BLE001 - the plugin's bug, named
            raise BackendError(f"the {stage} stage of the {self.kind!r} backend (plugin {self.plugin!r}) raised "
                               f"{type(err).__name__}: {err}", self.plugin, self.kind, stage) from err
        problem = check(out)
        if problem is not None:
            raise BackendError(f"the {stage} stage of the {self.kind!r} backend (plugin {self.plugin!r}) returned "
                               f"{problem}", self.plugin, self.kind, stage)
        log.debug("%s backend: %s stage in %.3f ms", self.kind, stage, (time.perf_counter() - start) * 1e3)
        return out


def _is_options(x: Any) -> str | None:
    return None if isinstance(x, BackendOptions) else f"a {type(x).__name__}; expected a loom.backend.BackendOptions"


def _is_sources(x: Any) -> str | None:
    if not isinstance(x, Mapping) or not x:
        return f"a {type(x).__name__}; expected a non-empty mapping of format name to source text"
    bad = [k for k, v in x.items() if not isinstance(k, str) or not isinstance(v, str)]
    return f"non-text entries {bad!r}; expected {{format: str}}" if bad else None


def _is_bytes(x: Any) -> str | None:
    return None if isinstance(x, (bytes, bytearray)) else f"a {type(x).__name__}; expected bytes"


def _is_module(x: Any) -> str | None:
    from ..runtime.module import Module

    return None if isinstance(x, Module) else f"a {type(x).__name__}; expected a loom.runtime.Module"


def called_functions(mod: IRModule) -> list[str]:
    """Names of the functions the PrimFuncs of ``mod`` call through a GlobalVar, in first-call order."""
    names: dict[str, None] = {}

    def visit(n: Any) -> None:
        if isinstance(n, E.Call) and isinstance(n.op, GlobalVar):
            names.setdefault(n.op.name_hint)

    for f in mod.functions.values():
        if isinstance(f, PrimFunc):
            post_order_visit(f.body, visit)
    return list(names)


def _entry_of(mod: IRModule) -> str:
    names = list(mod.functions)
    if "main" in mod.functions:
        return "main"
    hosts = [n for n in names if getattr(mod.functions[n], "attrs", {}).get("calling_conv") != "device_kernel"]
    return (hosts or names or [""])[0]


def _dumper() -> Any:
    from ..transform.instrument import DumpIR
    from ..transform.pass_base import PassContext

    return next((i for i in PassContext.current().instruments if isinstance(i, DumpIR)), None)


def build_module(mod: IRModule, target: Target, entry: str | None = None) -> Any:
    """Run the stages of ``target``'s backend on the lowered ``mod``; the loaded runtime Module.

    The module's ``info`` is its :class:`~loom.backend.ModuleInfo` and ``artifact``
    the compiled bytes; functions it calls that it does not define are listed in
    ``info.imports`` for the runtime to link (:mod:`loom.runtime.linking`).
    """
    backend, plugin = get_backend(target.kind.name)
    stages = _Stages(backend, plugin)
    dump = _dumper()
    kind = backend.kind or target.kind.name
    options = stages.run("options", backend.options, target, check=_is_options)
    sources = dict(stages.run("render", backend.render, mod, options, check=_is_sources))
    defined = set(mod.functions)
    info = ModuleInfo(kind, str(target), entry or _entry_of(mod),
                      {n: signature_of(f) for n, f in mod.functions.items() if isinstance(f, PrimFunc)},
                      tuple(n for n in called_functions(mod) if n not in defined), sources)
    if dump is not None:
        dump.write(f"{kind}.options", ".json", json.dumps(options.to_json(), indent=1, sort_keys=True) + "\n")
        for fmt, text in sources.items():
            dump.write(f"{kind}.render", f".{fmt}", text)
    _count("builds")
    data = _compiled(stages, sources, options)
    if dump is not None:
        dump.write(f"{kind}.compile", backend.artifact_suffix or ".bin", bytes(data))
        dump.write(f"{kind}.load", ".json", info.to_json() + "\n")
    return load_artifact(data, info, stages)


def _compiled(stages: _Stages, sources: dict[str, str], options: BackendOptions) -> Artifact:
    from ..runtime.disk_cache import CacheError, DiskCache

    backend = stages.backend

    def compile_() -> bytes:
        out = stages.run("compile", backend.compile, sources, options, check=_is_bytes)
        _count("compiles")
        return bytes(out)

    cache = DiskCache.default(f"backend-{stages.kind}", suffix=backend.artifact_suffix) if backend.cacheable else None
    if cache is None:
        log.debug("%s backend: compile cache %s", stages.kind, "off" if backend.cacheable else "not used (the "
                  "backend is not cacheable)")
        return Artifact(compile_())
    identity = stages.run("compiler_identity", backend.compiler_identity, options,
                          check=lambda x: None if isinstance(x, str) else f"a {type(x).__name__}; expected str")
    key = ["loom-backend", stages.kind, str(backend.version), options.digest(), identity,
           *(part for fmt in sorted(sources) for part in (fmt, sources[fmt]))]
    built: list[bytes] = []

    def write(path: str) -> None:
        built.append(compile_())
        with open(path, "wb") as fh:
            fh.write(built[-1])

    try:
        data, path = cache.fetch(key, write)  # the checked bytes: the file may change after this
    except CacheError as err:
        message = f"{err}; compiling without the cache"
        # Once per problem: a refused folder would otherwise warn on every build.
        (log.debug if message in _cache_warnings else log.warning)("%s", message)
        _cache_warnings.add(message)
        return Artifact(built[-1] if built else compile_())  # what the failed entry compiled, if it got that far
    _count("cache_misses" if built else "cache_hits")
    log.debug("%s backend: compile cache %s: %s", stages.kind, "miss, compiled into" if built else "hit", path)
    return Artifact(data, path)


def load_cached(data: Artifact, info: ModuleInfo) -> Any:
    """Load what an earlier build of the same inputs compiled (:mod:`loom.driver.build_cache`).

    It counts as a build whose artifact came from the cache: a hit and no compile.
    """
    module = load_artifact(data, info)
    _count("builds")
    _count("cache_hits")
    return module


def load_artifact(data: bytes, info: ModuleInfo, stages: _Stages | None = None) -> Any:
    """Load a compiled artifact through its kind's backend (used by builds and by ``load_module``)."""
    if stages is None:
        stages = _Stages(*get_backend(info.kind))
    module = stages.run("load", stages.backend.load, data, info, check=_is_module)
    _count("loads")
    module._adopt_build(info, data)
    return module
