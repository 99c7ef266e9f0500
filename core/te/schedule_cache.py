"""Cache primitives: ``Schedule.cache_read`` and ``Schedule.cache_write``.

Both add a copy stage.  The stages they change keep producing their original
tensors (``stage.origin_op``), so the tensors users hold (and pass to
``lower``) stay valid; only the stage's ``op`` is replaced by one reading or
writing the cache.
"""

from __future__ import annotations

from typing import Any

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.functor import Mutator, substitute
from .operation import HybridOp
from .tensor_compute import TensorComputeOp
from .cache_relayout import relayout_cache_op
from .schedule import Schedule, Stage
from .schedule_group import apply_group_placements
from .tensor import ComputeOp, ExternOp, Operation, Tensor

__all__ = ["cache_read", "cache_write"]


class _Rewire(Mutator):
    def __init__(self, old: Tensor, new: Tensor) -> None:
        self.old, self.new, self.hits = old, new, 0

    def visit_ProducerLoad(self, node: Any) -> Any:
        node = self.generic_visit(node)
        if node.producer is self.old:
            self.hits += 1
            return self.new[tuple(node.indices)]
        return node


def _reader_stage(sch: Schedule, r: Any) -> Stage:
    if isinstance(r, Stage):
        return r
    if isinstance(r, (Tensor, Operation)):
        return sch[r]
    raise LoomTypeError(f"cache_read: readers must be tensors, operations or stages, got {type(r).__name__}")


def _replace_input(stage: Stage, old: Tensor, new: Tensor) -> bool:
    op = stage.op
    if isinstance(op, ComputeOp):
        rewire = _Rewire(old, new)
        body = tuple(rewire.visit(b) for b in op.body)
        if not rewire.hits:
            return False
        stage.op = ComputeOp(op.name, op.axis, op.reduce_axis, body, op.tag, op.attrs)
        return True
    if isinstance(op, ExternOp) and any(t is old for t in op.inputs):
        inputs = tuple(new if t is old else t for t in op.inputs)
        stage.op = ExternOp(op.name, inputs, op.input_placeholders, op.output_placeholders, op.body, op.tag, op.attrs)
        return True
    if isinstance(op, TensorComputeOp):
        rewire = _Rewire(old, new)
        scalars = tuple(rewire.visit(x) for x in op.scalar_inputs)
        if not rewire.hits and not any(t is old for t in op.inputs):
            return False
        stage.op = op.with_(inputs=tuple(new if t is old else t for t in op.inputs), scalar_inputs=scalars)
        return True
    if isinstance(op, HybridOp) and any(t is old for t in op.inputs):
        inputs = tuple(new if t is old else t for t in op.inputs)
        body = _Rewire(old, new).visit(op.body)
        stage.op = HybridOp(op.name, inputs, op.outputs, op.axis, body, op.tag, op.attrs)
        return True
    return False


def _copy_axes(shape: tuple[E.PrimExpr, ...], suffix: str = "") -> tuple[E.IterVar, ...]:
    return tuple(E.IterVar(E.Range(ops.const(0, s.dtype), s), E.Var(f"ax{k}{suffix}", s.dtype), "data_par")
                 for k, s in enumerate(shape))


def _tensor_compute_cache(stage: Stage, op: TensorComputeOp, scope: str) -> tuple[TensorComputeOp, tuple[E.IterVar, ...]]:
    """The cache of a tensor compute: the same intrinsic call over fresh axes; and the axes over the
    intrinsic's block with which the stage, now a compute, copies the cache out.

    The stage keeps its outer axes (and what split, fuse or reorder made of them); its reduction
    moves to the cache, so it must not have been split or reordered yet."""
    moved = [iv for iv in op.reduce_axis if not any(iv is leaf for leaf in stage.leaf_iter_vars)]
    if moved:
        raise LoomValueError(f"cache_write of {op.name}: the reduction axis {moved[0].var.name} was split or fused; "
                             "cache the tensor compute first and schedule the reduction on the cache")
    fresh = {iv: E.IterVar(iv.dom, E.Var(iv.var.name, iv.var.dtype), iv.iter_type) for iv in op.axis + op.reduce_axis}
    vmap = {old.var: new.var for old, new in fresh.items()}
    regions = tuple(E.Range(substitute(r.min, vmap), substitute(r.extent, vmap)) for r in op.regions)
    cache = op.with_(name=f"{op.name}.{scope}", axis=tuple(fresh[iv] for iv in op.axis),
                     reduce_axis=tuple(fresh[iv] for iv in op.reduce_axis), regions=regions,
                     scalar_inputs=tuple(substitute(x, vmap) for x in op.scalar_inputs))
    n = op.schedulable_ndim
    block = tuple(E.IterVar(iv.dom, E.Var(iv.var.name, iv.var.dtype), "data_par") for iv in op.axis[n:])
    return cache, block


def _join_group(cache: Stage, origin: Stage) -> None:
    """A cache stage belongs to the group of the stage it copies (placed with it, as TVM's cache stages)."""
    cache.group = origin.group
    cache.follows_group = origin.group is not None
    if cache.group is not None:
        apply_group_placements(cache.group.schedule)


def cache_read(sch: Schedule, tensor: Tensor, scope: str, readers: Any) -> Tensor[ComputeOp]:
    """Copy ``tensor`` into a new ``scope`` stage ``<name>.<scope>`` that ``readers`` read instead.

    >>> from loom.te.operation import placeholder, compute
    >>> from loom.te.schedule import create_schedule
    >>> A = placeholder((8,), name="A")
    >>> B = compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B.op)
    >>> AA = s.cache_read(A, "shared", [B])
    >>> AA.name, [st.op.name for st in s.stages], s[AA].scope
    ('A.shared', ['A', 'A.shared', 'B'], 'shared')
    """
    if not isinstance(tensor, Tensor):
        raise LoomTypeError(f"cache_read expects a Tensor, got {type(tensor).__name__}")
    if not isinstance(scope, str) or not scope:
        raise LoomValueError(f"cache_read of {tensor.name}: the scope must be a non-empty string, got {scope!r}")
    producer = sch[tensor]
    readers = list(readers) if isinstance(readers, (list, tuple)) else [readers]
    if not readers:
        raise LoomValueError(f"cache_read of {tensor.name}: give at least one reader")
    name = tensor.op.name + (f".v{tensor.value_index}" if tensor.op.num_outputs > 1 else "") + f".{scope}"
    axis = _copy_axes(tensor.shape)
    cache_op = ComputeOp(name, axis, (), (tensor[tuple(iv.var for iv in axis)],))
    cache = cache_op.output(0)
    for r in readers:
        stage = _reader_stage(sch, r)
        if not _replace_input(stage, tensor, cache):
            raise LoomValueError(f"cache_read of {tensor.name}: {stage.op.name} does not read {tensor.name}")
    stage = Stage(cache_op)
    stage.scope = scope
    _join_group(stage, producer)
    sch.stages.insert(sch.stages.index(producer) + 1, stage)
    sch.stage_map[cache_op] = stage
    return cache


def cache_write(sch: Schedule, tensor: Any, scope: str) -> Tensor[Any] | list[Tensor[Any]]:
    """Compute ``tensor``'s operation into ``<name>.<scope>`` and make the original stage copy it out.

    After ``split``/``fuse``/``reorder`` of the stage, the cache is laid out
    like its loops (one dimension per data-parallel loop, TVM's relayout).  Every output of the operation
    is cached (a tuple reduction computes all of them together); a list of
    tensors gives a list of cache tensors.

    >>> from loom.te.operation import placeholder, compute
    >>> from loom.te.schedule import create_schedule
    >>> A = placeholder((8,), name="A")
    >>> B = compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B.op)
    >>> BL = s.cache_write(B, "local")
    >>> BL.name, [st.op.name for st in s.stages], str(s[B].op.body[0])
    ('B.local', ['A', 'B.local', 'B'], 'B.local[i]')
    """
    tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise LoomTypeError(f"cache_write expects a Tensor or a list of tensors of one operation, got {tensor!r}")
    if not isinstance(scope, str) or not scope:
        raise LoomValueError(f"cache_write of {tensors[0].name}: the scope must be a non-empty string, got {scope!r}")
    stage = sch[tensors[0]]
    if any(sch[t] is not stage for t in tensors):
        raise LoomValueError("cache_write: all tensors must be outputs of one operation")
    op = stage.op
    if not isinstance(op, (ComputeOp, TensorComputeOp)):
        raise LoomValueError(f"cache_write of {op.name}: only compute and tensor compute operations can be cached "
                             f"(this is a {type(op).__name__})")
    if stage.attach_type == "inline":
        raise LoomValueError(f"cache_write of {op.name}: the stage is inlined")
    cache_op: ComputeOp | TensorComputeOp
    index: tuple[E.PrimExpr, ...]
    if isinstance(op, TensorComputeOp):
        cache_op, block = _tensor_compute_cache(stage, op, scope)
        axis = op.schedulable_axis + block
        index = tuple(iv.var for iv in axis)
    else:
        # After split/fuse/reorder the cache takes the layout of the stage's loops (relayout); the stage
        # keeps its loops and copies the cache out.
        cache_op, index = relayout_cache_op(stage, op, scope)
        axis, block = op.axis, ()
    stage.op = ComputeOp(op.name, axis, (), tuple(cache_op.output(k)[index] for k in range(op.num_outputs)),
                         op.tag, op.attrs)
    reduce_axes = set(op.reduce_axis)
    stage.all_iter_vars = [iv for iv in stage.all_iter_vars if iv not in reduce_axes] + list(block)
    stage.leaf_iter_vars = [iv for iv in stage.leaf_iter_vars if iv not in reduce_axes] + list(block)
    cache_stage = Stage(cache_op)
    cache_stage.scope = scope
    _join_group(cache_stage, stage)
    sch.stages.insert(sch.stages.index(stage), cache_stage)
    sch.stage_map[cache_op] = cache_stage
    out = [cache_op.output(t.value_index) for t in tensors]
    return out if isinstance(tensor, (list, tuple)) else out[0]
