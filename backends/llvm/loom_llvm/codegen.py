"""LLVM code generation for lowered Loom modules.

:func:`codegen_module` translates every PrimFunc of a lowered ``IRModule`` (what
``loom.lower`` returns) into an ``llvmlite.ir.Module``.  Each function ``name``
becomes two LLVM functions:

* ``i32 @symbol(i64* args, i8** error)``, the native calling convention of
  :mod:`loom.runtime.abi`: it unpacks one 64-bit word per ABI slot and calls
* ``internal i32 @symbol.compute(<typed params>, i8** error)``, always inlined,
  whose buffer pointers carry ``noalias`` (when ``attrs["tir.noalias"]``) and
  ``align`` (each buffer's ``data_alignment``, capped at ``NATIVE_ALIGNMENT``): the inliner keeps those facts
  as alias scopes, which is what lets LLVM vectorize and reorder loads.

``symbol`` is :func:`symbol_of` the function: its name, unless that could collide
with a function the code calls (``exp``, ``GOMP_parallel``) or is not a plain
ASCII identifier (:func:`loom.runtime.abi.function_symbol`).

An outermost ``parallel`` loop becomes an OpenMP parallel region (see
:mod:`.parallel`); every module defines ``i32 @loom_num_threads``, the thread
count those regions ask for (0: one per core), which the runtime sets.
Intrinsics LowerIntrin did not lower go through the target's rules
(:mod:`.intrinsic_rules`); calls of other functions and device memory go
through the runtime's slots (:mod:`.calls`).

>>> import loom
>>> from loom.ir import BufferStore, IRModule, PrimFunc
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> f = PrimFunc([A.data], BufferStore(A, A[0] * 2.0, [1]), buffer_map={A.data: A})
>>> text = str(codegen_module(IRModule({"f": f}), None))
>>> 'define i32 @"f"(i64* %"args", i8** %"error")' in text
True
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from llvmlite import ir

from loom.errors import LoomError, LoomTypeError
from loom.ir.dtype import DataType
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.abi import NATIVE_ALIGNMENT, abi_vars, function_symbol

from .calls import ModuleCalls
from .codegen_expr import I64, PTR, llvm_type
from .codegen_stmt import StmtEmitter
from .float16 import define_conversions, uses_half
from .intrinsic_rules import rules_for
from .parallel import thread_count_global

__all__ = ["codegen_module", "codegen_function", "symbol_of"]

I32 = ir.IntType(32)


class FunctionCodegen(StmtEmitter):
    """Compiles one PrimFunc into ``module`` as the function ``symbol`` (``name`` is what messages say)."""

    def __init__(self, module: ir.Module, func: PrimFunc, symbol: str, fp_contract: bool = False,
                 rules: Mapping[str, Callable[[Any], Any]] | None = None, calls: ModuleCalls | None = None,
                 name: str | None = None) -> None:
        super().__init__()
        self.module, self.func, self.symbol = module, func, symbol
        self.fname = symbol if name is None else name
        self.values = {}
        self.float_flags = ("contract",) if fp_contract else ()
        self.intrinsic_rules = dict(rules if rules is not None else rules_for(None))
        self.calls = calls if calls is not None else ModuleCalls(module, {})

    def run(self) -> ir.Function:
        slots = abi_vars(self.func)
        compute = self._compute_function(slots)
        return self._entry(slots, compute)

    def _compute_function(self, slots: list[Any]) -> ir.Function:
        noalias = bool(self.func.attrs.get("tir.noalias", False))
        types = [llvm_type(v.dtype) for v in slots]
        fnty = ir.FunctionType(I32, [*types, PTR.as_pointer()])
        fn = ir.Function(self.module, fnty, name=f"{self.symbol}.compute")
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        # Argument pointers are only as aligned as the runtime guarantees (loom.runtime.abi).
        aligns = {id(b.data): max(1, min(b.data_alignment, NATIVE_ALIGNMENT)) for b in self.func.buffer_map.values()}
        self.param_alignments.update(aligns)
        for arg, var in zip(fn.args, slots):
            arg.name = var.name
            if var.dtype.is_handle:
                if noalias:
                    arg.add_attribute("noalias")
                if id(var) in aligns:
                    arg.attributes.align = aligns[id(var)]
                self.pointer_facts[id(var)] = (noalias, aligns.get(id(var), 1))
            self.values[id(var)] = arg
        fn.args[-1].name = "error"
        self.error_ptr = fn.args[-1]
        self.entry_block = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.builder = ir.IRBuilder(body)
        self.stmt(self.func.body)
        if not self.builder.block.is_terminated:
            self.return_code(0)
        with self.builder.goto_block(self.entry_block):
            self.builder.branch(body)
        return fn

    def _entry(self, slots: list[Any], compute: ir.Function) -> ir.Function:
        fn = self.calls.function(self.symbol)  # declared already when a function before it calls it
        if fn.blocks:
            raise LoomError(f"two functions of the module have the symbol {self.symbol!r}")
        fn.args[0].name, fn.args[1].name = "args", "error"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        values = []
        for k, var in enumerate(slots):
            word = b.load(b.gep(fn.args[0], [ir.Constant(I64, k)], inbounds=True, source_etype=I64),
                          typ=I64, align=8, name=f"{var.name}.word")
            values.append(self._unpack(b, word, var.dtype, var.name))
        b.ret(b.call(compute, [*values, fn.args[1]]))
        return fn

    @staticmethod
    def _unpack(b: ir.IRBuilder, word: ir.Value, t: DataType, name: str) -> ir.Value:
        if t.lanes != 1:
            raise LoomTypeError(f"parameter {name}: a vector ({t}) cannot be passed in one ABI word")
        if t.is_handle:
            return b.inttoptr(word, PTR, name=name)
        if t.is_float:
            d = b.bitcast(word, ir.DoubleType())
            return d if t.bits == 64 else b.fptrunc(d, llvm_type(t), name=name)
        if t.is_bool:
            return b.icmp_unsigned("!=", word, ir.Constant(I64, 0), name=name)
        return word if t.bits == 64 else b.trunc(word, llvm_type(t), name=name)


def codegen_function(module: ir.Module, func: PrimFunc, name: str, fp_contract: bool = False,
                     rules: Mapping[str, Callable[[Any], Any]] | None = None,
                     calls: ModuleCalls | None = None, label: str | None = None) -> ir.Function:
    """Add ``func`` to ``module`` as ``i32 @name(i64* args, i8** error)``; returns that function.

    ``name`` is the LLVM symbol, used as given (:func:`symbol_of` says what a module's
    functions get).  ``fp_contract`` lets LLVM fuse float multiplies and adds into FMA
    instructions; ``rules`` lower the intrinsics LowerIntrin left (default:
    :func:`.intrinsic_rules.rules_for` of no target); ``calls`` knows the other functions of
    the module (default: none, so every called function is imported); ``label`` is the
    function's name in messages (default: ``name``).
    """
    return FunctionCodegen(module, func, name, fp_contract, rules, calls, label).run()


def symbol_of(name: str, func: PrimFunc) -> str:
    """The symbol of ``func``, called ``name`` in its IRModule: :func:`~loom.runtime.abi.function_symbol`
    of its ``global_symbol`` (else of ``name``).

    >>> from loom.ir import PrimFunc, no_op
    >>> symbol_of("f", PrimFunc([], no_op())), symbol_of("expf", PrimFunc([], no_op()))
    ('f', 'loom_fn_expf')
    """
    return function_symbol(str(func.attrs.get("global_symbol", name)))


def _triple(target: Any) -> str:
    if target is None:
        return ""
    attrs = getattr(target, "attrs", {}) or {}
    return str(attrs.get("mtriple", "") or "")


def codegen_module(mod: IRModule, target: Any = None) -> ir.Module:
    """Translate every PrimFunc of the lowered ``mod`` into one LLVM module.

    :param mod: the output of ``loom.lower`` (or PrimFuncs in the same form).
    :param target: the ``llvm`` Target (its ``mtriple`` becomes the module's triple; ``fp_contract``,
        default on, allows FMA fusion), or None (no fusion).
    :returns: the ``llvmlite.ir.Module``; each function is named by :func:`symbol_of`: its
        ``global_symbol`` attribute (else its name in ``mod``), mangled when it could collide.

    Raises :class:`~loom.errors.LoomError` for IR the backend cannot compile,
    naming the function and the construct.
    """
    if not isinstance(mod, IRModule):
        raise LoomTypeError(f"codegen_module takes an IRModule, got {type(mod).__name__}")
    out = ir.Module(name=str(mod.attrs.get("name", "loom_module")) if hasattr(mod, "attrs") else "loom_module")
    out.triple = _triple(target)
    thread_count_global(out)
    attrs = getattr(target, "attrs", None) or {}
    fp_contract = bool(attrs.get("fp_contract", True)) if target is not None else False
    funcs: dict[str, PrimFunc] = {}
    for name, func in mod.functions.items():
        if not isinstance(func, PrimFunc):
            raise LoomTypeError(f"the llvm backend compiles PrimFuncs; {name} is a {type(func).__name__}")
        if func.attrs.get("calling_conv") == "device_kernel":
            raise LoomError(f"{name} is a device kernel; the llvm backend compiles host code only")
        funcs[name] = func
    symbols = {name: symbol_of(name, func) for name, func in funcs.items()}
    calls, rules = ModuleCalls(out, symbols), rules_for(target)
    for name, func in funcs.items():
        codegen_function(out, func, symbols[name], fp_contract, rules, calls, label=name)
    if uses_half(str(out)):  # the conversions LLVM calls where the CPU has no instruction
        define_conversions(out)
    return out
