"""Pre-order collection, the one traversal the generic functors do not offer.

The generic visitors of :mod:`loom.ir.functor` stop at a ``Tensor`` (its
``op`` is a reference field), so they serve te code directly.  Their
:func:`~loom.ir.functor.collect` is post-order (children first), while te
code wants outermost-first results: the loops of a nest from the outside in,
and the tensors a body reads in the order of its loads (``A[B[i]]`` reads
``A`` before ``B``).

>>> import loom
>>> from loom.ir import For, Evaluate
>>> i, j = loom.var("i"), loom.var("j")
>>> nest = For(i, 0, 2, "serial", For(j, 0, 3, "serial", Evaluate(i + j)))
>>> [str(f.loop_var) for f in te_collect(nest, lambda n: isinstance(n, For))]
['i', 'j']
"""

from __future__ import annotations

from typing import Any, Callable

from ..ir.functor import Visitor

__all__ = ["te_collect"]


class _PreOrder(Visitor):
    def __init__(self, pred: Callable[[Any], bool]) -> None:
        self.pred = pred
        self.found: list[Any] = []

    def generic_visit(self, node: Any) -> None:
        if self.pred(node):
            self.found.append(node)
        super().generic_visit(node)


def te_collect(node: Any, pred: Callable[[Any], bool]) -> list[Any]:
    """Every node below ``node`` (pre-order, outermost first, repeats included) for which ``pred`` holds."""
    c = _PreOrder(pred)
    c.visit(node)
    return c.found
