"""Schedules: how and where each operation of a tensor program is computed.

A :class:`Schedule` holds one :class:`Stage` per operation, in topological order
(inputs first).  A stage starts as a loop nest over its operation's axes and is
reshaped by its primitives (``split``, ``fuse``, ``reorder``, ``compute_at``...);
``loom.te.schedule_ops.schedule_to_stmt`` turns the result into IR.

>>> from loom.te.operation import placeholder, compute
>>> A = placeholder((16, 16), name="A")
>>> B = compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
>>> s = create_schedule(B.op)
>>> xo, xi = s[B].split(B.op.axis[0], factor=4)
>>> [iv.var.name for iv in s[B].leaf_iter_vars]
['i.outer', 'i.inner', 'j']
"""

from __future__ import annotations

import copy
from typing import Any, Generic, Optional, Sequence, TypeVar, Union, overload

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir.recursion import deep_recursion
from .relations import IterVarAttr, Rebase, Relation
from .operation import HybridOp
from .scan import ScanOp
from .tensor import ComputeOp, Operation, OpT, Tensor
from .tensor_compute import TensorComputeOp
from . import schedule_compute as _compute
from . import schedule_loops as _loops

__all__ = ["Schedule", "Stage", "create_schedule", "root_iter_vars"]

_Op = TypeVar("_Op", bound=Operation)

#: Where a stage's loops go: at the top level, nowhere (inlined), inside a consumer's loop.
ATTACH_ROOT, ATTACH_INLINE, ATTACH_SCOPE = "root", "inline", "scope"


def data_axes(op: ComputeOp | TensorComputeOp) -> tuple[E.IterVar, ...]:
    """The data-parallel axes the stage of ``op`` loops over: a tensor compute's outer axes."""
    return op.schedulable_axis if isinstance(op, TensorComputeOp) else op.axis


def root_iter_vars(op: Operation) -> tuple[E.IterVar, ...]:
    """The loop variables an operation starts with (a compute's axes, then its reduction axes; a hybrid's loops)."""
    if isinstance(op, TensorComputeOp):  # its intrinsic's block (the opaque axes) is no loop of its own
        return tuple(op.schedulable_axis) + tuple(op.reduce_axis)
    if isinstance(op, ComputeOp):
        return tuple(op.axis) + tuple(op.reduce_axis)
    if isinstance(op, HybridOp):
        return tuple(op.axis)
    if isinstance(op, ScanOp):  # one loop, over the rows its update computes
        return (op.scan_axis,)
    return ()


class Stage(Generic[OpT]):
    """The schedule of one operation: its loops and where they are placed.

    Primitives return the new loop variables (``split`` returns ``(outer,
    inner)``, ``fuse`` the fused one) and raise :class:`loom.errors.LoomError`
    subclasses naming the stage and the axis on misuse.  For type checkers a
    stage is generic in its operation's type, as :class:`~loom.te.Tensor` is
    (``s[B].op.axis`` is known for a compute ``B``; the cache primitives
    replace ``op`` with one of the same type).
    """

    def __init__(self, op: OpT, is_output: bool = False) -> None:
        self.op: OpT = op
        self.origin_op: Operation = op  # the op whose tensors the IR stores (cache primitives swap ``op``)
        self.all_iter_vars: list[E.IterVar] = list(root_iter_vars(op))
        self.leaf_iter_vars: list[E.IterVar] = list(self.all_iter_vars)
        self.relations: list[Relation] = []
        self.iter_var_attrs: dict[E.IterVar, IterVarAttr] = {}
        self.attach_type: str = ATTACH_ROOT
        self.attach_ivar: Optional[E.IterVar] = None
        self.attach_stage: Optional[Stage] = None
        self.scope: str = ""
        self.is_output: bool = is_output
        self.storage_aligns: dict[E.IterVar, tuple[int, int]] = {}
        self.double_buffer_: bool = False
        self.device: Any = None  # where the user placed the stage (on_device), resolved by loom.build
        self.group: Any = None  # the innermost StageGroup holding the stage (create_group)
        self.follows_group = False  # placed wherever its group is placed (schedule_group)
        self.store_predicate: Optional[E.PrimExpr] = None  # only threads where it holds store (set_store_predicate)

    def __repr__(self) -> str:
        return f"stage({self.op.name}, {type(self.op).__name__})"

    # -- loop structure (schedule_loops) ------------------------------------------
    def split(self, parent: E.IterVar, factor: Any = None, nparts: Any = None) -> tuple[E.IterVar, E.IterVar]:
        """Split ``parent`` into ``(outer, inner)``: inner of extent ``factor`` or outer of ``nparts``."""
        return _loops.split(self, parent, factor, nparts)

    def fuse(self, *axes: E.IterVar) -> E.IterVar:
        """Fuse adjacent loops (outermost first) into one."""
        return _loops.fuse(self, *axes)

    def reorder(self, *axes: E.IterVar) -> None:
        """Put the given loops, in the given order, where those loops were."""
        _loops.reorder(self, *axes)

    def tile(self, x_parent: E.IterVar, y_parent: E.IterVar, x_factor: Any, y_factor: Any) -> tuple[E.IterVar, ...]:
        """Split two loops and order them ``x_outer, y_outer, x_inner, y_inner`` (returned in that order)."""
        return _loops.tile(self, x_parent, y_parent, x_factor, y_factor)

    def unroll(self, axis: E.IterVar) -> None:
        """Unroll the loop ``axis``."""
        _loops.annotate(self, axis, "unrolled")

    def vectorize(self, axis: E.IterVar) -> None:
        """Vectorize the loop ``axis``."""
        _loops.annotate(self, axis, "vectorized")

    def parallel(self, axis: E.IterVar) -> None:
        """Run the iterations of ``axis`` in parallel."""
        _loops.annotate(self, axis, "parallelized")

    def bind(self, axis: E.IterVar, thread_ivar: E.IterVar) -> None:
        """Bind the loop ``axis`` to a thread axis (``loom.thread_axis("threadIdx.x")``)."""
        _loops.bind(self, axis, thread_ivar)

    def pragma(self, axis: E.IterVar, pragma_type: str, pragma_value: Any = None) -> None:
        """Annotate the loop ``axis`` with ``pragma_<pragma_type>`` (value 1 unless given)."""
        _loops.pragma(self, axis, pragma_type, pragma_value)

    def prefetch(self, tensor: Any, var: E.IterVar, offset: Any) -> None:
        """Prefetch, in each iteration of loop ``var``, what the body reads of ``tensor`` ``offset`` iterations later.

        A hint to the CPU caches (``llvm.prefetch``, C's ``__builtin_prefetch``): one
        prefetch per 64-byte line of the region, clamped to the tensor's storage;
        other targets drop it.

        >>> import loom
        >>> A = loom.placeholder((64, 64), name="A")
        >>> B = loom.compute((64, 64), lambda i, j: A[i, j] * 2, name="B")
        >>> s = loom.create_schedule(B.op)
        >>> s[B].prefetch(A, B.op.axis[0], 2)
        >>> "prefetch(A[min(i + 2, 63), A.prefetch1 * 16], 0, 3)" in str(loom.lower(s, [A, B], simple_mode=True))
        True
        """
        _loops.prefetch(self, tensor, var, offset)

    def tensorize(self, axis: E.IterVar, intrin: Any) -> None:
        """Compute the loops from ``axis`` inward with the tensor intrinsic ``intrin`` (see loom.te.tensorize)."""
        from .tensorize import tensorize

        tensorize(self, axis, intrin)

    # -- placement and storage (schedule_compute) ----------------------------------
    def compute_at(self, parent: Any, scope: E.IterVar) -> None:
        """Compute this stage inside the loop ``scope`` of the stage ``parent``."""
        _compute.compute_at(self, parent, scope)

    def compute_inline(self) -> None:
        """Substitute this stage's body into its consumers instead of storing it."""
        _compute.compute_inline(self)

    def compute_root(self) -> None:
        """Compute this stage at the top level (the default)."""
        _compute.compute_root(self)

    def set_scope(self, scope: str) -> None:
        """The memory scope of this stage's storage ("global", "shared", "local"...)."""
        _compute.set_scope(self, scope)

    def storage_align(self, axis: E.IterVar, factor: int, offset: int) -> None:
        """Pad the storage so that the stride of dimension ``axis`` is ``factor * k + offset``."""
        _compute.storage_align(self, axis, factor, offset)

    def double_buffer(self) -> None:
        """Double-buffer this stage's storage (the pass alternates two copies across the enclosing loop)."""
        _compute.double_buffer(self)

    def on_device(self, where: Any) -> None:
        """Run this stage on ``where`` (for a placeholder: the caller's array lives there).

        ``where`` is a :class:`~loom.target.VirtualDevice`, a :class:`~loom.target.Target`,
        a target string (``"ext_dev"``) or a device (``loom.cuda(0)``); ``loom.build``
        plans the devices of a schedule with placements (docs/heterogeneous.md).

        >>> from loom.te.operation import placeholder, compute
        >>> A = placeholder((8,), name="A")
        >>> B = compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> s = create_schedule(B.op)
        >>> s[B].on_device("interp"); s[B].device
        'interp'
        """
        _compute.on_device(self, where)

    def set_store_predicate(self, predicate: Any) -> None:
        """Store this stage's results only where ``predicate`` holds (``tx.var.equal(0)``: one thread of a group).

        >>> import loom
        >>> from loom.te.operation import placeholder, compute
        >>> A = placeholder((8,), name="A")
        >>> B = compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> s = create_schedule(B.op)
        >>> s[B].set_store_predicate(B.op.axis[0].var < 4); str(s[B].store_predicate)
        'i < 4'
        """
        from .cross_thread import check_store_predicate

        self.store_predicate = check_store_predicate(self, predicate)


def _as_ops(ops: Any) -> list[Operation]:
    items = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    out = []
    for x in items:
        if isinstance(x, Tensor):
            x = x.op
        if not isinstance(x, Operation):
            raise LoomTypeError(f"create_schedule expects operations or tensors, got {type(x).__name__}")
        if x not in out:
            out.append(x)
    return out


def _post_dfs(outputs: Sequence[Operation]) -> list[Operation]:
    order: list[Operation] = []
    seen: set[int] = set()
    stack: list[tuple[Operation, bool]] = [(op, False) for op in reversed(outputs)]
    while stack:
        op, done = stack.pop()
        if done:
            order.append(op)
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.append((op, True))
        stack.extend((t.op, False) for t in reversed(op.input_tensors) if id(t.op) not in seen)
    return order


class Schedule:
    """Stages in topological order, ``stage_map`` from operation to stage, and the outputs.

    ``s[T]`` (a Tensor or an Operation) is the stage of ``T``'s operation.
    """

    def __init__(self, outputs: Sequence[Operation]) -> None:
        self.outputs: list[Operation] = list(outputs)
        self.stages: list[Stage] = [Stage(op, op in self.outputs) for op in _post_dfs(self.outputs)]
        self.stage_map: dict[Operation, Stage] = {s.op: s for s in self.stages}
        self.is_normalized = False  # set on the copies normalize() returns
        self.groups: list[Any] = []  # StageGroups, see create_group
        from .schedule_group import make_scan_groups

        make_scan_groups(self)

    @overload
    def __getitem__(self, key: Tensor[_Op]) -> Stage[_Op]: ...
    @overload
    def __getitem__(self, key: _Op) -> Stage[_Op]: ...
    def __getitem__(self, key: Union[Tensor, Operation]) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if not isinstance(op, Operation):
            raise LoomTypeError(f"a schedule is indexed by a Tensor or an Operation, got {type(key).__name__}")
        stage = self.stage_map.get(op)
        if stage is None:
            raise LoomValueError(f"{op.name} is not part of this schedule (its stages: "
                                 f"{[s.op.name for s in self.stages]})")
        return stage

    def __repr__(self) -> str:
        return f"schedule({', '.join(s.op.name for s in self.stages)})"

    def cache_read(self, tensor: Tensor, scope: str, readers: Any) -> Tensor[ComputeOp]:
        """A stage copying ``tensor`` into ``scope`` that ``readers`` read instead (see schedule_cache)."""
        from .schedule_cache import cache_read

        with deep_recursion("cache_read"):
            return cache_read(self, tensor, scope, readers)

    @overload
    def cache_write(self, tensor: Tensor, scope: str) -> Tensor[ComputeOp]: ...
    @overload
    def cache_write(self, tensor: Sequence[Tensor], scope: str) -> list[Tensor[ComputeOp]]: ...
    def cache_write(self, tensor: Tensor | Sequence[Tensor], scope: str) -> Tensor[ComputeOp] | list[Tensor[ComputeOp]]:
        """Compute ``tensor`` into a ``scope`` cache first, then copy it out (see schedule_cache)."""
        from .schedule_cache import cache_write

        with deep_recursion("cache_write"):
            return cache_write(self, tensor, scope)

    def rfactor(self, tensor: Tensor, axis: E.IterVar, factor_axis: int = 0) -> Any:
        """Factor the reduction loop ``axis`` of ``tensor`` into a new tensor of partial results (see rfactor).

        ``s[tensor]`` then reduces that tensor over ``s[tensor].op.reduce_axis[0]``; a
        tuple reduction returns one factored tensor per output.
        """
        from .rfactor import rfactor

        with deep_recursion("rfactor"):
            return rfactor(self, tensor, axis, factor_axis)

    def create_group(self, outputs: Any, inputs: Any, include_inputs: bool = False) -> Any:
        """Group the stages computing ``outputs`` from ``inputs`` to place them together.

        The group's ``compute_at`` moves every member without a placement of its
        own (see :mod:`loom.te.schedule_group`).
        """
        from .schedule_group import create_group

        return create_group(self, outputs, inputs, include_inputs)

    def as_node(self) -> Any:
        """The record ``loom.save_json`` writes (``loom.load_json`` gives a Schedule back)."""
        from .schedule_json import schedule_record

        return schedule_record(self)

    def copy(self) -> Schedule:
        """An independent copy: primitives on it leave this schedule alone."""
        new = Schedule.__new__(Schedule)
        new.outputs = list(self.outputs)
        remap: dict[int, Stage] = {}
        new.stages = []
        for s in self.stages:
            c = Stage.__new__(Stage)
            c.__dict__.update(s.__dict__)
            c.all_iter_vars, c.leaf_iter_vars = list(s.all_iter_vars), list(s.leaf_iter_vars)
            c.relations = list(s.relations)
            c.iter_var_attrs = {k: v.copy() for k, v in s.iter_var_attrs.items()}
            c.storage_aligns = dict(s.storage_aligns)
            remap[id(s)] = c
            new.stages.append(c)
        for c in new.stages:
            if c.attach_stage is not None:
                c.attach_stage = remap[id(c.attach_stage)]
        new.stage_map = {op: remap[id(s)] for op, s in self.stage_map.items()}
        new.is_normalized = False
        groups = {id(g): copy.copy(g) for g in self.groups}
        for g in groups.values():
            g.schedule = new
            g.group = None if g.group is None else groups[id(g.group)]
            g.attach_stage = None if g.attach_stage is None else remap[id(g.attach_stage)]
        for c in new.stages:
            if c.group is not None:
                c.group = groups[id(c.group)]
        new.groups = [groups[id(g)] for g in self.groups]
        return new

    def normalize(self) -> Schedule:
        """A copy whose loops all start at zero (each un-split axis gets a :class:`Rebase`)."""
        sch = self.copy()
        rebased: dict[E.IterVar, E.IterVar] = {}
        for s in sch.stages:
            if s.attach_type == ATTACH_INLINE:
                continue
            for iv in root_iter_vars(s.op):
                attr = s.iter_var_attrs.get(iv)
                if iv not in s.leaf_iter_vars or (attr is not None and attr.bind_thread is not None):
                    continue
                new_iv = E.IterVar(None, E.Var(iv.var.name, iv.var.dtype), iv.iter_type, iv.thread_tag)
                s.relations.append(Rebase(iv, new_iv))
                s.all_iter_vars.append(new_iv)
                s.leaf_iter_vars[s.leaf_iter_vars.index(iv)] = new_iv
                if attr is not None:
                    s.iter_var_attrs[new_iv] = attr
                rebased[iv] = new_iv
        for s in sch.stages:
            if s.attach_type == ATTACH_SCOPE and s.attach_ivar in rebased:
                s.attach_ivar = rebased[s.attach_ivar]
        sch.is_normalized = True
        return sch


def create_schedule(ops: Any) -> Schedule:
    """A schedule computing ``ops`` (an operation, a tensor, or a list of them) and all they read.

    >>> from loom.te.operation import placeholder, compute
    >>> A = placeholder((8,), name="A")
    >>> B = compute((8,), lambda i: A[i] + 1.0, name="B")
    >>> s = create_schedule(B.op)
    >>> [st.op.name for st in s.stages], s[B].is_output
    (['A', 'B'], True)
    """
    outputs = _as_ops(ops)
    with deep_recursion("create_schedule"):  # finding the inputs walks every body
        return Schedule(outputs)
