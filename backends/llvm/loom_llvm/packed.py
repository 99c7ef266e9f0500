"""``tir.call_packed`` as LLVM IR: a call of the runtime's packed-call slot.

The contract is :mod:`loom.runtime.packed`'s: the arguments' words go into
one ``i64`` array on the stack (allocated once, in the entry block, as for calls
of other functions), their type codes into a private constant ``i32`` array,
and the code calls ``@loom_rt_call_packed(name, words, codes, nargs, error)``
through the external global slot the runtime fills when the module loads.  A
null slot, or a non-zero status, makes the function return -1 with the message
(the Python exception waits for the outermost caller); the call's value is 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from loom.runtime.packed import PACKED_CALL_SYMBOL, packed_layout

from .calls import I32
from .codegen_expr import I64, PTR

if TYPE_CHECKING:
    from loom.ir import expr as E

    from .codegen_stmt import StmtEmitter

__all__ = ["emit_call_packed", "PACKED_CALL_TYPE"]

#: ``i32 (i8* name, i64* words, i32* codes, i32 nargs, i8** error)``: the runtime slot's function.
PACKED_CALL_TYPE = ir.FunctionType(I32, [PTR, I64.as_pointer(), I32.as_pointer(), I32, PTR.as_pointer()])


def _codes(em: StmtEmitter, codes: list[int]) -> ir.Value:
    """A pointer to a private constant array holding ``codes``."""
    ty = ir.ArrayType(I32, max(1, len(codes)))
    g = ir.GlobalVariable(em.module, ty, name=em.module.get_unique_name("packed.codes"))
    g.global_constant, g.linkage, g.unnamed_addr = True, "private", True
    g.initializer = ir.Constant(ty, codes or [0])
    return g.gep([ir.Constant(I32, 0), ir.Constant(I32, 0)])


def emit_call_packed(em: StmtEmitter, call: E.Call) -> ir.Value:
    """Emit ``call`` (see the module docstring); its value is the int32 0."""
    name, layout = packed_layout(call)
    words = [w for _, ws in layout for w in ws]
    b = em.builder
    with b.goto_block(em.entry_block):  # one array per call site, however often it runs
        b.position_at_start(em.entry_block)
        array = b.alloca(ir.ArrayType(I64, max(1, len(words))), name="packed.words")
    first = b.gep(array, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True)
    for k, w in enumerate(words):
        slot = b.gep(first, [ir.Constant(I64, k)], inbounds=True)
        b.store(em.calls._word(em, w, name), slot, align=8)
    fn = b.load(em.calls.slot(PACKED_CALL_SYMBOL, PACKED_CALL_TYPE), name="packed.fn", align=8)
    em.fail_if(b.icmp_unsigned("==", fn, ir.Constant(fn.type, None)),
             f"call_packed({name!r}): the runtime's packed-call entry is not linked")
    error = em.callee_error_slot()
    args = [em.string(name), first, _codes(em, [int(c) for c, _ in layout]), ir.Constant(I32, len(layout)), error]
    status = b.call(fn, args, name="packed.status")
    em.fail_if(b.icmp_signed("!=", status, ir.Constant(I32, 0)), None, error)
    return ir.Constant(em.llvm_type(call.dtype), 0)
