"""Facts about a schedule's dataflow that bound inference and lowering share.

- :func:`inline_bodies`: each compute stage's body with inlined stages substituted;
- :func:`read_graph` / :func:`consumer_graph`: which stages read which;
- :func:`attach_paths`: for each attached stage, the enclosing loops, innermost first;
- :func:`bind_map`: leaf loop -> the thread axis it is bound to.
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomError, LoomValueError
from ..ir import expr as E
from ..ir.functor import Mutator, substitute
from ..ir.producer import ProducerLoad
from ._te_functor import te_collect
from .operation import HybridOp
from .tensor import ComputeOp, ExternOp, Tensor
from .tensor_compute import TensorComputeOp

__all__ = ["inline_bodies", "read_graph", "consumer_graph", "attach_paths", "bind_map", "stage_of"]


def stage_of(sch: Any, tensor: Tensor) -> Any:
    """The stage producing ``tensor``, or an error naming it."""
    stage = sch.stage_map.get(tensor.op)
    if stage is None:
        raise LoomValueError(f"tensor {tensor.name} is read but its operation is not part of the schedule")
    return stage


class _Inliner(Mutator):
    def __init__(self, sch: Any, bodies: dict[Any, tuple[E.PrimExpr, ...]]) -> None:
        self.sch, self.bodies = sch, bodies

    def visit_ProducerLoad(self, node: ProducerLoad) -> Any:
        node = self.generic_visit(node)
        stage = self.sch.stage_map.get(node.producer.op)
        if stage is None or stage.attach_type != "inline":
            return node
        op = stage.op
        body = self.bodies[stage][node.producer.value_index]
        return substitute(body, {iv.var: i for iv, i in zip(op.axis, node.indices)})


def inline_bodies(sch: Any) -> dict[Any, tuple[E.PrimExpr, ...]]:
    """Each compute stage's body with every inlined producer substituted (stages in schedule order)."""
    bodies: dict[Any, tuple[E.PrimExpr, ...]] = {}
    for stage in sch.stages:
        if isinstance(stage.op, ComputeOp):
            inliner = _Inliner(sch, bodies)
            bodies[stage] = tuple(inliner.visit(b) for b in stage.op.body)
    for stage in sch.stages:
        if isinstance(stage.op, (ExternOp, HybridOp, TensorComputeOp)):
            kind = {ExternOp: "an extern", HybridOp: "a hybrid"}.get(type(stage.op), "a tensor compute")
            for t in stage.op.inputs:
                if stage_of(sch, t).attach_type == "inline":
                    raise LoomError(f"{t.op.name} is inlined but {kind} operation {stage.op.name} reads it; "
                                    f"{kind} operation needs its inputs stored")
    return bodies


def read_graph(sch: Any, bodies: dict[Any, tuple[E.PrimExpr, ...]]) -> dict[Any, list[Tensor]]:
    """The tensors each stored stage reads (after inlining)."""
    reads: dict[Any, list[Tensor]] = {}
    for stage in sch.stages:
        if stage.attach_type == "inline":
            continue
        if stage in bodies:
            found: dict[int, Tensor] = {}
            for b in bodies[stage]:
                for load in te_collect(b, lambda n: isinstance(n, ProducerLoad)):
                    found.setdefault(id(load.producer), load.producer)
            reads[stage] = list(found.values())
        else:
            reads[stage] = stage.op.input_tensors
    return reads


def consumer_graph(sch: Any, reads: dict[Any, list[Tensor]]) -> dict[Any, list[Any]]:
    """For each stage, the stages that read one of its outputs."""
    out: dict[Any, list[Any]] = {s: [] for s in sch.stages}
    for stage, tensors in reads.items():
        for t in tensors:
            producer = stage_of(sch, t)
            if stage not in out[producer]:
                out[producer].append(stage)
    return out


def attach_paths(sch: Any) -> dict[Any, list[E.IterVar]]:
    """The loops around each stage's attach point, innermost first (empty at the root)."""
    paths: dict[Any, list[E.IterVar]] = {}
    for stage in sch.stages:
        path: list[E.IterVar] = []
        seen = {id(stage)}
        s = stage
        while s.attach_type == "scope":
            parent, ivar = s.attach_stage, s.attach_ivar
            if id(parent) in seen:
                raise LoomError(f"compute_at forms a cycle through {stage.op.name} and {parent.op.name}")
            if parent.attach_type == "inline":
                raise LoomError(f"{s.op.name} is computed at {parent.op.name}, which is inlined")
            seen.add(id(parent))
            leaves = parent.leaf_iter_vars
            pos = next((k for k, iv in enumerate(leaves) if iv is ivar), None)
            if pos is None:
                raise LoomError(f"{s.op.name} is computed at {ivar.var.name}, which is no longer a loop of "
                                f"{parent.op.name} (its loops are {[iv.var.name for iv in leaves]})")
            path.extend(reversed(leaves[:pos + 1]))
            s = parent
        paths[stage] = path
    return paths


def bind_map(sch: Any) -> dict[E.IterVar, E.IterVar]:
    """Every thread-bound leaf loop and its thread axis."""
    out: dict[E.IterVar, E.IterVar] = {}
    for stage in sch.stages:
        for iv, attr in stage.iter_var_attrs.items():
            if attr.bind_thread is not None:
                out[iv] = attr.bind_thread
    return out
