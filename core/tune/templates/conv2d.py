"""``conv2d_nchw``: the CPU direct-convolution template (NCHW data, OIHW weights).

The input is padded into its own stage first (in parallel over batch and
channels).  Each block of ``ff`` output channels x ``yy`` rows x ``xx`` columns
accumulates in a ``local`` cache over the whole reduction (``rc, ry, rx`` in the
order a knob picks), its channels and rows unrolled or not, its columns
vectorized; the blocks run in parallel over (batch, channel tile, row tile).
The knobs:

- ``tile_f``: output channels of a block (``[-1, ff]``), a factor of ``CO`` up to 16;
- ``tile_y``: output rows of a block (``[-1, yy]``), 1, 2 or 4 where they divide;
- ``tile_x``: output columns of a block, vectorized (``[-1, xx]``), a factor of the width;
- ``reorder_rc``: the order of the reduction loops ``rc, ry, rx``;
- ``ann_acc``: unroll the block's channels and rows, or not.

The hand schedule of ``bench/kernels.py`` (8 channels x 8 columns, ``rc, ry, rx``,
channels unrolled) is the fallback, where the sizes allow it.

>>> import numpy as np, loom
>>> from loom.tune import Task
>>> task = Task(conv2d_nchw, (1, 4, 10, 10, 8, 3, 3), target="llvm")
>>> s, args = task.instantiate()                     # the fallback config
>>> [tuple(int(d) for d in t.shape) for t in args]
[(1, 4, 10, 10), (8, 4, 3, 3), (1, 8, 10, 10)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import LoomValueError
from ...ir.expr_ops import all as all_of, const
from ...ir.intrin import if_then_else
from ...te import compute, create_schedule, placeholder, reduce_axis, sum as te_sum
from ..knobs import AnnotateEntity, ReorderEntity, SplitEntity
from ..task import template
from .matmul import check_dims, factors_between, nearest_at_most

__all__ = ["conv2d_nchw", "conv2d_reference", "conv2d_output_size"]

#: Output channels per block: ``ff`` accumulator vectors must fit the registers.
MAX_CHANNELS = 16
#: Output columns per block (the vector width, at most a few vectors).
MAX_COLUMNS = 64


def conv2d_output_size(size: int, kernel: int, stride: int, pad: int) -> int:
    """The output length of one spatial axis.

    >>> conv2d_output_size(56, 3, 1, 1), conv2d_output_size(56, 3, 2, 1)
    (56, 28)
    """
    return (size + 2 * pad - kernel) // stride + 1


@template(name="loom.conv2d_nchw")
def conv2d_nchw(cfg: Any, N: int, CI: int, H: int, W: int, CO: int, KH: int, KW: int, stride: int = 1,
                pad: int = 1, dtype: str = "float32") -> tuple[Any, list]:
    """The CPU convolution template (see the module docstring for its knobs); returns the
    schedule and ``[data, weight, output]``.

    >>> from loom.tune import ConfigSpace
    >>> space = ConfigSpace(); _ = conv2d_nchw(space, 1, 64, 56, 56, 64, 3, 3)
    >>> len(space), sorted(space.space_map)
    (1728, ['ann_acc', 'reorder_rc', 'tile_f', 'tile_x', 'tile_y'])
    """
    where = "loom.tune.templates.conv2d_nchw"
    check_dims(where, N=N, CI=CI, H=H, W=W, CO=CO, KH=KH, KW=KW, stride=stride)
    if isinstance(pad, bool) or not isinstance(pad, (int, np.integer)) or pad < 0:
        raise LoomValueError(f"{where}: pad must be an int of at least 0, got {pad!r}")
    oh, ow = conv2d_output_size(H, KH, stride, pad), conv2d_output_size(W, KW, stride, pad)
    if oh < 1 or ow < 1:
        raise LoomValueError(f"{where}: a {KH}x{KW} kernel does not fit a {H}x{W} input padded by {pad}")
    chans = factors_between(CO, 2, MAX_CHANNELS)
    rows = factors_between(oh, 1, 4)
    cols = factors_between(ow, 4, MAX_COLUMNS)
    cfg.define_split("tile_f", CO, num_outputs=2, filter=lambda e: e.size[-1] in chans)
    cfg.define_split("tile_y", oh, num_outputs=2, filter=lambda e: e.size[-1] in rows)
    cfg.define_split("tile_x", ow, num_outputs=2, filter=lambda e: e.size[-1] in cols)
    cfg.define_reorder("reorder_rc", [0, 1, 2], policy="all")
    cfg.define_annotate("ann_acc", [0, 1], policy="try_unroll")
    if cfg.is_fallback:
        cfg["tile_f"] = SplitEntity([-1, nearest_at_most(chans, 8)])
        cfg["tile_y"] = SplitEntity([-1, 1])
        cfg["tile_x"] = SplitEntity([-1, nearest_at_most(cols, 8)])
        cfg["reorder_rc"] = ReorderEntity([0, 1, 2])
        cfg["ann_acc"] = AnnotateEntity(["unroll", "none"])
    cfg.add_flop(2.0 * N * CO * oh * ow * CI * KH * KW)

    data = placeholder((N, CI, H, W), dtype, name="data")
    weight = placeholder((CO, CI, KH, KW), dtype, name="weight")
    padded: Any = data
    if pad:
        padded = compute(
            (N, CI, H + 2 * pad, W + 2 * pad),
            lambda b, c, y, x: if_then_else(all_of(y >= pad, y < H + pad, x >= pad, x < W + pad),
                                            data[b, c, y - pad, x - pad], const(0, dtype)),
            name="padded")
    rc = reduce_axis((0, CI), name="rc")
    ry = reduce_axis((0, KH), name="ry")
    rx = reduce_axis((0, KW), name="rx")
    out = compute(
        (N, CO, oh, ow),
        lambda b, f, y, x: te_sum(padded[b, rc, y * stride + ry, x * stride + rx] * weight[f, rc, ry, rx],
                                  axis=[rc, ry, rx]),
        name="conv")

    s = create_schedule(out.op)
    if pad:
        pb, pc, _, _ = padded.op.axis
        s[padded].parallel(s[padded].fuse(pb, pc))
    acc = s.cache_write(out, "local")
    b, f, y, x = out.op.axis
    fo, fi = cfg["tile_f"].apply(s, out, f)
    yo, yi = cfg["tile_y"].apply(s, out, y)
    xo, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(b, fo, yo, xo, fi, yi, xi)
    s[out].parallel(s[out].fuse(b, fo, yo))
    s[out].vectorize(xi)
    s[acc].compute_at(s[out], xo)

    _, af, ay, ax = s[acc].op.axis
    red = list(s[acc].op.reduce_axis)
    s[acc].reorder(*[red[i] for i in cfg["reorder_rc"].perm], af, ay, ax)
    cfg["ann_acc"].apply(s, acc, [af, ay])
    s[acc].vectorize(ax)
    return s, [data, weight, out]


def conv2d_reference(data: np.ndarray, weight: np.ndarray, stride: int = 1, pad: int = 1) -> list[np.ndarray]:
    """The expected output of :func:`conv2d_nchw`, computed in float64 by summing shifted
    slices (a plain loop over the kernel; for checking, not speed).

    >>> d = np.ones((1, 1, 3, 3), "float32"); w = np.ones((1, 1, 3, 3), "float32")
    >>> conv2d_reference(d, w)[0][0, 0].tolist()
    [[4.0, 6.0, 4.0], [6.0, 9.0, 6.0], [4.0, 6.0, 4.0]]
    """
    n, c, h, w = data.shape
    f, _, kh, kw = weight.shape
    oh, ow = conv2d_output_size(h, kh, stride, pad), conv2d_output_size(w, kw, stride, pad)
    padded = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, f, oh, ow))
    wt = weight.astype(np.float64)
    for dy in range(kh):
        for dx in range(kw):
            window = padded[:, :, dy:dy + stride * (oh - 1) + 1:stride, dx:dx + stride * (ow - 1) + 1:stride]
            out += np.einsum("nchw,fc->nfhw", window, wt[:, :, dy, dx])
    return [out.astype(data.dtype)]
