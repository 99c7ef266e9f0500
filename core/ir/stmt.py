"""Statement nodes of the tensor IR.

>>> import loom
>>> from loom.ir import For, BufferStore
>>> A = loom.decl_buffer((8,), "float32", name="A")
>>> i = loom.var("i")
>>> loop = For(i, 0, 8, "serial", BufferStore(A, loom.const(0.0), [i]))
>>> loop.kind.value
'serial'
"""

from __future__ import annotations

from typing import Any

from ..errors import IRError
from .buffer import Buffer
from .dtype import DataType
from . import expr as E
from .expr_ops import convert_expr
from .node import Converted, DictOf, Node, StrEnum, TupleOf, abstract_node, child, children, mapping, register_object
from .node import value as val

__all__ = [
    "Stmt", "LetStmt", "AttrStmt", "AssertStmt", "BufferStore", "Allocate", "ForKind", "For",
    "While", "IfThenElse", "Evaluate", "SeqStmt", "seq", "no_op",
]


@abstract_node
class Stmt(Node):
    """Base of statements."""


def _expr(v: Any) -> Any:
    return convert_expr(v) if isinstance(v, (bool, int, float)) else v


@register_object("tir.LetStmt")
class LetStmt(Stmt):
    """Bind ``var`` to ``value`` within ``body``."""

    var: E.Var = child(E.Var, binds=True)
    value: E.ExprField = child(E.PrimExpr, converter=_expr)
    body: Stmt = child(Stmt)

    def __attrs_post_init__(self) -> None:
        if self.var.dtype != self.value.dtype:
            raise IRError(f"LetStmt {self.var.name}: var is {self.var.dtype} but value is {self.value.dtype}")


@register_object("tir.AttrStmt")
class AttrStmt(Stmt):
    """Annotate ``body`` with ``attr_key = value`` about ``node``.

    Used for thread extents (``thread_extent``), pragmas, storage scopes,
    storage alignment and double buffering.
    """

    node: Any = child(Node, nullable=True)
    attr_key: str = val(str)
    value: Converted[E.PrimExpr, E.PrimExpr | int | float | str] = child(
        E.PrimExpr, converter=lambda v: E.StringImm(v) if isinstance(v, str) else _expr(v))
    body: Stmt = child(Stmt)


@register_object("tir.AssertStmt")
class AssertStmt(Stmt):
    """Check ``condition``; when false the function fails with ``message``."""

    condition: E.ExprField = child(E.PrimExpr, converter=_expr)
    message: Converted[E.PrimExpr, E.PrimExpr | str] = child(
        E.PrimExpr, converter=lambda v: E.StringImm(v) if isinstance(v, str) else v)
    body: Stmt = child(Stmt)

    def __attrs_post_init__(self) -> None:
        if not self.condition.dtype.is_bool:
            raise IRError(f"AssertStmt condition must be bool, got {self.condition.dtype}")


@register_object("tir.BufferStore")
class BufferStore(Stmt):
    """Write ``value`` to ``buffer[indices]``; vector indices store several lanes."""

    buffer: Buffer = child(Buffer)
    value: E.ExprField = child(E.PrimExpr, converter=_expr)
    indices: E.ExprTuple = children(E.PrimExpr, element_converter=_expr)

    def __attrs_post_init__(self) -> None:
        if len(self.indices) != len(self.buffer.shape) and self.buffer.shape:
            raise IRError(f"store to {self.buffer.name}: {len(self.indices)} indices for {len(self.buffer.shape)} dimensions")
        for i in self.indices:
            if not i.dtype.is_integer:
                raise IRError(f"store to {self.buffer.name}: index {i} has non-integer dtype {i.dtype}")
        lanes = max([i.dtype.lanes for i in self.indices] or [1]) * self.buffer.dtype.lanes
        want = self.buffer.dtype.with_lanes(lanes)
        if self.value.dtype != want:
            raise IRError(f"store to {self.buffer.name}: value is {self.value.dtype}, buffer element is {want}")


@register_object("tir.Allocate")
class Allocate(Stmt):
    """Allocate ``prod(extents)`` elements of ``dtype`` named by ``buffer_var`` for ``body``."""

    buffer_var: E.Var = child(E.Var, binds=True)
    dtype: E.DTypeField = val(DataType, converter=DataType.of)
    extents: E.ExprTuple = children(E.PrimExpr, element_converter=_expr)
    condition: E.ExprField = child(E.PrimExpr, converter=_expr)
    body: Stmt = child(Stmt)
    scope: str = val(str, default="global")
    annotations: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        if not self.buffer_var.dtype.is_handle:
            raise IRError(f"Allocate {self.buffer_var.name}: buffer_var must be a handle Var")


class ForKind(StrEnum):
    """How a loop runs."""

    SERIAL = "serial"
    UNROLLED = "unrolled"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    THREAD_BINDING = "thread_binding"


def _for_kind(v: Any) -> ForKind:
    try:
        return ForKind(v)
    except ValueError:
        raise IRError(f"unknown loop kind {v!r}; expected one of {[k.value for k in ForKind]}") from None


@register_object("tir.For")
class For(Stmt):
    """``for loop_var in range(min, min + extent): body``, run as ``kind`` says.

    A ``thread_binding`` loop names its thread in ``thread_tag``
    (``"threadIdx.x"``).
    """

    loop_var: E.Var = child(E.Var, binds=True)
    min: E.ExprField = child(E.PrimExpr, converter=_expr)
    extent: E.ExprField = child(E.PrimExpr, converter=_expr)
    kind: Converted[ForKind, ForKind | str] = val(ForKind, default=ForKind.SERIAL, converter=lambda v: _for_kind(v))
    body: Stmt = child(Stmt, default=None)
    thread_tag: str = val(str, default="")
    annotations: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        if self.body is None:
            raise IRError("For needs a body")
        t = self.loop_var.dtype
        for name in ("min", "extent"):
            e = getattr(self, name)
            if isinstance(e, E.IntImm) and e.dtype.is_integer and t.is_integer and e.dtype.bits < t.bits:
                # A narrower constant (a Python int) takes the loop var's dtype, as in TVM.
                e = E.IntImm(t, e.value)
                object.__setattr__(self, name, e)
            if e.dtype != t:
                raise IRError(f"For {self.loop_var.name}: {name} is {e.dtype} but the loop var is {self.loop_var.dtype}")
        if self.kind is ForKind.THREAD_BINDING and not self.thread_tag:
            raise IRError(f"For {self.loop_var.name}: a thread_binding loop needs a thread_tag")


@register_object("tir.While")
class While(Stmt):
    """``while condition: body``"""

    condition: E.ExprField = child(E.PrimExpr, converter=_expr)
    body: Stmt = child(Stmt)

    def __attrs_post_init__(self) -> None:
        if not self.condition.dtype.is_bool or self.condition.dtype.lanes != 1:
            raise IRError(f"While condition must be a scalar bool, got {self.condition.dtype}")


@register_object("tir.IfThenElse")
class IfThenElse(Stmt):
    """``if condition: then_case else: else_case`` (``else_case`` may be None)."""

    condition: E.ExprField = child(E.PrimExpr, converter=_expr)
    then_case: Stmt = child(Stmt)
    else_case: Stmt | None = child(Stmt, optional=True, default=None)

    def __attrs_post_init__(self) -> None:
        if not self.condition.dtype.is_bool or self.condition.dtype.lanes != 1:
            raise IRError(f"IfThenElse condition must be a scalar bool, got {self.condition.dtype}")


@register_object("tir.Evaluate")
class Evaluate(Stmt):
    """Evaluate an expression for its effect (an extern call)."""

    value: E.ExprField = child(E.PrimExpr, converter=_expr)


@register_object("tir.SeqStmt")
class SeqStmt(Stmt):
    """Statements run in order."""

    seq: TupleOf[Stmt] = children(Stmt)

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, i: int) -> Stmt:
        return self.seq[i]

    # TVM 0.6 chained statements as Block(first, rest); these read a SeqStmt the same way.
    @property
    def first(self) -> Stmt:
        """The first statement (TVM 0.6's ``Block.first``)."""
        return self.seq[0]

    @property
    def rest(self) -> Stmt:
        """The statements after the first: the second alone, or a SeqStmt (TVM 0.6's ``Block.rest``).

        >>> from loom.ir import Evaluate, SeqStmt
        >>> s = SeqStmt([Evaluate(1), Evaluate(2), Evaluate(3)])
        >>> s.first.value.value, s.rest.first.value.value, s.rest.rest.value.value
        (1, 2, 3)
        """
        return self.seq[1] if len(self.seq) == 2 else SeqStmt(self.seq[1:])


def no_op() -> Stmt:
    """The empty statement."""
    return Evaluate(E.IntImm("int32", 0))


def seq(*stmts: Stmt | None) -> Stmt:
    """Sequence statements, flattening nested SeqStmts and dropping None."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if not flat:
        return no_op()
    return flat[0] if len(flat) == 1 else SeqStmt(flat)
