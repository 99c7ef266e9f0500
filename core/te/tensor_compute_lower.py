"""Lowering a :class:`~loom.te.tensor_compute.TensorComputeOp` stage.

A tensor compute is a compute already tensorized at its inner axes: the stage's
loops (its outer and reduction axes, as scheduled) surround the intrinsic's
statement, whose buffers are bound to the call's regions at the loops' current
iteration, and to the output block ``C[i, j, 0:m, 0:n]``.  Without a reduction
axis that statement is the intrinsic's body; with one, its ``reduce_reset``
runs before the first reduction loop and its ``reduce_update`` inside the
loops (or the body on the first iteration when there is no reset), exactly as
tensorize does when outer loops split the reduction: both go through
:func:`~loom.te.tensorize.emit_intrinsic`.

>>> import loom
>>> from loom.ir import BufferStore, For
>>> x = loom.placeholder((4,), name="x")
>>> z = loom.compute((4,), lambda i: x[i] * 2.0, name="z")
>>> def double(ins, outs):
...     i = loom.var("i")
...     return For(i, 0, 4, "serial", BufferStore(outs[0], ins[0][i] * 2.0, [i]))
>>> twice = loom.decl_tensor_intrin(z.op, double, name="twice")
>>> A = loom.placeholder((3, 4), name="A")
>>> C = loom.compute((3, 4), lambda r: twice(A[r, 0:4]), name="C")
>>> print(loom.lower(loom.create_schedule(C.op), [A, C], simple_mode=True)["default_function"].body)
for r in range(3):
    for i in range(4):
        C[r, i] = A[r, i] * 2.0
"""

from __future__ import annotations

from typing import Any, Callable

from ..arith import Analyzer
from ..errors import LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.stmt import Stmt
from .loop_nest import make_bound_check, make_loop_nest
from .relations import pass_down_bitmask
from .tensor_compute import TensorComputeOp
from .tensorize import LoopNest, emit_intrinsic

__all__ = ["lower_tensor_compute"]


def _check_threads(stage: Any, op: TensorComputeOp, what: str) -> None:
    """A reduction loop bound to threads would need a cross-thread reduction of whole blocks."""
    flags = {iv: 2 for iv in op.reduce_axis}
    pass_down_bitmask(stage, flags)
    for iv in stage.leaf_iter_vars:
        attr = stage.iter_var_attrs.get(iv)
        if flags.get(iv, 0) & 2 and attr is not None and attr.bind_thread is not None:
            raise LoomValueError(f"{what}: loop {iv.var.name} of the reduction is bound to "
                                 f"{attr.bind_thread.var.name}; a tensor compute reduces serially")


def lower_tensor_compute(stage: Any, bounds: Any, attach: Callable[[E.IterVar, Stmt], Stmt]) -> Stmt:
    """The statement computing a tensor compute ``stage`` (see the module docstring)."""
    from .schedule_ops import _bounds_in_leaf_vars  # schedule_ops calls this module

    op: TensorComputeOp = stage.op
    what = f"tensor compute {op.name} with {op.intrin.name}"
    _check_threads(stage, op, what)
    dom_map, declared = _bounds_in_leaf_vars(stage, op, bounds)
    values: dict[E.IterVar, E.PrimExpr] = {}
    main = make_loop_nest(stage, dom_map, 0, False, set(), values, attach)
    preds = make_bound_check(stage, dom_map, values, False, set(), declared)
    an = Analyzer()
    for iv, r in dom_map.items():
        an.bind(iv.var, r, allow_override=True)
    sizes, asserts = op.extents(an, what)
    params = dict(zip(op.intrin.scalar_params, op.scalar_inputs))
    outputs = [stage.origin_op.output(k) for k in range(op.num_outputs)]
    block = [E.Range(iv.var, ops.const(1, iv.var.dtype)) for iv in op.schedulable_axis]
    block += [E.Range(ops.const(0, n.dtype), n) for n in op.intrin_shape]
    n_in = len(op.inputs)
    binds = (list(zip(op.intrin.buffers, op.inputs, op.input_regions)),
             [(buf, t, block) for buf, t in zip(op.intrin.buffers[n_in:], outputs)])
    nest = LoopNest(main, values, preds, dom_map, declared, len(stage.leaf_iter_vars), [])
    return emit_intrinsic(stage, op.intrin, nest, binds, {**sizes, **params}, asserts, what)
