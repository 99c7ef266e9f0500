"""The ``c`` target's runtime Module: the lowered IRModule as C, compiled once, called through ctypes.

``loom.build(..., target="c")`` returns a :class:`CModule`.  Building renders
every PrimFunc into one translation unit (:func:`loom_c.codegen.generate`, with
OpenMP pragmas when the target's ``openmp`` attribute is on) and compiles it
with the target's ``compiler`` and ``flags`` (:func:`loom_c.cc.compile_source`).
A call is checked by the shared :class:`~loom.runtime.ArgumentChecker` first, so
the compiled code only ever sees arguments matching its signature; the runner
then packs one ``uint64`` word per ABI slot (:mod:`loom.runtime.abi`) and makes
one foreign call.  A failing ``AssertStmt`` raises
:class:`loom.testing.AssertionFailed`, as on the interpreter.

Parallel loops run on ``LOOM_NUM_THREADS`` threads (read when the module is
loaded; unset or 0: OpenMP's default).  ``export_library(path)`` writes a plain
shared library with the module's metadata embedded
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
import tempfile

from loom.errors import LoomValueError
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.abi import NATIVE_ALIGNMENT, native_runner
from loom.runtime.module import Module, Runner, lowered_functions, module_target
from loom.runtime.native_library import THREADS_SYMBOL, library_metadata, link_shared_library, bind_thread_knob
from loom.target import Target

from .cc import SharedLibrary, c_flags, compile_source
from .codegen import CSource, generate

__all__ = ["CModule"]


class CModule(Module):
    """The PrimFuncs of a lowered IRModule compiled as C into one shared library.

    :param mod: the lowered module (every function after MakeAPI).
    :param target: the ``c`` target giving ``compiler``, ``flags`` and ``openmp``
        (default: the module's ``attrs["target"]``, else ``Target("c")``).
    :param entry_name: the function ``module(*args)`` calls (default: ``main``,
        else the first function).
    """

    format = "c"
    assumed_alignment = NATIVE_ALIGNMENT

    def __init__(self, mod: IRModule, target: Target | None = None, entry_name: str | None = None) -> None:
        prims = lowered_functions(mod, "CModule")
        target = module_target(mod, target, "c")
        self.ir_module = mod
        self.target = target
        openmp = bool(target.attrs["openmp"])
        self._source: CSource = generate(mod, openmp=openmp)
        self._library: SharedLibrary = compile_source(self._source.text, compiler=target.attrs["compiler"],
                                                      flags=target.attrs["flags"], openmp=openmp)
        # A cached library loaded twice is one handle, so the last module loaded sets its knob.
        bind_thread_knob(self, ctypes.addressof(ctypes.c_int32.in_dll(self._library.cdll, THREADS_SYMBOL)))
        super().__init__(prims, entry_name)

    def _make_runner(self, name: str, func: PrimFunc) -> Runner:
        return native_runner(self._library.function(self._source.symbols[name]), func, name)

    def get_source(self, fmt: str = "") -> str:
        """The generated C translation unit (``fmt`` ``""`` or ``"c"``)."""
        if fmt in ("", "c"):
            return self._source.text
        raise LoomValueError(f"c module source formats are '' and 'c'; got {fmt!r}")

    @property
    def library_path(self) -> str:
        """The path of the loaded shared library (valid while this module lives)."""
        return self._library.path

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Compile the module, metadata included, into the shared library ``path`` (for ``load_module``).

        The target's compiler and flags build it, as they built this module.
        """
        attrs = self.target.attrs
        metadata = library_metadata(self, sources={"c": self._source.text},
                                    symbols={n: self._source.symbols[n] for n in self.function_names})
        with tempfile.TemporaryDirectory(prefix="loom_c_export_") as work:
            src = os.path.join(work, "module.c")
            with open(src, "w", encoding="utf-8") as fh:
                fh.write(self._source.text)
            link_shared_library(path, [src], metadata, compiler=attrs["compiler"], flags=c_flags(attrs["flags"]),
                                openmp=bool(attrs["openmp"]))
