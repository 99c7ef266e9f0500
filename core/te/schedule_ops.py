"""Schedule to IR: the statement that computes a schedule (classic TVM's ``ScheduleOps``).

The result still speaks of tensors, not memory:

- each stored stage is a ``ProducerRealize`` of the region bound inference
  found (``storage_scope`` from ``set_scope``/cache scopes) around its
  loops, followed by the statements that read it;
- loops are ``For`` (kind from unroll/vectorize/parallel), a thread-bound loop
  is ``AttrStmt(thread, "thread_extent" | "virtual_thread", extent)``, a
  pragma is ``AttrStmt(loop IterVar, "pragma_<key>", value)`` around its loop;
- a non-divisible split guards the store with ``if likely(cond)``;
- a reduction initializes its output in a loop nest placed before the first
  loop touching a reduction axis, then updates ``C = combine(C, source)``;
- ``storage_align`` is ``AttrStmt(tensor, "storage_align", tvm_tuple(dim,
  factor, offset))`` just inside the realize; ``double_buffer`` wraps the
  stage's producing statement in ``AttrStmt(tensor, "double_buffer_scope", 1)``;
- a hybrid operation's body gets the stage's loops in place of its own
  (see ``schedule_hybrid``);
- an extern operation's body is wrapped, for each of its input and output
  buffers, in ``AttrStmt(Array([buffer, tensor]), "extern_buffer_bind", 0)``:
  storage flattening maps the buffer onto the tensor's storage;
- a tensor compute (an intrinsic call as a compute body) is the intrinsic's
  statement in its outer loops, its buffers bound to the regions
  (see ``tensor_compute_lower``).

>>> from loom.te.operation import placeholder, compute
>>> from loom.te.schedule import create_schedule
>>> A = placeholder((10,), name="A")
>>> B = compute((10,), lambda i: A[i] * 2.0, name="B")
>>> s = create_schedule(B.op)
>>> xo, xi = s[B].split(B.op.axis[0], factor=4)
>>> print(schedule_to_stmt(s))
realize B[0:10]:
    for i.outer in range(3):
        for i.inner in range(4):
            if likely(i.outer * 4 + i.inner < 10):
                B[i.outer * 4 + i.inner] = A[i.outer * 4 + i.inner] * 2.0
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import LoomError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.container import Array
from ..ir.functor import substitute
from ..ir.op import Op
from ..ir.producer import ProducerLoad, ProducerRealize, ProducerStore
from ..ir.reduce import Reduce
from ..ir.stmt import AttrStmt, IfThenElse, LetStmt, Stmt, seq
from ..transform._util import uses_vars
from ..transform.split_devices import DEVICE_SCOPE
from .bound import infer_bound
from .cross_thread import lower_cross_thread, predicate_guard, store_predicates, thread_reduce_leaves
from .loop_nest import make_bound_check, make_loop_nest, merge_nest
from .relations import pass_down_bitmask
from .schedule import Schedule, data_axes
from .operation import HybridOp
from .schedule_hybrid import lower_hybrid_stage
from .scan import ScanOp
from .scan_lower import lower_scan_stage, redirect_scan_tensors
from .tensor import ComputeOp, PlaceholderOp
from .tensor_compute import TensorComputeOp
from .tensor_compute_lower import lower_tensor_compute
from .tensorize import make_tensorize, tensorized_at

__all__ = ["schedule_to_stmt"]

_TRUE = E.IntImm("bool", 1)


class _Lowering:
    def __init__(self, sch: Schedule, devices: Any = None) -> None:
        self.devices = devices
        self.bounds = infer_bound(sch.normalize())
        self.sch = self.bounds.schedule
        self.bodies = self.bounds.bodies
        self.attached: dict[tuple[int, E.IterVar], list[Any]] = {}
        for s in self.sch.stages:
            if s.attach_type == "scope":
                self.attached.setdefault((id(s.attach_stage), s.attach_ivar), []).append(s)

    def run(self) -> Stmt:
        body: Optional[Stmt] = None
        for stage in reversed(self.sch.stages):
            if isinstance(stage.op, PlaceholderOp) or stage.attach_type != "root":
                continue
            body = self.pipeline(stage, body)
        if body is None:
            raise LoomError("the schedule computes nothing: its outputs are all placeholders")
        return redirect_scan_tensors(body, self.sch)

    # -- one stage ---------------------------------------------------------------
    def attach(self, stage: Any, iv: E.IterVar, body: Stmt) -> Stmt:
        for inner in reversed(self.attached.get((id(stage), iv), [])):
            body = self.pipeline(inner, body)
        return body

    def pipeline(self, stage: Any, consumer: Optional[Stmt]) -> Stmt:
        """Realize ``stage``'s outputs around its producing statement and then ``consumer``."""
        op = stage.op
        outputs = [stage.origin_op.output(k) for k in range(op.num_outputs)]
        if isinstance(op, ComputeOp):
            producer = self.compute(stage)
        elif isinstance(op, HybridOp):
            producer = lower_hybrid_stage(stage, self.bounds, lambda iv, b: self.attach(stage, iv, b))
        elif isinstance(op, ScanOp):
            producer = lower_scan_stage(self, stage)
        elif isinstance(op, TensorComputeOp):
            producer = lower_tensor_compute(stage, self.bounds, lambda iv, b: self.attach(stage, iv, b))
        else:
            producer = self.extern(stage)
        if stage.double_buffer_:
            for t in reversed(outputs):
                producer = AttrStmt(t, "double_buffer_scope", ops.const(1, "int32"), producer)
        if self.devices is not None and stage.attach_type == "root":
            # A compute stage writes all of its outputs; an extern or hybrid one may leave parts alone.
            whole = ops.const(int(isinstance(op, (ComputeOp, TensorComputeOp))), "int32")
            producer = AttrStmt(self.devices[id(op)], DEVICE_SCOPE, whole, producer)
        body = producer if consumer is None else seq(producer, consumer)
        for t in reversed(outputs):
            if isinstance(op, (ComputeOp, TensorComputeOp)):  # a tensor compute's intrinsic block is whole
                outer = data_axes(op)
                bounds = tuple(self.bounds[iv] for iv in outer)
                bounds += tuple(E.Range(ops.const(0, s.dtype), s) for s in t.shape[len(outer):])
            else:  # extern and hybrid operations compute their whole outputs
                bounds = tuple(E.Range(ops.const(0, s.dtype), s) for s in t.shape)
            inner = body
            for dim, axis in reversed(list(enumerate(getattr(op, "axis", ())))):
                if axis in stage.storage_aligns:
                    factor, offset = stage.storage_aligns[axis]
                    spec = E.Call("int32", Op.get("tir.tvm_tuple"), [ops.const(dim), ops.const(factor), ops.const(offset)])
                    inner = AttrStmt(t, "storage_align", spec, inner)
            body = ProducerRealize(t, bounds, _TRUE, inner, stage.scope)
        return body

    def extern(self, stage: Any) -> Stmt:
        op = stage.op
        body = op.body
        pairs = list(zip(op.input_placeholders, op.inputs))
        pairs += [(b, stage.origin_op.output(k)) for k, b in enumerate(op.output_placeholders)]
        for buf, t in reversed(pairs):
            body = AttrStmt(Array([buf, t]), "extern_buffer_bind", ops.const(0, "int32"), body)
        return body

    def compute(self, stage: Any) -> Stmt:
        if tensorized_at(stage) is not None:
            return make_tensorize(stage, self.bounds, self.bodies[stage], lambda iv, b: self.attach(stage, iv, b),
                                  self.sch.stages)
        op: ComputeOp = stage.op
        outputs = [stage.origin_op.output(k) for k in range(op.num_outputs)]
        index = [iv.var for iv in op.axis]
        bodies = self.bodies[stage]
        dom_map, declared = _bounds_in_leaf_vars(stage, op, self.bounds)
        guard = predicate_guard(stage, self.bounds)  # if_nest, with the store predicate's threads bound
        if thread_reduce_leaves(stage):  # reduction loops bound to threads: the threads reduce together
            return lower_cross_thread(stage, bodies, dom_map, declared, lambda iv, b: self.attach(stage, iv, b), guard)
        values: dict[E.IterVar, E.PrimExpr] = {}
        main = make_loop_nest(stage, dom_map, 0, False, set(), values, lambda iv, b: self.attach(stage, iv, b))
        preds = make_bound_check(stage, dom_map, values, False, set(), declared) + store_predicates(stage)
        if not op.reduce_axis:
            stores = seq(*(ProducerStore(t, b, index) for t, b in zip(outputs, bodies)))
            return merge_nest(main, guard(preds, substitute(stores, _vmap(values))))
        red = bodies[0]
        if not isinstance(red, Reduce):
            raise LoomError(f"{op.name} has reduction axes but its body is not a reduction")
        # The initialization goes before the first loop that touches a reduction axis.
        flags = {iv: 2 for iv in op.reduce_axis}
        flags.update({iv: 1 for iv in op.axis})
        pass_down_bitmask(stage, flags)
        leaves = stage.leaf_iter_vars
        begin = next((k for k, iv in enumerate(leaves) if flags.get(iv, 0) & 2), len(leaves))
        init_values = {iv: values[iv] for iv in leaves[:begin]}
        skip = {iv for iv, f in flags.items() if f == 2}
        init_nest = make_loop_nest(stage, dom_map, begin, True, skip, init_values)
        init_preds = make_bound_check(stage, dom_map, init_values, True, skip, declared) + store_predicates(stage)
        init_exprs = red.init or red.combiner.identity_element
        init = seq(*(ProducerStore(t, v, index) for t, v in zip(outputs, init_exprs)))
        init = merge_nest(init_nest, guard(init_preds, substitute(init, _vmap(init_values))))
        update = substitute(_update(red, outputs, index), _vmap(values))
        update = merge_nest(main[begin + 1:], guard(preds, update))
        return merge_nest(main[:begin + 1], seq(init, update))


def _bounds_in_leaf_vars(stage: Any, op: ComputeOp | TensorComputeOp,
                         dom_map: Any) -> tuple[Any, dict[E.IterVar, E.Range]]:
    """``dom_map``, and the declared domains of the reduction axes, with the ranges that use a data
    axis written in the loop variables the nest iterates.

    A reduction axis may range over a data axis (``sum(x[k])`` for ``k < i + 1``, a triangular
    reduction): its range names the root variable ``i``, while the nest iterates leaf variables
    (normalize rebases every axis, split makes two), and the body is rewritten in those; so must
    the range be, or the reduction loop's bound would name a variable nothing defines.
    """
    axes = data_axes(op)
    roots = [iv.var for iv in axes]
    data = {id(iv) for iv in axes}  # by identity: IterVar == builds an expression
    uses = [iv for iv, r in dom_map.items()
            if id(iv) not in data and (uses_vars(r.min, roots) or uses_vars(r.extent, roots))]
    if not uses:
        return dom_map, {}
    values: dict[E.IterVar, E.PrimExpr] = {}
    make_loop_nest(stage, dom_map, 0, False, set(), values)  # only for the values: nothing is built
    vmap = _vmap({iv: values[iv] for iv in axes})
    def rewritten(r: E.Range) -> E.Range:
        return E.Range(substitute(r.min, vmap), substitute(r.extent, vmap))

    out = dict(dom_map)
    for iv in uses:
        out[iv] = rewritten(dom_map[iv])
    declared = {iv: rewritten(iv.dom) for iv in op.reduce_axis if iv.dom is not None}
    return out, declared


def _vmap(values: dict[E.IterVar, E.PrimExpr]) -> dict[E.Var, E.PrimExpr]:
    return {iv.var: v for iv, v in values.items() if v is not iv.var}


def _update(red: Reduce, outputs: list[Any], index: list[E.Var]) -> Stmt:
    """``out = combine(out, source)`` for every output; a tuple computes all values before storing any."""
    current = [ProducerLoad(t, index) for t in outputs]
    combined = red.combiner(current, red.source)
    if len(outputs) == 1:
        body: Stmt = ProducerStore(outputs[0], combined[0], index)
    else:
        temps = [E.Var(f"{t.op.name}.v{k}", v.dtype) for k, (t, v) in enumerate(zip(outputs, combined))]
        body = seq(*(ProducerStore(t, v, index) for t, v in zip(outputs, temps)))
        for v, value in reversed(list(zip(temps, combined))):
            body = LetStmt(v, value, body)
    if not (isinstance(red.condition, E.IntImm) and red.condition.value == 1):
        body = IfThenElse(red.condition, body)
    return body


def schedule_to_stmt(sch: Schedule, devices: Any = None) -> Stmt:
    """The statement computing ``sch`` (normalized and bound-inferred here; ``sch`` itself is unchanged).

    With ``devices`` (``id(op) -> VirtualDevice``, from :func:`loom.driver.device_plan.plan_devices`)
    each top-level stage's statement is wrapped in ``AttrStmt(device, "loom.device_scope", whole)``
    (``whole`` is 1 when the stage writes all of its outputs), which
    :func:`~loom.transform.split_devices.SplitDevices` turns into a function per stage.
    """
    return _Lowering(sch, devices).run()
