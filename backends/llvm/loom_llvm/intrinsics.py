"""Lowering of ``tir.*`` intrinsic calls to LLVM IR, one rule per op.

A rule receives the expression emitter and the ``Call`` node and returns the
LLVM value.  Math functions with an LLVM intrinsic use it (vector forms
included, so vectorized loops stay vectorized); ``tanh`` and ``erf`` have no
exact intrinsic and call libm lane by lane.  ``round`` is round-half-to-even,
as numpy's ``round`` (the interpreter's semantics), hence ``llvm.roundeven``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from llvmlite import ir

from loom.errors import LoomError, LoomTypeError
from loom.ir import expr as E

if TYPE_CHECKING:
    from .codegen_expr import ExprEmitter

__all__ = ["INTRINSIC_RULES", "emit_call"]

Rule = Callable[["ExprEmitter", E.Call], ir.Value]

# LLVM intrinsics taking and returning the argument's (float) type.
_LLVM_UNARY = {
    "tir.exp": "llvm.exp", "tir.exp2": "llvm.exp2", "tir.log": "llvm.log", "tir.log2": "llvm.log2",
    "tir.log10": "llvm.log10", "tir.sqrt": "llvm.sqrt", "tir.sin": "llvm.sin", "tir.cos": "llvm.cos",
    "tir.floor": "llvm.floor", "tir.ceil": "llvm.ceil", "tir.round": "llvm.roundeven",
    "tir.trunc": "llvm.trunc", "tir.fabs": "llvm.fabs",
}
# Functions without an exact LLVM intrinsic: libm, by element width.
_LIBM = {"tir.tanh": {32: "tanhf", 64: "tanh"}, "tir.erf": {32: "erff", 64: "erf"}}


def _float_arg(em: ExprEmitter, call: E.Call) -> ir.Value:
    (x,) = call.args
    if not x.dtype.is_float:
        raise LoomTypeError(f"{call.op.name} needs a float argument, got {x.dtype} in {call}")
    return em.expr(x)


def _unary(name: str) -> Rule:
    def rule(em: ExprEmitter, call: E.Call) -> ir.Value:
        x = _float_arg(em, call)
        return em.builder.call(em.intrinsic(name, [x.type]), [x])
    return rule


def _libm(table: dict[int, str]) -> Rule:
    def rule(em: ExprEmitter, call: E.Call) -> ir.Value:
        x = _float_arg(em, call)
        t = call.args[0].dtype
        bits = 32 if t.bits < 32 else t.bits  # half computes in float and rounds back
        ft = ir.FloatType() if bits == 32 else ir.DoubleType()
        fn = em.extern(table[bits], ft, [ft])

        def one(v: ir.Value) -> ir.Value:
            wide = em.builder.fpext(v, ft) if t.bits < bits else v
            r = em.builder.call(fn, [wide])
            return em.builder.fptrunc(r, v.type) if t.bits < bits else r
        return em.per_lane(x, one)
    return rule


def _sigmoid(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = _float_arg(em, call)
    b = em.builder
    e = b.call(em.intrinsic("llvm.exp", [x.type]), [b.fneg(x)])
    one = em.splat_const(call.dtype, 1.0)
    return b.fdiv(one, b.fadd(one, e))


def _rsqrt(em: ExprEmitter, call: E.Call) -> ir.Value:
    x = _float_arg(em, call)
    return em.builder.fdiv(em.splat_const(call.dtype, 1.0), em.builder.call(em.intrinsic("llvm.sqrt", [x.type]), [x]))


def _power(em: ExprEmitter, call: E.Call) -> ir.Value:
    x, y = em.expr(call.args[0]), em.expr(call.args[1])
    if not call.dtype.is_float:
        raise LoomTypeError(f"tir.power needs float arguments, got {call.dtype} in {call}")
    y = em.convert(y, call.args[1].dtype, call.dtype)
    return em.builder.call(em.intrinsic("llvm.pow", [x.type]), [x, y])


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
    if not call.args or not isinstance(call.args[0], E.StringImm):
        raise LoomError(f"{call.op.name} needs the function name as its first argument, got {call}")
    args = [em.expr(a) for a in call.args[1:]]
    fn = em.extern(call.args[0].value, em.llvm_type(call.dtype), [a.type for a in args])
    return em.builder.call(fn, args)


def _storage_sync(em: ExprEmitter, call: E.Call) -> ir.Value:
    # One CPU thread runs the whole function: there is nothing to wait for.
    return ir.Constant(em.llvm_type(call.dtype), 0)


INTRINSIC_RULES: dict[str, Rule] = {
    **{op: _unary(name) for op, name in _LLVM_UNARY.items()},
    **{op: _libm(table) for op, table in _LIBM.items()},
    "tir.sigmoid": _sigmoid, "tir.rsqrt": _rsqrt, "tir.power": _power, "tir.abs": _abs,
    "tir.popcount": _popcount, "tir.isnan": _isnan, "tir.likely": _likely, "tir.reinterpret": _reinterpret,
    "tir.if_then_else": _if_then_else, "tir.call_extern": _call_extern, "tir.call_pure_extern": _call_extern,
    "tir.tvm_storage_sync": _storage_sync,
}


def emit_call(em: ExprEmitter, call: E.Call) -> Any:
    """The LLVM value of an intrinsic ``Call``; a LoomError for ops without a rule."""
    name = getattr(call.op, "name", None)
    rule = INTRINSIC_RULES.get(name) if isinstance(name, str) else None
    if rule is None:
        what = name if isinstance(name, str) else type(call.op).__name__
        raise LoomError(f"the llvm backend cannot compile a call of {what} ({call}); "
                        f"supported intrinsics: {', '.join(sorted(INTRINSIC_RULES))}")
    return rule(em, call)
