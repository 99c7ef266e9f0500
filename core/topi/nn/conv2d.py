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

from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Window:
    """Where a convolution's window reads the padded data: ``row(y, ry)``, ``col(x, rx)``."""

    padded: Tensor
    out_h: E.PrimExpr
    out_w: E.PrimExpr
    stride: tuple[Any, Any]
    dilation: tuple[Any, Any]

    def row(self, y: Any, ry: Any) -> E.PrimExpr:
        return window_index(y, self.stride[0], ry, self.dilation[0])

    def col(self, x: Any, rx: Any) -> E.PrimExpr:
        return window_index(x, self.stride[1], rx, self.dilation[1])


def _window(what: str, data: Tensor, h_axis: int, kernel_hw: tuple[Any, Any], stride: Any, padding: Padding,
            dilation: Any) -> _Window:
    """The padded input and output size of a convolution whose H and W axes are ``h_axis``, ``h_axis + 1``."""
    stride_h, stride_w = pair(stride, "stride", what)
    dil_h, dil_w = pair(dilation, "dilation", what)
    kh, kw = kernel_hw
    dkh, dkw = (kh - 1) * dil_h + 1, (kw - 1) * dil_w + 1
    top, left, bottom, right = get_pad_tuple(padding, (dkh, dkw))
    before: list[Any] = [0] * data.ndim
    after: list[Any] = [0] * data.ndim
    before[h_axis], before[h_axis + 1], after[h_axis], after[h_axis + 1] = top, left, bottom, right
    return _Window(_pad(data, before, after),
                   out_size(data.shape[h_axis], dkh, top, bottom, stride_h),
                   out_size(data.shape[h_axis + 1], dkw, left, right, stride_w),
                   (stride_h, stride_w), (dil_h, dil_w))


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: Any, padding: Padding, dilation: Any = 1,
                out_dtype: str | None = None) -> Tensor:
    """Convolution of NCHW ``data`` with an OIHW ``kernel`` (tag ``"conv2d_nchw"``)."""
    what = "conv2d_nchw"
    _check(data, kernel, what)
    out_dtype = out_dtype or data.dtype
    batch, in_c, _, _ = data.shape
    out_c, k_in_c, kh, kw = kernel.shape
    _same_channels(in_c, k_in_c, what)
    win = _window(what, data, 2, (kh, kw), stride, padding, dilation)
    rc = reduce_axis((0, in_c), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    return compute(
        (batch, out_c, win.out_h, win.out_w),
        lambda n, f, y, x: te_sum(
            win.padded[n, rc, win.row(y, ry), win.col(x, rx)].astype(out_dtype)
            * kernel[f, rc, ry, rx].astype(out_dtype), axis=[rc, ry, rx]),
        name=what, tag=tag.CONV2D_NCHW)


def conv2d_nhwc(data: Tensor, kernel: Tensor, stride: Any, padding: Padding, dilation: Any = 1,
                out_dtype: str | None = None) -> Tensor:
    """Convolution of NHWC ``data`` with an HWIO ``kernel`` (tag ``"conv2d_nhwc"``)."""
    what = "conv2d_nhwc"
    _check(data, kernel, what)
    out_dtype = out_dtype or data.dtype
    batch, _, _, in_c = data.shape
    kh, kw, k_in_c, out_c = kernel.shape
    _same_channels(in_c, k_in_c, what)
    win = _window(what, data, 1, (kh, kw), stride, padding, dilation)
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    rc = reduce_axis((0, in_c), name="rc")
    return compute(
        (batch, win.out_h, win.out_w, out_c),
        lambda n, y, x, f: te_sum(
            win.padded[n, win.row(y, ry), win.col(x, rx), rc].astype(out_dtype)
            * kernel[ry, rx, rc, f].astype(out_dtype), axis=[ry, rx, rc]),
        name=what, tag=tag.CONV2D_NHWC)


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
