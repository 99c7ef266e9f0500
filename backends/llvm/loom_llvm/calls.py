"""Host code calling the runtime: other functions (import slots) and device memory, as LLVM IR.

The contract is :mod:`loom.runtime.abi`'s:

* ``Call(int32, GlobalVar(name), args)`` packs one ``i64`` word per argument
  (a pointer's address, an integer sign-extended (unsigned: zero-extended), a
  float as the bits of a double, a bool as 0/1) into a stack array and calls
  ``i32 name(i64* words, i8** error)``: directly when ``name`` is a function of
  the same IRModule, else through its *import slot*, the external global
  ``i32 (i64*, i8**)* @<import_symbol(name)>`` (null until the runtime links the
  module that defines it).  A null slot fails with "function <name> is not
  linked: ..."; a non-zero status makes the caller return -1 at once, freeing
  its own allocations, with the callee's message in ``*error``.  The call's
  value is 0.
* An ``Allocate`` annotated with ``DEVICE_TYPE_ANNOTATION`` gets its memory from
  the runtime slot ``@loom_rt_device_alloc`` and gives it back through
  ``@loom_rt_device_free`` at the end of its scope and on every error return
  inside it.  Host code never touches that memory: there is no stack fallback.

Slots are external, writable globals initialised to null, created only for what
the module calls, so the runtime finds them by name (``get_global_value_address``
in the JIT, ``dlsym`` in an exported library) and writes them before any call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from llvmlite import ir

from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.dtype import DataType
from loom.runtime.abi import (DEVICE_ALLOC_SYMBOL, DEVICE_FREE_SYMBOL, DEVICE_ID_ANNOTATION,
                              DEVICE_TYPE_ANNOTATION, import_symbol)

from .codegen_expr import I64, PTR

if TYPE_CHECKING:
    from .codegen_stmt import StmtEmitter

__all__ = ["ModuleCalls", "ABI_FUNCTION_TYPE", "DEVICE_ALLOCATION_ALIGNMENT", "is_device_allocation"]

I32 = ir.IntType(32)
#: ``i32 (i64* args, i8** error)``: every compiled function, and every import slot's target.
ABI_FUNCTION_TYPE = ir.FunctionType(I32, [I64.as_pointer(), PTR.as_pointer()])
_ALLOC_TYPE = ir.FunctionType(PTR, [I32, I32, I64, I64, PTR.as_pointer()])
_FREE_TYPE = ir.FunctionType(I32, [I32, I32, PTR, PTR.as_pointer()])
#: The alignment host code asks of the device allocator.
DEVICE_ALLOCATION_ALIGNMENT = 64


def _annotation(s: S.Allocate, key: str, default: int | None = None) -> int | None:
    found = s.annotations.get(key)
    return default if found is None else int(getattr(found, "value", found))


def is_device_allocation(s: S.Allocate) -> bool:
    """Whether ``s`` holds device memory (annotated with a device type)."""
    return s.annotations.get(DEVICE_TYPE_ANNOTATION) is not None


class ModuleCalls:
    """The functions, import slots and runtime slots of one LLVM module.

    :param module: the module being generated.
    :param symbols: the symbol of each function of the IRModule, by its name there.
    """

    def __init__(self, module: ir.Module, symbols: Mapping[str, str]) -> None:
        self.module = module
        self.symbols = dict(symbols)

    def function(self, symbol: str) -> ir.Function:
        """The ABI function ``symbol`` of this module, declared now when its body comes later."""
        found = self.module.globals.get(symbol)
        if found is None:
            return ir.Function(self.module, ABI_FUNCTION_TYPE, name=symbol)
        if not isinstance(found, ir.Function) or found.function_type != ABI_FUNCTION_TYPE:
            raise LoomError(f"the symbol {symbol!r} of a function of the module is also that of an external "
                            f"function or global its code uses ({found.type}): rename one of them")
        return found

    def slot(self, symbol: str, fnty: ir.FunctionType) -> ir.GlobalVariable:
        """The external global function pointer ``symbol`` (null until the runtime links it)."""
        found = self.module.globals.get(symbol)
        if found is None:
            found = ir.GlobalVariable(self.module, fnty.as_pointer(), name=symbol)
            found.initializer = ir.Constant(fnty.as_pointer(), None)
            found.align = 8
        elif not isinstance(found, ir.GlobalVariable) or found.value_type != fnty.as_pointer():
            raise LoomError(f"the symbol {symbol!r} is taken by something other than a runtime slot")
        return found

    # -- calls of functions ------------------------------------------------------

    def emit(self, em: StmtEmitter, call: E.Call) -> ir.Value:
        """``call(...)`` of a GlobalVar: pack the words, call, propagate a failure; the value is 0."""
        name = call.op.name_hint
        b = em.builder
        count = max(1, len(call.args))
        with b.goto_block(em.entry_block):  # one array per call site, however often it runs
            b.position_at_start(em.entry_block)
            words = b.alloca(ir.ArrayType(I64, count), name=f"{name}.words")
        first = b.gep(words, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True)
        for k, arg in enumerate(call.args):
            slot = b.gep(first, [ir.Constant(I64, k)], inbounds=True)
            b.store(self._word(em, arg, name), slot, align=8)
        if name in self.symbols:
            callee: ir.Value = self.function(self.symbols[name])
        else:
            callee = b.load(self.slot(import_symbol(name), ABI_FUNCTION_TYPE), name=f"{name}.fn", align=8)
            em.fail_if(b.icmp_unsigned("==", callee, ir.Constant(callee.type, None)),
                     f"function {name} is not linked: the module that defines it was not imported")
        error = em.callee_error_slot()
        status = b.call(callee, [first, error], name=f"{name}.status")
        em.fail_if(b.icmp_signed("!=", status, ir.Constant(I32, 0)), None, error)
        return ir.Constant(em.llvm_type(call.dtype), 0)

    @staticmethod
    def _word(em: StmtEmitter, arg: E.PrimExpr, name: str) -> ir.Value:
        t: DataType = arg.dtype
        if t.lanes != 1:
            raise LoomError(f"{em.fname}: the call of {name} passes a vector ({t}), which no ABI word holds")
        v, b = em.expr(arg), em.builder
        if t.is_handle:
            return b.ptrtoint(v, I64)
        if t.is_float:
            d = v if t.bits == 64 else b.fpext(v, ir.DoubleType())
            return b.bitcast(d, I64)
        if t.is_bool or t.is_uint:
            return v if v.type == I64 else b.zext(v, I64)
        return v if v.type == I64 else b.sext(v, I64)

    # -- device memory -----------------------------------------------------------

    def allocate_device(self, em: StmtEmitter, s: S.Allocate) -> None:
        """Emit device allocation ``s``: memory from the runtime, freed on every way out of its scope."""
        b = em.builder
        device_type = ir.Constant(I32, _annotation(s, DEVICE_TYPE_ANNOTATION))
        device_id = ir.Constant(I32, _annotation(s, DEVICE_ID_ANNOTATION, 0))
        alloc = b.load(self.slot(DEVICE_ALLOC_SYMBOL, _ALLOC_TYPE), name="device.alloc", align=8)
        free = b.load(self.slot(DEVICE_FREE_SYMBOL, _FREE_TYPE), name="device.free", align=8)
        null = b.or_(b.icmp_unsigned("==", alloc, ir.Constant(alloc.type, None)),
                     b.icmp_unsigned("==", free, ir.Constant(free.type, None)))
        em.fail_if(null, "no device allocator is linked")
        size = em.allocation_bytes(s)
        error = em.callee_error_slot()
        ptr = b.call(alloc, [device_type, device_id, size, ir.Constant(I64, DEVICE_ALLOCATION_ALIGNMENT), error],
                     name=s.buffer_var.name)
        em.fail_if(b.icmp_unsigned("==", ptr, ir.Constant(PTR, None)), None, error)

        def release() -> None:  # on an error return: the first message stays
            em.builder.call(free, [device_type, device_id, ptr, em.local_error_slot()])

        em.cleanups.append(release)
        em.bind_allocation(s, ptr)
        em.cleanups.pop()
        status = em.builder.call(free, [device_type, device_id, ptr, error])
        em.fail_if(em.builder.icmp_signed("!=", status, ir.Constant(I32, 0)), None, error)
