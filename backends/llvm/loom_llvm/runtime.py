"""The ``llvm`` backend's stages and its runtime Module.

:class:`LLVMBackend` is what the plugin returns from ``loom_backend("llvm")``:

* ``options``: the target's triple, CPU, features, optimisation level and FMA
  policy (:class:`LLVMOptions`);
* ``render``: the lowered IRModule as LLVM IR text (:func:`~loom_llvm.codegen.codegen_module`),
  and the code its schedule imports (``pragma import_llvm`` / ``import_c``: :mod:`loom.backend.imported_code`);
* ``compile``: optimized at O3 and emitted as a position-independent object
  (:func:`~loom_llvm.jit.compile_object`, imported LLVM IR linked in first), packed with
  its optimized IR, the external symbols it needs and the shared library of imported C
  code; the core caches it on disk;
* ``load``: the object mapped into the process (MCJIT) as an :class:`LLVMModule`.

Calls go through the native calling convention of :mod:`loom.runtime.abi`: one
``uint64`` word per ABI slot and one foreign call, after the shared argument
checker.  ``export_library(path)`` links the same object with the system C
compiler into a shared library that embeds the functions' signatures and the
modules this one imports (see :mod:`loom.runtime.native_library`);
``loom.runtime.load_module(path)`` loads it in any process, without LLVM.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import types
from typing import Any, Mapping

import attrs

from loom.backend import Backend, BackendOptions, ModuleInfo, pack_sections, unpack_sections
from loom.backend.imported_code import compile_c_library, imported_sources, sources_of
from loom.errors import LoomError, LoomValueError
from loom.ir.function import IRModule
from loom.runtime.native_library import LinkError, library_metadata, link_shared_library, save_object
from loom.runtime.abi import function_symbol
from loom.runtime.native_module import NativeModule
from loom.target import Target

# The code generator (.codegen, llvmlite.ir) is imported by render only: loading a cached module needs none of it.
from .jit import CompiledObject, JitModule, compile_object, load_object, parse, target_machine
from .plugin import host_cpu
from .target_check import arch_of, cannot_run_reason, validate_attrs

__all__ = ["LLVMBackend", "LLVMOptions", "LLVMModule", "FORMAT"]

#: The format name of llvm modules, recorded in their exported libraries.
FORMAT = "llvm"


@attrs.frozen
class LLVMOptions(BackendOptions):
    """What of an ``llvm`` target changes the code: where it runs and how hard LLVM optimizes."""

    mtriple: str = ""
    mcpu: str = ""
    mattr: tuple[str, ...] = ()
    opt_level: int = 3
    fp_contract: bool = True

    @classmethod
    def of(cls, target: Target) -> LLVMOptions:
        a = target.attrs
        mattr = a.get("mattr") or ()
        return cls(str(a.get("mtriple") or ""), str(a.get("mcpu") or ""),
                   tuple(mattr.split(",") if isinstance(mattr, str) else mattr),
                   int(a.get("opt_level", 3)), bool(a.get("fp_contract", True)))

    def view(self) -> Any:
        """The options in the shape the code generator and target machine read (``.attrs``)."""
        return types.SimpleNamespace(attrs={"mtriple": self.mtriple, "mcpu": self.mcpu, "mattr": list(self.mattr),
                                            "opt_level": self.opt_level, "fp_contract": self.fp_contract})


class LLVMBackend(Backend):
    """The ``llvm`` kind's stages (see the module docstring).

    >>> import loom
    >>> from loom.backend import build_module, get_backend
    >>> backend, _ = get_backend("llvm")
    >>> opts = backend.options(loom.target.Target("llvm -opt_level=2"))
    >>> opts.opt_level, backend.thread_semantics
    (2, 'serial')
    """

    kind = FORMAT
    version = "1"
    artifact_suffix = ".llvm"

    def options(self, target: Target) -> LLVMOptions:
        validate_attrs(target.attrs, host_cpu())  # a complete target string skipped it at creation
        return LLVMOptions.of(target)

    def compiler_identity(self, options: BackendOptions) -> str:
        import llvmlite
        import llvmlite.binding as llvm

        return f"llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}"

    def render(self, mod: IRModule, options: BackendOptions) -> Mapping[str, str]:
        from .codegen import codegen_module

        assert isinstance(options, LLVMOptions)
        return {"ll": str(codegen_module(mod, options.view())), **imported_sources(mod)}

    def compile(self, sources: Mapping[str, str], options: BackendOptions) -> bytes:
        assert isinstance(options, LLVMOptions)
        obj = compile_object(sources["ll"], options.view(), imports=sources_of(sources, "llvm"))
        c_code = sources_of(sources, "c")  # pragma import_c: a shared library the JIT resolves calls against
        libraries = {"import_lib_0": compile_c_library(c_code)} if c_code else {}
        return pack_sections({"object": obj.object, "ll": obj.optimized_ir, **libraries,
                              "meta": json.dumps({"externals": list(obj.externals), "triple": obj.triple})})

    def load(self, data: bytes, info: ModuleInfo) -> LLVMModule:
        sections = unpack_sections(data, "an llvm artifact")
        meta = json.loads(sections["meta"])
        libraries = tuple(sections[k] for k in sorted(sections) if k.startswith("import_lib_"))
        compiled = CompiledObject(sections["object"], sections["ll"].decode("utf-8"), tuple(meta["externals"]),
                                  meta["triple"], libraries)
        return LLVMModule(compiled, info)


class LLVMModule(NativeModule):
    """Native CPU code compiled by LLVM and mapped into this process (built by :class:`LLVMBackend`).

    A failing ``AssertStmt`` raises :class:`loom.testing.AssertionFailed` with the
    statement's message, as the ``interp`` target does.  Parallel loops run on an
    OpenMP thread team of ``LOOM_NUM_THREADS`` threads (read when the module is
    loaded; unset or 0: the target's ``num_cores``; fewer, with a warning, when the
    process cannot start that many: :mod:`loom.runtime.threads`).  In a process forked after
    OpenMP was loaded they run on one thread: libgomp's pool does not survive ``fork()``.

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

    def __init__(self, compiled: CompiledObject, info: ModuleInfo) -> None:
        self.target = Target(info.target)
        options = LLVMOptions.of(self.target)
        #: Why this host must not run the code (another architecture, missing CPU features), or None.
        #: Such a module is export-only: it prints its sources and exports, and calling it raises.
        self.cannot_run: str | None = cannot_run_reason(options.mtriple, options.mcpu, options.mattr, host_cpu())
        #: The object mapped into this process; owns the native code (kept alive with this module).
        self.jit: JitModule | None = None if self.cannot_run else load_object(compiled, options.view())
        self.compiled = compiled
        self._raw_ir = info.sources.get("ll", "")
        self._imported_c = sources_of(info.sources, "c")
        # codegen.symbol_of, without importing the code generator
        symbols = {n: function_symbol(str(f.attrs.get("global_symbol", n))) for n, f in info.functions.items()}
        super().__init__(dict(info.functions), info.entry or None, symbols,
                         int(self.target.attrs.get("num_cores") or 0))

    def _symbol_address(self, symbol: str) -> int | None:
        return self.jit.symbol_address(symbol) or None if self.jit is not None else None

    def _function_address(self, name: str) -> int:
        if self.cannot_run:
            raise LoomError(f"cannot call {name!r} here: {self.cannot_run}.  This module is export-only: "
                            "export_library() it (or save('name.o') the object) and run it on a machine "
                            "it was built for")
        return super()._function_address(name)

    @property
    def uses_openmp(self) -> bool:
        """Whether the code calls the OpenMP runtime (it has parallel regions)."""
        from .parallel import OPENMP_SYMBOLS

        return any(name in OPENMP_SYMBOLS for name in self.compiled.externals)

    def get_source(self, fmt: str = "") -> str:
        """``""`` or ``"ll"``: the optimized LLVM IR; ``"asm"``/``"s"``: host assembly; ``"ll-raw"``: as generated."""
        if fmt in ("", "ll", "llvm"):
            return self.compiled.optimized_ir
        if fmt in ("asm", "s"):
            return self.jit.asm() if self.jit is not None else self._asm()
        if fmt == "ll-raw":
            return self._raw_ir
        raise LoomValueError(f"llvm module source formats are '', 'll', 'asm' and 'll-raw'; got {fmt!r}")

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the module as a shared library that :func:`loom.runtime.load_module` loads in any process.

        The compiled object is linked by ``cc`` (with libgomp when the code has
        parallel regions).  The library embeds the functions' signatures, the
        ``ll`` and ``asm`` sources and every module this one imports.  Raises
        :class:`~loom.runtime.native_library.LinkError` when linking fails.
        """
        from loom.runtime.extern_libraries import link_arguments

        sources = {"ll": self.compiled.optimized_ir, "asm": self._asm()}
        metadata = library_metadata(self, sources=sources, symbols=self._symbols)
        compiler = self._linker()
        with tempfile.TemporaryDirectory(prefix="loom_llvm_") as work:
            obj = os.path.join(work, "module.o")
            with open(obj, "wb") as fh:
                fh.write(self.compiled.object)
            # The libraries registered for its external symbols (BLAS...) become dependencies, found by rpath.
            libs = link_arguments(self.compiled.externals)
            imported = []  # pragma import_c: compiled into the library
            for k, text in enumerate(self._imported_c):
                imported.append(os.path.join(work, f"import_c_{k}.c"))
                with open(imported[-1], "w", encoding="utf-8") as fh:
                    fh.write(text)
            link_shared_library(path, [obj, *imported, *libs], metadata, openmp=self.uses_openmp, compiler=compiler,
                                flags=["-O2"] if imported else [])

    def save(self, path: str | os.PathLike[str], fmt: str = "") -> None:
        """Write the object file (``.o``), the optimized IR (``.ll``) or the assembly (``.s``) to ``path``.

        ``fmt`` is ``"o"``, ``"ll"`` or ``"s"``; by default the suffix of ``path`` says which.
        The object carries the module's metadata, so the shared library a linker makes of it
        (``loom.contrib.cc.create_shared``) loads with :func:`loom.runtime.load_module`; for
        another machine's architecture with no C compiler for it here, the object holds the
        code alone.
        """
        fmt = fmt or os.path.splitext(os.fspath(path))[1].lstrip(".")
        if fmt in ("o", "obj"):
            try:
                compiler = self._linker()
            except LinkError:  # another machine's code and no compiler for it here: the code alone
                with open(path, "wb") as fh:
                    fh.write(self.compiled.object)
                return
            sources = {"ll": self.compiled.optimized_ir, "asm": self._asm()}
            metadata = library_metadata(self, sources=sources, symbols=self._symbols)
            with tempfile.TemporaryDirectory(prefix="loom_llvm_") as work:
                obj = os.path.join(work, "module.o")
                with open(obj, "wb") as fh:
                    fh.write(self.compiled.object)
                imported = []  # pragma import_c: compiled into the object too
                for k, text in enumerate(self._imported_c):
                    imported.append(os.path.join(work, f"import_c_{k}.c"))
                    with open(imported[-1], "w", encoding="utf-8") as fh:
                        fh.write(text)
                save_object(path, [obj, *imported], metadata, compiler=compiler, flags=["-O2"] if imported else [])
            return
        if fmt in ("ll", "s", "asm"):
            data: bytes = self.get_source(fmt).encode("utf-8")
        else:
            raise LoomValueError(f"save() writes 'o', 'll' or 's' files; got {fmt!r} for {os.fspath(path)!r}")
        with open(path, "wb") as fh:
            fh.write(data)

    def _asm(self) -> str:
        return target_machine(self.target, jit=False).emit_assembly(parse(self.compiled.optimized_ir))

    def _linker(self) -> str:
        """The C compiler that links this module: ``cc`` for the host's architecture, a cross compiler else."""
        triple = self.compiled.triple
        if arch_of(triple) == arch_of(host_cpu()[0]):
            return "cc"
        parts = triple.split("-")
        no_vendor = "-".join(parts[:1] + parts[2:])  # aarch64-unknown-linux-gnu: aarch64-linux-gnu-gcc
        names = [f"{triple}-gcc", f"{triple}-cc", f"{no_vendor}-gcc"]
        for name in dict.fromkeys(names):
            if shutil.which(name):
                return name
        raise LinkError(f"exporting a library for {triple} needs a C compiler for that machine, and none of "
                        f"{', '.join(dict.fromkeys(names))} is on PATH; save('module.o') writes the object, "
                        "to link on that machine")
