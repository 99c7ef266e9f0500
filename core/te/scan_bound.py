"""Where a scan's stages run, and what a scan reads of them (bound inference's share of ``loom.scan``).

:func:`prepare_scans` runs on the normalized schedule before bound inference:

- the stages of each scan's update (those on a path from a state placeholder,
  or from one of the scan's ``inputs``, to an update) left at the root are
  computed inside the scan's loop (TVM's "scan group": ``compute_root`` there
  means the scan step, not the top level); a stage attached elsewhere must
  still end up inside that loop;
- an init computed only for the scan is marked :data:`SCAN_INIT`: lowering
  computes it just before the loop, straight into the scan's outputs;
  any other init is copied into them;
- misuse is an error naming the stage: splitting or parallelizing the scan
  axis, inlining an update or an init, reading a state placeholder from outside
  the update, sharing a state between scans.

:func:`scan_reads` is what one step reads: row ``t`` of each update (``t`` the
scan axis as the step sees it), and every row of each init.
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..arith.int_set import IntervalSet
from .relations import Rebase
from .graph import stage_of
from .scan import ScanOp, dataflow_between
from .tensor import ComputeOp

__all__ = ["prepare_scans", "scan_reads", "SCAN_INIT"]

#: The attach type of an init stage that lowering places before its scan's loop.
SCAN_INIT = "scan_init"


def _scan_loop(stage: Any) -> E.IterVar:
    """The scan's one loop (normalized): it runs in order, so it is not split, fused or parallel."""
    name = stage.op.name
    if len(stage.leaf_iter_vars) != 1 or any(not isinstance(r, Rebase) for r in stage.relations):
        raise LoomValueError(f"scan {name}: its scan axis runs step after step; it cannot be split, fused or "
                             f"given other loops (schedule the update's stages instead)")
    leaf = stage.leaf_iter_vars[0]
    attr = stage.iter_var_attrs.get(leaf)
    if attr is not None and (attr.bind_thread is not None or attr.iter_type in ("parallelized", "vectorized")):
        how = f"bound to {attr.bind_thread.var.name}" if attr.bind_thread is not None else attr.iter_type
        raise LoomValueError(f"scan {name}: its scan axis is {how}, but step t reads step t - 1; it must stay a "
                             f"serial loop (unroll is fine)")
    return leaf


def _attach_in_scan(s: Any, scan_stage: Any, leaf: E.IterVar, updates: set[int]) -> None:
    """Put a stage of the update inside the scan's loop, or check that its attachment is inside it.

    ``updates`` holds the ``id`` of each update's stage (its operation may be a cache_read's rewrite of the
    one the scan names)."""
    name, scan_name = s.op.name, scan_stage.op.name
    if s.is_output:
        raise LoomValueError(f"{name} is a step of scan {scan_name} (it reads the state), computed one row at a time "
                             f"inside the scan's loop; it cannot be an output (the scan's outputs hold every row)")
    if s.attach_type == "inline":
        if id(s) in updates:
            raise LoomValueError(f"compute_inline on {name}: it is an update of scan {scan_name}, which stores it "
                                 f"as its output; an update cannot be inlined")
        return
    if s.attach_type == "root":
        s.attach_type, s.attach_stage, s.attach_ivar = "scope", scan_stage, leaf
        return
    p, seen = s, set()
    while p.attach_type == "scope" and p is not scan_stage and id(p) not in seen:  # a cycle is reported later
        seen.add(id(p))
        p = p.attach_stage
    if p is not scan_stage:
        raise LoomValueError(f"{name} is a step of scan {scan_name} (it reads the state) but is computed at "
                             f"{s.attach_stage.op.name}.{s.attach_ivar.var.name}, outside the scan's loop; compute it "
                             f"inside (by default it is at the scan axis)")


def _readers(sch: Any) -> dict[int, list[Any]]:
    """Stages reading each operation's outputs (direct reads, before inlining), by ``id(op)``."""
    out: dict[int, list[Any]] = {}
    for s in sch.stages:
        for t in s.op.input_tensors:
            out.setdefault(id(t.op), []).append(s)
    return out


def _place_inits(sch: Any, stage: Any, readers: dict[int, list[Any]]) -> None:
    op: ScanOp = stage.op
    for t in op.init:
        s = sch.stage_map[t.op]
        if s.attach_type == SCAN_INIT and s.attach_stage is stage:
            continue  # an operation giving several inits
        if s.attach_type == "inline":
            raise LoomValueError(f"compute_inline on {s.op.name}: it is an init of scan {op.name}, which reads it "
                                 f"whole; a scan needs its inits stored")
        if s.attach_type == "scope":
            raise LoomValueError(f"{s.op.name} is an init of scan {op.name} but is computed at "
                                 f"{s.attach_stage.op.name}.{s.attach_ivar.var.name}; an init is computed once, "
                                 f"before the scan's loop: leave it at the root")
        inits = [k for k, u in enumerate(op.init) if u.op is t.op]
        alias = (isinstance(t.op, ComputeOp) and not s.is_output and len(inits) == t.op.num_outputs
                 and len({op.init[k].value_index for k in inits}) == len(inits)
                 and all(r is stage for r in readers.get(id(t.op), [])))
        if alias:  # computed into the scan's outputs before its loop; nothing else reads it
            s.attach_type, s.attach_stage, s.attach_ivar = SCAN_INIT, stage, None


def _check_owners(scans: list[Any]) -> None:
    owner: dict[int, str] = {}
    for stage in scans:
        for st in stage.op.state_placeholder:
            if id(st.op) in owner:
                raise LoomValueError(f"state placeholder {st.name} belongs to scans {owner[id(st.op)]} and "
                                     f"{stage.op.name}; give each scan its own")
            owner[id(st.op)] = stage.op.name


def prepare_scans(sch: Any) -> None:
    """Place the stages of every scan of a normalized schedule (see the module's docstring)."""
    scans = [s for s in sch.stages if isinstance(s.op, ScanOp)]
    if not scans:
        return
    _check_owners(scans)
    readers = _readers(sch)
    # The stages' current operations: cache_read/cache_write may have rewired the update's dataflow.
    inputs_of = lambda st: [stage_of(sch, t) for t in st.op.input_tensors]  # noqa: E731
    for stage in scans:
        op: ScanOp = stage.op
        if stage.attach_type != "root":
            raise LoomError(f"scan {op.name} must be computed at the root")
        leaf = _scan_loop(stage)
        for u in op.update:
            if not isinstance(stage_of(sch, u).op, ComputeOp):
                kind = type(stage_of(sch, u).op).__name__
                raise LoomValueError(f"scan {op.name}: update {u.name} comes from a {kind}; an update must be a "
                                     f"loom.compute (a step computes one row of it)")
        sources = [stage_of(sch, t) for t in op.state_placeholder + op.inputs]
        body = dataflow_between([stage_of(sch, t) for t in op.update], sources, inputs_of)
        updates = {id(stage_of(sch, u)) for u in op.update}
        for st in body:
            _attach_in_scan(st, stage, leaf, updates)
        inside = {id(st.op) for st in body}
        for state in op.state_placeholder:
            for r in readers.get(id(state.op), []):
                if id(r.op) not in inside:
                    raise LoomValueError(f"{r.op.name} reads {state.name}, the state placeholder of scan {op.name}, "
                                         f"but is not part of the scan's update; read the scan's output instead")
        _place_inits(sch, stage, readers)


def _whole(extent: E.PrimExpr) -> IntervalSet:
    return IntervalSet(ops.const(0, extent.dtype), extent - 1)


def scan_reads(op: ScanOp, dom_map: dict[E.Var, IntervalSet], targets: dict[Any, list[list[IntervalSet]]]) -> None:
    """Add to ``targets`` (tensor -> per-dimension sets) what the scan reads: updates at row ``t``, inits whole."""
    for init, update in zip(op.init, op.update):
        if init in targets:
            for dims, extent in zip(targets[init], init.shape):
                dims.append(_whole(extent))
        if update in targets:
            rows = targets[update]
            rows[0].append(dom_map[op.scan_axis.var])
            for d in range(1, len(rows)):
                rows[d].append(_whole(update.shape[d]))
