"""Max and average pooling over the H and W axes of a 4-D (or blocked, ``NCHW16c``) layout.

>>> import loom
>>> from loom import topi
>>> A = loom.placeholder((1, 2, 6, 6), name="A")
>>> P = topi.nn.pool(A, kernel=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), pool_type="max")
>>> topi.util.get_const_tuple(P.shape), P.op.tag
((1, 2, 3, 3), 'pool_max')
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import tag
from ...errors import LoomTypeError, LoomValueError
from ...ir import expr as E
from ...ir import expr_ops as ops
from ...te import compute, max as te_max, reduce_axis, sum as te_sum
from ...te.tensor import Tensor
from ._util import is_zero, out_size, pair, window_index
from .pad import pad

__all__ = ["pool"]


def _hw_axes(layout: str, ndim: int) -> tuple[int, int]:
    """The positions of ``H`` and ``W`` in ``layout``; neither may be split (no ``h``/``w``)."""
    letters = [c for c in layout if c.isalpha()]
    if len(letters) != ndim or "H" not in letters or "W" not in letters or "h" in letters or "w" in letters:
        raise LoomValueError(f"pool: layout {layout!r} must name each of the data's {ndim} dimensions, "
                             "with H and W unsplit (as in 'NCHW', 'NHWC' or 'NCHW16c')")
    return letters.index("H"), letters.index("W")


def pool(data: Tensor, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[Any], pool_type: str,
         ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True) -> Tensor:
    """Pool ``kernel``-sized windows of ``data`` moving by ``stride``; ``pool_type`` is ``"max"`` or ``"avg"``.

    :param padding: ``(top, left, bottom, right)``.  Max pooling never picks the
        border; average pooling counts it as zeros when ``count_include_pad``, and
        otherwise divides by the number of elements inside the data.
    :param ceil_mode: round the output size up: a last, partial window is kept.
    :param layout: where the H and W axes are (``"NCHW"``, ``"NHWC"``, ``"NCHW16c"``).
    """
    if not isinstance(data, Tensor):
        raise LoomTypeError(f"pool: expected a Tensor, got {type(data).__name__}")
    if pool_type not in ("max", "avg"):
        raise LoomValueError(f"pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if pool_type == "avg" and not data.dtype.is_float:
        raise LoomTypeError(f"pool: average pooling needs a float tensor, got {data.dtype}")
    if not isinstance(padding, (list, tuple)) or len(padding) != 4:
        raise LoomValueError(f"pool: padding must be (top, left, bottom, right), got {padding!r}")
    h_axis, w_axis = _hw_axes(layout, data.ndim)
    kh, kw = pair(kernel, "kernel", "pool")
    sh, sw = pair(stride, "stride", "pool")
    top, left, bottom, right = padding
    height, width = data.shape[h_axis], data.shape[w_axis]
    if ceil_mode:  # room for the last, partial window
        bottom, right = ops.add(bottom, sh - 1), ops.add(right, sw - 1)
    out_h = out_size(height, kh, top, bottom, sh)
    out_w = out_size(width, kw, left, right, sw)
    shape = list(data.shape)
    shape[h_axis], shape[w_axis] = out_h, out_w

    before, after = [0] * data.ndim, [0] * data.ndim
    before[h_axis], before[w_axis], after[h_axis], after[w_axis] = top, left, bottom, right
    padded = data
    if not all(is_zero(w) for w in before + after):
        fill = ops.min_value(data.dtype) if pool_type == "max" else ops.const(0, data.dtype)
        padded = pad(data, before, after, pad_value=fill, name="pad_temp")
    rh = reduce_axis((0, kh), name="rv_h")
    rw = reduce_axis((0, kw), name="rv_w")

    def window(index: tuple[E.Var, ...]) -> E.PrimExpr:
        at: list[E.PrimExpr] = list(index)
        at[h_axis] = window_index(index[h_axis], sh, rh)
        at[w_axis] = window_index(index[w_axis], sw, rw)
        return padded[tuple(at)]

    if pool_type == "max":
        return compute(shape, lambda *ix: te_max(window(ix), axis=[rh, rw]), name="tensor", tag=tag.POOL_MAX)

    sums = compute(shape, lambda *ix: te_sum(window(ix), axis=[rh, rw]), name="pool_sum", tag=tag.POOL_SUM)

    def average(*ix: E.Var) -> E.PrimExpr:
        if count_include_pad:
            return sums[ix] / ops.mul(kh, kw).astype(data.dtype)
        h0 = ops.sub(window_index(ix[h_axis], sh, ops.const(0)), top)
        w0 = ops.sub(window_index(ix[w_axis], sw, ops.const(0)), left)
        rows = ops.sub(ops.minimum(ops.add(h0, kh), height), ops.maximum(h0, 0))
        cols = ops.sub(ops.minimum(ops.add(w0, kw), width), ops.maximum(w0, 0))
        return sums[ix] / ops.maximum(ops.mul(rows, cols), 1).astype(data.dtype)

    return compute(shape, average, name="tensor", tag=tag.POOL_AVG)
