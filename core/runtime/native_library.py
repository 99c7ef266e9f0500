"""Native modules as shared libraries: exporting, loading, and the thread-count knob.

A native backend (llvm, c) exports a module as an ordinary shared library that
also defines two data symbols:

* ``loom_module_metadata`` (:data:`METADATA_SYMBOL`): a NUL-terminated UTF-8
  JSON object ``{"loom_module": 1, "format", "entry", "symbols", "signatures",
  "sources"}``.  ``signatures`` is the :func:`~loom.ir.save_json` text of the
  functions' signatures (the PrimFuncs after MakeAPI, bodies dropped), which is
  all the shared argument checker needs; ``symbols`` maps each function to its
  C symbol; ``sources`` holds the generated code by ``get_source`` format.
* ``loom_num_threads`` (:data:`THREADS_SYMBOL`): an ``int32_t`` that parallel
  regions pass to the thread pool as their thread count (0: the pool's default,
  one thread per core).  Modules set it from ``LOOM_NUM_THREADS`` when loaded.

:func:`link_shared_library` writes such a library from a backend's objects or C
sources; :func:`~loom.runtime.load_module` recognises it (ELF magic), reads the
metadata and asks the plugin of its format, which returns a :class:`LibraryModule`.
The library is a real ``.so``: ``ctypes.CDLL(path).<symbol>`` calls a function
through the native ABI of :mod:`loom.runtime.abi` without Loom.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import weakref
from typing import Any, Mapping, Sequence

from .. import envvars
from ..errors import LoomError, LoomValueError, SerializationError
from ..ir.function import IRModule
from ..ir.serialize import load_json, save_json
from .module import EXPORT_VERSION, Module
from .native_module import NativeModule

__all__ = ["METADATA_SYMBOL", "THREADS_SYMBOL", "LinkError", "LibraryModule", "configured_num_threads",
           "library_metadata", "link_shared_library", "is_shared_library", "read_library_metadata",
           "set_library_threads", "bind_thread_knob"]

METADATA_SYMBOL = "loom_module_metadata"
THREADS_SYMBOL = "loom_num_threads"
_ELF_MAGIC = b"\x7fELF"


class LinkError(LoomError):
    """Linking a shared library failed; the message holds the command and the compiler's output."""


def configured_num_threads() -> int:
    """The thread count of parallel regions from ``LOOM_NUM_THREADS`` (0 when unset: one per core).

    >>> import os
    >>> os.environ.pop("LOOM_NUM_THREADS", None) and None
    >>> configured_num_threads()
    0
    """
    return envvars.NUM_THREADS.get()


def set_library_threads(address: int, count: int | None = None) -> None:
    """Store ``count`` (default :func:`configured_num_threads`) into a module's ``loom_num_threads`` at ``address``."""
    ctypes.c_int32.from_address(address).value = configured_num_threads() if count is None else int(count)


#: The thread knobs of live native modules, by module.
_KNOBS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_forked_after_openmp = False


def bind_thread_knob(owner: Any, address: int, default: int = 0) -> None:
    """Set ``owner``'s ``loom_num_threads`` (at ``address``) and keep it safe across ``fork()``.

    The count is ``LOOM_NUM_THREADS`` when set, else ``default`` (a target's
    ``num_cores``; 0: one thread per core).

    libgomp's thread pool does not survive ``fork()``: in a child, a region of more
    than one thread waits forever for the parent's workers.  So in a process
    forked after OpenMP was loaded, every live knob (and every later one) is 1.
    """
    set_library_threads(address, 1 if _forked_after_openmp else configured_num_threads() or max(0, default))
    _KNOBS[owner] = address


def _openmp_loaded() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            return "libgomp" in fh.read()
    except OSError:
        return True  # cannot tell: stay safe


def _after_fork_in_child() -> None:
    global _forked_after_openmp
    if _KNOBS and _openmp_loaded():
        _forked_after_openmp = True
        for address in list(_KNOBS.values()):
            set_library_threads(address, 1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def library_metadata(module: Module, sources: Mapping[str, str], symbols: Mapping[str, str]) -> bytes:
    """The metadata a native ``module`` embeds in its exported library (UTF-8 JSON).

    :param sources: generated code by ``get_source`` format (e.g. ``{"c": text}``).
    :param symbols: each function's C symbol in the library, by function name.

    Besides the signatures it records the functions the module imports and, packed
    with :func:`~loom.runtime.linking.pack_modules`, every module it imports, so
    the loaded library links them again.
    """
    from ..backend.base import signature_of
    from .linking import pack_modules

    sigs = {name: signature_of(f) for name, f in module._signatures.items()}
    missing = sorted(set(sigs) - set(symbols))
    if missing:
        raise LoomValueError(f"library_metadata: no symbol given for functions {missing}")
    doc = {"loom_module": EXPORT_VERSION, "format": module.format, "entry": module.entry_name,
           "symbols": {n: str(symbols[n]) for n in sigs}, "signatures": save_json(IRModule(sigs)),
           "sources": dict(sources), "default_source": next(iter(sources), ""),
           "assumed_alignment": module.assumed_alignment, "imports": list(module.imports),
           "embedded": pack_modules(module.imported_modules) if module.imported_modules else ""}
    return json.dumps(doc, sort_keys=True).encode("utf-8")


def _metadata_c(metadata: bytes) -> str:
    if b"\0" in metadata:
        raise LoomValueError("library metadata must not contain NUL bytes")
    rows = [",".join(str(b) for b in metadata[k:k + 32]) for k in range(0, len(metadata), 32)]
    body = ",\n".join(rows)
    return ("/* Generated by Loom: the module's metadata (see loom.runtime.native_library). */\n"
            "#include <stdint.h>\n"
            f'__attribute__((visibility("default"))) const char {METADATA_SYMBOL}[] = {{\n{body},\n0}};\n')


def link_shared_library(path: str | os.PathLike[str], inputs: Sequence[str], metadata: bytes, *,
                        compiler: str = "cc", flags: Sequence[str] = (), libraries: Sequence[str] = ("m",),
                        openmp: bool = False) -> None:
    """Link ``inputs`` (object files or C sources) and ``metadata`` into the shared library ``path``.

    The library is written to a temporary file next to ``path`` and renamed, so
    a reader never sees half a file.  Raises :class:`LinkError` with the command
    and the compiler's messages when the compiler fails or is missing.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.TemporaryDirectory(prefix="loom_link_") as work:
        meta_c = os.path.join(work, "loom_metadata.c")
        with open(meta_c, "w", encoding="ascii") as fh:
            fh.write(_metadata_c(metadata))
        fd, tmp = tempfile.mkstemp(prefix=".loom-lib-", suffix=".so", dir=folder)
        os.close(fd)
        command = [*shlex.split(compiler), *flags, "-shared", "-fPIC", *(["-fopenmp"] if openmp else []),
                   "-o", tmp, meta_c, *map(os.fspath, inputs), *(f"-l{lib}" for lib in libraries)]
        try:
            try:
                done = subprocess.run(command, capture_output=True, text=True, check=False)
            except OSError as err:
                raise LinkError(f"cannot run the compiler to link {path!r}: {err}\n"
                                f"command: {shlex.join(command)}") from None
            if done.returncode != 0:
                raise LinkError(f"linking {path!r} failed with exit status {done.returncode}\n"
                                f"command: {shlex.join(command)}\n{done.stderr.strip()}")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def is_shared_library(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a shared library (ELF)."""
    try:
        with open(os.fspath(path), "rb") as fh:
            return fh.read(4) == _ELF_MAGIC
    except OSError:
        return False


def _open(path: str) -> tuple[ctypes.CDLL, dict[str, Any]]:
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as err:
        raise SerializationError(f"cannot load shared library {path!r}: {err}") from None
    try:
        raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, METADATA_SYMBOL)))
    except ValueError:
        raise SerializationError(f"{path!r} is a shared library but not a Loom module "
                                 f"(it defines no {METADATA_SYMBOL!r})") from None
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SerializationError(f"{path!r}: the Loom metadata is not valid JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("loom_module") != EXPORT_VERSION \
            or not all(isinstance(meta.get(k), t) for k, t in
                       (("format", str), ("entry", str), ("symbols", dict), ("signatures", str))):
        raise SerializationError(f"{path!r}: the Loom metadata is malformed or of another version "
                                 f"(this Loom reads version {EXPORT_VERSION})")
    return lib, meta


def read_library_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The metadata of a shared library written by a native module's ``export_library``."""
    return _open(os.fspath(path))[1]


def _private_copy(path: str) -> str:
    """A copy of ``path`` in a temporary folder, so its globals (import slots) are this module's own.

    ``dlopen`` of one path twice returns one handle, whose import slots two
    modules would then overwrite for each other.
    """
    work = tempfile.mkdtemp(prefix="loom_lib_")
    copy = os.path.join(work, os.path.basename(path) or "module.so")
    shutil.copyfile(path, copy)
    return copy


class LibraryModule(NativeModule):
    """A native module loaded from a shared library that ``export_library`` wrote.

    Backends return one from their ``loom_load_module`` hook; users get it from
    :func:`loom.runtime.load_module`.  Calls go through the same argument checks
    and native ABI as the module that was exported, and the modules it embeds
    are restored through their backends and linked again.

    :param path: the shared library.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self._lib, meta = _open(self.path)
        self.format = meta["format"]  # type: ignore[misc]  # per instance: the exporter's format
        self._sources: dict[str, str] = dict(meta.get("sources") or {})
        self._default_source = str(meta.get("default_source") or "")
        self._imports = tuple(str(x) for x in meta.get("imports") or ())
        align = meta.get("assumed_alignment")
        if isinstance(align, int) and align > 0:
            self.assumed_alignment = align  # type: ignore[misc]  # what the exporter's code relies on
        mod = load_json(meta["signatures"])
        if not isinstance(mod, IRModule):
            raise SerializationError(f"{self.path!r}: the signatures are a {type(mod).__name__}, not an IRModule")
        if self._imports:
            self._lib = _open(_private_copy(self.path))[0]
        entry = meta["entry"] or None
        super().__init__(dict(mod.functions), entry if entry in mod.functions else None, meta["symbols"])
        embedded = meta.get("embedded") or ""
        if embedded:
            from .linking import link, unpack_modules

            for sub in unpack_modules(embedded, self.path):
                self.import_module(sub)
            link(self)

    @property
    def imports(self) -> tuple[str, ...]:
        return self._imports

    def _symbol_address(self, symbol: str) -> int | None:
        try:
            return ctypes.addressof(ctypes.c_char.in_dll(self._lib, symbol))
        except ValueError:
            return None

    def get_source(self, fmt: str = "") -> str:
        """The generated code the exporter embedded (``fmt`` ``""``: the first form)."""
        if not self._sources:
            return super().get_source(fmt)
        if fmt == "":
            fmt = self._default_source if self._default_source in self._sources else next(iter(self._sources))
        if fmt not in self._sources:
            raise LoomValueError(f"this {self.format} library embeds sources {sorted(self._sources)}; got {fmt!r}")
        return self._sources[fmt]

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Copy the library to ``path`` (atomically)."""
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".loom-lib-", dir=os.path.dirname(os.path.abspath(path)))
        os.close(fd)
        try:
            shutil.copyfile(self.path, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
