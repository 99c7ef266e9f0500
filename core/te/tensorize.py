"""``Stage.tensorize``: replace a stage's innermost loops with a tensor intrinsic.

``s[C].tensorize(axis, intrin)`` records the request; lowering
(:func:`make_tensorize`, called by ``schedule_to_stmt`` for the stage) then

1. finds the region the loops from ``axis`` inward cover at one iteration of
   the loops outside (:func:`~loom.te.tensorize_match.infer_region`), refusing a
   bound check or an attached stage inside those loops;
2. checks the stage computes the intrinsic's pattern on that region
   (:func:`~loom.te.tensorize_match.match_body`), and that the extents agree
   (constants at once, symbolic ones by an assertion at run time; an extent of
   the intrinsic that is a variable takes the region's value);
3. emits the loops outside ``axis`` around the intrinsic's statement, each of its
   buffers bound to the region of its tensor by
   ``AttrStmt(Array([buffer, tensor]), "buffer_bind_scope", tvm_tuple(min0, extent0, ...))``,
   which storage flattening resolves (:mod:`loom.transform.buffer_bind`).

Which statement: when the tensorized loops hold the whole reduction (or there is
none), the intrinsic's ``body``.  When loops outside ``axis`` split the reduction,
``reduce_init`` runs before them and ``reduce_update`` inside them; without a
``reduce_init``, ``body`` runs on the first iteration of those loops and
``reduce_update`` on the others.  Emitting that statement (:func:`emit_intrinsic`) also
lowers a :class:`~loom.te.tensor_compute.TensorComputeOp` (an intrinsic called as
a compute's body), which is a compute tensorized at its inner axes from the start.

>>> import loom
>>> from loom.te.tensor_intrin import decl_tensor_intrin
>>> A = loom.placeholder((8, 4), name="A")
>>> B = loom.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
>>> a = loom.placeholder((4,), name="a")
>>> b = loom.compute((4,), lambda j: a[j] * 2.0, name="b")
>>> def double(ins, outs):
...     return loom.call_extern("int32", "double4", outs[0].access_ptr("w"), ins[0].access_ptr("r"))
>>> s = loom.create_schedule(B.op)
>>> s[B].tensorize(B.op.axis[1], decl_tensor_intrin(b.op, double, name="double4"))
>>> print(loom.lower(s, [A, B], simple_mode=True)["default_function"].body)
for i in range(8):
    call_extern('int32', 'double4', tvm_access_ptr(type_annotation(dtype='float32'), B, i * 4, 4, 2, dtype='handle'),
                tvm_access_ptr(type_annotation(dtype='float32'), A, i * 4, 4, 1, dtype='handle'))
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import attrs

from ..arith import Analyzer
from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.container import Array
from ..ir.functor import collect, substitute
from ..ir.intrin import likely
from ..ir.op import Op
from ..ir.stmt import AssertStmt, AttrStmt, IfThenElse, Stmt, seq
from ..transform._util import renew_defs, uses_vars
from .loop_nest import if_nest, make_bound_check, make_loop_nest, merge_nest
from .relations import IterVarAttr, Rebase, pass_down_bitmask
from .schedule_loops import check_leaf
from .tensor import ComputeOp, Tensor
from .tensor_compute import bind_extents
from .tensor_intrin import TensorIntrin
from .tensorize_match import infer_region, match_body, reads_of

__all__ = ["tensorize", "tensorized_at", "make_tensorize", "emit_intrinsic", "LoopNest", "BUFFER_BIND_SCOPE"]

#: The attribute binding an intrinsic's buffer to a region of a tensor (storage flattening resolves it).
BUFFER_BIND_SCOPE = "buffer_bind_scope"
#: Where a stage keeps its tensorize request: ``(axis, intrin)``.
_REQUEST = "tensor_intrin_at"
#: The Stage attribute holding a tensorize request ``(axis, intrin)`` (schedule_json refuses to save one).
REQUEST_ATTR = _REQUEST


def tensorize(stage: Any, axis: E.IterVar, intrin: TensorIntrin) -> None:
    """Record that the loops of ``stage`` from ``axis`` inward are ``intrin``; see :meth:`Stage.tensorize`."""
    if not isinstance(intrin, TensorIntrin):
        raise LoomTypeError(f"tensorize on {stage.op.name}: expected a TensorIntrin (loom.decl_tensor_intrin), "
                            f"got {type(intrin).__name__}")
    if not isinstance(stage.op, ComputeOp):
        raise LoomValueError(f"tensorize on {stage.op.name}: only compute stages can be tensorized, this is a "
                             f"{type(stage.op).__name__}")
    check_leaf(stage, axis, "tensorize")
    attr = stage.iter_var_attrs.get(axis)
    if attr is not None and attr.bind_thread is not None:
        raise LoomValueError(f"tensorize on {stage.op.name}: {axis.var.name} is bound to {attr.bind_thread.var.name}")
    prior = getattr(stage, _REQUEST, None)
    if prior is not None and prior[0] is not axis:
        raise LoomValueError(f"tensorize on {stage.op.name}: the stage is already tensorized at {prior[0].var.name}; "
                             "a stage has one tensorized loop")
    setattr(stage, _REQUEST, (axis, intrin))  # a tuple: Schedule.copy shares it safely
    if attr is None:
        attr = stage.iter_var_attrs[axis] = IterVarAttr()
    attr.iter_type, attr.tensor_intrin = "tensorized", intrin  # what TVM's iter_var_attrs showed


def tensorized_at(stage: Any) -> Optional[tuple[int, TensorIntrin]]:
    """``(position among the leaf loops, intrinsic)`` of a tensorized stage, else None."""
    request = getattr(stage, _REQUEST, None)
    if request is None:
        return None
    iv, intrin = request
    for rel in stage.relations:  # normalize() replaces an untouched axis with a rebased copy
        if isinstance(rel, Rebase) and rel.parent is iv:
            iv = rel.rebased
    for k, leaf in enumerate(stage.leaf_iter_vars):
        if leaf is iv:
            return k, intrin
    raise LoomValueError(f"tensorize on {stage.op.name}: loop {iv.var.name} was split or fused after tensorize; "
                         "tensorize the loop the final schedule has")


def _bind(buf: Any, tensor: Tensor, ranges: list[E.Range], body: Stmt) -> Stmt:
    spec = [x for r in ranges for x in (r.min, r.extent)]
    return AttrStmt(Array([buf, tensor]), BUFFER_BIND_SCOPE, E.Call("handle", Op.get("tir.tvm_tuple"), spec), body)


def _check_inner_loops(stage: Any, inner: list[E.IterVar], stages: list[Any], what: str) -> None:
    for iv in inner:
        attr = stage.iter_var_attrs.get(iv)
        if attr is not None and attr.bind_thread is not None:
            raise LoomValueError(f"{what}: loop {iv.var.name}, which tensorize replaces, is bound to "
                                 f"{attr.bind_thread.var.name}")
    for other in stages:
        inside = any(other.attach_ivar is iv for iv in inner)
        if other.attach_type == "scope" and other.attach_stage is stage and inside:
            raise LoomValueError(f"{what}: {other.op.name} is computed at loop {other.attach_ivar.var.name}, which "
                                 "tensorize replaces; compute it at a loop outside the tensorized one")


def _check_preds(preds: list[E.PrimExpr], banned: list[E.Var], what: str, why: str) -> None:
    for p in preds:
        if uses_vars(p, banned):
            raise LoomValueError(f"{what}: the condition {p} depends on a loop {why}; "
                                 "split by a factor that divides the extent")


def make_tensorize(stage: Any, bounds: Any, bodies: tuple[E.PrimExpr, ...],
                   attach: Callable[[E.IterVar, Stmt], Stmt], stages: list[Any]) -> Stmt:
    """The statement computing a tensorized compute ``stage`` (see the module docstring)."""
    from .schedule_ops import _bounds_in_leaf_vars  # schedule_ops calls this module

    op: ComputeOp = stage.op
    found = tensorized_at(stage)
    assert found is not None  # the caller asks only for tensorized stages
    tloc, intrin = found
    what = f"tensorize of {op.name} with {intrin.name}"
    leaves = stage.leaf_iter_vars
    _check_inner_loops(stage, leaves[tloc:], stages, what)
    dom_map, declared = _bounds_in_leaf_vars(stage, op, bounds)
    values: dict[E.IterVar, E.PrimExpr] = {}
    main = make_loop_nest(stage, dom_map, 0, False, set(), values, attach)
    preds = make_bound_check(stage, dom_map, values, False, set(), declared)
    outer_vars = {id(v) for iv in leaves[:tloc] for v in collect(values[iv], lambda n: isinstance(n, E.Var))}
    banned = [v for iv in leaves[tloc:] for v in collect(values[iv], lambda n: isinstance(n, E.Var))
              if id(v) not in outer_vars]
    _check_preds(preds, banned, what, "that tensorize replaces (a split that leaves a remainder)")
    region = infer_region(stage, bodies, dom_map, values, tloc)
    checks, params = match_body(stage, bodies, region, intrin, what)
    an = Analyzer()
    for iv, r in dom_map.items():
        an.bind(iv.var, r, allow_override=True)
    sizes, asserts = bind_extents(checks, what, an, "the tensorized loops")
    inputs = reads_of(bodies)
    outputs = [stage.origin_op.output(k) for k in range(op.num_outputs)]
    out_region = [region.axes[iv] for iv in op.axis]
    binds = ([(buf, t, region.inputs[t]) for buf, t in zip(intrin.buffers, inputs)],
             [(buf, t, out_region) for buf, t in zip(intrin.buffers[len(inputs):], outputs)])
    nest = LoopNest(main, values, preds, dom_map, declared, tloc, banned)
    return emit_intrinsic(stage, intrin, nest, binds, {**sizes, **params}, asserts, what)


@attrs.frozen
class LoopNest:
    """The stage's loops around the intrinsic: ``main`` (from ``make_loop_nest``) fills ``values``;
    ``preds`` are its bound checks; the intrinsic replaces the leaf loops from ``tloc`` on, whose
    own variables are ``banned`` from conditions."""

    main: list
    values: dict
    preds: list
    dom_map: Any
    declared: dict
    tloc: int
    banned: list


Binding = tuple[Any, Tensor, list[E.Range]]


def emit_intrinsic(stage: Any, intrin: TensorIntrin, nest: LoopNest, binds: tuple[list[Binding], list[Binding]],
                   subst: dict[E.Var, E.PrimExpr], asserts: list[tuple[E.PrimExpr, str]], what: str) -> Stmt:
    """The loops of ``stage`` outside ``nest.tloc`` around the intrinsic's statements.

    ``binds`` are ``(buffer, tensor, region)`` of the inputs and of the outputs (regions in the
    operation's axes); ``subst`` gives the intrinsic's symbolic sizes and scalar parameters their
    values.  A tensorized compute and a :class:`~loom.te.tensor_compute.TensorComputeOp` both end here.
    """
    from .schedule_ops import _vmap  # schedule_ops calls this module

    op = stage.op
    leaves, main, values, preds, tloc = stage.leaf_iter_vars, nest.main, nest.values, nest.preds, nest.tloc
    in_binds, out_binds = binds

    def finish(stmt: Stmt, with_inputs: bool = True, vmap: Optional[dict] = None) -> Stmt:
        stmt = renew_defs(stmt)  # the intrinsic's own loop variables, fresh at each use (SSA)
        for buf, t, rng in reversed(out_binds):
            stmt = _bind(buf, t, rng, stmt)
        if with_inputs:
            for buf, t, rng in reversed(in_binds):
                stmt = _bind(buf, t, rng, stmt)
            for cond, message in reversed(asserts):
                stmt = AssertStmt(cond, message, stmt)
        stmt = substitute(substitute(stmt, subst), _vmap(values))
        return substitute(stmt, vmap) if vmap else stmt

    flags = {iv: 2 for iv in op.reduce_axis}
    flags.update({iv: 1 for iv in op.axis})
    pass_down_bitmask(stage, flags)
    begin = next((k for k, iv in enumerate(leaves) if flags.get(iv, 0) & 2), len(leaves))
    if not op.reduce_axis or tloc <= begin:  # the intrinsic's loops hold the whole reduction
        if intrin.body is None:
            raise LoomValueError(f"{what}: the intrinsic has no body, only a reduce_update; tensorize a loop outside "
                                 "the reduction's loops, or give the intrinsic a body")
        return merge_nest(main[:tloc + 1], if_nest(preds, finish(intrin.body)))
    splitting = [iv for iv in leaves[begin:tloc] if flags.get(iv, 0) & 2]
    if intrin.reduce_update is None:
        raise LoomValueError(f"{what}: loops {[iv.var.name for iv in splitting]} outside the tensorized one split "
                             "the reduction, so the intrinsic needs a reduce_update (fcompute returning "
                             "(body, reduce_reset, reduce_update))")
    update_nest = main[begin + 1:tloc + 1]
    if intrin.reduce_init is None:
        if intrin.body is None:
            raise LoomValueError(f"{what}: the intrinsic has neither a reduce_reset nor a body to start the reduction")
        firsts = [values[iv] for iv in splitting]
        _check_preds(preds, [v for x in firsts for v in collect(x, lambda n: isinstance(n, E.Var))], what,
                     "that splits the reduction (it would clash with the choice of the first iteration)")
        later = ops.any(*(x > nest.dom_map[iv].min for x, iv in zip(firsts, splitting)))
        choice = IfThenElse(likely(later), intrin.reduce_update, intrin.body)
        return merge_nest(main[:begin + 1], merge_nest(update_nest, if_nest(preds, finish(choice))))
    skip = {iv for iv, f in flags.items() if f == 2}
    init_values = {iv: values[iv] for iv in leaves[:begin]}
    init_nest = make_loop_nest(stage, nest.dom_map, begin, True, skip, init_values)
    init_preds = make_bound_check(stage, nest.dom_map, init_values, True, skip, nest.declared)
    _check_preds(init_preds, nest.banned, what, "that tensorize replaces (a split that leaves a remainder)")
    to_init = {iv.var: init_values[iv] for iv in leaves[begin:tloc] if iv not in skip and iv in init_values}
    init = merge_nest(init_nest[:tloc + 1],
                      if_nest(init_preds, finish(intrin.reduce_init, with_inputs=False, vmap=to_init)))
    update = merge_nest(update_nest, if_nest(preds, finish(intrin.reduce_update)))
    return merge_nest(main[:begin + 1], seq(init, update))
