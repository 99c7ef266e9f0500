"""Builders of tensor-expression operations: ``placeholder``, ``compute``, ``extern``, ``thread_axis``.

They mirror classic TVM's ``tvm.placeholder`` / ``tvm.compute`` / ``tvm.extern``:

>>> from loom.te.operation import placeholder, compute
>>> A = placeholder((4, 8), name="A")
>>> B = compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
>>> [iv.var.name for iv in B.op.axis], str(B.dtype), B.op.axis[0].iter_type
(['i', 'j'], 'float32', 'data_par')

Iteration variables take part in expressions as their ``var`` (``A[i, k]`` with
``k`` a reduction axis), as in TVM where an IterVar converts to its variable.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Sequence, overload

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.buffer import Buffer, decl_buffer
from ..ir.dtype import DataType, DTypeLike
from ..ir.functor import Visitor
from ..ir.node import DictOf, TupleOf, child, children, mapping, register_object
from ..ir.node import value as val
from ..ir.printer import register_node_printer
from ..ir.recursion import deep_recursion
from .tag import current_tag
from ..ir.reduce import Reduce
from ..ir.stmt import Evaluate, Stmt
from .tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, Tensor, unique_tensors

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["placeholder", "compute", "extern", "thread_axis", "normalize_shape", "HybridOp"]

_VIRTUAL_THREAD_TAGS = ("vthread", "cthread")


# ---------------------------------------------------------------------------
# shapes and iteration variables


def normalize_shape(shape: Any, what: str) -> tuple[E.PrimExpr, ...]:
    """``shape`` (an int, an expression or a sequence of them) as a tuple of integer expressions.

    Python ints take the index dtype of the symbolic entries (int64 if any is int64),
    so a shape never mixes index widths.  ``what`` names the caller in errors.
    """
    if isinstance(shape, (int, float, np.integer, np.floating, E.PrimExpr)) or hasattr(shape, "as_expr"):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)):
        raise LoomTypeError(f"{what}: shape must be a tuple of ints or expressions, got {type(shape).__name__}")
    # An integral float (4.0) is the int, as TVM 0.6 took it; 4.5 stays an error below.
    shape = [int(s) if isinstance(s, np.integer) or isinstance(s, (float, np.floating)) and float(s).is_integer()
             else s for s in shape]
    exprs = []
    for k, s in enumerate(shape):
        if isinstance(s, bool) or not isinstance(s, (int, E.PrimExpr)) and not hasattr(s, "as_expr"):
            raise LoomTypeError(f"{what}: shape entry {k} must be an int or an integer expression, got {s!r}")
        e = ops.convert_expr(s)
        if not e.dtype.is_integer or e.dtype.lanes != 1:
            raise LoomTypeError(f"{what}: shape entry {k} must be a scalar integer, got dtype {e.dtype}")
        if isinstance(e, E.IntImm) and e.value < 0:
            raise LoomValueError(f"{what}: shape entry {k} is negative ({e.value})")
        exprs.append(e)
    wide = next((e.dtype for e in exprs if e.dtype.bits == 64), None)
    if wide is not None:
        exprs = [ops.const(s, wide) if isinstance(s, int) else e for s, e in zip(shape, exprs)]
    return tuple(exprs)


def _data_axis(name: str, extent: E.PrimExpr) -> E.IterVar:
    return E.IterVar(E.Range(ops.const(0, extent.dtype), extent), E.Var(name, extent.dtype), "data_par")


def _axis_names(fcompute: Callable[..., Any], ndim: int, what: str) -> list[str]:
    """Names of the axis variables: fcompute's positional parameters (``*args`` fills ``i<k>``)."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: trust the shape
        return [f"i{k}" for k in range(ndim)]
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if varargs and len(positional) <= ndim:
        return positional + [f"i{k}" for k in range(len(positional), ndim)]
    if len(positional) != ndim:
        raise LoomValueError(
            f"{what}: fcompute takes {len(positional)} index argument(s) {positional} "
            f"but the shape has {ndim} dimension(s)")
    return positional


def _iter_var_ops() -> None:
    """Let IterVars stand for their variable in expressions (``A[i, k]``, ``k * 2``, ``k > 1``).

    ``==`` and ``!=`` stay identity comparisons: schedules key dictionaries by IterVar.
    """
    def lift(name: str) -> Callable[..., Any]:
        return lambda self, *rest: getattr(self.var, name)(*rest)

    setattr(E.IterVar, "as_expr", lambda self: self.var)  # declared on IterVar for type checkers
    for name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                 "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__neg__",
                 "__lt__", "__le__", "__gt__", "__ge__", "astype"):
        setattr(E.IterVar, name, lift(name))


_iter_var_ops()


# ---------------------------------------------------------------------------
# builders


def placeholder(shape: Any, dtype: DTypeLike = "float32", name: str = "placeholder") -> Tensor[PlaceholderOp]:
    """An input tensor of ``shape`` and ``dtype``.

    >>> import loom
    >>> n = loom.var("n")
    >>> A = placeholder((n, 4), "int8", name="A")
    >>> A.ndim, str(A.dtype), A.name
    (2, 'int8', 'A')
    """
    what = f"placeholder {name!r}"
    try:
        t = DataType.of(dtype)
    except LoomTypeError as err:
        raise LoomTypeError(f"{what}: {err}") from err
    return PlaceholderOp(name, normalize_shape(shape, what), t).output(0)


# One output for an expression, a list of them for a tuple of two or more (a list of any length
# gives either, as it has one element or more).
@overload
def compute(shape: Any, fcompute: Callable[..., E.ExprLike], name: str = ..., tag: str = ...,
            attrs: dict[str, Any] | None = ...) -> Tensor[ComputeOp]: ...
@overload
def compute(shape: Any, fcompute: Callable[..., tuple[Any]], name: str = ..., tag: str = ...,
            attrs: dict[str, Any] | None = ...) -> Tensor[ComputeOp]: ...
@overload
def compute(shape: Any, fcompute: Callable[..., tuple[Any, Any, Unpack[tuple[Any, ...]]]], name: str = ...,
            tag: str = ..., attrs: dict[str, Any] | None = ...) -> list[Tensor[ComputeOp]]: ...
@overload
def compute(shape: Any, fcompute: Callable[..., list[Any]], name: str = ..., tag: str = ...,
            attrs: dict[str, Any] | None = ...) -> Tensor[ComputeOp] | list[Tensor[ComputeOp]]: ...
def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: dict[str, Any] | None = None) -> Tensor[ComputeOp] | list[Tensor[ComputeOp]]:
    """A tensor whose element at each index of ``shape`` is ``fcompute(*index)``.

    ``fcompute`` returning a tuple makes one output per element (all share the axes);
    a top-level reduction (``loom.sum(..., axis=k)``) makes a reduction.

    >>> A = placeholder((3, 4), name="A")
    >>> S, P = compute((3,), lambda i: (A[i, 0] + A[i, 1], A[i, 0] * A[i, 1]), name="SP")
    >>> S.op is P.op, S.value_index, P.value_index, S.op.num_outputs
    (True, 0, 1, 2)
    """
    what = f"compute {name!r}"
    tag = tag or current_tag()
    extents = normalize_shape(shape, what)
    if not callable(fcompute):
        raise LoomTypeError(f"{what}: fcompute must be callable, got {type(fcompute).__name__}")
    from . import tensor_compute as tc  # a body calling a tensor intrinsic makes a TensorComputeOp

    made = tc.try_tensor_compute(extents, fcompute, name, tag, attrs, what)  # fcompute takes the outer indices
    if made is not None:
        return made
    axis = tuple(_data_axis(n, ext) for n, ext in zip(_axis_names(fcompute, len(extents), what), extents))
    result = fcompute(*(iv.var for iv in axis))
    if isinstance(result, tc.TensorIntrinCall):
        return tc.tensor_compute(extents, axis, result, name, tag, attrs, what)
    bodies = list(result) if isinstance(result, (tuple, list)) else [result]
    if not bodies:
        raise LoomValueError(f"{what}: fcompute returned an empty tuple")
    with deep_recursion(what):  # a long chain of operations is as deep as it is long
        converted = []
        for k, b in enumerate(bodies):
            if isinstance(b, Tensor):
                raise LoomTypeError(f"{what}: fcompute returned the tensor {b.name} itself; index it, "
                                    f"e.g. {b.name}[i]")
            try:
                converted.append(ops.convert_expr(b))
            except LoomTypeError as err:
                raise LoomTypeError(f"{what}: output {k} of fcompute is not an expression: {err}") from err
        reduce_axis = _check_reductions(converted, what)
        op = ComputeOp(name, axis, reduce_axis, converted, tag, dict(attrs or {}))
        outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


class _ReduceFinder(Visitor):
    """Finds a Reduce in one expression, not in the bodies of the tensors it reads."""

    found = False

    def visit_Tensor(self, node: Tensor) -> None:
        pass

    def visit_Reduce(self, node: Reduce) -> None:
        self.found = True


def _nested_reduce(e: E.PrimExpr) -> bool:
    finder = _ReduceFinder()
    finder.visit(e)
    return finder.found


def _check_reductions(bodies: list[E.PrimExpr], what: str) -> tuple[E.IterVar, ...]:
    """Reductions must be whole bodies, and several outputs must be one tuple reduction."""
    tops = [b for b in bodies if isinstance(b, Reduce)]
    for k, b in enumerate(bodies):
        inner = [b.condition, *b.source, *b.init] if isinstance(b, Reduce) else [b]
        if any(_nested_reduce(x) for x in inner):
            raise LoomValueError(
                f"{what}: output {k} uses a reduction inside another expression; a reduction must be the "
                f"whole body (compute the reduction into its own tensor, then use that tensor)")
    if not tops:
        return ()
    if len(tops) != len(bodies):
        raise LoomValueError(f"{what}: either every output is a reduction or none is")
    first = tops[0]
    for k, b in enumerate(tops):
        same = (b.combiner is first.combiner and _same(b.source, first.source) and _same(b.axis, first.axis)
                and b.condition is first.condition and _same(b.init, first.init))
        if not same:
            raise LoomValueError(
                f"{what}: output {k} is a different reduction from output 0; several reduction outputs must "
                f"come from one tuple reduction (one call of a comm_reducer on a tuple)")
        if b.value_index != k:
            raise LoomValueError(f"{what}: output {k} is element {b.value_index} of the tuple reduction; "
                                 f"return the reducer's elements in order")
    if len(first.source) != len(bodies):
        raise LoomValueError(
            f"{what}: the tuple reduction has {len(first.source)} elements but the compute has {len(bodies)} "
            f"output(s); return all of its elements")
    return first.axis


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def thread_axis(dom: Any = None, tag: str = "", name: str = "") -> E.IterVar:
    """A GPU thread (or virtual-thread) axis to ``bind`` loops to.

    >>> tx = thread_axis("threadIdx.x")
    >>> tx.var.name, tx.iter_type, tx.thread_tag, tx.dom is None
    ('threadIdx.x', 'thread_index', 'threadIdx.x', True)
    >>> str(thread_axis((0, 4), "vthread").iter_type)
    'virtual_thread'
    """
    if isinstance(dom, str):
        if tag:
            raise LoomValueError(f"thread_axis: the tag is given twice ({dom!r} and {tag!r})")
        dom, tag = None, dom
    if not tag:
        raise LoomValueError("thread_axis needs a tag such as 'threadIdx.x', 'blockIdx.y' or 'vthread'")
    if dom is not None:
        dom = _as_range(dom, f"thread_axis {tag!r}")
    iter_type = "virtual_thread" if tag in _VIRTUAL_THREAD_TAGS else "thread_index"
    dtype = dom.extent.dtype if dom is not None else "int32"
    return E.IterVar(dom, E.Var(name or tag, dtype), iter_type, tag)


def _as_range(dom: Any, what: str) -> E.Range:
    """A Range from a Range or a ``(begin, end)`` pair (TVM's convention)."""
    if isinstance(dom, E.Range):
        return dom
    if not isinstance(dom, (list, tuple)) or len(dom) != 2:
        raise LoomTypeError(f"{what}: domain must be a Range or a (begin, end) pair, got {dom!r}")
    try:
        lo, hi = ops._match(dom[0], dom[1])
    except LoomTypeError as err:
        raise LoomTypeError(f"{what}: domain bounds must be integers or integer expressions: {err}") from err
    if not lo.dtype.is_integer or lo.dtype.lanes != 1:
        raise LoomTypeError(f"{what}: domain bounds must be scalar integers, got {lo.dtype}")
    extent = hi - lo
    if isinstance(extent, E.IntImm) and extent.value < 0:
        raise LoomValueError(f"{what}: empty domain ({dom[0]}, {dom[1]}): the end is below the beginning")
    return E.Range(lo, extent)


# One output for one shape, one per shape (a Tensor for a single one) for a list of shapes.
@overload
def extern(shape: E.ExprLike | Sequence[E.ExprLike], inputs: Sequence[Tensor],
           fcompute: Callable[[list[Buffer], list[Buffer]], Any], name: str = ..., dtype: Any = ...,
           in_buffers: Any = ..., out_buffers: Any = ..., tag: str = ...,
           attrs: dict[str, Any] | None = ...) -> Tensor[ExternOp]: ...
@overload
def extern(shape: Sequence[Sequence[E.ExprLike]], inputs: Sequence[Tensor],
           fcompute: Callable[[list[Buffer], list[Buffer]], Any], name: str = ..., dtype: Any = ...,
           in_buffers: Any = ..., out_buffers: Any = ..., tag: str = ...,
           attrs: dict[str, Any] | None = ...) -> Tensor[ExternOp] | list[Tensor[ExternOp]]: ...
def extern(shape: Any, inputs: Sequence[Tensor], fcompute: Callable[[list[Buffer], list[Buffer]], Any],
           name: str = "extern", dtype: Any = None, in_buffers: Any = None, out_buffers: Any = None,
           tag: str = "", attrs: dict[str, Any] | None = None) -> Tensor[ExternOp] | list[Tensor[ExternOp]]:
    """Tensors computed by hand-written IR: ``fcompute(input_buffers, output_buffers)`` returns a Stmt.

    ``shape`` may be a list of shapes for several outputs.  An expression result
    (an extern call) becomes ``Evaluate(expr)``.

    >>> import loom
    >>> A = placeholder((8,), name="A")
    >>> B = extern((8,), [A], lambda ins, outs: loom.call_extern("int32", "copy", ins[0].data, outs[0].data),
    ...            name="B")
    >>> str(B.dtype), [b.name for b in B.op.input_placeholders], type(B.op.body).__name__
    ('float32', ['A'], 'Evaluate')
    """
    what = f"extern {name!r}"
    if isinstance(shape, (int, E.PrimExpr)):
        shape = (shape,)
    shapes = [shape] if not shape or not isinstance(shape[0], (list, tuple)) else list(shape)
    out_shapes = [normalize_shape(s, what) for s in shapes]
    inputs = list(inputs)
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise LoomTypeError(f"{what}: input {k} must be a Tensor, got {type(t).__name__}")
    dtypes = _extern_dtypes(dtype, inputs, len(out_shapes), what)
    ins = _buffers(in_buffers, len(inputs), "input", what)
    if ins is None:
        ins = [decl_buffer(t.shape, t.dtype, t.name.replace(".", "_")) for t in inputs]
    for k, (t, b) in enumerate(zip(inputs, ins)):
        if b.dtype != t.dtype or len(b.shape) != t.ndim:
            raise LoomValueError(f"{what}: input buffer {k} ({b.name}) is {len(b.shape)}-d {b.dtype}, "
                                 f"but its tensor {t.name} is {t.ndim}-d {t.dtype}")
    outs = _buffers(out_buffers, len(out_shapes), "output", what)
    if outs is None:
        names = [name] if len(out_shapes) == 1 else [f"{name}_v{k}" for k in range(len(out_shapes))]
        outs = [decl_buffer(s, t, n) for s, t, n in zip(out_shapes, dtypes, names)]
    body = fcompute(list(ins), list(outs))
    if isinstance(body, E.PrimExpr):
        body = Evaluate(body)
    if not isinstance(body, Stmt):
        raise LoomTypeError(f"{what}: fcompute must return a Stmt or an expression, got {type(body).__name__}")
    with deep_recursion(what):
        op = ExternOp(name, inputs, ins, outs, body, tag or current_tag(), dict(attrs or {}))
        outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def _extern_dtypes(dtype: Any, inputs: list[Tensor], n: int, what: str) -> list[DataType]:
    if dtype is None:
        found = {str(t.dtype) for t in inputs}
        if len(found) != 1:
            seen = f"inputs of dtypes {sorted(found)}" if found else "no inputs"
            raise LoomValueError(f"{what}: cannot infer the output dtype from {seen}; pass dtype=")
        dtype = found.pop()
    dts = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * n
    if len(dts) != n:
        raise LoomValueError(f"{what}: {len(dts)} dtypes given for {n} output(s)")
    return [DataType.of(d) for d in dts]


def _buffers(given: Any, n: int, kind: str, what: str) -> list[Buffer] | None:
    if given is None:
        return None
    bufs = [given] if isinstance(given, Buffer) else list(given)
    if len(bufs) != n:
        raise LoomValueError(f"{what}: {len(bufs)} {kind} buffer(s) given for {n} {kind}(s)")
    for k, b in enumerate(bufs):
        if not isinstance(b, Buffer):
            raise LoomTypeError(f"{what}: {kind} buffer {k} must be a Buffer, got {type(b).__name__}")
    return bufs


@register_object("te.HybridOp")
class HybridOp(Operation):
    """An operation computed by a statement with loops (what ``loom.hybrid.script`` parses to).

    ``body`` reads ``inputs`` and writes ``outputs``, placeholder tensors that
    lowering redirects to this operation's own outputs (the body cannot name
    them: an operation does not contain itself).  ``axis`` has one IterVar per
    ``For`` loop of the body, outermost first, so schedule primitives address
    those loops as they address a compute's axes.

    >>> import loom
    >>> from loom.ir import For, IterVar, Range
    >>> from loom.ir.producer import ProducerStore
    >>> A, out, i = placeholder((4,), name="A"), placeholder((4,), name="B"), loom.var("i")
    >>> body = For(i, 0, 4, "serial", ProducerStore(out, A[i] + 1.0, [i]))
    >>> op = HybridOp("inc", [A], [out], [IterVar(Range.from_min_extent(0, 4), i)], body)
    >>> op.output(0).name, [int(x) for x in op.output(0).shape], op.input_tensors == [A]
    ('inc', [4], True)
    """

    name: str = val(str)
    inputs: TupleOf[Tensor] = children(Tensor)
    outputs: TupleOf[Tensor] = children(Tensor)
    axis: TupleOf[E.IterVar] = children(E.IterVar)
    body: Stmt = child(Stmt)
    tag: str = val(str, default="")
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        if not self.outputs:
            raise LoomValueError(f"hybrid operation {self.name} has no output")
        for t in self.outputs:
            if not isinstance(t.op, PlaceholderOp):
                raise LoomTypeError(f"hybrid operation {self.name}: output {t.name} must be a placeholder "
                                    f"tensor, got the output of a {type(t.op).__name__}")
        for iv in self.axis:
            if iv.dom is None:
                raise LoomValueError(f"hybrid operation {self.name}: axis {iv.var.name} has no domain")

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        return self.outputs[index].shape

    def output_dtype(self, index: int) -> DataType:
        return self.outputs[index].dtype

    @property
    def input_tensors(self) -> list[Tensor]:
        return unique_tensors(self.inputs)


def _hybrid_text(p: Any, op: HybridOp) -> str:
    ins = ", ".join(p.name(t, t.name) for t in op.inputs)
    outs = ", ".join(p.name(t, t.name) for t in op.outputs)
    lines = [f"hybrid {op.name}({ins}) -> ({outs}):"]
    p.block(op.body, 1, lines)
    return "\n".join(lines)


register_node_printer(HybridOp, _hybrid_text)
