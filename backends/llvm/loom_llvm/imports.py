"""Imported code of an llvm module (``pragma import_llvm`` / ``import_c``, see :mod:`loom.backend.imported_code`).

* :func:`link_llvm_imports` links LLVM IR texts into the module before it is
  optimized, so calls into them may be inlined;
* :class:`ImportedLibraries` loads the shared libraries compiled from imported C
  code privately (``RTLD_LOCAL``: another module may define the same function
  differently) and maps the module's external calls of their functions in its own
  JIT engine, never in the process's symbol table.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from typing import Any, Sequence

import llvmlite.binding as llvm

from loom.errors import LoomError
from loom.runtime.threads import prepare_openmp

__all__ = ["link_llvm_imports", "ImportedLibraries"]


def link_llvm_imports(ref: llvm.ModuleRef, texts: Sequence[str]) -> None:
    """Link each LLVM IR text into ``ref`` (its triple and data layout become ``ref``'s)."""
    for k, text in enumerate(texts):
        try:
            imported = llvm.parse_assembly(text)
            imported.verify()
        except RuntimeError as exc:
            raise LoomError(f"the LLVM IR imported with pragma import_llvm (import {k}) does not parse: "
                            f"{exc}") from None
        imported.triple, imported.data_layout = ref.triple, ref.data_layout
        try:
            ref.link_in(imported)
        except RuntimeError as exc:
            raise LoomError(f"cannot link the LLVM IR imported with pragma import_llvm (import {k}): {exc}") from None


class ImportedLibraries:
    """Shared libraries of imported C code, loaded for one JIT module; ``addresses`` of the symbols it needs."""

    def __init__(self, libraries: Sequence[bytes], wanted: Sequence[str]) -> None:
        self._work = tempfile.TemporaryDirectory(prefix="loom_llvm_import_") if libraries else None
        self._dlls: list[ctypes.CDLL] = []
        self.addresses: dict[str, int] = {}
        for k, data in enumerate(libraries):
            assert self._work is not None
            path = os.path.join(self._work.name, f"import{k}.so")
            with open(path, "wb") as fh:
                fh.write(data)
            prepare_openmp()
            try:
                dll = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            except OSError as err:
                raise LoomError(f"cannot load the library compiled from the imported C code: {err}") from None
            self._dlls.append(dll)
            for name in wanted:
                if name not in self.addresses:
                    addr = _symbol(dll, name)
                    if addr:
                        self.addresses[name] = addr

    def engine_module(self, triple: str) -> llvm.ModuleRef:
        """The (otherwise empty) module a JIT engine starts with: a declaration per mapped symbol."""
        ref = llvm.parse_assembly("".join(f'declare void @"{name}"()\n' for name in self.addresses))
        ref.triple = triple
        return ref

    def map_into(self, engine: Any, ref: llvm.ModuleRef) -> None:
        """Resolve the engine's references to the mapped symbols to the libraries' functions."""
        for name, addr in self.addresses.items():
            engine.add_global_mapping(ref.get_function(name), addr)


def _symbol(dll: ctypes.CDLL, name: str) -> int | None:
    try:
        return ctypes.cast(dll[name], ctypes.c_void_p).value
    except AttributeError:
        return None
