"""``loom.topi``: a small operator library with schedules per target (TVM's ``topi``).

The operators are tensor-expression functions (``compute`` stages with a tag);
the schedules in :mod:`loom.topi.generic` pick loops for the target in scope.

* elementwise and broadcasting arithmetic: :func:`add`, :func:`subtract`, ... (the
  same as ``A + B`` on tensors);
* :mod:`loom.topi.nn`: ``conv2d`` (NCHW, NHWC), ``pool`` (max, avg), ``pad``, ``relu``;
* :mod:`loom.topi.generic`: ``schedule_injective``, ``schedule_conv2d_nchw``, ...;
* :mod:`loom.topi.tag`, :mod:`loom.topi.util` (``get_const_tuple``) and
  :mod:`loom.topi.testing` (numpy references).

>>> import loom
>>> from loom import topi
>>> A = loom.placeholder((1, 3, 8, 8), name="A")
>>> W = loom.placeholder((8, 3, 3, 3), name="W")
>>> B = topi.nn.relu(topi.nn.conv2d(A, W, strides=1, padding=1))
>>> with loom.Target("llvm"):
...     s = topi.generic.schedule_conv2d_nchw(B)
>>> f = loom.build(s, [A, W, B], "llvm")
"""

from ..te.tensor_ops import (add, broadcast_shape, divide, floor_divide, floor_mod, maximum, minimum, multiply,
                             negative, subtract)
from . import generic, nn, tag, testing, util

__all__ = ["add", "subtract", "multiply", "divide", "floor_divide", "floor_mod", "maximum", "minimum", "negative",
           "broadcast_shape", "generic", "nn", "tag", "testing", "util"]
