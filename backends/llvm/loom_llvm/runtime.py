"""The ``llvm`` target's runtime Module: lowered functions compiled to native code in-process.

``loom.build(..., target="llvm")`` returns an :class:`LLVMModule`.  It translates
the lowered IRModule with :func:`~loom_llvm.codegen.codegen_module`, optimizes and
JIT-compiles it once (:func:`~loom_llvm.jit.compile_module`), and calls each
function through the native calling convention of :mod:`loom.runtime.abi`:
one ``uint64`` word per ABI slot and one foreign call.  Arguments are checked
by the shared :class:`~loom.runtime.arguments.ArgumentChecker` before any word
is packed, so a bad call never reaches native code.

``export_library(path)`` compiles the same optimized code ahead of time into a
position-independent object and links it with the system C compiler into a
shared library that embeds the functions' signatures (see
:mod:`loom.runtime.native_library`); ``loom.runtime.load_module(path)`` loads it
in any process, without LLVM, as a :class:`~loom.runtime.native_library.LibraryModule`.
"""

from __future__ import annotations

import os
import tempfile

from loom.errors import LoomValueError
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.abi import NATIVE_ALIGNMENT, NATIVE_SIGNATURE, native_runner
from loom.runtime.module import Module, Runner, lowered_functions, module_target
from loom.runtime.native_library import THREADS_SYMBOL, bind_thread_knob, library_metadata, link_shared_library
from loom.target import Target

from .codegen import codegen_module
from .jit import JitModule, compile_module, parse, target_machine
from .parallel import OPENMP_SYMBOLS

__all__ = ["LLVMModule", "FORMAT"]

#: The format name of llvm modules, recorded in their exported libraries.
FORMAT = "llvm"


class LLVMModule(Module):
    """Native CPU code for the PrimFuncs of a lowered IRModule, compiled with LLVM.

    :param mod: the lowered module (what ``loom.build``'s host pipeline produces).
    :param target: the ``llvm`` target (default: the module's ``attrs["target"]``,
        else ``Target("llvm")``, the host CPU).
    :param entry_name: the function ``module(*args)`` calls (default: ``main``,
        else the first function).

    Compilation happens once, here; a failing ``AssertStmt`` raises
    :class:`loom.testing.AssertionFailed` with the statement's message, as the
    ``interp`` target does.  Parallel loops run on an OpenMP thread team of
    ``LOOM_NUM_THREADS`` threads (read when the module is built; unset or 0:
    one per core).  In a process forked after OpenMP was loaded they run on one
    thread: libgomp's pool does not survive ``fork()``.

    >>> import numpy as np, loom
    >>> A = loom.placeholder((8,), name="A")
    >>> B = loom.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> f = loom.build(loom.create_schedule(B.op), [A, B], target="llvm", name="double")
    >>> b = np.zeros(8, "float32"); f(np.arange(8, dtype="float32"), b); b[:4]
    array([0., 2., 4., 6.], dtype=float32)
    >>> "define" in f.get_source("ll")
    True
    """

    format = FORMAT
    assumed_alignment = NATIVE_ALIGNMENT

    def __init__(self, mod: IRModule, target: Target | None = None, entry_name: str | None = None) -> None:
        prims = lowered_functions(mod, "LLVMModule")
        self.ir_module = mod
        self.target = module_target(mod, target, "llvm")
        #: The unoptimized ``llvmlite.ir.Module`` the code generator produced.
        self.llvm_ir = codegen_module(mod, self.target)
        #: The optimized, JIT-compiled module; owns the native code (kept alive with this Module).
        self.jit: JitModule = compile_module(self.llvm_ir, self.target)
        bind_thread_knob(self, self.jit.global_address(THREADS_SYMBOL), int(self.target.attrs.get("num_cores") or 0))
        super().__init__(prims, entry_name)

    @property
    def uses_openmp(self) -> bool:
        """Whether the code calls the OpenMP runtime (it has parallel regions)."""
        return any(name in self.llvm_ir.globals for name in OPENMP_SYMBOLS)

    def _make_runner(self, name: str, func: PrimFunc) -> Runner:
        # The PackedFunc holding this runner references the Module, which owns the native code.
        native = NATIVE_SIGNATURE(self.jit.address(str(func.attrs.get("global_symbol", name))))
        return native_runner(native, func, name)

    def get_source(self, fmt: str = "") -> str:
        """``""`` or ``"ll"``: the optimized LLVM IR; ``"asm"``/``"s"``: host assembly; ``"ll-raw"``: as generated."""
        if fmt in ("", "ll", "llvm"):
            return self.jit.ir()
        if fmt in ("asm", "s"):
            return self.jit.asm()
        if fmt == "ll-raw":
            return str(self.llvm_ir)
        raise LoomValueError(f"llvm module source formats are '', 'll', 'asm' and 'll-raw'; got {fmt!r}")

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the module as a shared library that :func:`loom.runtime.load_module` loads in any process.

        The optimized code is compiled to a position-independent object for the
        module's target and linked by ``cc`` (with libgomp when the code has
        parallel regions).  The library embeds the functions' signatures and
        the ``ll`` and ``asm`` sources.  Raises
        :class:`~loom.runtime.native_library.LinkError` when linking fails.
        """
        tm = target_machine(self.target, jit=False)
        ref = parse(self.jit.ir())  # the JIT owns its module: compile a copy of the optimized code
        ref.triple, ref.data_layout = tm.triple, str(tm.target_data)
        sources = {"ll": self.jit.ir(), "asm": tm.emit_assembly(ref)}
        symbols = {name: str(f.attrs.get("global_symbol", name)) for name, f in self._signatures.items()}
        metadata = library_metadata(self, sources=sources, symbols=symbols)
        with tempfile.TemporaryDirectory(prefix="loom_llvm_") as work:
            obj = os.path.join(work, "module.o")
            with open(obj, "wb") as fh:
                fh.write(tm.emit_object(ref))
            link_shared_library(path, [obj], metadata, openmp=self.uses_openmp)

