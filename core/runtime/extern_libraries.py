"""Shared libraries that define the external functions generated code calls.

A ``call_extern`` of a function no Loom module defines (``scipy_cblas_sgemm``)
needs the library that defines it, in three places: the llvm JIT resolves the
symbol when it maps the code, a C module's library resolves it when ``dlopen``
loads it, and a library written by ``export_library`` must name it as a
dependency so that :func:`loom.runtime.load_module` works in a fresh process.
:func:`register_library` records which symbols a library defines and how to
find it; the native backends ask :func:`libraries_for` about the external
symbols of each module they load or export.  The interpreter does not load
libraries: give it a Python implementation of the symbol with
:func:`loom.testing.register_extern`.

>>> import ctypes.util
>>> lib = register_library("doc-libm", ["doc_only_symbol"], lambda: ctypes.util.find_library("m") or "libm.so.6")
>>> [lib.name for lib in libraries_for(["doc_only_symbol", "printf"])]
['doc-libm']
>>> unregister_library("doc-libm")
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from typing import Callable, Iterable

import attrs

from ..errors import LoomError, LoomTypeError, LoomValueError

__all__ = ["ExternLibrary", "register_library", "unregister_library", "registered_libraries", "libraries_for",
           "load_libraries", "link_arguments"]


@attrs.frozen
class ExternLibrary:
    """A shared library and the external symbols it provides.

    ``locate()`` returns the library's path (or a name ``dlopen`` finds), or
    raises a :class:`~loom.errors.LoomError` saying how to install it; it runs
    only when a backend needs the library, so building for the interpreter
    works without it.
    """

    name: str
    symbols: frozenset[str]
    locate: Callable[[], str]

    def path(self) -> str:
        """Where the library is (``locate()``, checked to be a string)."""
        where = self.locate()
        if not isinstance(where, str) or not where:
            raise LoomError(f"external library {self.name!r}: its locator returned {where!r}, not a path")
        return where


_LOCK = threading.Lock()
_LIBRARIES: dict[str, ExternLibrary] = {}


def register_library(name: str, symbols: Iterable[str], locate: Callable[[], str], *,
                     override: bool = False) -> ExternLibrary:
    """Record that the library ``locate()`` finds defines ``symbols`` (see the module docstring).

    Registering ``name`` again with the same symbols is a no-op; with others it
    is an error unless ``override=True``.  Two libraries may not claim one symbol.
    """
    if not isinstance(name, str) or not name:
        raise LoomTypeError(f"register_library: the name must be a non-empty string, got {name!r}")
    if not callable(locate):
        raise LoomTypeError(f"register_library({name!r}): locate must be a callable returning a path")
    syms = frozenset(symbols)
    if not syms or not all(isinstance(s, str) and s.isidentifier() for s in syms):
        raise LoomValueError(f"register_library({name!r}): symbols must be C identifiers, got {sorted(map(str, syms))}")
    lib = ExternLibrary(name, syms, locate)
    with _LOCK:
        old = _LIBRARIES.get(name)
        if old is not None and not override:
            if old.symbols == syms:
                return old
            raise LoomValueError(f"external library {name!r} is already registered with other symbols; "
                                 "pass override=True to replace it")
        for other in _LIBRARIES.values():
            shared = other.symbols & syms
            if other.name != name and shared:
                raise LoomValueError(f"register_library({name!r}): {sorted(shared)} already belong to "
                                     f"library {other.name!r}")
        _LIBRARIES[name] = lib
    return lib


def unregister_library(name: str) -> None:
    """Forget the library ``name`` (an error if it is not registered); libraries already loaded stay loaded."""
    with _LOCK:
        if _LIBRARIES.pop(name, None) is None:
            raise LoomValueError(f"external library {name!r} is not registered")


def registered_libraries() -> list[str]:
    """The names of the registered libraries."""
    return sorted(_LIBRARIES)


def libraries_for(symbols: Iterable[str]) -> list[ExternLibrary]:
    """The registered libraries defining any of ``symbols``, in registration order."""
    wanted = set(symbols)
    with _LOCK:
        return [lib for lib in _LIBRARIES.values() if lib.symbols & wanted]


@functools.lru_cache(maxsize=None)
def _dlopen_global(path: str) -> ctypes.CDLL:
    # RTLD_GLOBAL: libraries dlopen'ed later (a C module) resolve their undefined symbols against it.
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as err:
        raise LoomError(f"cannot load the shared library {path!r}: {err}") from None


def load_libraries(symbols: Iterable[str]) -> list[str]:
    """Load (once, with ``RTLD_GLOBAL``) the libraries defining any of ``symbols``; their paths."""
    paths = [lib.path() for lib in libraries_for(symbols)]
    for path in paths:
        _dlopen_global(path)
    return paths


def link_arguments(symbols: Iterable[str]) -> list[str]:
    """Linker arguments that make a shared library depend on the libraries defining ``symbols``.

    Each library is named by its path, with an ``rpath`` to its folder, so the
    dynamic loader finds it without ``LD_LIBRARY_PATH``.  A library located by
    a bare name (no folder) is linked as ``-l:name``.
    """
    out: list[str] = []
    for lib in libraries_for(symbols):
        path = lib.path()
        if os.sep in path:
            folder = os.path.dirname(os.path.abspath(path))
            out += [os.path.abspath(path), f"-Wl,-rpath,{folder}"]
        else:
            out.append(f"-l:{path}")
    return out
