"""The ``llvm`` target's runtime Module: lowered functions compiled to native code in-process.

``loom.build(..., target="llvm")`` returns an :class:`LLVMModule`.  It translates
the lowered IRModule with :func:`~loom_llvm.codegen.codegen_module`, optimizes and
JIT-compiles it once (:func:`~loom_llvm.jit.compile_module`), and calls each
function through the native calling convention of :mod:`loom.runtime.abi`:
one ``uint64`` word per ABI slot and one foreign call.  Arguments are checked
by the shared :class:`~loom.runtime.arguments.ArgumentChecker` before any word
is packed, so a bad call never reaches native code.
"""

from __future__ import annotations

from loom.errors import LoomValueError
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.abi import NATIVE_SIGNATURE, native_runner
from loom.runtime.module import Module, Runner, lowered_functions, module_target
from loom.target import Target

from .codegen import codegen_module
from .jit import JitModule, compile_module

__all__ = ["LLVMModule", "FORMAT"]

#: The format name of llvm modules (export is not implemented yet).
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
    ``interp`` target does.  Parallel loops currently run serially on the
    calling thread; exporting (``export_library``) is not supported yet.

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

    def __init__(self, mod: IRModule, target: Target | None = None, entry_name: str | None = None) -> None:
        prims = lowered_functions(mod, "LLVMModule")
        self.ir_module = mod
        self.target = module_target(mod, target, "llvm")
        #: The unoptimized ``llvmlite.ir.Module`` the code generator produced.
        self.llvm_ir = codegen_module(mod, self.target)
        #: The optimized, JIT-compiled module; owns the native code (kept alive with this Module).
        self.jit: JitModule = compile_module(self.llvm_ir, self.target)
        super().__init__(prims, entry_name)

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
