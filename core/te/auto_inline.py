"""Whole-schedule inlining passes of TVM's classic API: ``AutoInlineElemWise`` and ``AutoInlineInjective``.

>>> import loom
>>> A = loom.placeholder((8,), name="A")
>>> B = loom.compute((8,), lambda i: A[i] + 1.0, name="B")
>>> C = loom.compute((8,), lambda i: B[i] * 2.0, name="C")
>>> s = loom.create_schedule(C.op)
>>> AutoInlineElemWise(s)
>>> s[B].attach_type, s[C].attach_type
('inline', 'root')
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir.producer import ProducerLoad
from ..ir.reduce import Reduce
from ._te_functor import te_collect
from .tensor import ComputeOp

__all__ = ["AutoInlineElemWise", "AutoInlineInjective", "is_elemwise", "is_injective"]


def is_injective(op: Any) -> bool:
    """A compute operation without reductions: each output element reads its inputs once."""
    return isinstance(op, ComputeOp) and not op.reduce_axis and not any(isinstance(b, Reduce) for b in op.body)


def is_elemwise(op: Any) -> bool:
    """An injective operation whose every read indexes its inputs by its own axes, in order."""
    if not is_injective(op):
        return False
    axes = [iv.var for iv in op.axis]
    for body in op.body:
        for load in te_collect(body, lambda n: isinstance(n, ProducerLoad)):
            idx = list(load.indices)
            if len(idx) != len(axes) or not all(isinstance(i, E.Var) and i is v for i, v in zip(idx, axes)):
                return False
    return True


def _inline_where(sch: Any, pred: Any) -> None:
    for stage in sch.stages:
        if not stage.is_output and stage.attach_type != "inline" and pred(stage.op):
            stage.compute_inline()


def AutoInlineElemWise(sch: Any) -> None:  # noqa: N802 (TVM's name)
    """Inline every non-output element-wise stage of ``sch`` into its consumers."""
    _inline_where(sch, is_elemwise)


def AutoInlineInjective(sch: Any) -> None:  # noqa: N802 (TVM's name)
    """Inline every non-output stage of ``sch`` that has no reduction."""
    _inline_where(sch, is_injective)
