"""Operator tags: what kind of computation a compute is, for schedules to dispatch on.

Every operator of :mod:`loom.topi` (and Loom's tensor arithmetic, ``A + B``) tags its
compute; a schedule reads ``op.tag`` to decide how to treat the stage.  The names
and the prefix rule are TVM topi's (``"elemwise"``, ``"broadcast"``, ``"injective"``).

>>> import loom
>>> from loom.topi import tag
>>> A = loom.placeholder((4, 3), name="A")
>>> (A + 1.0).op.tag == tag.ELEMWISE, (A + A).op.tag == tag.BROADCAST
(True, True)
>>> tag.is_injective("broadcast"), tag.is_broadcast("injective")
(True, False)
"""

from __future__ import annotations

__all__ = ["ELEMWISE", "BROADCAST", "INJECTIVE", "COMM_REDUCE", "COMM_REDUCE_IDX", "CONV2D_NCHW",
           "CONV2D_NHWC", "POOL_MAX", "POOL_AVG", "POOL_SUM", "is_broadcast", "is_injective"]

#: Each output element from the same position of each input (``A + 1``).
ELEMWISE = "elemwise"
#: Elementwise with numpy broadcasting of the inputs' shapes (``A + B``).
BROADCAST = "broadcast"
#: Each output element reads its inputs at most once, anywhere (padding, transpose).
INJECTIVE = "injective"
#: A commutative reduction (``sum``, ``max``).
COMM_REDUCE = "comm_reduce"
#: A commutative reduction that returns an index (``argmax``).
COMM_REDUCE_IDX = "comm_reduce_idx"
CONV2D_NCHW = "conv2d_nchw"
CONV2D_NHWC = "conv2d_nhwc"
POOL_MAX = "pool_max"
POOL_AVG = "pool_avg"
#: The window sums of an average pool (its division is a separate elementwise stage).
POOL_SUM = "pool_sum"


def is_broadcast(tag: str) -> bool:
    """True for an elementwise or broadcast tag (or one that starts with either)."""
    return tag.startswith((ELEMWISE, BROADCAST))


def is_injective(tag: str) -> bool:
    """True for an elementwise, broadcast or injective tag (or one that starts with one of them)."""
    return tag.startswith((ELEMWISE, BROADCAST, INJECTIVE))
