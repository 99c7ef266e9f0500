"""numpy references for topi's operators, to check a build against.

>>> import numpy as np
>>> from loom.topi.testing import conv2d_nchw_python
>>> a = np.ones((1, 1, 4, 4), "float32"); w = np.ones((2, 1, 3, 3), "float32")
>>> conv2d_nchw_python(a, w, 1, 1)[0, 0]
array([[4., 6., 6., 4.],
       [6., 9., 9., 6.],
       [6., 9., 9., 6.],
       [4., 6., 6., 4.]], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .nn.conv2d import get_pad_tuple

__all__ = ["conv2d_nchw_python", "conv2d_nhwc_python", "pool_nchw_python"]


def _pair(value: Any) -> tuple[int, int]:
    return (int(value[0]), int(value[1])) if isinstance(value, (list, tuple)) else (int(value), int(value))


def conv2d_nchw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                       dilation: Any = 1) -> np.ndarray:
    """Convolution of NCHW ``a_np`` with an OIHW ``w_np``, as :func:`loom.topi.nn.conv2d_nchw` computes it."""
    sh, sw = _pair(stride)
    dh, dw = _pair(dilation)
    _, _, kh, kw = w_np.shape
    top, left, bottom, right = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    padded = np.pad(a_np, ((0, 0), (0, 0), (top, bottom), (left, right)))
    out_h = (padded.shape[2] - (kh - 1) * dh - 1) // sh + 1
    out_w = (padded.shape[3] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((a_np.shape[0], w_np.shape[0], out_h, out_w), dtype=np.result_type(a_np, w_np))
    for ry in range(kh):
        for rx in range(kw):
            patch = padded[:, :, ry * dh: ry * dh + (out_h - 1) * sh + 1: sh, rx * dw: rx * dw + (out_w - 1) * sw + 1: sw]
            out += np.einsum("nchw,fc->nfhw", patch, w_np[:, :, ry, rx])
    return out


def conv2d_nhwc_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                       dilation: Any = 1) -> np.ndarray:
    """Convolution of NHWC ``a_np`` with an HWIO ``w_np``."""
    out = conv2d_nchw_python(a_np.transpose(0, 3, 1, 2), w_np.transpose(3, 2, 0, 1), stride, padding, dilation)
    return out.transpose(0, 2, 3, 1)


def pool_nchw_python(a_np: np.ndarray, kernel: Any, stride: Any, padding: Any, pool_type: str,
                     ceil_mode: bool = False, count_include_pad: bool = True) -> np.ndarray:
    """Max or average pooling of NCHW ``a_np``; ``padding`` is ``(top, left, bottom, right)``."""
    kh, kw = _pair(kernel)
    sh, sw = _pair(stride)
    top, left, bottom, right = (int(p) for p in padding)
    height, width = a_np.shape[2:]
    if ceil_mode:
        bottom, right = bottom + sh - 1, right + sw - 1
    out_h = (height + top + bottom - kh) // sh + 1
    out_w = (width + left + right - kw) // sw + 1
    out = np.empty(a_np.shape[:2] + (out_h, out_w), dtype=a_np.dtype)
    for y in range(out_h):
        for x in range(out_w):
            y0, x0 = y * sh - top, x * sw - left
            window = a_np[:, :, max(y0, 0):min(y0 + kh, height), max(x0, 0):min(x0 + kw, width)]
            if pool_type == "max":
                out[:, :, y, x] = window.max(axis=(2, 3))
            else:
                count = kh * kw if count_include_pad else max(window.shape[2] * window.shape[3], 1)
                out[:, :, y, x] = window.sum(axis=(2, 3)) / count
    return out
