"""bfloat16 on the CPU: stored as 16 bits, computed in float32, rounded after every operation.

A bfloat16 value is the upper half of a float32, so the backend keeps bfloat16
values in ``float`` registers (always holding a bfloat16-representable number),
widens loaded bits with a shift, and rounds each result to the nearest
bfloat16, ties to even, as ml_dtypes (and so numpy and the interpreter) do;
NaNs stay NaNs (quiet).  Stores keep the upper 16 bits of the rounded value.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

__all__ = ["widen", "round_to_bfloat16", "to_bits", "constant"]

I16, I32 = ir.IntType(16), ir.IntType(32)


def _like(v: ir.Value, elem: ir.Type) -> ir.Type:
    return ir.VectorType(elem, v.type.count) if isinstance(v.type, ir.VectorType) else elem


def _splat(v: ir.Value, value: int) -> ir.Constant:
    t = _like(v, I32)
    return ir.Constant(t, [value] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(t, value)


def widen(b: ir.IRBuilder, raw: ir.Value) -> ir.Value:
    """16-bit patterns (scalar or vector ``i16``) as the float32 values they stand for."""
    wide = b.zext(raw, _like(raw, I32))
    return b.bitcast(b.shl(wide, _splat(wide, 16)), _like(raw, ir.FloatType()))


def _rounded_bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    u = b.bitcast(v, _like(v, I32))
    lsb = b.and_(b.lshr(u, _splat(u, 16)), _splat(u, 1))
    rounded = b.add(b.add(u, _splat(u, 0x7FFF)), lsb)
    quiet_nan = b.or_(u, _splat(u, 0x00400000))
    return b.select(b.fcmp_unordered("uno", v, v), quiet_nan, rounded)


def round_to_bfloat16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """``v`` (float32) rounded to the nearest bfloat16, still as float32."""
    bits = b.and_(_rounded_bits(b, v), _splat(v, -65536))  # 0xFFFF0000
    return b.bitcast(bits, v.type)


def to_bits(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """The 16-bit pattern of float32 ``v`` rounded to bfloat16 (for stores)."""
    bits = _rounded_bits(b, v)
    return b.trunc(b.lshr(bits, _splat(bits, 16)), _like(v, I16))


def constant(value: float) -> float:
    """``value`` rounded to bfloat16 (a Python float)."""
    import ml_dtypes

    return float(np.array(value, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32))
