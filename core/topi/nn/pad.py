"""``pad``: a tensor surrounded by a constant border.

>>> import loom
>>> from loom import topi
>>> A = loom.placeholder((2, 3), name="A")
>>> P = topi.nn.pad(A, (0, 1), (0, 2))
>>> [int(d) for d in P.shape], P.op.tag
([2, 6], 'injective')
"""

from __future__ import annotations

from typing import Any, Sequence, cast

from .. import tag
from ... import ir
from ...errors import LoomTypeError, LoomValueError
from ...ir import expr as E
from ...ir import expr_ops as ops
from ...ir.intrin import if_then_else
from ...te import compute
from ...te.tensor import Tensor
from ._util import is_zero

__all__ = ["pad"]


def _widths(widths: Sequence[Any], ndim: int, what: str) -> list[E.PrimExpr]:
    if not isinstance(widths, (list, tuple)):
        raise LoomTypeError(f"pad: {what} must be a list with one width per dimension, got {type(widths).__name__}")
    if len(widths) != ndim:
        raise LoomValueError(f"pad: {what} has {len(widths)} entries but the tensor has {ndim} dimensions")
    out = [cast(E.PrimExpr, ir.convert(w)) for w in widths]
    for w in out:
        if isinstance(w, E.IntImm) and w.value < 0:
            raise LoomValueError(f"pad: {what} has a negative width {w.value}")
    return out


def pad(data: Tensor, pad_before: Sequence[Any], pad_after: Sequence[Any] | None = None,
        pad_value: Any = 0.0, name: str = "PadInput") -> Tensor:
    """``data`` with ``pad_before[d]`` elements before and ``pad_after[d]`` after it on axis ``d``.

    The border holds ``pad_value`` (cast to the tensor's dtype); ``pad_after``
    defaults to ``pad_before``.  The result is an injective compute (tag
    ``"injective"``) that a schedule usually inlines into its consumer.
    """
    if not isinstance(data, Tensor):
        raise LoomTypeError(f"pad: expected a Tensor, got {type(data).__name__}")
    before = _widths(pad_before, data.ndim, "pad_before")
    after = before if pad_after is None else _widths(pad_after, data.ndim, "pad_after")
    shape = tuple(ops.add(d, ops.add(b, a)) for d, b, a in zip(data.shape, before, after))
    fill = ops.const(pad_value, data.dtype) if not isinstance(pad_value, E.PrimExpr) else pad_value.astype(data.dtype)

    def body(*index: E.Var) -> E.PrimExpr:
        inside, at = [], []
        for i, d, b, a in zip(index, data.shape, before, after):
            at.append(i if is_zero(b) else ops.sub(i, b))
            if not is_zero(b):
                inside.append(i >= b)
            if not is_zero(a):
                inside.append(i < ops.add(d, b))
        value = data[tuple(at)]
        return if_then_else(ops.all(*inside), value, fill) if inside else value

    return compute(shape, body, name=name, tag=tag.INJECTIVE)
