"""Runtime Modules: what ``loom.build`` returns, and the export file format.

A :class:`Module` holds built functions.  Calling it calls its entry function;
``m["name"]`` returns a :class:`PackedFunc`.  Every call goes through the shared
:class:`~loom.runtime.arguments.ArgumentChecker` first, so a bad call raises a
clear error and never reaches the generated code.

Export format (``export_library``): one header line, a JSON object
``{"loom_module": 2, "format": <fmt>, "entry": <name>, "sha256": <digest>, ...}``,
then the backend's payload bytes; the digest covers the rest of the header and
the payload.  :func:`load_module` reads the header and asks the plugins (hook
``loom_load_module(path, fmt)``) to rebuild the Module; a plugin reads the file
back with :func:`read_export`, which checks the digest.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import tempfile
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import attrs

from ..errors import LoomError, LoomTypeError, LoomValueError, PluginError, SerializationError
from ..ir.function import IRModule, PrimFunc
from ..target.devices import Device, cpu
from .arguments import ArgumentChecker, BoundCall
from .fast_path import FastPath
from .packed_func import PackedFunc
from .safe_files import NotARegularFile, read_regular_file

if TYPE_CHECKING:
    from ..backend.base import ModuleInfo

__all__ = ["Module", "ModuleFunction", "PackedFunc", "ProfileResult", "load_module", "read_export",
           "EXPORT_VERSION", "lowered_functions"]

#: Version of the export header written by :meth:`Module.export_library`.
EXPORT_VERSION = 2  # 2: libraries end with an integrity record, module files carry a sha256

Runner = Callable[[BoundCall], Any]


class ModuleFunction(PackedFunc):
    """One callable function of a Module (a :class:`PackedFunc`): checks its arguments, then runs.

    ``f(*args)`` takes arrays for buffer parameters and scalars for scalar
    parameters; results are written into the arrays, and the call returns None.
    """

    __slots__ = ("module", "_bind", "_run", "_fast", "_call")

    def __init__(self, name: str, module: Module, checker: ArgumentChecker, run: Runner) -> None:
        self.name = name
        self.module = module
        self._bind = checker.bind
        self._run = run
        # Native runners take packed words, so a layout checked once can skip the checker.
        invoke, pack = getattr(run, "invoke", None), getattr(run, "pack", None)
        self._fast = FastPath(checker, invoke, pack) if invoke is not None and pack is not None and \
            FastPath.applies_to(checker) else None
        #: What a call runs: the native fast path (falling back to the checked call) where it is built.
        self._call: Callable[..., Any] = \
            (self._fast is not None and self._fast.native_caller(run, self._checked_call)) or self._checked_call

    @property
    def func(self) -> Callable[..., Any]:
        """Itself: a kernel's ``call_packed`` of a registered module function runs it as it is."""
        return self

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def _checked_call(self, *args: Any) -> Any:
        fast = self._fast
        if fast is not None and fast(args):
            return None
        call = self._bind(args)
        try:
            result = self._run(call)
        finally:
            call.finish()
        if fast is not None:
            fast.learn(args, call)
        return result

    def __repr__(self) -> str:
        return f"<loom.runtime.PackedFunc {self.name} of {self.module.type_key} module>"


@attrs.frozen
class ProfileResult:
    """Timings from :meth:`Module.time_evaluator`: ``results`` holds the mean seconds of each repeat."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __str__(self) -> str:
        ms = [x * 1e3 for x in (self.mean, self.median, self.max, self.min, self.std)]
        return "mean {:.4f} ms, median {:.4f} ms, max {:.4f} ms, min {:.4f} ms, std {:.4f} ms".format(*ms)


def lowered_functions(mod: Any, owner: str) -> dict[str, PrimFunc]:
    """The PrimFuncs of ``mod``, checked for a backend Module's constructor.

    :raises LoomTypeError: when ``mod`` is not an IRModule or holds anything but PrimFuncs.
    """
    if not isinstance(mod, IRModule):
        raise LoomTypeError(f"{owner} takes an IRModule, got {type(mod).__name__}")
    prims = {name: f for name, f in mod.functions.items() if isinstance(f, PrimFunc)}
    if len(prims) != len(mod.functions):
        raise LoomTypeError(f"{owner} runs PrimFuncs; {sorted(set(mod.functions) - set(prims))} are not")
    return prims


def _default_entry(functions: Mapping[str, PrimFunc]) -> str:
    if "main" in functions:
        return "main"
    hosts = [n for n, f in functions.items() if f.attrs.get("calling_conv") != "device_kernel"]
    return (hosts or list(functions))[0]


class Module:
    """A built module: named functions callable from Python.

    >>> import numpy as np, loom
    >>> from loom.ir import BufferStore, For, IRModule, PrimFunc
    >>> A = loom.decl_buffer((4,), "float32", name="A")
    >>> i = loom.var("i")
    >>> f = PrimFunc([A.data], For(i, 0, 4, "serial", BufferStore(A, A[i] * 2.0, [i])),
    ...              buffer_map={A.data: A}, attrs={"global_symbol": "double"})
    >>> m = loom.runtime.InterpModule(IRModule({"double": f}))
    >>> a = np.ones(4, "float32"); m(a); a
    array([2., 2., 2., 2.], dtype=float32)
    >>> m.entry_name, m["double"]
    ('double', <loom.runtime.PackedFunc double of interp module>)

    Subclassing (backends): pass the *signatures* (the PrimFuncs after MakeAPI)
    of the functions callable from Python to ``__init__``, and implement

    * ``_make_runner(name, func) -> Callable[[BoundCall], Any]``: called once per
      function on first use; the runner gets arguments already checked, aligned
      and bound (``call.values``, ``call.pointers``, ``call.binding``);
    * ``get_source(fmt="")``: the generated code (``fmt`` picks a stage);
    * ``_export_payload() -> bytes`` (and optionally ``_export_header() -> dict``),
      with a ``loom_load_module`` hookimpl for ``format`` that rebuilds the
      module from :func:`read_export`;
    * ``_synchronize()`` when calls return before the device finishes;
    * for calls between modules (:mod:`loom.runtime.linking`):
      ``native_function(name)``, ``call_words(name, words)`` and
      ``link_import(name, provider)``; native modules inherit all three from
      :class:`~loom.runtime.native_module.NativeModule`.

    The class attribute ``format`` names the export format and ``type_key``;
    ``assumed_alignment`` caps the alignment arguments are copied to.
    Modules built by a backend's stages also carry :attr:`info` (their
    :class:`~loom.backend.ModuleInfo`) and :attr:`artifact` (the compiled bytes),
    which is how a host module embeds the modules it imports when exported.
    """

    format: ClassVar[str] = ""
    #: What the backend stages recorded (None for a module made by hand).
    info: ModuleInfo | None = None
    #: The compiled bytes this module was loaded from (None for a module made by hand).
    artifact: bytes | None = None
    #: The largest pointer alignment the generated code relies on (None: each buffer's
    #: ``data_alignment``); see :class:`~loom.runtime.arguments.ArgumentChecker`.
    assumed_alignment: ClassVar[int | None] = None

    def __init__(self, functions: Mapping[str, PrimFunc], entry_name: str | None = None,
                 imported_modules: Sequence[Module] = (), device: Device | None = None) -> None:
        self._signatures = dict(functions)
        if entry_name is not None and entry_name not in self._signatures:
            raise LoomValueError(f"entry {entry_name!r} is not a function of the module "
                                 f"(it has {sorted(self._signatures)})")
        # A module may hold no function itself: a host module that only imports device modules.
        self._entry = entry_name or (_default_entry(self._signatures) if self._signatures else "")
        self.imported_modules: list[Module] = list(imported_modules)
        self.device = device or cpu(0)
        self._packed: dict[str, ModuleFunction] = {}

    def _adopt_build(self, info: ModuleInfo, artifact: bytes) -> None:
        """Record the stage outputs this module was loaded from (called by :mod:`loom.backend.stages`)."""
        self.info, self.artifact = info, artifact

    # -- calls between modules (loom.runtime.linking) -----------------------------
    @property
    def imports(self) -> tuple[str, ...]:
        """Functions this module calls that other modules define (linked by :func:`loom.runtime.linking.link`)."""
        return self.info.imports if self.info is not None else ()

    def native_function(self, name: str) -> tuple[int, Any]:
        """``(address, keepalive)`` of a native-ABI function running ``name`` (see :mod:`loom.runtime.abi`).

        Native modules hand out the compiled function itself; others a ctypes
        callback into :meth:`call_words`, kept alive by ``keepalive``.
        """
        from .linking import words_callback

        if name not in self._signatures:
            raise LoomValueError(f"{self.type_key} module has no function {name!r}; it has {sorted(self._signatures)}")
        return words_callback(self, name)

    def call_words(self, name: str, words: Sequence[int]) -> None:
        """Run ``name`` on native-ABI argument words (a call from another module)."""
        raise LoomTypeError(f"a {self.type_key} module cannot be called from another module")

    def link_import(self, name: str, provider: Module) -> None:
        """Make this module's calls of ``name`` go to ``provider`` (which defines it)."""
        raise LoomTypeError(f"a {self.type_key} module cannot call functions of other modules")

    # -- backend interface -------------------------------------------------------
    def _make_runner(self, name: str, func: PrimFunc) -> Runner:
        raise NotImplementedError(f"{type(self).__name__} must implement _make_runner")

    def _export_payload(self) -> bytes:
        raise LoomTypeError(f"a {self.type_key} module cannot be exported")

    def _export_header(self) -> dict[str, Any]:
        return {}

    def _synchronize(self) -> None:
        """Wait for work this module started on its device (CPU modules: nothing to wait for)."""

    def get_source(self, fmt: str = "") -> str:
        """The module's code as text; ``fmt`` selects a form when there are several."""
        raise LoomTypeError(f"a {self.type_key} module has no source")

    # -- functions -----------------------------------------------------------------
    @property
    def type_key(self) -> str:
        return self.format or type(self).__name__

    @property
    def entry_name(self) -> str:
        """The function ``module(*args)`` calls (an empty module's: its first import's)."""
        if not self._entry and self.imported_modules:
            return self.imported_modules[0].entry_name
        return self._entry

    @property
    def function_names(self) -> list[str]:
        return list(self._signatures)

    def import_module(self, module: Module) -> None:
        """Add ``module`` to :attr:`imported_modules` (a host module importing its device modules)."""
        if not isinstance(module, Module):
            raise LoomTypeError(f"import_module takes a runtime Module, got {type(module).__name__}")
        self.imported_modules.append(module)

    def function_names_deep(self) -> list[str]:
        """The names of this module's functions and of every module it imports."""
        return [*self._signatures, *(n for sub in self.imported_modules for n in sub.function_names_deep())]

    def get_function(self, name: str, query_imports: bool = False) -> ModuleFunction:
        """The function ``name``, also searched in imported modules when ``query_imports``."""
        found = self._packed.get(name)
        if found is not None:
            return found
        func = self._signatures.get(name)
        if func is None:
            if query_imports:
                for sub in self.imported_modules:
                    if name in sub.function_names_deep():
                        return sub.get_function(name, True)
            names = self.function_names_deep() if query_imports else list(self._signatures)
            raise LoomValueError(f"{self.type_key} module has no function {name!r}; it has {sorted(names)}")
        found = ModuleFunction(name, self, ArgumentChecker(func, name, assumed_alignment=self.assumed_alignment),
                               self._make_runner(name, func))
        self._packed[name] = found
        return found

    def __getitem__(self, name: str) -> ModuleFunction:
        """``module[name]``: the function ``name`` of this module or of a module it imports."""
        return self.get_function(name, query_imports=True)

    def __contains__(self, name: object) -> bool:
        return name in self._signatures

    def __call__(self, *args: Any) -> Any:
        found = self._packed.get(self._entry)  # the entry is usually this module's own function, made already
        if found is None:
            entry = self.entry_name
            if not entry:
                raise LoomValueError(f"this {self.type_key} module holds no function and imports none")
            found = self.get_function(entry, query_imports=True)
        return found(*args)

    def __repr__(self) -> str:
        return f"<loom.runtime.Module {self.type_key}: {', '.join(self._signatures)}>"

    # -- timing --------------------------------------------------------------------
    _HOST = 1  # DLPack's CPU device type

    def _imported_deep(self) -> list[Module]:
        out: list[Module] = []
        for m in self.imported_modules:
            out += [m, *m._imported_deep()]
        return out

    def time_evaluator(self, func_name: str, dev: Any, number: int = 10, repeat: int = 3,
                       min_repeat_ms: float = 0) -> Callable[..., ProfileResult]:
        """A function that times ``func_name`` on given arguments.

        Each of ``repeat`` measurements runs the function ``number`` times (more
        when a repeat takes under ``min_repeat_ms``) and records the mean seconds
        per call, arguments checks included, after one warm-up call.  ``dev`` is
        the module's device or that of a module it imports (a host module timing
        its GPU kernels); a device with a clock of its own (CUDA events) measures
        on it, others on the host's clock after synchronizing.
        """
        if number < 1 or repeat < 1:
            raise LoomValueError(f"time_evaluator needs number >= 1 and repeat >= 1, got {number}, {repeat}")
        dev = dev if isinstance(dev, Device) else Device(dev)
        modules = [self, *self._imported_deep()]
        if dev.device_type not in {m.device.device_type for m in modules}:
            raise LoomValueError(f"time_evaluator: the {self.type_key} module runs on {self.device}, not {dev}")
        func = self.get_function(func_name)

        def sync() -> None:
            for m in modules:
                m._synchronize()

        def measure(n: int, args: tuple[Any, ...]) -> float:
            """Seconds for ``n`` calls: on the device's own clock when it has one (a GPU's events)."""
            from .device_api import get_device_api

            timer = get_device_api(dev.device_type).timer(dev) if dev.device_type != self._HOST else None
            if timer is not None:
                timer.start()
                for _ in range(n):
                    func(*args)
                return float(timer.stop())
            start = time.perf_counter()
            for _ in range(n):
                func(*args)
            sync()
            return time.perf_counter() - start

        def evaluate(*args: Any) -> ProfileResult:
            func(*args)
            sync()
            results: list[float] = []
            n = number
            for _ in range(repeat):
                while True:
                    spent = measure(n, args)
                    if spent * 1e3 >= min_repeat_ms or n >= 1 << 30:
                        break
                    n = max(n * 2, math.ceil(n * min_repeat_ms / max(spent * 1e3, 1e-3)))
                results.append(spent / n)
            return ProfileResult(tuple(results))

        return evaluate

    # -- export --------------------------------------------------------------------
    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the module to ``path``; :func:`load_module` reads it back in any process."""
        header = {"loom_module": EXPORT_VERSION, "format": self.format, "entry": self._entry,
                  **self._export_header()}
        if not self.format:
            raise LoomTypeError(f"{type(self).__name__} declares no export format")
        payload = self._export_payload()
        header["sha256"] = _export_digest(header, payload)
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".loom-export-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(json.dumps(header, sort_keys=True).encode() + b"\n")
                fh.write(payload)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _export_digest(header: Mapping[str, Any], payload: bytes) -> str:
    """The sha256 an export records: of its header (without the digest) and its payload."""
    fields = {k: v for k, v in header.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode() + b"\n" + payload).hexdigest()


def read_export(path: str | os.PathLike[str]) -> tuple[dict[str, Any], bytes]:
    """The header and payload of a file written by :meth:`Module.export_library`.

    The file must be a regular file (a FIFO, a device or a folder is refused without
    reading it) whose content matches the sha256 recorded at export, so a truncated
    or modified file is a :class:`~loom.errors.SerializationError`.  The returned
    header leaves the digest out.
    """
    path = os.fspath(path)
    try:
        data = read_regular_file(path)
    except NotARegularFile as err:
        raise LoomValueError(f"cannot read module file: {err}") from None
    except (OSError, LoomError) as err:
        raise LoomValueError(f"cannot read module file {path!r}: {err}") from None
    line, newline, payload = data.partition(b"\n")
    try:
        header = json.loads(line.decode("utf-8")) if newline else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("format"), str) \
            or not isinstance(header.get("entry"), str):
        raise SerializationError(f"{path!r} is not a Loom module file (it must start with a JSON header line "
                                 '{"loom_module": 2, "format": ..., "entry": ...})')
    if header.get("loom_module") != EXPORT_VERSION:
        raise SerializationError(f"{path!r} is a Loom module file of version {header.get('loom_module')!r}; "
                                 f"this Loom reads version {EXPORT_VERSION}")
    digest = header.pop("sha256", None)
    if not isinstance(digest, str):
        raise SerializationError(f"{path!r} has no integrity record (sha256) in its header: export_library did "
                                 "not write it; export it again")
    if digest != _export_digest(header, payload):
        raise SerializationError(f"{path!r} was modified or truncated after export: its content does not match "
                                 "the sha256 export_library recorded; export it again")
    return header, payload


def load_module(path: str | os.PathLike[str]) -> Module:
    """Load a module written by :meth:`Module.export_library` through the plugin for its format.

    ``path`` is a Loom module file (JSON header and payload) or a shared library
    that a native backend exported (see :mod:`loom.runtime.native_library`).  It
    must be a regular file that matches the sha256 recorded at export: anything
    else (a FIFO, a device, a truncated or modified file) is a clear
    :class:`~loom.errors.LoomError`, raised before any of its code is loaded.
    Each call loads the file anew, so a module re-exported to the same path loads
    as the new module.

    >>> import loom, numpy as np, os, tempfile
    >>> from loom.ir import BufferStore, IRModule, PrimFunc
    >>> A = loom.decl_buffer((1,), "int32", name="A")
    >>> f = PrimFunc([A.data], BufferStore(A, A[0] + 1, [0]), buffer_map={A.data: A})
    >>> path = os.path.join(tempfile.mkdtemp(), "inc.loom")
    >>> loom.runtime.InterpModule(IRModule({"inc": f})).export_library(path)
    >>> a = np.zeros(1, "int32"); loom.runtime.load_module(path)(a); a
    array([1], dtype=int32)
    """
    from loom.plugins import call_first  # lazy: the plugin manager imports loom

    from .native_library import is_shared_library, read_library_metadata

    header = read_library_metadata(path) if is_shared_library(path) else read_export(path)[0]
    fmt = header["format"]
    mod, plugin = call_first("loom_load_module", path=os.fspath(path), fmt=fmt)
    if mod is None:
        raise PluginError(f"no installed plugin loads modules of format {fmt!r} ({os.fspath(path)!r}); "
                          "install the backend that exported it (see `loom plugins`)")
    if not isinstance(mod, Module):
        raise PluginError(f"plugin {plugin!r} loading format {fmt!r} returned a {type(mod).__name__}, not a Module")
    return mod
