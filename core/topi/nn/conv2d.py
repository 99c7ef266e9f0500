"""2-D convolution in the NCHW and NHWC layouts.

``conv2d(data, kernel, strides, padding, dilation, layout)`` is TVM topi's
signature: NCHW data takes an OIHW kernel, NHWC data an HWIO kernel.  ``padding``
is an int (every side), a pair ``(h, w)`` (both sides of each), a quadruple
``(top, left, bottom, right)``, or ``"SAME"`` / ``"VALID"``.

>>> import loom
>>> from loom import topi
>>> A = loom.placeholder((1, 3, 8, 8), name="A")
>>> W = loom.placeholder((4, 3, 3, 3), name="W")
>>> C = topi.nn.conv2d(A, W, strides=1, padding=1, dilation=1)
>>> topi.util.get_const_tuple(C.shape), C.op.tag
((1, 4, 8, 8), 'conv2d_nchw')
"""

from __future__ import annotations

from typing import Any, Sequence, Union

from .. import tag
from ...errors import LoomTypeError, LoomValueError
from ...ir import expr as E
from ...te import compute, reduce_axis, sum as te_sum
from ...te.tensor import Tensor
from ._util import is_zero, out_size, pair, window_index
from .pad import pad

__all__ = ["conv2d", "conv2d_nchw", "conv2d_nhwc", "get_pad_tuple"]

Padding = Union[int, str, Sequence[Any]]


def get_pad_tuple(padding: Padding, kernel: Sequence[Any]) -> tuple[Any, Any, Any, Any]:
    """``(top, left, bottom, right)`` for a padding spec and a (dilated) kernel size ``(kh, kw)``.

    >>> get_pad_tuple(1, (3, 3)), get_pad_tuple((1, 2), (3, 3)), get_pad_tuple("SAME", (4, 3))
    ((1, 1, 1, 1), (1, 2, 1, 2), (2, 1, 1, 1))
    """
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() != "SAME":
            raise LoomValueError(f"padding must be an int, a pair, four ints, 'SAME' or 'VALID', got {padding!r}")
        total_h, total_w = kernel[0] - 1, kernel[1] - 1
        top, left = (total_h + 1) // 2, (total_w + 1) // 2
        return top, left, total_h - top, total_w - left
    if isinstance(padding, (list, tuple)):
        if len(padding) == 4:
            return padding[0], padding[1], padding[2], padding[3]
        if len(padding) == 2:
            return padding[0], padding[1], padding[0], padding[1]
        raise LoomValueError(f"padding must be an int, a pair or four ints, got {padding!r}")
    if isinstance(padding, bool) or not isinstance(padding, (int, E.PrimExpr)):
        raise LoomTypeError(f"padding must be an int, a pair, four ints, 'SAME' or 'VALID', got {type(padding).__name__}")
    return padding, padding, padding, padding


def _check(data: Tensor, kernel: Tensor, what: str) -> None:
    for t, role in ((data, "data"), (kernel, "kernel")):
        if not isinstance(t, Tensor):
            raise LoomTypeError(f"{what}: {role} must be a Tensor, got {type(t).__name__}")
        if t.ndim != 4:
            raise LoomValueError(f"{what}: {role} must have 4 dimensions, got shape {list(t.shape)}")


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: Any, padding: Padding, dilation: Any = 1,
                out_dtype: str | None = None) -> Tensor:
    """Convolution of NCHW ``data`` with an OIHW ``kernel`` (tag ``"conv2d_nchw"``)."""
    what = "conv2d_nchw"
    _check(data, kernel, what)
    out_dtype = out_dtype or data.dtype
    stride_h, stride_w = pair(stride, "stride", what)
    dil_h, dil_w = pair(dilation, "dilation", what)
    batch, in_c, height, width = data.shape
    out_c, k_in_c, kh, kw = kernel.shape
    _same_channels(in_c, k_in_c, "conv2d_nchw")
    dkh, dkw = (kh - 1) * dil_h + 1, (kw - 1) * dil_w + 1
    top, left, bottom, right = get_pad_tuple(padding, (dkh, dkw))
    out_h = out_size(height, dkh, top, bottom, stride_h)
    out_w = out_size(width, dkw, left, right, stride_w)
    padded = _pad(data, [0, 0, top, left], [0, 0, bottom, right])
    rc = reduce_axis((0, in_c), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    return compute(
        (batch, out_c, out_h, out_w),
        lambda n, f, y, x: te_sum(
            padded[n, rc, window_index(y, stride_h, ry, dil_h), window_index(x, stride_w, rx, dil_w)].astype(out_dtype)
            * kernel[f, rc, ry, rx].astype(out_dtype), axis=[rc, ry, rx]),
        name="conv2d_nchw", tag=tag.CONV2D_NCHW)


def conv2d_nhwc(data: Tensor, kernel: Tensor, stride: Any, padding: Padding, dilation: Any = 1,
                out_dtype: str | None = None) -> Tensor:
    """Convolution of NHWC ``data`` with an HWIO ``kernel`` (tag ``"conv2d_nhwc"``)."""
    what = "conv2d_nhwc"
    _check(data, kernel, what)
    out_dtype = out_dtype or data.dtype
    stride_h, stride_w = pair(stride, "stride", what)
    dil_h, dil_w = pair(dilation, "dilation", what)
    batch, height, width, in_c = data.shape
    kh, kw, k_in_c, out_c = kernel.shape
    _same_channels(in_c, k_in_c, "conv2d_nhwc")
    dkh, dkw = (kh - 1) * dil_h + 1, (kw - 1) * dil_w + 1
    top, left, bottom, right = get_pad_tuple(padding, (dkh, dkw))
    out_h = out_size(height, dkh, top, bottom, stride_h)
    out_w = out_size(width, dkw, left, right, stride_w)
    padded = _pad(data, [0, top, left, 0], [0, bottom, right, 0])
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    rc = reduce_axis((0, in_c), name="rc")
    return compute(
        (batch, out_h, out_w, out_c),
        lambda n, y, x, f: te_sum(
            padded[n, window_index(y, stride_h, ry, dil_h), window_index(x, stride_w, rx, dil_w), rc].astype(out_dtype)
            * kernel[ry, rx, rc, f].astype(out_dtype), axis=[ry, rx, rc]),
        name="conv2d_nhwc", tag=tag.CONV2D_NHWC)


def conv2d(data: Tensor, kernel: Tensor, strides: Any, padding: Padding, dilation: Any = 1,
           layout: str = "NCHW", out_dtype: str | None = None) -> Tensor:
    """2-D convolution; ``layout`` is ``"NCHW"`` (OIHW kernel) or ``"NHWC"`` (HWIO kernel)."""
    if layout == "NCHW":
        return conv2d_nchw(data, kernel, strides, padding, dilation, out_dtype)
    if layout == "NHWC":
        return conv2d_nhwc(data, kernel, strides, padding, dilation, out_dtype)
    raise LoomValueError(f"conv2d: layout must be 'NCHW' or 'NHWC', got {layout!r}")


def _same_channels(data_c: Any, kernel_c: Any, what: str) -> None:
    if isinstance(data_c, E.IntImm) and isinstance(kernel_c, E.IntImm) and data_c.value != kernel_c.value:
        raise LoomValueError(f"{what}: the data has {data_c.value} input channels but the kernel takes {kernel_c.value}")


def _pad(data: Tensor, before: list[Any], after: list[Any]) -> Tensor:
    """The padded input, or ``data`` itself when every width is zero (no stage to schedule)."""
    if all(is_zero(w) for w in before + after):
        return data
    return pad(data, before, after, name="pad_temp")
