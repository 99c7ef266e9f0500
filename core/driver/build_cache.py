"""Cache hits without lowering: a build keyed by a fingerprint of what it is made from.

The backend stages' cache (:mod:`loom.backend.stages`) is keyed by the rendered
source, so a hit there still lowers the schedule and renders it.  This cache sits
in front of it: :func:`fingerprint` computes, before anything is lowered, a key
from everything the generated code depends on, and a hit rebuilds the Module
from what the first build stored under that key (the compiled artifact and its
:class:`~loom.backend.ModuleInfo`: the functions' signatures, the entry, the
sources), without lowering, rendering or compiling.  The key holds:

* the schedule: every attribute of the schedule, of each stage (operation and
  its body, loops, relations, annotations, attachment, scope...) and of each
  group, the argument list, the name, and the target with its host, written
  with IR nodes in one table as :func:`loom.save_json` writes them (so an object
  used in several places is one entry);
* the pass context (opt level, required and disabled passes, every config option);
* the backend: its version, options digest and compiler identity (LLVM's version...);
* the code: the size and modification time of every file of Loom's packages and of
  every registered plugin's package, plus the versions of Python and numpy.

The key must change whenever the generated code could.  So the fingerprint is
**not computed** (the build takes the usual path, and nothing is stored) for
anything it cannot describe exactly: inputs other than one schedule for one
target (PrimFuncs, lists, heterogeneous builds, ``binds``); pass instruments
(``LOOM_DUMP_DIR``, ``LOOM_PRINT_AFTER``, ``LOOM_VERIFY``, ``dump_pass_ir``) or
a pass context of another class; config values that are not plain data (such
as ``add_lower_pass``); a schedule holding anything but IR nodes and plain data
(a tensorized loop, whose intrinsic is Python code) or calling an ``EnvFunc`` (a
function looked up by name); a target kind registered in-process
(``register_target_kind``); a plugin that is not a module, or an op lowering rule
(``register_lowering``) defined outside the fingerprinted packages; a source file
modified after this process started (the code running may not be the code on
disk); and anything the fingerprint fails on for a reason of its own.  Patching Loom's functions or module
constants at run time is not seen either: set ``LOOM_CACHE=0`` when doing that.

>>> import loom
>>> A = loom.placeholder((64,), name="A")
>>> B = loom.compute((64,), lambda i: A[i] * 2.0, name="B")
>>> s = loom.create_schedule(B.op)
>>> k1 = fingerprint_of(s, [A, B])  # for the default host target
>>> xo, xi = s[B].split(B.op.axis[0], factor=8)
>>> k2 = fingerprint_of(s, [A, B])
>>> k1 != k2 or k1 is None  # None: not cacheable (interp), or a Loom file is newer than this process
True
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import LoomError

if TYPE_CHECKING:
    from ..runtime.module import Module
    from ..target import Target

__all__ = ["BuildKey", "fingerprint", "fingerprint_of", "lookup", "store"]

_log = logging.getLogger(__name__)

#: Part of every key: bump it when what a key covers, or the entry format, changes.
FORMAT = "2"


class _Unknown(Exception):
    """The build holds something the fingerprint cannot describe (the message says what)."""


class BuildKey:
    """The key material of one build, and the cache namespace of its target kind."""

    def __init__(self, parts: list[str], kind: str) -> None:
        self.parts, self.kind = parts, kind

    def digest(self) -> str:
        from ..runtime.disk_cache import cache_key

        return cache_key(self.parts)


# --------------------------------------------------------------------------- the code

_START: float | None = None


def _process_start() -> float:
    """When this process started (wall clock); where /proc is missing, when this module was imported."""
    global _START
    if _START is None:
        try:
            with open("/proc/self/stat", "rb") as fh:
                ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])  # field 22: start time after boot
            with open("/proc/stat", "rb") as fh:
                boot = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
            _START = boot + ticks / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError, StopIteration):
            _START = _IMPORTED
    return _START


_IMPORTED = time.time()


def _package_dirs() -> list[str]:
    """The folders of Loom's packages and of every registered plugin's top-level package."""
    from ..plugins import get_plugin_manager

    dirs: list[str] = []
    for name in ("loom", "loom.plugins"):
        dirs += list(getattr(sys.modules.get(name), "__path__", ()))
    for plugin in get_plugin_manager().get_plugins():
        if not isinstance(plugin, type(sys)):
            raise _Unknown(f"plugin {plugin!r} is not a module")
        top = sys.modules.get(plugin.__name__.split(".")[0])
        where = list(getattr(top, "__path__", ()))
        if not where:
            path = getattr(top, "__file__", None) or getattr(plugin, "__file__", None)
            if not path:
                raise _Unknown(f"plugin module {plugin.__name__} has no source file")
            where = [path]
        dirs += where
    return sorted({os.path.realpath(d) for d in dirs})


def _tree_text(folders: Sequence[str]) -> tuple[str, int, str]:
    """``(text, newest_mtime_ns, newest_path)`` of the files below ``folders``, skipping dot files and caches.

    For each folder, ``"[folder]\\n"`` and a ``"path:size:mtime_ns\\n"`` line per file,
    sorted by path.  The Python form of ``loom.driver._tree_state.tree_text``, which
    is used where the extension was built (it runs without the GIL).
    """
    lines: list[str] = []
    newest, newest_path = 0, ""

    def walk(path: str) -> None:
        with os.scandir(path) as it:
            for e in it:
                name = e.name
                if name[0] == "." or name == "__pycache__":
                    continue
                if e.is_dir(follow_symlinks=False):
                    walk(e.path)
                else:
                    st = e.stat()
                    found.append((os.fsencode(e.path), e.path, st.st_size, st.st_mtime_ns))

    for folder in folders:
        found: list[tuple[bytes, str, int, int]] = []
        walk(folder)
        found.sort()  # by the path's bytes, as the C walk sorts
        lines.append(f"[{folder}]\n")
        for _, path, size, mtime in found:
            lines.append(f"{path}:{size}:{mtime}\n")
            if mtime > newest:
                newest, newest_path = mtime, path
    return "".join(lines), newest, newest_path


class _CodeState:
    """The code state, read on a native thread while the caller works (where the C walk was built)."""

    def __init__(self) -> None:
        self.folders = _package_dirs()
        try:
            from ._tree_state import start
        except ImportError:  # installed without a C compiler: walked in Python by lines()
            self.walker = None
            return
        self.walker = start(self.folders)

    def lines(self) -> list[str]:
        """The state; _Unknown when a file changed after this process started."""
        text, newest, newest_path = _tree_text(self.folders) if self.walker is None else self.walker.result()
        if newest / 1e9 > _process_start() - 1.0:  # a second's slack: clock granularity
            raise _Unknown(f"{newest_path} changed after this process started")
        import numpy

        from ..plugins import get_plugin_manager

        pm = get_plugin_manager()
        plugins = sorted(f"{pm.get_name(p)}={getattr(p, '__name__', '')}" for p in pm.get_plugins())
        return [sys.version, f"numpy {numpy.__version__}", *plugins, text]


def _rules_state(kinds: Sequence[str]) -> None:
    """Lowering rules registered directly for ``kinds`` must come from the fingerprinted packages.

    Rules for other kinds cannot reach this build (a rule applies to its own kind,
    ``"default"`` to every kind), so code elsewhere registering them changes nothing.
    """
    from ..ir import op as op_mod

    roots = ("loom", *(getattr(p, "__name__", "").split(".")[0] for p in _plugins()))
    for info in list(op_mod._OPS.values()):
        for kind, rule in list(info.lowering.items()):
            module = getattr(rule, "__module__", None) or ""
            if kind in kinds and module.split(".")[0] not in roots:
                raise _Unknown(f"op {info.name} has a lowering rule for {kind!r} from {module or 'unknown code'}")


def _plugins() -> list[Any]:
    from ..plugins import get_plugin_manager

    return list(get_plugin_manager().get_plugins())


# --------------------------------------------------------------------------- the inputs


def _schedule_doc(sch: Any, args: Sequence[Any], target: Target, host: Target) -> str:
    """Every attribute of the schedule, its stages and groups, the arguments and the targets, as JSON.

    Nodes go into one node table (:func:`loom.save_json`'s), so an object used in
    several places is one entry; stages and groups are referred to by index.
    Anything else that is not plain data raises _Unknown: the key would not describe it.
    """
    import dataclasses

    from ..errors import SerializationError
    from ..ir.node import Node
    from ..ir.serialize import _Writer
    from ..te.schedule import Schedule, Stage
    from ..te.schedule_group import StageGroup

    table = _Writer()
    stages = {id(st): k for k, st in enumerate(sch.stages)}
    groups = {id(g): k for k, g in enumerate(sch.groups)}

    plain = (type(None), bool, int, float, str)

    def val(v: Any) -> Any:
        if type(v) in plain:
            return table.value(v, "Schedule", "attribute")
        if isinstance(v, Node):
            return {"$ref": table.node(v)}
        if isinstance(v, list):
            return [val(x) for x in v]
        if isinstance(v, tuple):
            return {"$tuple": [val(x) for x in v]}
        if isinstance(v, dict):
            return {"$map": [[val(k), val(x)] for k, x in v.items()]}
        if isinstance(v, Stage):
            return {"$stage": stages[id(v)]}
        if isinstance(v, StageGroup):
            return {"$group": groups[id(v)]}
        if v is sch:
            return {"$schedule": 0}
        if dataclasses.is_dataclass(v) and not isinstance(v, type):  # loop relations, loop annotations
            if getattr(v, "tensor_intrin", None) is not None:
                raise _Unknown("a loop is tensorized (a tensor intrinsic holds Python code)")
            return {"$dc": f"{type(v).__module__}.{type(v).__qualname__}",
                    "fields": [val(getattr(v, f.name)) for f in dataclasses.fields(v)]}
        if isinstance(v, (Schedule, Stage, StageGroup)) or not (v is None or isinstance(v, (bool, int, float, str))):
            raise _Unknown(f"the schedule holds a {type(v).__name__}")
        return table.value(v, "Schedule", "attribute")

    def obj(o: Any) -> Any:
        return [type(o).__qualname__, [[k, val(x)] for k, x in sorted(vars(o).items())]]

    try:
        doc = [obj(sch), [obj(st) for st in sch.stages], [obj(g) for g in sch.groups], val(list(args)),
               val(target), val(host)]
    except (SerializationError, KeyError) as err:  # KeyError: a stage or group of another schedule
        raise _Unknown(f"the schedule cannot be written down ({type(err).__name__}: {err})") from None
    if any(n["type"] == "ir.EnvFunc" for n in table.nodes):
        raise _Unknown("the schedule calls an EnvFunc (a function looked up by name)")
    return json.dumps([doc, table.nodes], separators=(",", ":"))


def _plain(value: Any) -> str:
    def refuse(v: Any) -> Any:
        raise _Unknown(f"a config value is a {type(v).__name__}")

    return json.dumps(value, sort_keys=True, default=refuse)


def _context_state() -> list[str]:
    from ..transform.pass_base import PassContext
    from .build_config import BuildConfig

    ctx = PassContext.current()
    if type(ctx) not in (PassContext, BuildConfig) or ctx.instruments:
        raise _Unknown("the pass context has instruments or is of another class")
    if ctx.config.get("tir.add_lower_pass") or ctx.config.get("tir.dump_pass_ir"):
        raise _Unknown("the pass context adds passes or dumps the IR")
    return [str(ctx.opt_level), _plain(sorted(ctx.required_pass)), _plain(sorted(ctx.disabled_pass)),
            _plain(ctx.config)]


def _backend_state(target: Target) -> list[str]:
    from ..backend import get_backend
    from ..target.kind import kind_origin

    if kind_origin(target.kind_name) != "plugin":
        raise _Unknown(f"target kind {target.kind_name!r} was not installed by a plugin")
    backend, plugin = get_backend(target.kind.name)
    if not backend.cacheable:
        raise _Unknown(f"the {target.kind_name} backend is not cacheable")
    options = backend.options(target)
    return [plugin, type(backend).__module__, type(backend).__qualname__, str(backend.version), options.digest(),
            backend.compiler_identity(options)]


def fingerprint(inputs: Any, args: Sequence[Any] | None, name: str, binds: Any, target: Target,
                host: Target) -> BuildKey | None:
    """The key of building schedule ``inputs`` for ``target`` (whose host is ``host``), or None.

    None means the build must take the usual path (see the module docstring for
    when); the reason is logged at debug level.
    """
    from ..runtime.disk_cache import cache_enabled
    from ..te.schedule import Schedule

    if not cache_enabled() or not isinstance(inputs, Schedule) or binds or not isinstance(args, (list, tuple)) \
            or target.device_type != host.device_type:  # device code: a host module importing device modules
        return None
    try:
        code = _CodeState()  # the source files are read on a thread while the schedule is written down
        parts = ["loom-build", FORMAT, name, *_context_state(), *_backend_state(target),
                 _schedule_doc(inputs, args, target, host), *code.lines()]
        _rules_state((target.kind_name, host.kind_name, "default"))
    except _Unknown as why:
        _log.debug("build %s: no build fingerprint (%s); lowering as usual", name, why)
        return None
    except Exception as err:  # noqa: BLE001 - whatever it is, the usual path builds correctly without a key
        _log.debug("build %s: no build fingerprint (%s: %s); lowering as usual", name, type(err).__name__, err)
        return None
    return BuildKey(parts, target.kind_name)


def fingerprint_of(inputs: Any, args: Sequence[Any] | None = None, target: Any = None,
                   name: str = "default_function") -> str | None:
    """The hex digest :func:`loom.build` would cache ``build(inputs, args, target, name=name)`` under.

    None when the build takes the usual path (see the module docstring).
    """
    from .build import _resolve_targets
    from .lower import driver_context

    with driver_context():
        cfg, work = _resolve_targets(inputs, target, None)
        if len(work) != 1:
            return None
        key = fingerprint(inputs, args, name, None, work[0][0].without_host(), cfg.host_target)
    return key.digest() if key is not None else None


# --------------------------------------------------------------------------- the entries
# An entry holds the ModuleInfo and the key (digest) of the artifact in the backend stages' cache, not a
# copy of it: one artifact on disk, and a damaged or evicted artifact makes the hit a miss.


def _caches(key: BuildKey) -> tuple[Any, Any]:
    from ..backend import get_backend
    from ..runtime.disk_cache import DiskCache

    backend, _ = get_backend(key.kind)
    return (DiskCache.default(f"builds-{key.kind}", suffix=".build"),
            DiskCache.default(f"backend-{key.kind}", suffix=backend.artifact_suffix))


def lookup(key: BuildKey) -> Module | None:
    """The Module stored under ``key``, loaded and linked; None on a miss or an unusable entry."""
    from ..backend.base import Artifact, ModuleInfo, unpack_sections
    from ..backend.stages import load_cached
    from ..runtime.disk_cache import CacheError
    from ..runtime.linking import link

    builds, artifacts = _caches(key)
    if builds is None or artifacts is None:
        return None
    try:
        found = builds.get(key.parts)
        if found is None:
            return None
        data, path = found
        sections = unpack_sections(data, f"build cache entry {path}")
        artifact = artifacts.get_key(sections["artifact"].decode("ascii"))
    except (CacheError, LoomError, KeyError, UnicodeDecodeError) as err:  # KeyError: a section is missing
        _log.debug("build cache: no hit (%s: %s)", type(err).__name__, err)
        return None
    if artifact is None:  # evicted or damaged since: the usual path compiles it again
        return None
    try:
        info = ModuleInfo.from_json(sections["info"], f"build cache entry {path}")
        notes = json.loads(sections["notes"])
        if info.kind != key.kind:
            raise LoomError(f"build cache entry {path} is for {info.kind}")
        module = link(load_cached(Artifact(*artifact), info))
        _log.debug("%s backend: build cache hit: %s", key.kind, path)
        for name, level, message in notes:  # what the build that made the entry warned about
            logging.getLogger(name).log(level, "%s", message)
        return module
    except Exception as err:  # noqa: BLE001 - any problem with the entry: build as usual, and replace it
        _log.warning("build cache entry %s cannot be used (%s: %s): building again", path, type(err).__name__, err)
        try:
            builds.discard(key.parts)
        except CacheError:
            pass
        return None


class _Notes(logging.Handler):
    """The warnings a build logs (on this thread), which a hit logs again: the same build, the same warnings."""

    # About the cache or the process (loading runs again on a hit), not about the code.
    _QUIET = ("loom.cache", "loom.runtime", __name__, "loom.backend.stages")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.notes: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread and not record.name.startswith(self._QUIET):
            self.notes.append((record.name, record.levelno, record.getMessage()))


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, int, str]]]:
    """The warnings Loom's loggers emit on this thread inside the block (``(logger, level, message)``)."""
    handler = _Notes()
    logger = logging.getLogger("loom")
    logger.addHandler(handler)
    try:
        yield handler.notes
    finally:
        logger.removeHandler(handler)


def store(key: BuildKey, module: Module, notes: Sequence[tuple[str, int, str]] = ()) -> None:
    """Keep what a hit on ``key`` needs to rebuild ``module`` (a single module that imports nothing),
    and the warnings its build logged."""
    import os

    from ..backend.base import pack_sections
    from ..runtime.disk_cache import CacheError

    info, artifact = getattr(module, "info", None), getattr(module, "artifact", None)
    where = getattr(artifact, "path", None)  # None: the artifact is not in the cache
    if info is None or where is None or info.imports or module.imported_modules or info.kind != key.kind:
        return
    builds, artifacts = _caches(key)
    if builds is None or artifacts is None or os.path.dirname(where) != artifacts.folder:
        return
    digest = os.path.basename(where)[:64]
    entry = pack_sections({"info": info.to_json(), "artifact": digest, "notes": json.dumps(list(notes))})

    def write(path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(entry)

    try:
        builds.fetch(key.parts, write)
    except CacheError as err:
        _log.debug("build cache: not stored: %s", err)
