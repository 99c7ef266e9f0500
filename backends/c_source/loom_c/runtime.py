"""The ``c`` backend's stages and its runtime Module.

:class:`CBackend` is what the plugin returns from ``loom_backend("c")``:

* ``options``: the target's ``compiler``, ``flags`` and ``openmp`` (:class:`COptions`);
* ``render``: every PrimFunc in one C translation unit (:func:`loom_c.codegen.generate`,
  with OpenMP pragmas when ``openmp`` is on), and the C code the schedule imports
  (``pragma import_c``, more translation units; ``import_llvm`` is refused);
* ``compile``: the system compiler's shared library (:func:`loom_c.cc.compile_library`);
  the core caches it on disk, keyed with :func:`loom_c.cc.compiler_identity`;
* ``load``: the library opened with ctypes, as a :class:`CModule`.

A call is checked by the shared :class:`~loom.runtime.ArgumentChecker` first, so
the compiled code only ever sees arguments matching its signature; the runner
then packs one ``uint64`` word per ABI slot (:mod:`loom.runtime.abi`) and makes
one foreign call.  A failing ``AssertStmt`` raises
:class:`loom.testing.AssertionFailed`, as on the interpreter.

Parallel loops run on ``LOOM_NUM_THREADS`` threads (read when the module is
loaded; unset or 0: OpenMP's default; fewer, with a warning, when the process
cannot start that many: :mod:`loom.runtime.threads`).  ``export_library(path)`` writes a plain
shared library with the module's metadata (and the modules it imports) embedded
(:mod:`loom.runtime.native_library`); :func:`loom.runtime.load_module` reads it
back in any process.

>>> import numpy as np, loom
>>> A = loom.placeholder((4,), "float32", name="A")
>>> B = loom.compute((4,), lambda i: A[i] * 2.0, name="B")
>>> f = loom.build(loom.create_schedule(B.op), [A, B], target="c -flags=-O1")
>>> b = np.zeros(4, "float32"); f(np.arange(4, dtype="float32"), b); b
array([0., 2., 4., 6.], dtype=float32)
"""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
from typing import Mapping

import attrs

from loom.backend import Backend, BackendOptions, ModuleInfo
from loom.backend.imported_code import imported_sources, sources_of
from loom.errors import LoomValueError
from loom.ir.function import IRModule
from loom.runtime.extern_libraries import link_arguments, load_libraries
from loom.runtime.native_library import library_metadata, link_shared_library, save_object
from loom.runtime.native_module import NativeModule
from loom.target import Target

from .cc import SharedLibrary, c_flags, compile_library, compiler_identity
from .codegen import CRenderer, generate

__all__ = ["CBackend", "COptions", "CModule", "FORMAT"]

#: The format name of c modules, recorded in their exported libraries.
FORMAT = "c"


@attrs.frozen
class COptions(BackendOptions):
    """How the C source is compiled."""

    compiler: str = "cc"
    flags: str = "-O3 -march=native"
    openmp: bool = True

    @classmethod
    def of(cls, target: Target) -> COptions:
        a = target.attrs
        return cls(str(a["compiler"]), str(a["flags"]), bool(a["openmp"]))


class CBackend(Backend):
    """The ``c`` kind's stages (see the module docstring)."""

    kind = FORMAT
    version = "1"
    artifact_suffix = ".so"

    def options(self, target: Target) -> COptions:
        return COptions.of(target)

    def compiler_identity(self, options: BackendOptions) -> str:
        assert isinstance(options, COptions)
        return compiler_identity(options.compiler, options.flags)

    def render(self, mod: IRModule, options: BackendOptions) -> Mapping[str, str]:
        assert isinstance(options, COptions)
        imported = imported_sources(mod)
        if any(name.startswith("import_llvm") for name in imported):
            raise LoomValueError("pragma import_llvm links LLVM IR, which the c target cannot compile: build for "
                                 "llvm, or import the C source with pragma import_c")
        return {"c": generate(mod, openmp=options.openmp).text, **imported}

    def compile(self, sources: Mapping[str, str], options: BackendOptions) -> bytes:
        assert isinstance(options, COptions)
        return compile_library(sources["c"], options.compiler, options.flags, options.openmp,
                               extra=sources_of(sources, "c"))

    def load(self, data: bytes, info: ModuleInfo) -> CModule:
        return CModule(data, info)


_EXTERN_DECL = re.compile(r"^extern [^(;]*?\b([A-Za-z_]\w*)\(", re.MULTILINE)


def extern_symbols(source: str) -> list[str]:
    r"""The external functions a rendered translation unit declares (``extern T name(...);``).

    >>> extern_symbols("extern int32_t f(float);\nextern void * g(void *, int32_t);\nint h(void);")
    ['f', 'g']
    """
    return _EXTERN_DECL.findall(source)


def _library_file(data: bytes) -> tuple[str, tempfile.TemporaryDirectory[str]]:
    """A private file holding the library's (checked) bytes, never the disk cache's own file.

    ``dlopen`` of a path already loaded returns the library loaded first, and a
    cache file damaged or rebuilt on disk must not reach code that is mapped.
    """
    work = tempfile.TemporaryDirectory(prefix="loom_c_")
    path = os.path.join(work.name, "module.so")
    with open(path, "wb") as fh:
        fh.write(data)
    return path, work


class CModule(NativeModule):
    """The PrimFuncs of a lowered IRModule compiled as C into one shared library (built by :class:`CBackend`).

    The library is opened from a private copy of its bytes: ``dlopen`` of one file
    twice gives one set of globals (two modules must not share import slots), and
    the disk cache's file may be damaged or replaced while the module lives.
    """

    format = FORMAT

    def __init__(self, data: bytes, info: ModuleInfo) -> None:
        self.target = Target(info.target)
        self._source_text = info.sources.get("c", "")
        self._imported_c = sources_of(info.sources, "c")  # pragma import_c: more translation units
        load_libraries(extern_symbols(self._source_text))  # BLAS...: dlopen resolves the module's calls against them
        path, keep = _library_file(data)
        self._library = SharedLibrary(path, keep)
        renderer = CRenderer()
        super().__init__(dict(info.functions), info.entry or None, {n: renderer.symbol(n) for n in info.functions})

    def _symbol_address(self, symbol: str) -> int | None:
        try:
            return ctypes.addressof(ctypes.c_char.in_dll(self._library.cdll, symbol))
        except ValueError:
            return None

    def get_source(self, fmt: str = "") -> str:
        """The generated C translation unit (``fmt`` ``""`` or ``"c"``)."""
        if fmt in ("", "c"):
            return self._source_text
        raise LoomValueError(f"c module source formats are '' and 'c'; got {fmt!r}")

    @property
    def library_path(self) -> str:
        """The path of the loaded shared library (valid while this module lives)."""
        return self._library.path

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Compile the module, metadata included, into the shared library ``path`` (for ``load_module``).

        The target's compiler and flags build it, as they built this module.
        """
        attrs_ = self.target.attrs
        metadata = library_metadata(self, sources={"c": self._source_text}, symbols=self._symbols)
        with tempfile.TemporaryDirectory(prefix="loom_c_export_") as work:
            src = os.path.join(work, "module.c")
            with open(src, "w", encoding="utf-8") as fh:
                fh.write(self._source_text)
            imported = []
            for k, text in enumerate(self._imported_c):
                imported.append(os.path.join(work, f"import_c_{k}.c"))
                with open(imported[-1], "w", encoding="utf-8") as fh:
                    fh.write(text)
            libs = link_arguments(extern_symbols(self._source_text))  # dependencies, found by rpath
            link_shared_library(path, [src, *imported, *libs], metadata, compiler=attrs_["compiler"],
                                flags=c_flags(attrs_["flags"]),
                                openmp=bool(attrs_["openmp"]))

    def save(self, path: str | os.PathLike[str], fmt: str = "") -> None:
        """Write the C source (``.c``) or an object file (``.o``, metadata included) to ``path``.

        ``fmt`` is ``"c"`` or ``"o"``; by default the suffix of ``path`` says which.  The
        shared library a linker makes of the object (``loom.contrib.cc.create_shared``)
        loads with :func:`loom.runtime.load_module`.
        """
        fmt = fmt or os.path.splitext(os.fspath(path))[1].lstrip(".")
        if fmt == "c":
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(self._source_text)
            return
        if fmt not in ("o", "obj"):
            raise LoomValueError(f"save() writes 'c' or 'o' files; got {fmt!r} for {os.fspath(path)!r}")
        attrs_ = self.target.attrs
        metadata = library_metadata(self, sources={"c": self._source_text}, symbols=self._symbols)
        with tempfile.TemporaryDirectory(prefix="loom_c_save_") as work:
            sources = [os.path.join(work, "module.c")]
            with open(sources[0], "w", encoding="utf-8") as fh:
                fh.write(self._source_text)
            for k, text in enumerate(self._imported_c):  # pragma import_c: more translation units
                sources.append(os.path.join(work, f"import_c_{k}.c"))
                with open(sources[-1], "w", encoding="utf-8") as fh:
                    fh.write(text)
            flags = c_flags(attrs_["flags"]) + (["-fopenmp"] if attrs_["openmp"] else [])
            save_object(path, sources, metadata, compiler=attrs_["compiler"], flags=flags)
