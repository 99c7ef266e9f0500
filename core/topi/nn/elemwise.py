"""Elementwise activation functions.

>>> import loom
>>> from loom import topi
>>> A = loom.placeholder((3,), name="A")
>>> topi.nn.relu(A).op.tag
'elemwise'
"""

from __future__ import annotations

from .. import tag
from ...errors import LoomTypeError
from ...ir import expr as E
from ...ir import expr_ops as ops
from ...te import compute
from ...te.tensor import Tensor

__all__ = ["relu", "leaky_relu"]


def _tensor(x: object, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise LoomTypeError(f"{what}: expected a Tensor, got {type(x).__name__}")
    return x


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` elementwise."""
    x = _tensor(x, "relu")
    return compute(x.shape, lambda *i: ops.maximum(x[i], ops.const(0, x.dtype)), name="T_relu", tag=tag.ELEMWISE)


def leaky_relu(x: Tensor, alpha: float) -> Tensor:
    """``x`` where positive, ``alpha * x`` elsewhere."""
    x = _tensor(x, "leaky_relu")

    def body(*i: E.Var) -> E.PrimExpr:
        v = x[i]
        return ops.select(v > 0, v, v * ops.const(alpha, x.dtype))

    return compute(x.shape, body, name="T_leaky_relu", tag=tag.ELEMWISE)
