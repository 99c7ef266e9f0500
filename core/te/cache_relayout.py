"""``cache_write`` of a stage whose loops were already split, fused or reordered.

The cache takes the layout of the stage's loops (TVM calls it a relayout): one
dimension per data-parallel leaf loop, in leaf order, so that the cache stage
computes in the order the user scheduled and the original stage becomes a copy
that reads ``cache[leaf values of its own axes]`` and keeps its loop structure.
Where a split does not divide its axis the cache has room for the overshoot;
those elements are guarded (zero, or the reducer's identity) so no input is read
out of bounds.
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import substitute
from ..ir.reduce import Reduce
from .relations import Fuse, Rebase, Split, pass_down_domain, pass_up_index
from .tensor import ComputeOp

__all__ = ["relayout_cache_op"]


def _pass_down_index(stage: Any, dom: dict[E.IterVar, E.Range], values: dict[E.IterVar, E.PrimExpr]) -> None:
    """The value of every derived loop variable from its parents' values (the inverse of pass_up_index)."""
    for rel in stage.relations:
        if isinstance(rel, Split):
            if rel.parent in values:
                v = values[rel.parent] - dom[rel.parent].min
                factor = dom[rel.inner].extent
                values[rel.outer], values[rel.inner] = ops.floordiv(v, factor), ops.floormod(v, factor)
        elif isinstance(rel, Fuse):
            if rel.outer in values and rel.inner in values:
                t = rel.fused.var.dtype
                outer = ops.cast(values[rel.outer] - dom[rel.outer].min, t)
                inner = ops.cast(values[rel.inner] - dom[rel.inner].min, t)
                values[rel.fused] = outer * ops.cast(dom[rel.inner].extent, t) + inner
        elif isinstance(rel, Rebase):
            if rel.parent in values:
                values[rel.rebased] = values[rel.parent] - dom[rel.parent].min
        else:
            values[rel.iter] = ops.const(0, rel.iter.var.dtype)


def _dom(iv: E.IterVar) -> E.Range:
    assert iv.dom is not None  # a compute operation's axes always have domains
    return iv.dom


def _check_reductions_untouched(stage: Any, op: ComputeOp) -> None:
    reduce_axes = set(op.reduce_axis)
    for rel in stage.relations:
        parents = [rel.parent] if isinstance(rel, (Split, Rebase)) else [rel.outer, rel.inner] if isinstance(rel, Fuse) else []
        touched = [iv for iv in parents if iv in reduce_axes]
        if touched:
            raise LoomValueError(f"cache_write of {op.name}: the reduction axis {touched[0].var.name} was already "
                                 f"split or fused; call cache_write before scheduling reduction axes")
    annotated = [iv for iv in stage.iter_var_attrs if iv in reduce_axes]
    if annotated:
        raise LoomValueError(f"cache_write of {op.name}: the reduction axis {annotated[0].var.name} is annotated; "
                             f"call cache_write before scheduling reduction axes")


def relayout_cache_op(stage: Any, op: ComputeOp, scope: str) -> tuple[ComputeOp, tuple[E.PrimExpr, ...]]:
    """The cache operation laid out like ``stage``'s data-parallel leaf loops, and the copy's index.

    Returns ``(cache_op, index)`` where ``cache_op.output(k)[index]`` is output
    ``k`` of ``op`` at its axes' values.
    """
    _check_reductions_untouched(stage, op)
    analyzer = Analyzer()
    dom: dict[E.IterVar, E.Range] = {iv: _dom(iv) for iv in op.axis}
    for iv in op.axis:
        analyzer.bind(iv.var, dom[iv])
    pass_down_domain(stage, dom, analyzer)
    reduce_axes = set(op.reduce_axis)
    leaves = [iv for iv in stage.leaf_iter_vars if iv not in reduce_axes]
    # Each data leaf becomes a cache axis starting at zero.
    new_axis = tuple(E.IterVar(E.Range(ops.const(0, dom[iv].extent.dtype), dom[iv].extent),
                               E.Var(f"{iv.var.name}.c", iv.var.dtype), "data_par") for iv in leaves)
    up: dict[E.IterVar, E.PrimExpr] = {iv: new.var + dom[iv].min for iv, new in zip(leaves, new_axis)}
    pass_up_index(stage, dom, up)
    vsub = {iv.var: analyzer.simplify(up[iv]) for iv in op.axis}
    bodies = tuple(substitute(b, vsub) for b in op.body)
    inside = [analyzer.simplify(ops.all(vsub[iv.var] >= dom[iv].min, vsub[iv.var] < dom[iv].min + dom[iv].extent))
              for iv in op.axis]
    bind = Analyzer()
    for new in new_axis:
        bind.bind(new.var, _dom(new))
    guards = [g for g in inside if not bind.can_prove(g)]
    if guards:  # a non-dividing split: the overshoot elements must not read past the inputs
        cond = ops.all(*guards)
        if isinstance(bodies[0], Reduce):
            bodies = tuple(Reduce(b.combiner, b.source, b.axis, ops.all(b.condition, cond), b.value_index, b.init)
                           for b in bodies if isinstance(b, Reduce))
        else:
            bodies = tuple(ops.select(cond, b, ops.const(0, b.dtype)) for b in bodies)
    if op.reduce_axis and not all(isinstance(b, Reduce) for b in bodies):
        raise LoomValueError(f"cache_write of {op.name}: a reduction's body must be a reduction")
    cache_op = ComputeOp(f"{op.name}.{scope}", new_axis, op.reduce_axis, bodies, op.tag, op.attrs)
    down: dict[E.IterVar, E.PrimExpr] = {iv: iv.var for iv in op.axis}
    _pass_down_index(stage, dom, down)
    index = tuple(analyzer.simplify(down[iv] - dom[iv].min) for iv in leaves)
    return cache_op, index
