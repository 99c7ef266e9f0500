"""A tensor intrinsic called as a compute's body: ``TensorComputeOp`` (classic TVM's, as in v0.6).

Calling a :class:`~loom.te.tensor_intrin.TensorIntrin` on regions of tensors,
``vadd(A[i, 0:16], B[i, 0:16])``, and returning the call from ``loom.compute``'s
fcompute makes a :class:`TensorComputeOp`.  fcompute takes the *outer* indices
only; at each outer point the intrinsic computes a whole block, its own output
shape, so the output's shape is the outer extents followed by the intrinsic's
output shape (give the whole shape to ``compute``, or the outer part only).  As
in TVM, an intrinsic whose output has leading dimensions of extent 1, ``(1, n)``,
may also fill a shape that leaves them out, ``(m, n)`` with one outer index: each
of those dimensions then covers one element of an outer axis.  As in TVM,
``op.axis`` lists an axis per output dimension: the outer axes, then one
``"opaque"`` axis per dimension of the intrinsic's block (``ax0``, ...), which the
intrinsic covers whole and schedules cannot touch (``op.schedulable_axis`` are the
outer ones).

``reduce_axis=`` names reduction axes that the regions use (``A[i, k, 0:16]``):
the intrinsic's ``reduce_reset`` (or its body, on their first iteration) runs
before them and its ``reduce_update`` at each.  The outer axes and reduction
axes are scheduled as a compute's are; the intrinsic's block is not.  Lowering
(:mod:`loom.te.tensor_compute_lower`) emits what tensorize emits for a compute
tensorized at its inner axes: the intrinsic's statement with its buffers bound
to the regions.

>>> import loom
>>> x, y = loom.placeholder((16,), name="x"), loom.placeholder((16,), name="y")
>>> z = loom.compute((16,), lambda i: x[i] + y[i], name="z")
>>> vadd = loom.decl_tensor_intrin(z.op, lambda ins, outs: loom.call_extern(
...     "int32", "vadd", outs[0].access_ptr("w"), ins[0].access_ptr("r"), ins[1].access_ptr("r")), name="vadd")
>>> A, B = loom.placeholder((8, 16), name="A"), loom.placeholder((8, 16), name="B")
>>> C = loom.compute((8, 16), lambda i: vadd(A[i, 0:16], B[i, 0:16]), name="C")
>>> print(C.op)
tensor_compute C[i] = vadd(A[i, 0:16], B[i, 0:16])  # over i: range(0, 8)
>>> [str(n) for n in C.shape], type(C.op).__name__
(['8', '16'], 'TensorComputeOp')
"""

from __future__ import annotations

import inspect
import traceback
from typing import Any, Callable, Optional, Sequence

from ..arith import Analyzer
from ..errors import IRError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.dtype import DataType
from ..ir.functor import collect, substitute
from ..ir.node import DictOf, TupleOf, child, children, mapping, register_object
from ..ir.node import value as val
from ..ir.printer import register_node_printer
from ..ir.producer import ProducerLoad
from ..arith.int_set import IntervalSet, eval_set
from .tensor import Operation, Tensor, TensorSlice, unique_tensors
from .tensor_intrin import TensorIntrin

__all__ = ["TensorComputeOp", "TensorRegion", "TensorIntrinCall", "call_intrin", "bind_extents"]


def _is_one(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _index(x: Any, dtype: DataType, what: str) -> E.PrimExpr:
    try:
        e = ops.convert_expr(x)
    except LoomTypeError as err:
        raise LoomTypeError(f"{what}: {err}") from err
    if not e.dtype.is_integer:
        raise LoomTypeError(f"{what}: an index must be an integer, got {e} of dtype {e.dtype}")
    return ops.cast(e, dtype) if e.dtype != dtype else e


class TensorRegion:
    """``A[i, 0:16]``: a range per dimension of a tensor, an argument of a tensor intrinsic call.

    >>> import loom
    >>> A = loom.placeholder((4, 32), name="A")
    >>> r = A[1, 8:24]
    >>> r, [(str(x.min), str(x.extent)) for x in r.ranges]
    (A[1, 8:24], [('1', '1'), ('8', '16')])
    """

    def __init__(self, tensor: Tensor, ranges: list[E.Range], reduce_axes: list[E.IterVar]) -> None:
        self.tensor, self.ranges, self.reduce_axes = tensor, ranges, reduce_axes

    @staticmethod
    def of(tensor: Tensor, indices: tuple[Any, ...]) -> TensorRegion:
        """The region ``tensor[indices]``: slices cover ranges, other indices one element; missing
        trailing indices cover their whole dimension."""
        an = Analyzer()
        ranges: list[E.Range] = []
        used = [i for i in indices if isinstance(i, E.IterVar) and i.iter_type == "reduce"]
        padded = tuple(indices) + (slice(None),) * (tensor.ndim - len(indices))
        for d, (idx, n) in enumerate(zip(padded, tensor.shape)):
            what = f"region of {tensor.name}, dimension {d}"
            if not isinstance(idx, slice):
                ranges.append(E.Range(_index(idx, n.dtype, what), ops.const(1, n.dtype)))
                continue
            if idx.step is not None and not (isinstance(idx.step, int) and idx.step == 1):
                raise LoomValueError(f"{what}: the slice has step {idx.step}; a region is contiguous (no step)")
            lo = _index(idx.start, n.dtype, what) if idx.start is not None else ops.const(0, n.dtype)
            hi = _index(idx.stop, n.dtype, what) if idx.stop is not None else n
            extent = an.simplify(hi - lo)
            if an.can_prove(lo < 0) or an.can_prove(extent <= 0) or an.can_prove(hi > n):
                raise LoomValueError(f"{what}: the slice {lo}:{hi} is empty or outside the dimension's "
                                     f"[0, {n}) (negative indices do not count from the end)")
            ranges.append(E.Range(lo, extent))
        return TensorRegion(tensor, ranges, used)

    @property
    def dtype(self) -> DataType:
        return self.tensor.dtype

    def as_expr(self) -> Any:
        raise LoomValueError(f"{self!r} is a region of {self.tensor.name}, not an element: only a tensor intrinsic "
                             f"call takes regions (intrin({self!r}, ...)); index with numbers for an element")

    def __repr__(self) -> str:
        def text(r: E.Range) -> str:
            return str(r.min) if _is_one(r.extent) else f"{r.min}:{Analyzer().simplify(r.min + r.extent)}"

        return f"{self.tensor.name}[{', '.join(text(r) for r in self.ranges)}]"

    def _not_a_value(self, *_: Any) -> Any:
        return self.as_expr()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _not_a_value
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = _not_a_value


class TensorIntrinCall:
    """``intrin(regions..., scalars..., reduce_axis=...)``: the whole body of a compute (a TensorComputeOp)."""

    def __init__(self, intrin: TensorIntrin, regions: list[TensorRegion], reduce_axis: tuple[E.IterVar, ...],
                 scalar_inputs: list[E.PrimExpr]) -> None:
        self.intrin, self.regions, self.reduce_axis, self.scalar_inputs = intrin, regions, reduce_axis, scalar_inputs

    def as_expr(self) -> Any:
        raise LoomValueError(f"{self!r} is a call of the tensor intrinsic {self.intrin.name}: it is the whole body of "
                             "a compute (return it from fcompute), not a value inside an expression")

    def __repr__(self) -> str:
        args = [repr(r) for r in self.regions] + [str(x) for x in self.scalar_inputs]
        return f"{self.intrin.name}({', '.join(args)})"

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = TensorRegion._not_a_value
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = TensorRegion._not_a_value


def bind_extents(checks: Sequence[tuple[Any, ...]], what: str, an: Analyzer,
                 where: str) -> tuple[dict[E.Var, E.PrimExpr], list[tuple[E.PrimExpr, str]]]:
    """Compare the intrinsic's extents with those ``where`` covers: ``checks`` are ``(name, intrinsic's,
    covered)``, or ``(name, intrinsic's, covered, where)``.  Returns the intrinsic's extent variables
    bound to the covered values, and the assertions of the equalities left to run time.

    :raises LoomValueError: for an extent provably different.
    """
    bound: dict[E.Var, E.PrimExpr] = {}
    asserts: list[tuple[E.PrimExpr, str]] = []
    for name, want, have, *place in checks:
        where = place[0] if place else where
        want = substitute(want, bound)
        have = ops.cast(have, want.dtype) if have.dtype != want.dtype else have
        if isinstance(want, E.Var):  # a symbolic size of the intrinsic: this region's
            bound[want] = have
        elif not an.can_prove_equal(want, have):
            if an.can_prove(ops.ne(want, have)):
                raise LoomValueError(f"{what}: {name} has extent {want} in the intrinsic but {have} in {where}")
            asserts.append((ops.eq(want, have), f"{what}: {name} has extent {want} in the intrinsic but {where} "
                                                "cover another"))
    return bound, asserts


def _region_of(arg: Any) -> Optional[TensorRegion]:
    if isinstance(arg, TensorRegion):
        return arg
    if isinstance(arg, Tensor):
        return TensorRegion.of(arg, ())
    if isinstance(arg, TensorSlice):
        return TensorRegion.of(arg.tensor, arg.indices)
    if isinstance(arg, ProducerLoad) and isinstance(arg.producer, Tensor):
        return TensorRegion.of(arg.producer, tuple(arg.indices))  # A[i, j]: one element, as TVM took it
    return None


def _scalar(x: Any, param: E.Var, what: str) -> E.PrimExpr:
    if isinstance(x, (bool, int, float)):
        return ops.const(x, param.dtype)
    try:
        e = ops.convert_expr(x)
    except LoomTypeError as err:
        raise LoomTypeError(f"{what}: the value of scalar parameter {param.name}: {err}") from err
    if e.dtype != param.dtype:
        raise LoomTypeError(f"{what}: scalar parameter {param.name} is {param.dtype}, given {e} of dtype {e.dtype}")
    return e


def _input_checks(intrin: TensorIntrin, regions: Sequence[tuple[Tensor, Sequence[E.Range]]], what: str,
                  an: Analyzer) -> list[tuple[Any, ...]]:
    """Ranks, dtypes and single-element leading dimensions now; the extents to compare, returned."""
    checks: list[tuple[Any, ...]] = []
    for k, ((t, ranges), it) in enumerate(zip(regions, intrin.inputs)):
        lead = t.ndim - it.ndim
        if lead < 0:
            raise LoomValueError(f"{what}: argument {k} is a region of the {t.ndim}-d tensor {t.name}, but the "
                                 f"intrinsic's input {it.name} has {it.ndim} dimensions")
        if t.dtype != it.dtype:
            raise LoomTypeError(f"{what}: argument {k} ({t.name}) is {t.dtype}, the intrinsic's input {it.name} "
                                f"{it.dtype}")
        for d in range(lead):
            if not an.can_prove_equal(ranges[d].extent, 1):
                raise LoomValueError(f"{what}: argument {k} covers {ranges[d].extent} elements of dimension {d} of "
                                     f"{t.name}; the intrinsic's input {it.name} is {it.ndim}-d, so each of the "
                                     f"region's {lead} leading dimension(s) must cover a single element")
        for d, n in enumerate(it.shape):
            checks.append((f"dimension {d} of input {it.name} (argument {k}, {t.name})", n, ranges[lead + d].extent))
    return checks


def call_intrin(intrin: TensorIntrin, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TensorIntrinCall:
    """``intrin(*args, **kwargs)``: see :meth:`TensorIntrin.__call__`; the checks that need no outer axes."""
    what = f"call of tensor intrinsic {intrin.name!r}"
    unknown = sorted(set(kwargs) - {"reduce_axis"})
    if unknown:
        raise LoomTypeError(f"{what}: unknown keyword argument(s) {unknown}; only reduce_axis is taken")
    found = [_region_of(a) for a in args]
    regions = [r for r in found if r is not None]
    scalars = [a for a, r in zip(args, found) if r is None]
    # Regions and scalars may interleave (TVM's order): each kind keeps its own order.
    if len(regions) != len(intrin.inputs) or len(scalars) != len(intrin.scalar_params):
        raise LoomValueError(f"{what}: expected {len(intrin.inputs)} tensor region(s) (for "
                             f"{[t.name for t in intrin.inputs]}) and {len(intrin.scalar_params)} scalar(s) (for "
                             f"{[v.name for v in intrin.scalar_params]}); got {len(regions)} region(s) and "
                             f"{len(scalars)} other argument(s) {scalars} (a region slices: A[i, 0:16])")
    bind_extents(_input_checks(intrin, [(r.tensor, r.ranges) for r in regions], what, Analyzer()), what,
                 Analyzer(), "the region")  # a constant mismatch is an error now
    raw = kwargs.get("reduce_axis", ())
    reduce_axis = tuple(raw) if isinstance(raw, (list, tuple)) else (raw,)
    for iv in reduce_axis:
        if not isinstance(iv, E.IterVar) or iv.iter_type != "reduce":
            raise LoomTypeError(f"{what}: reduce_axis must hold reduction axes (loom.reduce_axis), got {iv!r}")
    if len({id(iv) for iv in reduce_axis}) != len(reduce_axis):
        raise LoomValueError(f"{what}: reduce_axis names an axis twice")
    for r in regions:
        for iv in r.reduce_axes:
            if not any(iv is x for x in reduce_axis):
                raise LoomValueError(f"{what}: the region {r!r} uses the reduction axis {iv.var.name}, which "
                                     "reduce_axis does not name; pass reduce_axis=" + iv.var.name)
    if reduce_axis and (intrin.reduce_update is None or intrin.reduce_init is None and intrin.body is None):
        raise LoomValueError(f"{what}: with reduce_axis the intrinsic needs a reduce_update and a reduce_reset (or a "
                             "body for the first step): fcompute returning (body, reduce_reset, reduce_update)")
    if not reduce_axis and intrin.body is None:
        raise LoomValueError(f"{what}: the intrinsic has no body, only reduce parts; call it with reduce_axis=")
    values = [_scalar(x, p, what) for x, p in zip(scalars, intrin.scalar_params)]
    return TensorIntrinCall(intrin, regions, reduce_axis, values)


@register_object("te.TensorComputeOp")
class TensorComputeOp(Operation):
    """A tensor intrinsic computing one block of the output per point of its outer axes.

    ``axis`` has one axis per output dimension: the outer (schedulable) axes, then an
    ``"opaque"`` axis over each dimension of the intrinsic's block, whose extents are
    :attr:`intrin_shape`; ``reduce_axis`` are the reduction axes of the call.  The block
    has the intrinsic's output rank, or fewer dimensions by :attr:`merged_dims` when the
    intrinsic's leading dimensions (extent 1) lie at the last outer axes.  Input
    ``k`` is ``inputs[k]`` over the region ``input_regions[k]`` (kept flat in
    ``regions``); ``scalar_inputs`` are the values of the intrinsic's scalar parameters.
    """

    name: str = val(str)
    axis: TupleOf[E.IterVar] = children(E.IterVar)
    reduce_axis: TupleOf[E.IterVar] = children(E.IterVar)
    intrin: TensorIntrin = child(TensorIntrin)
    inputs: TupleOf[Tensor] = children(Tensor)
    regions: TupleOf[E.Range] = children(E.Range)
    scalar_inputs: TupleOf[E.PrimExpr] = children(E.PrimExpr)
    tag: str = val(str, default="")
    attrs: DictOf[str, Any] = mapping()

    def __attrs_post_init__(self) -> None:
        what = f"tensor compute {self.name}"
        if len(self.inputs) != len(self.intrin.inputs) or len(self.scalar_inputs) != len(self.intrin.scalar_params):
            raise IRError(f"{what}: {len(self.inputs)} inputs and {len(self.scalar_inputs)} scalars for an intrinsic "
                          f"taking {len(self.intrin.inputs)} and {len(self.intrin.scalar_params)}")
        if len(self.regions) != sum(t.ndim for t in self.inputs):
            raise IRError(f"{what}: {len(self.regions)} ranges for inputs of {sum(t.ndim for t in self.inputs)} "
                          "dimensions in all")
        for iv in self.axis + self.reduce_axis:
            if iv.dom is None:
                raise IRError(f"{what}: axis {iv.var.name} has no domain")
        if any(iv.iter_type == "opaque" for iv in self.schedulable_axis):
            raise IRError(f"{what}: the opaque axes of the intrinsic's block must come after the outer axes")
        if not 0 <= self.merged_dims <= self.schedulable_ndim:
            raise IRError(f"{what}: intrin_shape has {len(self.intrin_shape)} dimensions, the intrinsic's outputs "
                          f"{self.intrin.op.output(0).ndim}, with {self.schedulable_ndim} outer axes")

    @property
    def num_outputs(self) -> int:
        return self.intrin.op.num_outputs

    @property
    def schedulable_ndim(self) -> int:
        """How many of ``axis`` are outer axes, which schedules split, reorder and bind."""
        return len(self.axis) - sum(iv.iter_type == "opaque" for iv in self.axis)

    @property
    def intrin_shape(self) -> tuple[E.PrimExpr, ...]:
        """The extents of the intrinsic's block: those of the opaque axes."""
        return tuple(iv.dom.extent for iv in self.axis[self.schedulable_ndim:] if iv.dom is not None)

    @property
    def schedulable_axis(self) -> tuple[E.IterVar, ...]:
        """The outer axes: ``axis`` without the opaque axes of the intrinsic's block."""
        return self.axis[:self.schedulable_ndim]

    @property
    def merged_dims(self) -> int:
        """How many leading dimensions of the intrinsic's output lie at outer axes (one element each)."""
        return self.intrin.op.output(0).ndim - len(self.intrin_shape)

    def output_shape(self, index: int) -> tuple[E.PrimExpr, ...]:
        return tuple(iv.dom.extent for iv in self.axis if iv.dom is not None)

    def output_dtype(self, index: int) -> DataType:
        return self.intrin.op.output_dtype(index)

    @property
    def input_tensors(self) -> list[Tensor]:
        return unique_tensors(self.inputs)

    @property
    def input_regions(self) -> list[list[E.Range]]:
        """The region of each input: one Range per dimension, in the outer and reduction axes' variables."""
        out, k = [], 0
        for t in self.inputs:
            out.append(list(self.regions[k:k + t.ndim]))
            k += t.ndim
        return out

    def extents(self, an: Analyzer, what: str) -> tuple[dict[E.Var, E.PrimExpr], list[tuple[E.PrimExpr, str]]]:
        """The intrinsic's symbolic sizes bound to the regions', and the extent checks left to run time."""
        regions = list(zip(self.inputs, self.input_regions))
        checks = _input_checks(self.intrin, regions, what, an)
        shape = self.intrin.op.output(0).shape
        one = [ops.const(1, n.dtype) for n in shape[:self.merged_dims]]
        checks += [(f"output dimension {d}", n, m, "the shape given to compute" if d >= len(one) else
                    "an outer axis (one element)") for d, (n, m) in enumerate(zip(shape, [*one, *self.intrin_shape]))]
        return bind_extents(checks, what, an, "the call's regions")


def fewer_indices(fcompute: Callable[..., Any], ndim: int) -> Optional[list[str]]:
    """The names of fcompute's index parameters when it takes fewer than ``ndim`` (and no ``*args``): the outer
    indices of an intrinsic call's compute, or a mistake."""
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.KEYWORD_ONLY) and p.default is p.empty for p in params):
        return None
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names if len(names) < ndim else None


def try_tensor_compute(extents: tuple[E.PrimExpr, ...], fcompute: Callable[..., Any], name: str, tag: str,
                       attrs: Optional[dict[str, Any]], what: str) -> Any:
    """``compute`` whose fcompute takes fewer indices than the shape has dimensions: the outputs of a
    TensorComputeOp when fcompute returns an intrinsic call, else None (the caller reports the arity)."""
    names = fewer_indices(fcompute, len(extents))
    if names is None:
        return None
    axis = tuple(E.IterVar(E.Range(ops.const(0, n.dtype), n), E.Var(a, n.dtype), "data_par")
                 for a, n in zip(names, extents))
    try:
        result = fcompute(*(iv.var for iv in axis))
    except Exception as err:
        ours = (call_intrin.__code__, TensorRegion.of.__code__)
        if any(frame.f_code in ours for frame, _ in traceback.walk_tb(err.__traceback__)):
            raise  # a misused intrinsic call or region
        return None  # no intrinsic call: the caller's arity error says more
    if not isinstance(result, TensorIntrinCall):
        return None
    return tensor_compute(extents, axis, result, name, tag, attrs, what)


def tensor_compute(extents: tuple[E.PrimExpr, ...], axis: tuple[E.IterVar, ...], call: TensorIntrinCall, name: str,
                   tag: str, attrs: Optional[dict[str, Any]], what: str) -> Any:
    """The outputs of the TensorComputeOp of ``call`` over ``axis`` (``extents`` is compute's whole shape)."""
    intrin = call.intrin
    inner = extents[len(axis):]
    shape = intrin.op.output(0).shape
    # TVM's fuzzy rank: an intrinsic output of more dimensions than the shape leaves it
    # covers one element of as many outer axes with its leading (extent-1) dimensions.
    if inner and not 0 <= len(shape) - len(inner) <= len(axis):
        raise LoomValueError(f"{what}: the shape has {len(extents)} dimensions: fcompute takes {len(axis)} "
                             f"index(es) and the intrinsic {intrin.name} computes {len(shape)}-d outputs "
                             f"{list(shape)}, so give {len(axis) + len(shape)} (or the {len(axis)} outer ones, or "
                             f"{max(len(axis), len(shape))} with the intrinsic's leading dimensions of extent 1 at "
                             "outer axes)")
    an = Analyzer()
    for iv in axis + call.reduce_axis:
        assert iv.dom is not None  # compute's axes and reduce_axis have domains
        an.bind(iv.var, iv.dom, allow_override=True)
    regions = [(r.tensor, r.ranges) for r in call.regions]
    sizes, _ = bind_extents(_input_checks(intrin, regions, what, an), what, an, "the call's regions")
    if not inner:
        inner = tuple(an.simplify(substitute(n, sizes)) for n in shape)
        own = {id(v) for n in shape for v in collect(n, lambda x: isinstance(x, E.Var))}
        if any(id(v) in own for n in inner for v in collect(n, lambda x: isinstance(x, E.Var))):
            raise LoomValueError(f"{what}: the intrinsic's output shape {list(shape)} is not fixed by its inputs' "
                                 "regions; give compute the whole shape")
    block = tuple(E.IterVar(E.Range(ops.const(0, n.dtype), n), E.Var(f"ax{d}", n.dtype), "opaque")
                  for d, n in enumerate(inner))
    op = TensorComputeOp(name, axis + block, call.reduce_axis, intrin, [r.tensor for r in call.regions],
                         [x for r in call.regions for x in r.ranges], call.scalar_inputs, tag, dict(attrs or {}))
    op.extents(an, what)  # the output extents, against the intrinsic's
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def tensor_compute_reads(op: TensorComputeOp, dom_map: dict[E.Var, IntervalSet],
                         targets: dict[Any, list[list[IntervalSet]]], an: Analyzer) -> None:
    """Add the regions ``op`` reads, over the axis sets of ``dom_map``, to ``targets`` (bound inference)."""
    for t, ranges in zip(op.inputs, op.input_regions):
        dims = targets.get(t)
        if dims is None:
            continue
        for k, (r, n) in enumerate(zip(ranges, t.shape)):
            lo = eval_set(r.min, dom_map, an).min
            hi = eval_set(an.simplify(r.min + r.extent - 1), dom_map, an).max  # A[i:10]: i cancels
            zero = ops.const(0, n.dtype)
            if lo is None or an.can_prove(lo <= zero):
                lo = zero
            if hi is None or an.can_prove(hi >= n - 1):
                hi = an.simplify(n - 1)
            dims[k].append(IntervalSet(lo, hi))


def _tensor_compute_text(p: Any, op: TensorComputeOp) -> str:
    outs = ", ".join(p.name(op.output(k), op.output(k).name) for k in range(op.num_outputs))
    args = [repr(TensorRegion(t, rs, [])) for t, rs in zip(op.inputs, op.input_regions)]
    args += [p.expr(x) for x in op.scalar_inputs]
    if op.reduce_axis:
        args.append("reduce_axis=[" + ", ".join(p.expr(iv.var) for iv in op.reduce_axis) + "]")
    axes = ", ".join(f"{p.expr(iv.var)}: {p.node(iv.dom)}" for iv in op.schedulable_axis + op.reduce_axis)
    index = ", ".join(p.expr(iv.var) for iv in op.schedulable_axis)
    return f"tensor_compute {outs}[{index}] = {op.intrin.name}({', '.join(args)})  # over {axes}"


register_node_printer(TensorComputeOp, _tensor_compute_text)
