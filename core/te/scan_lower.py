"""Lowering a scan (``loom.scan``): its inits, then one serial loop over the scan axis.

The scan stage's statement is::

    <each init computed straight into the scan's outputs, or copied into them>
    for <scan>.idx in range(extent):          # the scan axis, rows [init rows, state rows)
        <the update's stages, attached here, each computing row t>

Every stage of the update stores into its own tensor and reads the state
placeholders; :func:`redirect_scan_tensors` then points the updates, the
state placeholders and the inits computed in place at the scan's outputs, and
drops their realizes (as TVM's ``SchedulePostProc`` does for a ``ScanOp``), so
step ``t`` reads rows the earlier steps wrote.
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import Mutator
from ..ir.producer import ProducerLoad, ProducerRealize, ProducerStore
from ..ir.stmt import AttrStmt, For, Stmt, no_op, seq
from .loop_nest import make_loop_nest, merge_nest
from .scan import ScanOp
from .scan_bound import SCAN_INIT
from .tensor import Tensor

__all__ = ["lower_scan_stage", "redirect_scan_tensors"]


def _copy_init(stage: Any, k: int) -> Stmt:
    """``out[i...] = init[i...]`` over the init's whole shape (an init that is not computed in place)."""
    op: ScanOp = stage.op
    init, out = op.init[k], stage.origin_op.output(k)
    idx = [E.Var(f"{op.name}.init{k}.i{d}", extent.dtype) for d, extent in enumerate(init.shape)]
    body: Stmt = ProducerStore(out, ProducerLoad(init, idx), idx)
    for v, extent in reversed(list(zip(idx, init.shape))):
        body = For(v, ops.const(0, v.dtype), extent, "serial", body)
    return body


def lower_scan_stage(lowering: Any, stage: Any) -> Stmt:
    """The statement computing a scan ``stage`` (``lowering`` is schedule_ops' lowering state)."""
    op: ScanOp = stage.op
    parts: list[Stmt] = []
    placed: set[int] = set()
    for k, t in enumerate(op.init):
        s = lowering.sch.stage_map[t.op]
        if s.attach_type == SCAN_INIT and s.attach_stage is stage:
            if id(s) not in placed:
                placed.add(id(s))
                parts.append(lowering.pipeline(s, None))
        else:
            parts.append(_copy_init(stage, k))
    values: dict[E.IterVar, E.PrimExpr] = {}
    nest = make_loop_nest(stage, lowering.bounds, 0, False, set(), values)
    leaf = stage.leaf_iter_vars[0]
    step: Stmt | None = None
    for inner in reversed(lowering.attached.get((id(stage), leaf), [])):
        step = lowering.pipeline(inner, step)
    parts.append(merge_nest(nest, step if step is not None else no_op()))
    return seq(*parts)


class _Redirect(Mutator):
    def __init__(self, vmap: dict[int, Tensor]) -> None:
        self.vmap = vmap

    def visit_Tensor(self, node: Tensor) -> Tensor:
        return self.vmap.get(id(node), node)

    def visit_ProducerRealize(self, node: ProducerRealize) -> Any:
        if id(node.producer) in self.vmap:  # its storage is the scan output's, realized around the scan
            return self.visit(node.body)
        return self.generic_visit(node)

    def visit_AttrStmt(self, node: AttrStmt) -> Any:
        if isinstance(node.node, Tensor) and id(node.node) in self.vmap:  # storage hints of a storage that is gone
            return self.visit(node.body)
        return self.generic_visit(node)


def redirect_scan_tensors(body: Stmt, sch: Any) -> Stmt:
    """Point updates, state placeholders and in-place inits of every scan of ``sch`` at the scan's outputs."""
    vmap: dict[int, Tensor] = {}
    for stage in sch.stages:
        op = stage.op
        if not isinstance(op, ScanOp):
            continue
        for k, (init, update, state) in enumerate(zip(op.init, op.update, op.state_placeholder)):
            out = stage.origin_op.output(k)
            vmap[id(update)] = vmap[id(state)] = out
            s = sch.stage_map[init.op]
            if s.attach_type == SCAN_INIT and s.attach_stage is stage:
                vmap[id(init)] = out
    return _Redirect(vmap).visit(body) if vmap else body
