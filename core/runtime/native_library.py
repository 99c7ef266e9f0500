"""Native modules as shared libraries: exporting, loading, and the thread-count knob.

A native backend (llvm, c) exports a module as an ordinary shared library that
also defines two data symbols:

* ``loom_module_metadata`` (:data:`METADATA_SYMBOL`): a NUL-terminated UTF-8
  JSON object ``{"loom_module": 2, "format", "entry", "symbols", "signatures",
  "sources"}``.  ``signatures`` is the :func:`~loom.ir.save_json` text of the
  functions' signatures (the PrimFuncs after MakeAPI, bodies dropped), which is
  all the shared argument checker needs; ``symbols`` maps each function to its
  C symbol; ``sources`` holds the generated code by ``get_source`` format.
* ``loom_num_threads`` (:data:`THREADS_SYMBOL`): an ``int32_t`` that parallel
  regions pass to the thread pool as their thread count (0: the pool's default,
  one thread per core).  Modules set it from ``LOOM_NUM_THREADS`` when loaded.

:func:`link_shared_library` writes such a library from a backend's objects or C
sources and appends an integrity record (:func:`seal`: the library's size and
sha256, which the dynamic loader ignores); :func:`~loom.runtime.load_module`
recognises it (ELF magic), reads the metadata from the file's bytes without
loading it and asks the plugin of its format, which returns a :class:`LibraryModule`.
A library that is not a regular file, lacks the record or does not match it (truncated,
modified after export), or whose metadata names a symbol the library does not
define as a function, is a :class:`~loom.errors.SerializationError` before anything
is mapped.  The library is a real ``.so``: ``ctypes.CDLL(path).<symbol>`` calls a
function through the native ABI of :mod:`loom.runtime.abi` without Loom.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import shlex
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import envvars
from ..errors import LoomError, LoomValueError, SerializationError
from ..ir.function import IRModule, PrimFunc
from ..ir.serialize import load_json, save_json
from .elf_symbols import ELF_MAGIC, FUNCTION, OBJECT, ElfError, ElfSymbol, dynamic_symbols, symbol_bytes
from .module import EXPORT_VERSION, Module
from .native_module import NativeModule
from .safe_files import open_regular, read_regular_file

__all__ = ["METADATA_SYMBOL", "THREADS_SYMBOL", "LinkError", "LibraryModule", "configured_num_threads",
           "library_metadata", "link_shared_library", "save_object", "run_compiler", "is_shared_library", "read_library_metadata",
           "set_library_threads", "bind_thread_knob", "seal"]

_log = logging.getLogger(__name__)

METADATA_SYMBOL = "loom_module_metadata"
THREADS_SYMBOL = "loom_num_threads"
#: Brackets the integrity record at the end of an exported library (see :func:`seal`).
_SEAL = b"LOOMSEAL"
_SEAL_SIZE = len(_SEAL) * 2 + 8 + 32


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
    """Store ``count`` (default :func:`configured_num_threads`) into a module's ``loom_num_threads`` at ``address``.

    :raises LoomValueError: for a count the ``int32_t`` knob cannot hold (it would wrap).
    """
    count = configured_num_threads() if count is None else int(count)
    if not 0 <= count < 1 << 31:
        raise LoomValueError(f"a thread count must be between 0 and {(1 << 31) - 1}, got {count}")
    ctypes.c_int32.from_address(address).value = count


#: The thread knobs of live native modules, by module.
_KNOBS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_forked_after_openmp = False


def bind_thread_knob(owner: Any, address: int, default: int = 0) -> None:
    """Set ``owner``'s ``loom_num_threads`` (at ``address``) and keep it safe across ``fork()``.

    The count is ``LOOM_NUM_THREADS`` when set, else ``default`` (a target's
    ``num_cores``; 0: one thread per core), checked by
    :func:`loom.runtime.threads.usable_threads`: capped at ``MAX_THREADS``, and
    lowered with a warning when this process cannot start that many threads
    (libgomp would end it).

    libgomp's thread pool does not survive ``fork()``: in a child, a region of more
    than one thread waits forever for the parent's workers.  So in a process
    forked after OpenMP was loaded, every live knob (and every later one) is 1.
    """
    from .threads import usable_threads

    if _forked_after_openmp:
        count = 1
    else:
        configured = configured_num_threads()
        count = usable_threads(configured or max(0, default),
                               "LOOM_NUM_THREADS" if configured else "the target's num_cores")
    set_library_threads(address, count)
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


def link_shared_library(path: str | os.PathLike[str], inputs: Sequence[str], metadata: bytes | None, *,
                        compiler: str = "cc", flags: Sequence[str] = (), libraries: Sequence[str] = ("m",),
                        openmp: bool = False) -> None:
    """Link ``inputs`` (object files or C sources) and ``metadata`` into the shared library ``path``.

    ``metadata=None`` links objects that already define the metadata symbol (written by a
    module's ``save("x.o")``, see :func:`save_object`).

    The library is written to a temporary file next to ``path`` and renamed, so
    a reader never sees half a file.  Raises :class:`LinkError` with the command
    and the compiler's messages when the compiler fails or is missing.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.TemporaryDirectory(prefix="loom_link_") as work:
        meta_c = [] if metadata is None else [os.path.join(work, "loom_metadata.c")]
        for name in meta_c:
            with open(name, "w", encoding="ascii") as fh:
                fh.write(_metadata_c(metadata or b""))
        fd, tmp = tempfile.mkstemp(prefix=".loom-lib-", suffix=".so", dir=folder)
        os.close(fd)
        command = [*shlex.split(compiler), *flags, "-shared", "-fPIC", *(["-fopenmp"] if openmp else []),
                   "-o", tmp, *meta_c, *map(os.fspath, inputs), *(f"-l{lib}" for lib in libraries)]
        try:
            run_compiler(command, f"linking {path!r}", step="link")
            try:
                record = seal(Path(tmp).read_bytes())
                with open(tmp, "ab") as fh:
                    fh.write(record)
                os.replace(tmp, path)
            except OSError as err:  # a full disk, a folder that went away
                raise LinkError(f"cannot write the library {path!r}: {err}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def save_object(path: str | os.PathLike[str], inputs: Sequence[str], metadata: bytes, *, compiler: str = "cc",
                flags: Sequence[str] = ()) -> None:
    """Write one relocatable object file holding ``inputs`` (objects or C sources) and ``metadata``.

    What a native module's ``save("x.o")`` writes: linking it into a shared library
    (``loom.contrib.cc.create_shared``) gives a library :func:`~loom.runtime.load_module` loads.
    """
    path = os.fspath(path)
    with tempfile.TemporaryDirectory(prefix="loom_obj_") as work:
        meta_c = os.path.join(work, "loom_metadata.c")
        with open(meta_c, "w", encoding="ascii") as fh:
            fh.write(_metadata_c(metadata))
        objects = []
        for k, src in enumerate([meta_c, *map(os.fspath, inputs)]):
            if not src.endswith(".c"):
                objects.append(src)
                continue
            obj = os.path.join(work, f"part{k}.o")
            run_compiler([*shlex.split(compiler), *flags, "-fPIC", "-c", "-o", obj, src], f"compiling {src!r} for {path!r}")
            objects.append(obj)
        tmp = os.path.join(work, "combined.o")
        run_compiler([*shlex.split(compiler), "-r", "-nostdlib", "-o", tmp, *objects], f"combining {path!r}", step="link")
        try:
            with open(tmp, "rb") as src_fh, open(path, "wb") as out:
                out.write(src_fh.read())
        except OSError as err:
            raise LinkError(f"cannot write the object file {path!r}: {err}") from None


def run_compiler(command: list[str], what: str, step: str = "compile") -> None:
    """Run a compiler or linker ``command``, logged at DEBUG as ``"<step>: <command> (exit status N)"``.

    :raises LinkError: naming ``what``, the command and the compiler's messages when it fails.
    """
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as err:
        raise LinkError(f"cannot run the compiler for {what}: {err}\ncommand: {shlex.join(command)}") from None
    _log.debug("%s: %s (exit status %d)", step, shlex.join(command), done.returncode)
    if done.returncode != 0:
        raise LinkError(f"{what} failed with exit status {done.returncode}\n"
                        f"command: {shlex.join(command)}\n{done.stderr.strip()}")


def is_shared_library(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts like a shared library (ELF); never blocks."""
    try:
        fd, _ = open_regular(path)
    except (OSError, LoomError):
        return False
    try:
        return os.read(fd, 4) == ELF_MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


def seal(data: bytes) -> bytes:
    """The integrity record :func:`link_shared_library` appends to a library: its size and sha256.

    The dynamic loader ignores bytes after the ELF data; :func:`~loom.runtime.load_module`
    refuses a library whose record is missing or does not match.
    """
    return _SEAL + len(data).to_bytes(8, "little") + hashlib.sha256(data).digest() + _SEAL


def _check_seal(data: bytes, path: str) -> None:
    n = len(data) - _SEAL_SIZE
    if n < 0 or data[-len(_SEAL):] != _SEAL or data[n:n + len(_SEAL)] != _SEAL:
        raise SerializationError(f"{path!r} has no Loom integrity record at its end: it was truncated, stripped or "
                                 "rewritten after export, or export_library did not write it; export it again")
    recorded = int.from_bytes(data[n + len(_SEAL):n + len(_SEAL) + 8], "little")
    if recorded != n or hashlib.sha256(data[:n]).digest() != data[n + len(_SEAL) + 8:-len(_SEAL)]:
        raise SerializationError(f"{path!r} was modified after export: its size or sha256 differs from what "
                                 "export_library recorded; export it again")


def _read_library(path: str) -> tuple[bytes, dict[str, Any], dict[str, ElfSymbol]]:
    """The bytes, metadata and defined dynamic symbols of a library ``export_library`` wrote, checked.

    Nothing is loaded: the file is read once (a regular file only), its integrity
    record checked, and the metadata read from the bytes.
    """
    try:
        data = read_regular_file(path)
    except (OSError, LoomError) as err:
        raise SerializationError(f"cannot load shared library {path!r}: {err}") from None
    try:
        symbols = dynamic_symbols(data)
    except ElfError as err:
        raise SerializationError(f"cannot load shared library {path!r}: {err}") from None
    found = symbols.get(METADATA_SYMBOL)
    if found is None or found.kind != OBJECT or found.offset is None:
        raise SerializationError(f"{path!r} is a shared library but not a Loom module "
                                 f"(it defines no {METADATA_SYMBOL!r})")
    _check_seal(data, path)
    raw = symbol_bytes(data, found).split(b"\0", 1)[0]
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SerializationError(f"{path!r}: the Loom metadata is not valid JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("loom_module") != EXPORT_VERSION \
            or not all(isinstance(meta.get(k), t) for k, t in
                       (("format", str), ("entry", str), ("symbols", dict), ("signatures", str))) \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta["symbols"].items()):
        raise SerializationError(f"{path!r}: the Loom metadata is malformed or of another version "
                                 f"(this Loom reads version {EXPORT_VERSION})")
    return data, meta, symbols


def read_library_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The metadata of a shared library written by a native module's ``export_library`` (checked, not loaded)."""
    return _read_library(os.fspath(path))[1]


_WORDS = {FUNCTION: "a function", OBJECT: "a variable"}


def _check_symbols(path: str, functions: Mapping[str, Any], symbols: Mapping[str, str],
                   defined: Mapping[str, ElfSymbol], imports: Sequence[str]) -> None:
    """Every symbol Loom will call is a function of the library, every one it writes a variable big enough.

    Calling a variable, or storing a pointer into code or a smaller variable,
    would crash the process or corrupt memory.
    """
    from .abi import import_symbol
    from .linking import device_services

    for name, func in functions.items():
        if not isinstance(func, PrimFunc):
            raise SerializationError(f"{path!r}: the metadata's {name!r} is a {type(func).__name__}, not a PrimFunc")
        symbol = symbols.get(name) or str(func.attrs.get("global_symbol", name))
        found = defined.get(symbol)
        if found is None or found.kind != FUNCTION:
            what = "not defined" if found is None else f"{_WORDS.get(found.kind, 'another kind of symbol')}, " \
                "not a function"
            raise SerializationError(f"{path!r}: the metadata names symbol {symbol!r} for function {name!r}, "
                                     f"but in the library it is {what}")
    pointer = ctypes.sizeof(ctypes.c_void_p)
    slots = {THREADS_SYMBOL: 4, **{s: pointer for s in device_services()},
             **{import_symbol(n): pointer for n in imports}}
    for symbol, size in slots.items():
        found = defined.get(symbol)
        if found is not None and (found.kind != OBJECT or found.size < size):
            raise SerializationError(f"{path!r}: {symbol!r} must be a variable of at least {size} bytes, but in "
                                     f"the library it is {_WORDS.get(found.kind, 'another kind of symbol')} "
                                     f"of {found.size} bytes")


class LibraryModule(NativeModule):
    """A native module loaded from a shared library that ``export_library`` wrote.

    Backends return one from their ``loom_load_module`` hook; users get it from
    :func:`loom.runtime.load_module`.  Calls go through the same argument checks
    and native ABI as the module that was exported, and the modules it embeds
    are restored through their backends and linked again.

    The file is read once and checked (a regular file, its integrity record, the
    metadata against the symbols the library defines) before anything is mapped;
    the checked bytes are then loaded from a private copy.  So each load gets its
    own code and globals, even when ``path`` was re-exported in between (``dlopen``
    of an already loaded path would return the old library), and a later change to
    ``path`` cannot reach the loaded code.

    :param path: the shared library.
    :raises SerializationError: when the file is not such a library, or was modified after export.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(path))
        data, meta, self._defined = _read_library(self.path)
        self._data = data
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
        _check_symbols(self.path, mod.functions, meta["symbols"], self._defined, self._imports)
        self._work = tempfile.TemporaryDirectory(prefix="loom_lib_")  # removed with this module
        copy = os.path.join(self._work.name, os.path.basename(self.path) or "module.so")
        with open(copy, "wb") as fh:
            fh.write(data)
        from .threads import prepare_openmp

        prepare_openmp()
        try:
            self._lib = ctypes.CDLL(copy)
        except OSError as err:
            raise SerializationError(f"cannot load shared library {self.path!r}: {err}") from None
        entry = meta["entry"] or None
        functions = {n: f for n, f in mod.functions.items() if isinstance(f, PrimFunc)}
        super().__init__(functions, entry if entry in functions else None, meta["symbols"])
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
        if symbol not in self._defined:  # only this library's own symbols, never one of its dependencies'
            return None
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
        """Write the library this module was loaded from (the checked bytes) to ``path``, atomically."""
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".loom-lib-", dir=os.path.dirname(os.path.abspath(path)))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(self._data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
