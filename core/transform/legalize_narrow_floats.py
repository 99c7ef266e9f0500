"""``LegalizeNarrowFloats``: 16-bit float arithmetic written out in float32, for backends without it.

numpy, the interpreter and the llvm backend compute every float16 and bfloat16
operation in float32 and round the result to the narrow type.  This pass says
so in the IR: the operands of each operation are widened to float32 and a
narrow result is cast back, so every operation rounds once, as theirs do.
Conversions go through float32 too (an integer through float64, which holds
it exactly, so it is rounded once; to bfloat16 through float32, as ml_dtypes
converts).  Afterwards a narrow float is only loaded, stored, moved (let,
select, if_then_else, broadcast, shuffle, reinterpret, extern calls) or
converted from float32/float64 or to float32: a backend with no 16-bit float
type keeps the values' bits in a 16-bit integer and renders those three
conversions (the C backend does).

>>> import loom
>>> a, b = loom.var("a", "float16"), loom.var("b", "float16")
>>> print(legalize_narrow_floats(a * b + a))
float16(float32(float16(float32(a) * float32(b))) + float32(a))
>>> print(legalize_narrow_floats(loom.exp(a) < b))
float32(float16(exp(float32(a)))) < float32(b)
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir.dtype import DataType
from ..ir.functor import Mutator
from ..ir.op import Op
from ._util import body_pass
from .pass_base import Pass

__all__ = ["LegalizeNarrowFloats", "legalize_narrow_floats", "NARROW_FLOATS"]

#: The element types written out in float32.
NARROW_FLOATS = frozenset({"float16", "bfloat16"})

#: Calls that move a narrow value without computing with it (or pass it through as bits).
_MOVES = frozenset({"tir.if_then_else", "tir.reinterpret", "tir.likely", "tir.call_extern", "tir.call_pure_extern",
                    "tir.address_of", "tir.tvm_access_ptr", "tir.type_annotation", "tir.call_packed",
                    "tir.prefetch"})

_ARITHMETIC = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_COMPARISONS = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)


def _narrow(t: DataType) -> bool:
    return str(t.element_of()) in NARROW_FLOATS


def _wide(t: DataType, bits: int = 32) -> DataType:
    return DataType("float", bits, t.lanes)


def _widen(e: E.PrimExpr) -> E.PrimExpr:
    return E.Cast(_wide(e.dtype), e) if _narrow(e.dtype) else e


class _Legalize(Mutator):
    def visit_Buffer(self, b: Any) -> Any:
        return b

    def _rebuilt(self, e: E.BinaryOp) -> E.BinaryOp:
        a, b = self.visit(e.a), self.visit(e.b)
        return e if a is e.a and b is e.b else type(e)(a, b)

    def _operation(self, e: Any) -> E.PrimExpr:
        e = self._rebuilt(e)
        if not _narrow(e.a.dtype):
            return e
        wide = type(e)(_widen(e.a), _widen(e.b))
        return E.Cast(e.dtype, wide) if _narrow(e.dtype) else wide

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        value = self.visit(e.value)
        kept = e if value is e.value else E.Cast(e.dtype, value)
        src, dst = value.dtype, e.dtype
        if _narrow(src) and src.element_of() != dst.element_of():
            if dst.code == "float" and dst.bits == 32:
                return kept
            return self.visit_Cast(E.Cast(dst, E.Cast(_wide(src), value)))  # float32 holds it exactly
        if _narrow(dst) and src.element_of() != dst.element_of():
            if src.code == "float" and src.bits == 32:
                return kept
            if src.code == "float" and src.bits == 64:  # float16 from float64: one rounding; bfloat16: via float32
                return kept if dst.code == "float" else E.Cast(dst, E.Cast(_wide(src), value))
            # integers and bools: exactly in float64, then as from float64
            return self.visit_Cast(E.Cast(dst, E.Cast(_wide(src, 64), value)))
        return kept

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        args = [self.visit(a) for a in e.args]
        if not isinstance(e.op, Op) or e.op.name in _MOVES or not (
                _narrow(e.dtype) or any(_narrow(a.dtype) for a in args)):
            return e if all(x is y for x, y in zip(args, e.args)) else e.with_(args=tuple(args))
        wide = e.with_(dtype=_wide(e.dtype) if _narrow(e.dtype) else e.dtype,
                            args=tuple(_widen(a) for a in args))
        return E.Cast(e.dtype, wide) if _narrow(e.dtype) else wide


for _cls in _ARITHMETIC + _COMPARISONS:
    setattr(_Legalize, f"visit_{_cls.__name__}", _Legalize._operation)


def legalize_narrow_floats(node: Any) -> Any:
    """``node`` (an expression or statement) with 16-bit float arithmetic written in float32."""
    return _Legalize().visit(node)


def LegalizeNarrowFloats() -> Pass:  # noqa: N802 - TVM's pass-factory naming
    """The pass of :func:`legalize_narrow_floats` over each function body (see the module docstring)."""
    return body_pass("LegalizeNarrowFloats", lambda body, ctx: legalize_narrow_floats(body))
