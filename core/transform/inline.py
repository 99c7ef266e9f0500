"""``inline``: replace the reads of an operation's output by its body (TVM's ``ir_pass.Inline``).

Schedules inline a stage with ``s[T].compute_inline()``; this is the same
substitution on a statement or expression written by hand: every read
``T[i, j]`` of the operation's output becomes ``body`` with ``args`` bound to
``i, j``.  Repeated bindings the copies bring in (a ``Let`` inside the body)
are renamed, so the result stays in SSA form.

>>> import loom
>>> from loom.ir import Evaluate
>>> A = loom.placeholder((16,), name="A")
>>> T = loom.compute((16,), lambda i: A[i] + 10, name="T")
>>> print(inline(Evaluate(T[3] + 2 * T[5]), T.op, [iv.var for iv in T.op.axis], T.op.body[0]))
A[3] + 10.0 + 2.0 * (A[5] + 10.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.functor import Mutator, substitute
from ..ir.producer import ProducerLoad
from ..ir.reduce import Reduce
from .ssa import convert_ssa

__all__ = ["inline"]

N = TypeVar("N", S.Stmt, E.PrimExpr)


class _Inline(Mutator):
    def __init__(self, op: Any, args: list[E.Var], body: E.PrimExpr) -> None:
        self.op, self.args, self.body = op, args, body

    def visit_ProducerLoad(self, node: ProducerLoad) -> Any:
        node = self.generic_visit(node)
        if getattr(node.producer, "op", None) is not self.op:
            return node
        return substitute(self.body, dict(zip(self.args, node.indices)))


def inline(node: N, op: Any, args: Sequence[E.Var], body: E.PrimExpr) -> N:
    """``node`` (a statement or expression) with every read of ``op``'s output replaced by ``body``,
    whose variables ``args`` stand for the read's indices (see the module docstring).

    :raises LoomTypeError: when ``node``, ``op``, ``args`` or ``body`` has the wrong type.
    :raises LoomValueError: for a reduction body or a count of ``args`` other than the output's rank.
    """
    from ..te.tensor import Operation  # te imports the transforms: import on use

    if not isinstance(node, (S.Stmt, E.PrimExpr)):
        raise LoomTypeError(f"inline: the first argument must be a statement or expression, got {type(node).__name__}")
    if not isinstance(op, Operation):
        raise LoomTypeError(f"inline: op must be an operation (T.op), got {type(op).__name__}")
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence) or not all(isinstance(a, E.Var) for a in args):
        raise LoomTypeError(f"inline: args must be a list of variables (the body's index variables), got {args!r}")
    if not isinstance(body, E.PrimExpr):
        raise LoomTypeError(f"inline: body must be an expression, got {type(body).__name__}")
    if isinstance(body, Reduce):
        raise LoomValueError(f"inline: the body of {op.name} is a reduction, which cannot be inlined into a read")
    ndim = len(op.output(0).shape)
    if len(args) != ndim:
        raise LoomValueError(f"inline: {op.name}'s output has {ndim} dimension(s), given {len(args)} variable(s)")
    return convert_ssa(_Inline(op, list(args), body).visit(node))
