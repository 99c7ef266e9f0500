"""``Schedule.rfactor``: factor a reduction loop out into a tensor of partial results.

``BF = s.rfactor(B, ki)`` splits the reduction ``B`` in two stages:

- ``BF`` (``<B>.rf``) gets a new data axis, ``ki``'s loop, and reduces over the
  rest of ``B``'s reduction (the other leaf loops of the reduction axes ``ki``
  derives from, and the untouched reduction axes), with a bound check when a
  split does not divide;
- ``B``'s stage now reduces ``BF`` over that new axis (``s[B].op.reduce_axis[0]``,
  named ``<ki>.v``).  It starts over with fresh loops: its earlier
  ``split``/``bind`` were about the old reduction; its placement is kept, and it
  still stores the tensors users hold (``stage.origin_op``).

``factor_axis`` places the new axis among ``BF``'s dimensions (negative counts
from the end, as in Python).  A tuple reduction (argmax) gives one ``BF``
tensor per output.  Binding ``s[B].op.reduce_axis[0]`` to ``threadIdx.x``
makes a cross-thread reduction (:mod:`loom.te.cross_thread`).

>>> from loom.te.operation import placeholder, compute
>>> from loom.te.reduction import reduce_axis, sum
>>> from loom.te.schedule import create_schedule
>>> A = placeholder((8, 64), name="A")
>>> k = reduce_axis((0, 64), name="k")
>>> B = compute((8,), lambda i: sum(A[i, k], axis=k), name="B")
>>> s = create_schedule(B.op)
>>> ko, ki = s[B].split(k, factor=16)
>>> BF = rfactor(s, B, ki)
>>> BF.name, [int(x) for x in BF.shape], [iv.var.name for iv in BF.op.reduce_axis]
('B.rf', [16, 8], ['k.outer'])
>>> [iv.var.name for iv in s[B].op.reduce_axis], [st.op.name for st in s.stages]
(['k.inner.v'], ['A', 'B.rf', 'B'])
"""

from __future__ import annotations

from typing import Any

from ..arith import Analyzer
from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import substitute
from ..ir.intrin import likely
from ..ir.reduce import Reduce
from .loop_nest import make_bound_check
from .relations import Fuse, Rebase, Split, pass_down_domain, pass_up_index
from .schedule import Schedule, Stage, root_iter_vars
from .schedule_loops import check_leaf
from .tensor import ComputeOp, Tensor

__all__ = ["rfactor"]


def _touched(stage: Stage, axis: E.IterVar) -> set[E.IterVar]:
    """``axis``, the axes it derives from, and every loop derived from those."""
    touched = {axis}
    for rel in reversed(stage.relations):
        if isinstance(rel, Split) and (rel.outer in touched or rel.inner in touched):
            touched.add(rel.parent)
        elif isinstance(rel, Fuse) and rel.fused in touched:
            touched.update((rel.outer, rel.inner))
        elif isinstance(rel, Rebase) and rel.rebased in touched:
            touched.add(rel.parent)
    for rel in stage.relations:
        if isinstance(rel, Split) and rel.parent in touched:
            touched.update((rel.outer, rel.inner))
        elif isinstance(rel, Fuse) and (rel.outer in touched or rel.inner in touched):
            touched.add(rel.fused)
        elif isinstance(rel, Rebase) and rel.parent in touched:
            touched.add(rel.rebased)
    return touched


def _check(sch: Schedule, tensor: Any, axis: Any, factor_axis: Any) -> tuple[Stage, ComputeOp, int]:
    if not isinstance(tensor, Tensor):
        raise LoomTypeError(f"rfactor expects the reduction's Tensor, got {type(tensor).__name__}")
    stage = sch[tensor]
    op = stage.op
    if not isinstance(op, ComputeOp) or not op.reduce_axis:
        raise LoomValueError(f"rfactor of {tensor.name}: its stage computes no reduction (a compute whose body "
                             f"is loom.sum/max/min or a comm_reducer over reduce_axis)")
    check_leaf(stage, axis, "rfactor")
    if axis.iter_type != "reduce":
        raise LoomValueError(f"rfactor of {op.name}: {axis.var.name} is a data-parallel loop; rfactor factors out "
                             f"a reduction loop (one of {[iv.var.name for iv in stage.leaf_iter_vars if iv.iter_type == 'reduce']})")
    if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
        raise LoomTypeError(f"rfactor of {op.name}: factor_axis must be an int, got {factor_axis!r}")
    ndim = len(op.axis)
    pos = factor_axis if factor_axis >= 0 else ndim + 1 + factor_axis
    if not 0 <= pos <= ndim:
        raise LoomValueError(f"rfactor of {op.name}: factor_axis={factor_axis} is out of range for a factored tensor "
                             f"of {ndim + 1} dimensions (use -{ndim + 1}..{ndim})")
    for other in sch.stages:
        if other.attach_stage is stage and other.attach_type == "scope" and other.attach_ivar is not None:
            raise LoomValueError(f"rfactor of {op.name}: {other.op.name} is computed at {op.name}.{other.attach_ivar.var.name}, "
                                 f"a loop rfactor replaces; compute it at the root first and place it afterwards")
    return stage, op, pos


def _partial_values(stage: Stage, op: ComputeOp, axis: E.IterVar,
                    touched: set[E.IterVar]) -> tuple[dict[E.IterVar, E.Range], dict[E.IterVar, E.PrimExpr], list[E.PrimExpr]]:
    """Domains of every loop, the touched reduction axes in the touched leaves' variables, and bound checks."""
    an = Analyzer()
    dom_map: dict[E.IterVar, E.Range] = {}
    for iv in root_iter_vars(op):
        assert iv.dom is not None  # a compute's axes have domains
        dom_map[iv] = iv.dom
        an.bind(iv.var, iv.dom, allow_override=True)
    pass_down_domain(stage, dom_map, an)
    values: dict[E.IterVar, E.PrimExpr] = {}
    for iv in stage.leaf_iter_vars:
        if iv in touched:
            lo = dom_map[iv].min
            # BF's new axis counts from zero; the other leaves keep their own range as BF's reduction axes
            shifted = iv is axis and not (isinstance(lo, E.IntImm) and lo.value == 0)
            values[iv] = iv.var + lo if shifted else iv.var
    pass_up_index(stage, dom_map, values)
    skip = set(op.axis) | {iv for iv in op.reduce_axis if iv not in touched}
    preds = make_bound_check(stage, dom_map, values, True, skip)
    return dom_map, values, preds


def rfactor(sch: Schedule, tensor: Tensor, axis: E.IterVar,
            factor_axis: int = 0) -> Tensor[ComputeOp] | list[Tensor[ComputeOp]]:
    """Factor the reduction loop ``axis`` of ``tensor``'s stage into a new tensor; see the module docstring."""
    stage, op, pos = _check(sch, tensor, axis, factor_axis)
    touched = _touched(stage, axis)
    data = [iv.var.name for iv in op.axis if iv in touched]
    if data:
        raise LoomValueError(f"rfactor of {op.name}: {axis.var.name} is fused with the data axis {data[0]}; "
                             f"rfactor factors out loops of the reduction only")
    dom_map, values, preds = _partial_values(stage, op, axis, touched)
    red = op.body[0]
    assert isinstance(red, Reduce)  # a compute with reduction axes has Reduce bodies
    vsub = {iv.var: values[iv] for iv in op.reduce_axis if iv in touched}
    cond = substitute(red.condition, vsub)
    if not (isinstance(cond, E.IntImm) and cond.value == 1):
        preds.append(cond)
    extent = dom_map[axis].extent
    new_axis = E.IterVar(E.Range(ops.const(0, extent.dtype), extent), axis.var, "data_par")
    rf_axes = list(op.axis)
    rf_axes.insert(pos, new_axis)
    rf_reduce = [iv for iv in op.reduce_axis if iv not in touched]
    for iv in stage.leaf_iter_vars:
        if iv in touched and iv is not axis:
            rf_reduce.append(E.IterVar(dom_map[iv], iv.var, "reduce"))
    sources = [substitute(s, vsub) for s in red.source]
    rf_op = ComputeOp(f"{op.name}.rf", rf_axes, rf_reduce, _partial_bodies(red, sources, rf_reduce, preds))
    # B reduces BF over the new axis, with fresh data axes (BF keeps the old ones).
    rv = E.IterVar(new_axis.dom, E.Var(f"{axis.var.name}.v", extent.dtype), "reduce")
    axes = [E.IterVar(iv.dom, E.Var(iv.var.name, iv.var.dtype), "data_par") for iv in op.axis]
    index: list[E.PrimExpr] = [iv.var for iv in axes]
    index.insert(pos, rv.var)
    loads = [rf_op.output(k)[tuple(index)] for k in range(rf_op.num_outputs)]
    renamed = {old.var: new.var for old, new in zip(op.axis, axes)}
    init = [substitute(v, renamed) for v in red.init]
    true = ops.const(True)
    bodies = [Reduce(red.combiner, loads, [rv], true, k, init) for k in range(len(loads))]
    repl = ComputeOp(op.name, axes, (rv,), bodies, op.tag, op.attrs)
    rf_stage = Stage(rf_op)
    rf_stage.group = getattr(stage, "group", None)
    sch.stages.insert(sch.stages.index(stage), rf_stage)
    sch.stage_map[rf_op] = rf_stage
    stage.op = repl
    sch.stage_map[repl] = stage
    stage.all_iter_vars = list(root_iter_vars(repl))
    stage.leaf_iter_vars = list(stage.all_iter_vars)
    stage.relations, stage.iter_var_attrs, stage.storage_aligns = [], {}, {}
    outs = [rf_op.output(k) for k in range(rf_op.num_outputs)]
    return outs[0] if len(outs) == 1 else outs


def _partial_bodies(red: Reduce, sources: list[E.PrimExpr], axes: list[E.IterVar],
                    preds: list[E.PrimExpr]) -> list[E.PrimExpr]:
    """BF's bodies: a reduction over ``axes``, or (none left) each source where the checks hold."""
    cond = ops.all(*preds) if preds else None
    if not axes:  # a reduction over nothing: the value itself, or the identity where it does not count
        ident = red.combiner.identity_element
        return [s if cond is None else ops.select(cond, s, i) for s, i in zip(sources, ident)]
    where = likely(cond) if cond is not None else ops.const(True)
    return [Reduce(red.combiner, sources, axes, where, k) for k in range(len(sources))]
