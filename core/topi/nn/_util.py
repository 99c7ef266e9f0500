"""Index arithmetic shared by the windowed operators (convolution and pooling)."""

from __future__ import annotations

from typing import Any

from ... import ir
from ...arith import Analyzer
from ...errors import LoomValueError
from ...ir import expr as E
from ...ir import expr_ops as ops


def pair(value: Any, what: str, op: str) -> tuple[Any, Any]:
    """``(h, w)`` from an int or a pair."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise LoomValueError(f"{op}: {what} must be an int or a pair, got {value!r}")
        return value[0], value[1]
    return value, value


def simplified(value: Any) -> E.PrimExpr:
    """An int or expression as a simplified integer expression."""
    return Analyzer().simplify(ir.convert(value))


def is_zero(value: Any) -> bool:
    folded = simplified(value)
    return isinstance(folded, E.IntImm) and folded.value == 0


def out_size(size: Any, window: Any, before: Any, after: Any, stride: Any) -> E.PrimExpr:
    """How many positions a ``window`` sliding by ``stride`` takes over ``size`` padded elements."""
    return simplified(ops.add(ops.floordiv(ops.sub(ops.add(size, ops.add(before, after)), window), stride), 1))


def window_index(out: Any, stride: Any, offset: Any, dilation: Any = 1) -> E.PrimExpr:
    """``out * stride + offset * dilation``, without the factors that are 1 (tensorize matches the plain form)."""
    def scaled(x: Any, k: Any) -> Any:
        return x if isinstance(k, int) and k == 1 else ops.mul(x, k)
    return ops.add(scaled(out, stride), scaled(offset, dilation))
