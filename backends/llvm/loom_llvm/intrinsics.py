"""Emission of intrinsic calls to LLVM IR: the generic forms, and the ops that are not math choices.

The target-level choice of how a math op is computed (``tir.exp`` -> ``llvm.exp``,
``tir.tanh`` -> libm's ``tanhf``...) lives in :mod:`.intrinsic_rules` as IR
rewrites, which LowerIntrin applies before code generation.  What reaches this
module is then:

* ``tir.call_llvm_pure_intrin(name, *operands)`` (and ``tir.call_llvm_intrin``,
  the same call with side effects): a call of the LLVM intrinsic
  ``name`` overloaded on the first operand's type (``llvm.exp.v8f32``), returning
  the call's type;
* ``tir.call_extern``/``tir.call_pure_extern(name, *operands)``: a C function;
  vector operands are called lane by lane;
* ops that are about bits and control, not math libraries: ``abs``,
  ``popcount``, ``isnan``, ``likely``, ``reinterpret``, ``if_then_else``,
  ``tvm_storage_sync``, ``prefetch`` (``llvm.prefetch``);
* ``tir.call_packed``: a call of the runtime's packed-call slot (:mod:`.packed`);
* anything else: the target's rule applied here (the module was not lowered by
  LowerIntrin), then emitted as above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from llvmlite import ir

from loom.errors import LoomError
from loom.ir import expr as E

if TYPE_CHECKING:
    from .codegen_expr import ExprEmitter

__all__ = ["INTRINSIC_EMITTERS", "emit_call"]

Emitter = Callable[["ExprEmitter", E.Call], ir.Value]


def _name_and_operands(call: E.Call) -> tuple[str, list[Any]]:
    if not call.args or not isinstance(call.args[0], E.StringImm):
        raise LoomError(f"{call.op.name} needs the function name (a StringImm) as its first argument, got {call}")
    return call.args[0].value, list(call.args[1:])


def _llvm_intrinsic(em: ExprEmitter, call: E.Call) -> ir.Value:
    name, operands = _name_and_operands(call)
    if not operands:
        raise LoomError(f"call_llvm_pure_intrin of {name} needs an operand to overload on ({call})")
    args = [em.expr(a) for a in operands]
    return em.builder.call(em.intrinsic(name, [a.type for a in args], em.llvm_type(call.dtype)), args)


def _abs(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = em.expr(call.args[0])
    t = call.args[0].dtype
    if t.is_float:
        return em.builder.call(em.intrinsic("llvm.fabs", [x.type]), [x])
    if t.is_uint or t.is_bool:
        return x
    zero = ir.Constant(x.type, None)
    # Wraps at INT_MIN, like numpy's abs.
    return em.builder.select(em.builder.icmp_signed("<", x, zero), em.builder.sub(zero, x), x)


def _popcount(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = em.expr(call.args[0])
    return em.builder.call(em.intrinsic("llvm.ctpop", [x.type]), [x])


def _isnan(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = em.expr(call.args[0])
    if not call.args[0].dtype.is_float:
        return ir.Constant(em.llvm_type(call.dtype), None)
    return em.builder.fcmp_unordered("uno", x, x)


def _likely(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = em.expr(call.args[0])
    if call.dtype.lanes != 1 or not call.dtype.is_bool:
        return x
    expect = em.extern("llvm.expect.i1", x.type, [x.type, x.type])
    return em.builder.call(expect, [x, ir.Constant(x.type, 1)])


def _reinterpret(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = em.expr(call.args[0])
    return em.builder.bitcast(x, em.llvm_type(call.dtype))


def _if_then_else(em: ExprEmitter, call: E.Call) -> ir.Value:
    cond, t, f = call.args
    if cond.dtype.lanes != 1:  # a vector condition cannot branch: both sides, lane select
        return em.builder.select(em.expr(cond), em.expr(t), em.expr(f))
    b = em.builder
    c = em.expr(cond)
    then_bb, else_bb, end_bb = (b.append_basic_block(n) for n in ("if_then", "if_else", "if_end"))
    b.cbranch(c, then_bb, else_bb)
    b.position_at_end(then_bb)
    tv = em.expr(t)
    then_end = b.block
    b.branch(end_bb)
    b.position_at_end(else_bb)
    fv = em.expr(f)
    else_end = b.block
    b.branch(end_bb)
    b.position_at_end(end_bb)
    phi = b.phi(tv.type)
    phi.add_incoming(tv, then_end)
    phi.add_incoming(fv, else_end)
    return phi


def _call_extern(em: ExprEmitter, call: E.Call) -> ir.Value:
    name, operands = _name_and_operands(call)
    args = [em.expr(a) for a in operands]
    lanes = call.dtype.lanes
    if lanes == 1 and all(a.dtype.lanes == 1 for a in operands):
        fn = em.extern(name, em.llvm_type(call.dtype), [a.type for a in args])
        return em.builder.call(fn, args)
    # A C function takes scalars: call it once per lane (scalar operands are passed to every lane).
    elem = em.llvm_type(call.dtype.element_of())
    scalar = [a.type.element if isinstance(a.type, ir.VectorType) else a.type for a in args]
    fn = em.extern(name, elem, scalar)
    return em.lanes(lanes, args, lambda *xs: em.builder.call(fn, list(xs)))


def _access_ptr(em: ExprEmitter, call: E.Call) -> ir.Value:
    # tvm_access_ptr(type_annotation(t), data, offset, extent, mask): the address of element ``offset`` (of t).
    from .codegen_expr import llvm_type

    annotation, data, offset = call.args[0], call.args[1], call.args[2]
    elem = llvm_type(annotation.dtype, memory=True)
    b = em.builder
    base = b.bitcast(em.expr(data), elem.as_pointer())
    index = em.convert(em.expr(offset), offset.dtype, offset.dtype.with_bits(64))
    return b.bitcast(b.gep(base, [index], source_etype=elem), em.llvm_type(call.dtype))


def _prefetch(em: ExprEmitter, call: E.Call) -> ir.Value:
    # prefetch(A[i], rw, locality): llvm.prefetch(address, rw, locality, 1 = the data cache); it never faults.
    from loom.ir.buffer import prefetch_address, prefetch_parts

    where, rw, locality = prefetch_parts(call)
    ptr = em.expr(prefetch_address(where))
    i32 = ir.IntType(32)
    fn = em.extern("llvm.prefetch.p0", ir.VoidType(), [ptr.type, i32, i32, i32])
    em.builder.call(fn, [ptr, em.expr(rw), em.expr(locality), ir.Constant(i32, 1)])
    return ir.Constant(em.llvm_type(call.dtype), 0)


def _storage_sync(em: ExprEmitter, call: E.Call) -> ir.Value:
    # One CPU thread runs the whole function: there is nothing to wait for.
    return ir.Constant(em.llvm_type(call.dtype), 0)


def _bitwise(em: ExprEmitter, call: E.Call) -> ir.Value:
    """Shifts modulo the bit width (as the interpreter's), and the bit operations (see loom.ir.bitwise)."""
    b, name, t = em.builder, call.op.name, call.dtype
    xs = [em.expr(a) for a in call.args]
    if name == "tir.bitwise_not":
        return b.not_(xs[0])
    x, y = xs
    if name in ("tir.shift_left", "tir.shift_right"):
        width = t.bits - 1
        mask = ir.Constant(y.type, [width] * t.lanes if isinstance(y.type, ir.VectorType) else width)
        y = b.and_(y, mask)
        if name == "tir.shift_left":
            return b.shl(x, y)
        return b.lshr(x, y) if t.is_uint else b.ashr(x, y)
    return {"tir.bitwise_and": b.and_, "tir.bitwise_or": b.or_, "tir.bitwise_xor": b.xor}[name](x, y)


def _call_packed(em: ExprEmitter, call: E.Call) -> ir.Value:
    from .packed import emit_call_packed  # .packed reaches this module through .calls: import on use

    return emit_call_packed(em, call)  # type: ignore[arg-type]  # statement emitters emit every call


INTRINSIC_EMITTERS: dict[str, Emitter] = {
    **dict.fromkeys(("tir.shift_left", "tir.shift_right", "tir.bitwise_and", "tir.bitwise_or", "tir.bitwise_xor",
                     "tir.bitwise_not"), _bitwise),
    "tir.call_llvm_pure_intrin": _llvm_intrinsic, "tir.call_llvm_intrin": _llvm_intrinsic,
    "tir.call_extern": _call_extern, "tir.call_pure_extern": _call_extern,
    "tir.abs": _abs, "tir.popcount": _popcount, "tir.isnan": _isnan, "tir.likely": _likely,
    "tir.reinterpret": _reinterpret, "tir.if_then_else": _if_then_else, "tir.tvm_storage_sync": _storage_sync,
    "tir.call_packed": _call_packed, "tir.tvm_access_ptr": _access_ptr, "tir.prefetch": _prefetch,
}


def emit_call(em: ExprEmitter, call: E.Call) -> Any:
    """The LLVM value of an intrinsic ``Call``; a LoomError for ops neither emitted nor lowered here."""
    name = getattr(call.op, "name", None)
    emit = INTRINSIC_EMITTERS.get(name) if isinstance(name, str) else None
    if emit is not None:
        return emit(em, call)
    rule = em.intrinsic_rules.get(name) if isinstance(name, str) else None
    lowered = rule(call) if rule is not None else None
    if lowered is None:
        what = name if isinstance(name, str) else type(call.op).__name__
        known = sorted({*INTRINSIC_EMITTERS, *em.intrinsic_rules})
        raise LoomError(f"the llvm backend cannot compile a call of {what} ({call}); "
                        f"supported intrinsics: {', '.join(known)}")
    return em.expr_unrounded(lowered)
