"""Tensorize, part one: the region the tensorized loops cover, and whether they compute the intrinsic.

:func:`infer_region` finds, for the loops of a stage from the tensorized one
inward (the loops outside stay fixed at their current iteration), the range of
every axis of the operation and the region of every input it reads (TVM's
``InferTensorizeRegion``).  :func:`match_body` rewrites the stage's computation
in the intrinsic's terms (axis ``i`` covering ``[m, m + e)`` becomes the
intrinsic's axis ``i' + m``, an input region becomes the intrinsic's input)
and requires it to equal the intrinsic's pattern after simplification (TVM's
``VerifyTensorizeBody``); the errors say which part differs.

Leading dimensions of extent one match nothing ("fuzzy" matching): a
``[1, 16]`` region of a 2-d tensor matches a 1-d intrinsic input of 16.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..arith import Analyzer
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import Mutator, collect
from ..ir.node import Node, fields_of
from ..ir.producer import ProducerLoad
from ..ir.reduce import Reduce
from ..ir.structural import structural_equal
from .bound import _ReadRegions, _pass_up_domain
from ..arith.int_set import IntervalSet, cover_range, union
from .schedule import root_iter_vars
from .tensor import Tensor
from .tensor_intrin import TensorIntrin

__all__ = ["Region", "infer_region", "match_body", "reads_of"]


@attrs.frozen(eq=False)
class Region:
    """What the tensorized loops cover: a range per axis of the operation, a region per input tensor."""

    axes: dict[E.IterVar, E.Range]
    inputs: dict[Tensor, list[E.Range]]


def _is_one(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def reads_of(bodies: tuple[E.PrimExpr, ...]) -> list[Tensor]:
    """The tensors ``bodies`` read, in first-use order (as ``ComputeOp.input_tensors`` lists them)."""
    seen: dict[int, Tensor] = {}
    for b in bodies:
        for load in collect(b, lambda n: isinstance(n, ProducerLoad)):
            seen.setdefault(id(load.producer), load.producer)
    return list(seen.values())


def infer_region(stage: Any, bodies: tuple[E.PrimExpr, ...], dom_map: dict[E.IterVar, E.Range],
                 values: dict[E.IterVar, E.PrimExpr], tloc: int) -> Region:
    """The region computed by one execution of the loops ``stage.leaf_iter_vars[tloc:]``.

    The loops outside are at the iteration ``values`` gives (their loop variables).
    """
    an = Analyzer()
    for iv, r in dom_map.items():
        an.bind(iv.var, r, allow_override=True)
    up: dict[E.IterVar, IntervalSet] = {}
    for k, iv in enumerate(stage.leaf_iter_vars):
        r = dom_map[iv]
        if _is_one(r.extent):
            up[iv] = IntervalSet.point(r.min)
        elif k < tloc:
            up[iv] = IntervalSet.point(values[iv])
        else:
            up[iv] = IntervalSet.from_range(r)
    _pass_up_domain(stage, dom_map, up, an)
    axes = {iv: cover_range(up.get(iv), dom_map[iv], an) for iv in root_iter_vars(stage.op)}
    inputs = reads_of(bodies)
    targets: dict[Any, list[list[IntervalSet]]] = {t: [[] for _ in t.shape] for t in inputs}
    sets = {iv.var: IntervalSet.from_range(r) for iv, r in axes.items()}
    reader = _ReadRegions(targets, sets, an)
    for b in bodies:
        reader.visit(b)
    regions = {}
    for t in inputs:
        regions[t] = [cover_range(union(dims, an), E.Range(ops.const(0, n.dtype), n), an)
                      for dims, n in zip(targets[t], t.shape)]
    return Region(axes, regions)


class _ToIntrinsic(Mutator):
    """The stage's computation in the intrinsic's variables and tensors."""

    def __init__(self, vmap: dict[E.Var, E.PrimExpr], inputs: dict[Tensor, tuple[Tensor, int, list[E.Range]]],
                 axes: dict[E.IterVar, E.IterVar]) -> None:
        self.vmap, self.inputs, self.axes = vmap, inputs, axes

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.vmap.get(v, v)

    def visit_ProducerLoad(self, e: ProducerLoad) -> E.PrimExpr:
        idx = [self.visit(i) for i in e.indices]
        found = self.inputs.get(e.producer)
        if found is None:
            return e.with_(indices=tuple(idx))
        tensor, lead, region = found
        return ProducerLoad(tensor, [i - r.min for i, r in zip(idx[lead:], region[lead:])])

    def visit_Reduce(self, e: Reduce) -> E.PrimExpr:
        # Axes fixed by the region (extent one) are gone; the others are the intrinsic's.  The
        # IterVars themselves are not visited: their variables map to expressions.
        axis = tuple(self.axes[iv] for iv in e.axis if iv in self.axes)
        return Reduce(e.combiner, tuple(self.visit(x) for x in e.source), axis, self.visit(e.condition),
                      e.value_index, tuple(self.visit(x) for x in e.init))


def _require_one(an: Analyzer, extent: E.PrimExpr, message: str) -> None:
    if not an.can_prove_equal(extent, 1):
        raise LoomValueError(message)


def _map_axes(stage_axes: tuple[E.IterVar, ...], intrin_axes: tuple[E.IterVar, ...], region: Region, what: str,
              kind: str, an: Analyzer, vmap: dict, axes: dict, extents: list) -> None:
    lead = len(stage_axes) - len(intrin_axes)
    if lead < 0:
        raise LoomValueError(f"{what}: the intrinsic has {len(intrin_axes)} {kind} axes, the stage only "
                             f"{len(stage_axes)}")
    for k, iv in enumerate(stage_axes):
        r = region.axes[iv]
        if k < lead:
            _require_one(an, r.extent, f"{what}: {kind} axis {iv.var.name} covers {r.extent} iterations in the "
                         f"tensorized loops, but the intrinsic has only {len(intrin_axes)} {kind} axes, so the "
                         "axes it lacks must cover one")
            vmap[iv.var] = r.min
            continue
        target = intrin_axes[k - lead]
        vmap[iv.var] = target.var + r.min if not (isinstance(r.min, E.IntImm) and r.min.value == 0) else target.var
        axes[iv] = target
        assert target.dom is not None  # a compute's axes have domains
        extents.append((f"{kind} axis {target.var.name}", target.dom.extent, r.extent))
        an.bind(target.var, target.dom, allow_override=True)


def _unify(pattern: Any, expr: Any, params: dict[int, E.Var], found: dict[E.Var, E.PrimExpr]) -> None:
    """Bind the pattern's scalar parameters to the parts of ``expr`` at their places (a loose walk:
    the structural comparison after substituting them is the real check)."""
    if isinstance(pattern, E.Var) and id(pattern) in params:
        if isinstance(expr, E.PrimExpr):
            found.setdefault(pattern, expr)
        return
    if type(pattern) is not type(expr):
        return
    if isinstance(pattern, tuple):
        for a, b in zip(pattern, expr):
            _unify(a, b, params, found)
    elif isinstance(pattern, Node):
        for f in fields_of(type(pattern)):
            _unify(getattr(pattern, f.name), getattr(expr, f.name), params, found)


def match_body(stage: Any, bodies: tuple[E.PrimExpr, ...], region: Region, intrin: TensorIntrin,
               what: str) -> tuple[list[tuple[str, E.PrimExpr, E.PrimExpr]], dict[E.Var, E.PrimExpr]]:
    """Check that the tensorized loops compute ``intrin``'s pattern.

    Returns the extents to compare ``(what, intrinsic's, region's)`` (the caller checks or asserts
    them) and the values of the intrinsic's scalar parameters.
    :raises LoomValueError: naming what differs.
    """
    op, iop = stage.op, intrin.op
    an = Analyzer()
    vmap: dict[E.Var, E.PrimExpr] = {}
    axes: dict[E.IterVar, E.IterVar] = {}
    extents: list[tuple[str, E.PrimExpr, E.PrimExpr]] = []
    _map_axes(tuple(op.axis), tuple(iop.axis), region, what, "data", an, vmap, axes, extents)
    _map_axes(tuple(op.reduce_axis), tuple(iop.reduce_axis), region, what, "reduction", an, vmap, axes, extents)
    inputs = reads_of(bodies)
    if len(inputs) != len(intrin.inputs):
        raise LoomValueError(f"{what}: the stage reads {len(inputs)} tensors {[t.name for t in inputs]}, the "
                             f"intrinsic {len(intrin.inputs)} {[t.name for t in intrin.inputs]}")
    remap: dict[Tensor, tuple[Tensor, int, list[E.Range]]] = {}
    for t, it in zip(inputs, intrin.inputs):
        regions = region.inputs[t]
        lead = len(regions) - it.ndim
        if lead < 0:
            raise LoomValueError(f"{what}: input {t.name} has {t.ndim} dimensions, the intrinsic's {it.name} {it.ndim}")
        for j in range(lead):
            _require_one(an, regions[j].extent, f"{what}: the tensorized loops read {regions[j].extent} elements of "
                         f"dimension {j} of {t.name}, which the intrinsic's {it.ndim}-d input {it.name} lacks")
        if t.dtype != it.dtype:
            raise LoomValueError(f"{what}: input {t.name} is {t.dtype}, the intrinsic's {it.name} {it.dtype}")
        for j, (r, n) in enumerate(zip(regions[lead:], it.shape)):
            extents.append((f"dimension {j} of input {it.name}", n, r.extent))
        remap[t] = (it, lead, regions)
    if op.num_outputs != iop.num_outputs:
        raise LoomValueError(f"{what}: the stage computes {op.num_outputs} outputs, the intrinsic {iop.num_outputs}")
    params = {id(v): v for v in intrin.scalar_params}
    mutator = _ToIntrinsic(vmap, remap, axes)
    found: dict[E.Var, E.PrimExpr] = {}
    for k, (mine, theirs) in enumerate(zip(bodies, iop.body)):
        if mine.dtype != theirs.dtype:
            raise LoomValueError(f"{what}: output {k} of the stage is {mine.dtype}, of the intrinsic {theirs.dtype}")
        lhs = an.canonical_simplify(an.simplify(mutator.visit(mine)))
        rhs = an.canonical_simplify(an.simplify(theirs))
        if params:
            _unify(rhs, lhs, params, found)
            rhs = an.canonical_simplify(an.simplify(_substitute_params(rhs, found)))
        if not structural_equal(lhs, rhs):
            raise LoomValueError(f"{what}: the computation does not match the intrinsic's: in the intrinsic's "
                                 f"terms the stage computes {lhs}, the intrinsic {rhs}")
    missing = [v.name for v in intrin.scalar_params if v not in found]
    if missing:
        raise LoomValueError(f"{what}: the scalar parameters {missing} do not occur in the intrinsic's computation")
    inner = {t.var for t in axes.values()}
    for v, e in found.items():
        if collect(e, lambda n: isinstance(n, E.Var) and n in inner):
            raise LoomValueError(f"{what}: scalar parameter {v.name} matches {e}, which varies inside the "
                                 "tensorized loops")
    return extents, found


def _substitute_params(e: E.PrimExpr, found: dict[E.Var, E.PrimExpr]) -> E.PrimExpr:
    from ..ir.functor import substitute

    return substitute(e, dict(found))
