"""Expression nodes of the tensor IR.

Every expression has a ``dtype``.  Where TVM derives it from the operands
(``Add``, ``LT``, ``Ramp``...) it is derived here too and is not a constructor
argument.  Python operators on expressions build nodes (see ``expr_ops``).

>>> x = Var("x", "int32")
>>> e = x * 4 + 1
>>> type(e).__name__, str(e.dtype)
('Add', 'int32')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Union

import attrs
import numpy as np

from ..errors import ExprTruthError, IRError
from .dtype import DataType, DTypeLike
from ._operators import ArithOperators
from .literals import expr_or_number_types, typed_literals
from .node import Converted, Node, TupleOf, abstract_node, child, children, register_object
from .node import value as val

__all__ = [
    "PrimExpr", "Var", "SizeVar", "IntImm", "FloatImm", "StringImm", "Cast",
    "BinaryOp", "Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max",
    "CmpOp", "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not", "Select",
    "BufferLoad", "Ramp", "Broadcast", "Shuffle", "Let", "Call", "Range", "IterVar",
    "ExprLike", "SupportsAsExpr",
]

_dtype = DataType.of


class SupportsAsExpr(Protocol):
    """An object that stands for an expression (an iteration variable, a tensor slice)."""

    def as_expr(self) -> PrimExpr: ...


#: What expression operators and builders accept: an expression, a Python or numpy
#: number, or an object with ``as_expr()``.
ExprLike = Union["PrimExpr", int, float, np.generic, SupportsAsExpr]
#: Field types whose constructor argument is converted: a dtype given as text, an
#: expression given as a Python number.
DTypeField = Converted[DataType, DTypeLike]
ExprField = Converted["PrimExpr", Union["PrimExpr", int, float]]
ExprTuple = Converted[tuple["PrimExpr", ...], Sequence[Union["PrimExpr", int, float]]]


def _set(obj: Any, name: str, v: Any) -> None:
    object.__setattr__(obj, name, v)


@abstract_node
class PrimExpr(ArithOperators, Node):
    """Base of scalar and vector expressions.  Operators build IR."""

    # Operator overloads are attached by ``expr_ops`` to keep this file about data.
    __hash__ = Node.__hash__  # identity; ``__eq__`` below builds an EQ node

    def __bool__(self) -> bool:
        raise ExprTruthError(
            f"cannot use the IR expression {self} as a Python bool; "
            "use loom.all/loom.any or loom.select, or compare with structural_equal"
        )

    @property
    def lanes(self) -> int:
        return self.dtype.lanes

    if TYPE_CHECKING:  # every expression has a dtype field; operators are attached by expr_ops
        @property
        def dtype(self) -> DataType: ...
        # An EQ/NE node for an expression or a number (object's __eq__ returns bool).
        def __eq__(self, other: object) -> PrimExpr: ...  # type: ignore[override]
        def __ne__(self, other: object) -> PrimExpr: ...  # type: ignore[override]
        def __and__(self, other: ExprLike) -> PrimExpr: ...
        def __rand__(self, other: ExprLike) -> PrimExpr: ...
        def __or__(self, other: ExprLike) -> PrimExpr: ...
        def __ror__(self, other: ExprLike) -> PrimExpr: ...
        def __invert__(self) -> PrimExpr: ...
        def __xor__(self, other: ExprLike) -> PrimExpr: ...
        def __rxor__(self, other: ExprLike) -> PrimExpr: ...
        def __lshift__(self, other: ExprLike) -> PrimExpr: ...
        def __rlshift__(self, other: ExprLike) -> PrimExpr: ...
        def __rshift__(self, other: ExprLike) -> PrimExpr: ...
        def __rrshift__(self, other: ExprLike) -> PrimExpr: ...
        def equal(self, other: ExprLike) -> PrimExpr: ...


@register_object("tir.Var")
class Var(PrimExpr):
    """A variable: a loop index, a size, a buffer's data pointer.

    Each Var is its own identity: two Vars with the same name are different
    variables.

    >>> n = Var("n", "int64"); str(n.dtype)
    'int64'
    """

    binding_identity: ClassVar[bool] = True
    name: str = val(str)
    dtype: DTypeField = val(DataType, default=DataType.of("int32"), converter=_dtype)

    @property
    def name_hint(self) -> str:
        return self.name


@register_object("tir.SizeVar")
class SizeVar(Var):
    """A variable known to be non-negative (a shape dimension)."""


def _int_range(t: DataType) -> tuple[int, int]:
    if t.is_bool:
        return 0, 1
    if t.is_uint:
        return 0, (1 << t.bits) - 1
    return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1


@register_object("tir.IntImm")
class IntImm(PrimExpr):
    """An integer (or bool) constant; the value must fit its dtype."""

    dtype: DTypeField = val(DataType, converter=_dtype)
    value: int = val(int, converter=lambda v: int(v) if isinstance(v, bool) else v)

    def __attrs_post_init__(self) -> None:
        t = self.dtype
        if not (t.is_integer or t.is_bool) or t.lanes != 1:
            raise IRError(f"IntImm needs a scalar integer or bool dtype, got {t}")
        lo, hi = _int_range(t)
        if not lo <= self.value <= hi:
            raise IRError(f"IntImm value {self.value} does not fit in {t}")

    def __int__(self) -> int:
        return self.value

    def __bool__(self) -> bool:
        return self.value != 0  # constants are usable as Python conditions, as in TVM

    def __index__(self) -> int:
        return self.value


@register_object("tir.FloatImm")
class FloatImm(PrimExpr):
    """A floating-point constant."""

    dtype: DTypeField = val(DataType, converter=_dtype)
    value: float = val(float, converter=lambda v: float(v) if isinstance(v, int) else v)

    def __attrs_post_init__(self) -> None:
        if not self.dtype.is_float or self.dtype.lanes != 1:
            raise IRError(f"FloatImm needs a scalar float dtype, got {self.dtype}")

    def __float__(self) -> float:
        return self.value


@register_object("tir.StringImm")
class StringImm(PrimExpr):
    """A string constant (assert messages, pragma values)."""

    value: str = val(str)
    dtype: DataType = attrs.field(init=False, default=DataType.of("handle"))


@register_object("tir.Cast")
class Cast(PrimExpr):
    """Convert ``value`` to ``dtype`` (lanes must agree)."""

    dtype: DTypeField = val(DataType, converter=_dtype)
    value: PrimExpr = child(expr_or_number_types)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr):
            typed_literals(self, "value")
        if self.dtype.lanes != self.value.dtype.lanes:
            raise IRError(f"Cast to {self.dtype} from {self.value.dtype}: lanes differ")


@abstract_node
class BinaryOp(PrimExpr):
    """Arithmetic on two operands of the same dtype."""

    a: PrimExpr = child(expr_or_number_types)
    b: PrimExpr = child(expr_or_number_types)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.a, PrimExpr) or not isinstance(self.b, PrimExpr):
            typed_literals(self, "a", "b")
        if self.a.dtype != self.b.dtype:
            raise IRError(f"{type(self).__name__} operands differ in dtype: {self.a.dtype} and {self.b.dtype}")
        _set(self, "dtype", self._result_dtype())

    def _result_dtype(self) -> DataType:
        return self.a.dtype


@register_object("tir.Add")
class Add(BinaryOp):
    """``a + b``"""


@register_object("tir.Sub")
class Sub(BinaryOp):
    """``a - b``"""


@register_object("tir.Mul")
class Mul(BinaryOp):
    """``a * b``"""


@register_object("tir.Div")
class Div(BinaryOp):
    """``a / b``: true division for floats, truncated (C) division for integers."""


@register_object("tir.Mod")
class Mod(BinaryOp):
    """Truncated (C) remainder: the sign follows ``a``."""


@register_object("tir.FloorDiv")
class FloorDiv(BinaryOp):
    """Division rounded toward negative infinity (Python's ``//``)."""


@register_object("tir.FloorMod")
class FloorMod(BinaryOp):
    """Remainder of FloorDiv: the sign follows ``b`` (Python's ``%``)."""


@register_object("tir.Min")
class Min(BinaryOp):
    """``min(a, b)``"""


@register_object("tir.Max")
class Max(BinaryOp):
    """``max(a, b)``"""


@abstract_node
class CmpOp(BinaryOp):
    """A comparison: bool with the operands' lanes."""

    def _result_dtype(self) -> DataType:
        return DataType("bool", 1, self.a.dtype.lanes)


@register_object("tir.EQ")
class EQ(CmpOp):
    """``a == b``.  As a Python bool it is pointer equality of the operands."""

    def __bool__(self) -> bool:
        return self.a is self.b


@register_object("tir.NE")
class NE(CmpOp):
    """``a != b``.  As a Python bool it is pointer inequality of the operands."""

    def __bool__(self) -> bool:
        return self.a is not self.b


@register_object("tir.LT")
class LT(CmpOp):
    """``a < b``"""


@register_object("tir.LE")
class LE(CmpOp):
    """``a <= b``"""


@register_object("tir.GT")
class GT(CmpOp):
    """``a > b``"""


@register_object("tir.GE")
class GE(CmpOp):
    """``a >= b``"""


@abstract_node
class LogicalOp(BinaryOp):
    def __attrs_post_init__(self) -> None:
        if not isinstance(self.a, PrimExpr) or not isinstance(self.b, PrimExpr):
            typed_literals(self, "a", "b", like=_dtype("bool"))
        for side in (self.a, self.b):
            if not side.dtype.is_bool:
                raise IRError(f"{type(self).__name__} needs bool operands, got {side.dtype}")
        BinaryOp.__attrs_post_init__(self)


@register_object("tir.And")
class And(LogicalOp):
    """Logical and of two bools."""


@register_object("tir.Or")
class Or(LogicalOp):
    """Logical or of two bools."""


@register_object("tir.Not")
class Not(PrimExpr):
    """Logical negation of a bool."""

    a: PrimExpr = child(expr_or_number_types)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.a, PrimExpr):
            typed_literals(self, "a", like=_dtype("bool"))
        if not self.a.dtype.is_bool:
            raise IRError(f"Not needs a bool operand, got {self.a.dtype}")
        _set(self, "dtype", self.a.dtype)


@register_object("tir.Select")
class Select(PrimExpr):
    """``true_value if condition else false_value``; both sides may be evaluated."""

    condition: PrimExpr = child(expr_or_number_types)
    true_value: PrimExpr = child(expr_or_number_types)
    false_value: PrimExpr = child(expr_or_number_types)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.condition, PrimExpr):
            typed_literals(self, "condition", like=_dtype("bool"))
        if not isinstance(self.true_value, PrimExpr) or not isinstance(self.false_value, PrimExpr):
            typed_literals(self, "true_value", "false_value")
        if not self.condition.dtype.is_bool:
            raise IRError(f"Select condition must be bool, got {self.condition.dtype}")
        if self.true_value.dtype != self.false_value.dtype:
            raise IRError(f"Select branches differ in dtype: {self.true_value.dtype} and {self.false_value.dtype}")
        _set(self, "dtype", self.true_value.dtype)


def _buffer_type() -> type:
    from .buffer import Buffer

    return Buffer


@register_object("tir.BufferLoad")
class BufferLoad(PrimExpr):
    """Read ``buffer[indices]``; a vector index (a Ramp) loads several lanes."""

    buffer: Any = child(_buffer_type)
    indices: TupleOf[PrimExpr] = children(PrimExpr)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        lanes = 1
        for i in self.indices:
            if not (i.dtype.is_integer):
                raise IRError(f"BufferLoad of {self.buffer.name}: index {i} has non-integer dtype {i.dtype}")
            lanes = max(lanes, i.dtype.lanes)
        _set(self, "dtype", self.buffer.dtype.with_lanes(self.buffer.dtype.lanes * lanes))


@register_object("tir.Ramp")
class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ..., base + (lanes-1)*stride]``."""

    base: PrimExpr = child(expr_or_number_types)
    stride: PrimExpr = child(expr_or_number_types)
    lanes: int = val(int)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.base, PrimExpr) or not isinstance(self.stride, PrimExpr):
            typed_literals(self, "base", "stride")
        if self.lanes < 2:
            raise IRError(f"Ramp needs at least 2 lanes, got {self.lanes}")
        if self.base.dtype.is_vector or self.stride.dtype != self.base.dtype:
            raise IRError(f"Ramp base and stride must be scalars of one dtype, got {self.base.dtype}, {self.stride.dtype}")
        _set(self, "dtype", self.base.dtype.with_lanes(self.lanes))


@register_object("tir.Broadcast")
class Broadcast(PrimExpr):
    """A scalar repeated over ``lanes`` lanes."""

    value: PrimExpr = child(expr_or_number_types)
    lanes: int = val(int)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr):
            typed_literals(self, "value")
        if self.lanes < 2 or self.value.dtype.is_vector:
            raise IRError(f"Broadcast needs a scalar value and at least 2 lanes, got {self.value.dtype} x {self.lanes}")
        _set(self, "dtype", self.value.dtype.with_lanes(self.lanes))


@register_object("tir.Let")
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value``."""

    var: Var = child(Var, binds=True)
    value: PrimExpr = child(expr_or_number_types)
    body: PrimExpr = child(PrimExpr)
    dtype: DataType = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr):
            typed_literals(self, "value", like=self.var.dtype)
        if self.var.dtype != self.value.dtype:
            raise IRError(f"Let {self.var.name}: var is {self.var.dtype} but value is {self.value.dtype}")
        _set(self, "dtype", self.body.dtype)


def _callee_types() -> tuple[type, ...]:
    from .function import GlobalVar
    from .op import Op

    return (Op, GlobalVar)


@register_object("tir.Call")
class Call(PrimExpr):
    """A call of a registered intrinsic :class:`Op` or of a global function."""

    dtype: DTypeField = val(DataType, converter=_dtype)
    op: Any = child(_callee_types)
    args: TupleOf[Any] = children(PrimExpr)

    @property
    def name(self) -> str:
        """The callee's name as TVM 0.6's ``Call.name`` gave it: ``exp`` for ``tir.exp``, the function's
        name for ``call_extern``/``call_pure_extern``, a global function's name (``self.op.name`` is the op's)."""
        full = self.op.name_hint if hasattr(self.op, "name_hint") else self.op.name
        if full in ("tir.call_extern", "tir.call_pure_extern") and self.args and isinstance(self.args[0], StringImm):
            return self.args[0].value
        return full[4:] if full.startswith("tir.") else full


@register_object("ir.Range")
class Range(Node):
    """The half-open interval ``[min, min + extent)``.

    >>> r = Range.from_min_extent(0, 16); int(r.extent)
    16
    """

    min: PrimExpr = child(PrimExpr)
    extent: PrimExpr = child(PrimExpr)

    @staticmethod
    def from_min_extent(min_value: Any, extent: Any) -> Range:
        from .expr_ops import convert_expr

        return Range(convert_expr(min_value), convert_expr(extent))


@register_object("tir.IterVar")
class IterVar(ArithOperators, Node):
    """An iteration variable with a domain: a loop axis or a thread axis.

    ``iter_type`` is one of ``data_par``, ``reduce``, ``thread_index``,
    ``ordered``, ``opaque``, ``unrolled``, ``vectorized``, ``parallelized``
    (also named by TVM's class constants, set by :mod:`loom.te.relations`:
    ``IterVar.Unrolled == "unrolled"``).
    """

    binding_identity: ClassVar[bool] = True
    is_declaration: ClassVar[bool] = True
    dom: Range | None = child(Range, nullable=True)
    var: Var = child(Var, binds=True)
    iter_type: str = val(str, default="data_par")
    thread_tag: str = val(str, default="")

    if TYPE_CHECKING:  # te.operation lets an IterVar stand for its variable in expressions
        def as_expr(self) -> Var: ...


# Operator overloading lives in expr_ops; importing it attaches the methods.
from . import expr_ops as _expr_ops  # noqa: E402,F401
# Shuffle (TVM's tir.Shuffle) lives in its own module to keep this file small.
from .shuffle import Shuffle  # noqa: E402
