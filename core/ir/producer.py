"""IR nodes that read and write tensors before storage is flattened.

The schedule lowers each stage to ``ProducerRealize`` (an allocation of the
region the consumers need) around ``ProducerStore``\\ s, and compute bodies
read inputs through ``ProducerLoad``.  Storage flattening turns them into
``Allocate`` / ``BufferStore`` / ``BufferLoad`` over buffers.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..errors import IRError
from .dtype import DataType
from . import expr as E
from .node import TupleOf, child, children, register_object
from .node import value as val
from .printer import ATOM, INDENT, register_expr_printer, register_stmt_printer
from .stmt import Stmt, _expr

__all__ = ["ProducerLoad", "ProducerStore", "ProducerRealize"]


def _tensor_type() -> type:
    from ..te.tensor import Tensor

    return Tensor


def _check_indices(what: str, tensor: Any, indices: tuple[E.PrimExpr, ...]) -> None:
    if len(indices) != len(tensor.shape):
        raise IRError(f"{what} {tensor.name}: {len(indices)} indices for {len(tensor.shape)} dimensions")
    for i in indices:
        if not i.dtype.is_integer:
            raise IRError(f"{what} {tensor.name}: index {i} has non-integer dtype {i.dtype}")


@register_object("tir.ProducerLoad")
class ProducerLoad(E.PrimExpr):
    """Read ``producer[indices]`` (a te Tensor)."""

    producer: Any = child(_tensor_type)
    indices: E.ExprTuple = children(E.PrimExpr, element_converter=_expr)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        _check_indices("load of", self.producer, self.indices)
        object.__setattr__(self, "dtype", self.producer.dtype)


@register_object("tir.ProducerStore")
class ProducerStore(Stmt):
    """Write ``value`` to ``producer[indices]``."""

    producer: Any = child(_tensor_type)
    value: E.ExprField = child(E.PrimExpr, converter=_expr)
    indices: E.ExprTuple = children(E.PrimExpr, element_converter=_expr)

    def __attrs_post_init__(self) -> None:
        _check_indices("store to", self.producer, self.indices)
        if self.value.dtype != self.producer.dtype:
            raise IRError(f"store to {self.producer.name}: value is {self.value.dtype}, tensor is {self.producer.dtype}")


@register_object("tir.ProducerRealize")
class ProducerRealize(Stmt):
    """Make storage for the region ``bounds`` of ``producer`` available to ``body``."""

    producer: Any = child(_tensor_type)
    bounds: TupleOf[E.Range] = children(E.Range)
    condition: E.ExprField = child(E.PrimExpr, converter=_expr)
    body: Stmt = child(Stmt)
    storage_scope: str = val(str, default="")

    def __attrs_post_init__(self) -> None:
        if len(self.bounds) != len(self.producer.shape):
            raise IRError(f"realize {self.producer.name}: {len(self.bounds)} bounds for {len(self.producer.shape)} dimensions")


def _name(p: Any, t: Any) -> str:
    return p.name(t, t.name)


def _realize(p: Any, s: ProducerRealize, depth: int, out: list[str]) -> None:
    region = ", ".join(f"{p.expr(r.min)}:{p.end(r.min, r.extent)}" for r in s.bounds)
    scope = f" in {s.storage_scope!r}" if s.storage_scope else ""
    cond = "" if isinstance(s.condition, E.IntImm) and s.condition.value == 1 else f" if {p.expr(s.condition)}"
    out.append(f"{INDENT * depth}realize {_name(p, s.producer)}[{region}]{scope}{cond}:")
    p.block(s.body, depth + 1, out)


register_expr_printer(ProducerLoad, lambda p, e: (f"{_name(p, e.producer)}[{', '.join(p.expr(i) for i in e.indices)}]", ATOM))
register_stmt_printer(ProducerStore, lambda p, s, depth, out: out.append(
    f"{INDENT * depth}{_name(p, s.producer)}[{', '.join(p.expr(i) for i in s.indices)}] = {p.expr(s.value)}"))
register_stmt_printer(ProducerRealize, _realize)
