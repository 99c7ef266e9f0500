"""Compile LLVM IR to an object file, and load object files into the process (MCJIT).

The two halves are the llvm backend's ``compile`` and ``load`` stages:

* :func:`compile_object` parses and verifies the text of an ``llvmlite.ir.Module``,
  optimizes it with LLVM's new pass manager at the target's ``opt_level``
  (default O3) for the CPU the target names (``mcpu``/``mattr``/``mtriple``,
  defaulting to the host) and emits a position-independent object file, which
  runs in-process and links into a shared library alike;
* :func:`load_object` maps such an object into the process and returns a
  :class:`JitModule` whose :meth:`~JitModule.address` gives native addresses.

:func:`compile_module` does both.

>>> from llvmlite import ir
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.IntType(32), []), "seven")
>>> ir.IRBuilder(f.append_basic_block()).ret(ir.Constant(ir.IntType(32), 7))  # doctest: +ELLIPSIS
<...>
>>> import ctypes
>>> jit = compile_module(m)
>>> ctypes.CFUNCTYPE(ctypes.c_int32)(jit.address("seven"))()
7
"""

from __future__ import annotations

import ctypes.util
import functools
import sys
from typing import Any, NamedTuple, Sequence

import llvmlite.binding as llvm
from llvmlite import ir

from loom.errors import LoomError

from .imports import ImportedLibraries, link_llvm_imports
from .target_check import arch_of

__all__ = ["compile_module", "compile_object", "load_object", "CompiledObject", "parse", "JitModule",
           "target_machine", "load_openmp", "OPENMP_LIBRARIES"]

#: Shared libraries that provide libgomp's ``GOMP_parallel`` (LLVM's libomp and Intel's implement it too).
OPENMP_LIBRARIES = ("libgomp.so.1", "libgomp.so", "libomp.so", "libiomp5.so")


@functools.cache
def _initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # Math intrinsics without an LLVM lowering (tanhf, powf...) become libm calls; the Python
    # executable need not link libm itself, so make its symbols visible to the JIT's linker.
    # find_library runs ldconfig or a compiler (milliseconds): asked only where the usual name fails.
    for find in (lambda: "libm.so.6", lambda: ctypes.util.find_library("m")):
        name = find()
        if name:
            try:
                llvm.load_library_permanently(name)
                break
            except RuntimeError:
                continue


@functools.cache
def _initialize_all() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def _attr(target: Any, key: str, default: Any) -> Any:
    attrs = getattr(target, "attrs", None) or {}
    value = attrs.get(key)
    return default if value in (None, "", ()) else value


@functools.cache
def _host() -> tuple[str, str, str]:
    """The process triple, host CPU name and feature string (each load needs them), from the plugin's one query."""
    from .plugin import host_cpu
    from .target_check import host_feature_table

    _initialize()
    triple, cpu, _ = host_cpu()
    # llvmlite's FeatureMap.flatten(): every feature, sorted, "+" on and "-" off (the CPU name may imply more)
    features = ",".join(("+" if on else "-") + name for name, on in sorted(host_feature_table().items()))
    return triple, cpu, features


def target_machine(target: Any = None, jit: bool = True) -> llvm.TargetMachine:
    """A TargetMachine for the target's triple, CPU and features (the host's where unset).

    ``jit=False`` gives one for object files that go into a shared library
    (position-independent code, the default code model).
    """
    host_triple, host_cpu, host_features = _host()
    triple = _attr(target, "mtriple", host_triple)
    foreign = arch_of(triple) != arch_of(host_triple)
    if foreign:  # cross compiling: the other architectures' backends are set up on first use
        _initialize_all()
    cpu = _attr(target, "mcpu", "generic" if foreign else host_cpu)
    mattr = _attr(target, "mattr", None)
    if mattr is None:
        mattr = host_features if cpu == host_cpu and not foreign else ""
    features = mattr if isinstance(mattr, str) else ",".join(mattr)
    opt = int(_attr(target, "opt_level", 3))
    kind = {"codemodel": "jitdefault", "jit": True} if jit else {"codemodel": "default", "reloc": "pic"}
    return llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=min(opt, 3),
                                                                 **kind)


#: Libraries that must outlive LLVM's teardown at exit (see load_openmp).
_KEEP_LOADED: list[ctypes.CDLL] = []


@functools.cache
def load_openmp() -> str:
    """Make the OpenMP runtime's symbols visible to the JIT (once); returns the library loaded.

    Raises a LoomError naming the libraries tried when none can be loaded.
    """
    from loom.runtime.threads import prepare_openmp

    prepare_openmp()  # libgomp reads its environment when it loads
    tried = list(OPENMP_LIBRARIES)
    for name in _candidates(tried):
        try:
            llvm.load_library_permanently(name)
        except RuntimeError:
            continue
        # LLVM closes its "permanent" libraries in its static destructors at exit; libgomp's
        # threads may still be running (spinning, under OMP_WAIT_POLICY=active) and would
        # fault in unmapped code.  A handle ctypes never closes keeps libgomp mapped.
        _KEEP_LOADED.append(ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL))
        return name
    raise LoomError("parallel loops need an OpenMP runtime providing GOMP_parallel, and none of "
                    f"{tried} can be loaded; install libgomp (e.g. `apt-get install libgomp1`) "
                    "or build without .parallel() in the schedule")


def _candidates(tried: list[str]) -> Any:
    """The usual OpenMP library names, then (milliseconds: it runs ldconfig) what find_library finds."""
    yield from OPENMP_LIBRARIES
    found = ctypes.util.find_library("gomp")
    if found and found not in tried:
        tried.append(found)
        yield found


@functools.cache
def _load_library(path: str) -> None:
    try:
        llvm.load_library_permanently(path)
    except RuntimeError as err:
        raise LoomError(f"cannot load the shared library {path!r} for the JIT: {err}") from None


def _check_externals(names: list[str]) -> None:
    # MCJIT links a symbol it cannot resolve to nothing callable: the first call would crash the process.
    if any(n.startswith("GOMP_") or n.startswith("omp_") for n in names):
        load_openmp()
    registry = sys.modules.get("loom.runtime.extern_libraries")  # not imported yet: nothing is registered
    for path in registry.load_libraries(names) if registry is not None else ():
        _load_library(path)  # a library registered for external symbols (BLAS...)
    missing = [n for n in names if not llvm.address_of_symbol(n)]
    if missing:
        raise LoomError(f"the generated code calls functions this process does not define: {sorted(missing)}; "
                        "load the library that defines them first (e.g. llvmlite.binding.load_library_permanently), "
                        "or register it with loom.runtime.extern_libraries.register_library")


def _optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, level: int) -> None:
    pto = llvm.PipelineTuningOptions(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pto.loop_unrolling = level >= 1
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


class CompiledObject(NamedTuple):  # a NamedTuple: cheaper to define than an attrs class, on every cache hit
    """What :func:`compile_object` makes: the object file, its optimized IR, and the symbols it needs."""

    object: bytes
    optimized_ir: str
    externals: tuple[str, ...]
    triple: str
    #: Shared libraries compiled from imported C code (``pragma import_c``), which the JIT resolves calls against.
    libraries: tuple[bytes, ...] = ()


class JitModule:
    """Native code of one object file mapped into this process, kept alive as long as this object."""

    def __init__(self, compiled: CompiledObject, target: Any = None,
                 imports: ImportedLibraries | None = None) -> None:
        self.compiled = compiled
        self.target = target  # what asm() renders for
        # The engine only maps an object already compiled: its target machine needs the triple, not the
        # CPU and its features (a generic one costs a fifth of the host's).
        tm = llvm.Target.from_triple(compiled.triple).create_target_machine(cpu="generic", features="",
                                                                           codemodel="jitdefault", jit=True)
        self.imports = imports or ImportedLibraries((), ())  # kept loaded as long as the code
        empty = self.imports.engine_module(tm.triple)
        self.engine = llvm.create_mcjit_compiler(empty, tm)
        self.imports.map_into(self.engine, empty)
        # MCJIT would run the whole code generation pipeline over this IR module when it finalizes
        # (0.4-0.5 ms for a module of declarations); the mappings are kept by name, so it can go.
        self.engine.remove_module(empty)
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(compiled.object))
        self.engine.finalize_object()

    def symbol_address(self, name: str) -> int:
        """The address of function or global ``name``; 0 when the module has none."""
        return self.engine.get_function_address(name) or self.engine.get_global_value_address(name)

    def global_address(self, name: str) -> int:
        """The address of global variable ``name``; a LoomError when the module has none."""
        addr = self.engine.get_global_value_address(name)
        if not addr:
            raise LoomError(f"the compiled module has no global {name!r}")
        return addr

    def address(self, name: str) -> int:
        """The address of function ``name``; a LoomError when the module has none."""
        addr = self.engine.get_function_address(name)
        if not addr:
            raise LoomError(f"the compiled module has no function {name!r}")
        return addr

    def ir(self) -> str:
        """The optimized LLVM IR text."""
        return self.compiled.optimized_ir

    def asm(self) -> str:
        """The host assembly of the optimized module."""
        return target_machine(self.target, jit=True).emit_assembly(parse(self.compiled.optimized_ir))


def parse(module: ir.Module | str) -> llvm.ModuleRef:
    """Parse and verify LLVM IR; a LoomError with LLVM's message when it is malformed."""
    _initialize()
    try:
        ref = llvm.parse_assembly(str(module))
        ref.verify()
    except RuntimeError as exc:
        raise LoomError(f"LLVM rejected the generated IR: {exc}") from None
    return ref


def compile_object(module: ir.Module | str, target: Any = None, imports: Sequence[str] = ()) -> CompiledObject:
    """Verify, optimize (``opt_level``, default 3) and compile ``module`` to a PIC object for ``target``.

    ``imports`` are LLVM IR texts linked into the module first (``pragma import_llvm``).
    """
    ref = parse(module)
    tm = target_machine(target, jit=False)
    ref.triple = tm.triple
    ref.data_layout = str(tm.target_data)
    link_llvm_imports(ref, imports)
    level = int(_attr(target, "opt_level", 3))
    if level > 0:
        _optimize(ref, tm, min(level, 3))
    externals = tuple(sorted(f.name for f in ref.functions if f.is_declaration and not f.name.startswith("llvm.")))
    return CompiledObject(tm.emit_object(ref), str(ref), externals, tm.triple)


def load_object(compiled: CompiledObject, target: Any = None) -> JitModule:
    """Map ``compiled`` into this process (loading the OpenMP runtime when it has parallel regions).

    :raises LoomError: when the object is for another architecture, or calls a
        function this process cannot resolve (which would crash at the first call).
    """
    host = _host()[0]
    if arch_of(compiled.triple) != arch_of(host):
        raise LoomError(f"this llvm module was compiled for {compiled.triple} and cannot run on this {host} host; "
                        "export it with export_library and load it on a matching machine")
    imports = ImportedLibraries(compiled.libraries, compiled.externals)
    _check_externals([n for n in compiled.externals if n not in imports.addresses])
    return JitModule(compiled, target, imports)


def compile_module(module: ir.Module | str, target: Any = None) -> JitModule:
    """:func:`compile_object` then :func:`load_object`: ``module`` compiled and ready to call."""
    return load_object(compile_object(module, target), target)
