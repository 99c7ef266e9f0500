"""Tensors and the operations that produce them (the data of tensor expressions).

An :class:`Operation` computes one or more output :class:`Tensor`\\ s.  The
operations here are plain registered nodes; the builders users call
(``loom.placeholder``, ``loom.compute``...) live in ``te/operation.py``.

``op.output(i)`` always returns the same Tensor object, so tensors can be used
as dictionary keys (schedules map tensors to stages, binds map them to buffers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, Iterable, TypeVar, cast

import attrs

from ..errors import IRError, LoomValueError
from ..ir.buffer import Buffer
from ..ir.dtype import DataType
from ..ir import expr as E
from ..ir.node import DictOf, Node, TupleOf, abstract_node, child, children, mapping, register_object
from ..ir.node import value as val
from ..ir.printer import register_node_printer
from ..ir.stmt import Stmt

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..ir.producer import ProducerLoad

__all__ = ["Operation", "PlaceholderOp", "ComputeOp", "ExternOp", "Tensor", "TensorSlice"]


def _as_expr(v: Any) -> Any:
    from ..ir.expr_ops import convert_expr

    return convert_expr(v) if isinstance(v, int) else v


@abstract_node
class Operation(Node):
    """Base of operations.  ``name``, ``tag`` and ``attrs`` are common to all."""

    _outputs: dict[int, Tensor[Any]] | None = attrs.field(init=False, default=None)  # of this operation

    if TYPE_CHECKING:  # a field of every operation
        @property
        def name(self) -> str: ...

    @property
    def num_outputs(self) -> int:
        raise NotImplementedError

    def output(self, index: int) -> Tensor[Self]:
        """The ``index``-th output tensor (the same object on every call)."""
        if not 0 <= index < self.num_outputs:
            raise LoomValueError(f"{self.name} has {self.num_outputs} output(s); output({index}) does not exist")
        cache = self._outputs
        if cache is None:
            cache = {}
            object.__setattr__(self, "_outputs", cache)
        found = cache.get(index)
        if found is None:
            found = cache[index] = Tensor(self, index)
        return found

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        raise NotImplementedError

    def output_dtype(self, index: int) -> DataType:
        raise NotImplementedError

    @property
    def input_tensors(self) -> list[Tensor]:
        """Tensors this operation reads, in first-use order, without repeats."""
        return []

    @classmethod
    def __from_json_fields__(cls, **fields: Any) -> Operation:
        return cls(**fields)


@register_object("te.PlaceholderOp")
class PlaceholderOp(Operation):
    """An input tensor: a shape and a dtype, no computation."""

    name: str = val(str)
    shape: E.ExprTuple = children(E.PrimExpr, element_converter=_as_expr)
    dtype: E.DTypeField = val(DataType, converter=DataType.of)
    tag: str = val(str, default="")
    attrs: DictOf[str, Any] = mapping()

    @property
    def num_outputs(self) -> int:
        return 1

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        return self.shape

    def output_dtype(self, index: int) -> DataType:
        return self.dtype


@register_object("te.ComputeOp")
class ComputeOp(Operation):
    """``out[axis] = body[i]`` for every point of the ``axis`` domain.

    Several bodies make several outputs of one shape (all Reduce bodies then share
    one reduction).  ``reduce_axis`` lists the reduction IterVars of the body.
    """

    name: str = val(str)
    axis: TupleOf[E.IterVar] = children(E.IterVar)
    reduce_axis: TupleOf[E.IterVar] = children(E.IterVar)
    body: TupleOf[E.PrimExpr] = children(E.PrimExpr)
    tag: str = val(str, default="")
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        if not self.body:
            raise IRError(f"compute {self.name} has no body")
        for iv in self.axis + self.reduce_axis:
            if iv.dom is None:
                raise IRError(f"compute {self.name}: axis {iv.var.name} has no domain")

    @property
    def num_outputs(self) -> int:
        return len(self.body)

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        extents = []
        for iv in self.axis:
            assert iv.dom is not None  # checked at construction
            extents.append(iv.dom.extent)
        return tuple(extents)

    def output_dtype(self, index: int) -> DataType:
        return self.body[index].dtype

    @property
    def input_tensors(self) -> list[Tensor]:
        from ..ir.functor import collect
        from ..ir.producer import ProducerLoad

        return unique_tensors(load.producer for b in self.body
                              for load in collect(b, lambda n: isinstance(n, ProducerLoad)))


@register_object("te.ExternOp")
class ExternOp(Operation):
    """An operation whose body is given as IR over input and output buffers."""

    name: str = val(str)
    inputs: TupleOf[Tensor] = children(lambda: Tensor)
    input_placeholders: TupleOf[Buffer] = children(Buffer)
    output_placeholders: TupleOf[Buffer] = children(Buffer)
    body: Stmt = child(Stmt)
    tag: str = val(str, default="")
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        if len(self.inputs) != len(self.input_placeholders):
            raise IRError(f"extern {self.name}: {len(self.inputs)} inputs but {len(self.input_placeholders)} input buffers")
        if not self.output_placeholders:
            raise IRError(f"extern {self.name} has no output buffer")

    @property
    def num_outputs(self) -> int:
        return len(self.output_placeholders)

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        return self.output_placeholders[index].shape

    def output_dtype(self, index: int) -> DataType:
        return self.output_placeholders[index].dtype

    @property
    def input_tensors(self) -> list[Tensor]:
        return unique_tensors(self.inputs)


def unique_tensors(tensors: Iterable[Tensor]) -> list[Tensor]:
    """``tensors`` without repeats (the same object), in first-seen order: an operation's ``input_tensors``."""
    return list({id(t): t for t in tensors}.values())


if TYPE_CHECKING:  # a plain ``Tensor`` is ``Tensor[Operation]`` (TypeVar defaults are 3.13+)
    from typing_extensions import TypeVar as _TypeVar

    OpT = _TypeVar("OpT", bound=Operation, default=Operation, covariant=True)
else:
    OpT = TypeVar("OpT", bound=Operation, covariant=True)


@register_object("te.Tensor")
class Tensor(Node, Generic[OpT]):
    """The ``value_index``-th output of ``op``.  ``T[i, j]`` reads it in an expression.

    Obtain tensors from ``op.output(i)`` (or the builders), which returns one
    object per output, so tensors work as dictionary keys.  For type checkers a
    tensor is generic in its operation: ``loom.compute`` returns a
    ``Tensor[ComputeOp]``, whose ``op.axis`` is known.
    """

    # A tensor names data: structural equality pairs tensors like buffers, and
    # visitors stop here instead of walking into the producing operation.
    binding_identity: ClassVar[bool] = True
    is_declaration: ClassVar[bool] = True
    op: OpT = child(Operation, reference=True)
    value_index: int = val(int, default=0)

    @classmethod
    def __from_json_fields__(cls, op: Operation, value_index: int = 0) -> Tensor:
        return op.output(value_index)  # keep one Tensor object per output after loading

    @property
    def shape(self) -> tuple[E.PrimExpr, ...]:
        return self.op.output_shape(self.value_index)

    @property
    def dtype(self) -> DataType:
        return self.op.output_dtype(self.value_index)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def name(self) -> str:
        return self.op.name if self.op.num_outputs == 1 else f"{self.op.name}.v{self.value_index}"

    def __getitem__(self, indices: Any) -> ProducerLoad:
        """``T[i, j]``: a ProducerLoad of this tensor.

        Fewer indices than dimensions give a :class:`TensorSlice` to index further,
        as TVM's classic API allowed: ``T[i][j]`` is ``T[i, j]``.
        """
        from ..ir.expr_ops import convert_expr
        from ..ir.producer import ProducerLoad

        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) > self.ndim or (not indices and self.ndim):
            raise LoomValueError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(indices)}")
        if any(isinstance(i, slice) for i in indices):  # A[i, 0:16]: a region, for a tensor intrinsic call
            from .tensor_compute import TensorRegion

            return cast("ProducerLoad", TensorRegion.of(self, tuple(indices)))
        if len(indices) < self.ndim:  # typed as the load: the partial form is the classic spelling's
            return cast("ProducerLoad", TensorSlice(self, tuple(indices)))
        return ProducerLoad(self, [convert_expr(i) for i in indices])

    def __call__(self, *indices: Any) -> ProducerLoad:
        """``T(i, j)``: the same as ``T[i, j]`` (TVM's classic call syntax)."""
        return self[indices]

    if TYPE_CHECKING:  # elementwise operators with broadcasting, attached by te.tensor_ops
        def __add__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __radd__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __sub__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __rsub__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __mul__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __rmul__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __truediv__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __rtruediv__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __floordiv__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __rfloordiv__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __mod__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __rmod__(self, other: Tensor | E.ExprLike) -> Tensor: ...
        def __neg__(self) -> Tensor: ...


class TensorSlice:
    """``T[i]`` of a tensor with more dimensions: index it further (``T[i][j]``) to load an element.

    >>> from loom.te.operation import placeholder
    >>> A = placeholder((4, 5), name="A")
    >>> A[1][2], A(1, 2), A[1].dtype
    (A[1, 2], A[1, 2], DataType('float32'))
    """

    def __init__(self, tensor: Tensor, indices: tuple[Any, ...]) -> None:
        self.tensor, self.indices = tensor, indices

    def __getitem__(self, indices: Any) -> Any:
        more = indices if isinstance(indices, tuple) else (indices,)
        return self.tensor[self.indices + more]

    @property
    def dtype(self) -> Any:
        return self.tensor.dtype

    def as_expr(self) -> Any:
        t = self.tensor
        raise LoomValueError(f"{self!r} indexes {len(self.indices)} of the {t.ndim} dimensions of tensor {t.name}; "
                             f"index the rest ({t.name}[i][j] or {t.name}[i, j]) to get an element")

    def __repr__(self) -> str:
        return f"{self.tensor.name}[{', '.join(map(str, self.indices))}]"

    def _incomplete(self, *_: Any) -> Any:
        return self.as_expr()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _incomplete
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = _incomplete


def _tensor_text(p: Any, t: Tensor) -> str:
    shape = ", ".join(p.expr(x) for x in t.shape)
    return f"Tensor({p.name(t, t.name)}, [{shape}], {str(t.dtype)!r})"


def _compute_text(p: Any, op: ComputeOp) -> str:
    axes = ", ".join(f"{p.expr(iv.var)}: {p.node(iv.dom)}" for iv in op.axis + op.reduce_axis)
    outs = ", ".join(p.name(op.output(k), op.output(k).name) for k in range(op.num_outputs))
    body = ", ".join(p.expr(b) for b in op.body)
    return f"compute {outs}[{', '.join(p.expr(iv.var) for iv in op.axis)}] = {body}  # over {axes}"


register_node_printer(Tensor, _tensor_text)
register_node_printer(ComputeOp, _compute_text)
