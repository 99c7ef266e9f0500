"""Cross-thread reductions: a reduction whose loops are bound to ``threadIdx.*``.

When some reduction loops of a stage are bound to threads (``s[B].bind(ki, tx)``,
typically after :meth:`~loom.te.schedule.Schedule.rfactor`), the threads of a
group compute the reduction together.  The stage lowers to::

    <data loops and thread attrs, stages attached to them>
      reduce_temp = allocate (local, one element per output)
      <attrs of the reduction threads, stages attached to them>
        normal_reduce_temp = identity                  # when some reduction loops are not bound:
        for <the unbound reduction loops>:             #   each thread reduces its share first
            normal_reduce_temp = combine(normal_reduce_temp, source)
        thread_allreduce(source or normal_reduce_temp, cond, init, reduce_temp, threads)
      <attrs of the reduction threads>
        if threads == 0 and <bound checks> and <store predicate>:
            B[i] = reduce_temp

``LowerThreadAllreduce`` (:mod:`loom.transform.lower_thread_allreduce`) turns the
allreduce into shared-memory staging, barriers and a tree where threads run
together, and into a plain accumulation where they run one after another.
The data loops must come before the reduction loops (reorder them).

>>> import loom
>>> from loom.te.operation import placeholder, compute, thread_axis
>>> from loom.te.reduction import reduce_axis, sum
>>> from loom.te.schedule import create_schedule
>>> from loom.te.schedule_ops import schedule_to_stmt
>>> A = placeholder((4, 64), name="A")
>>> k = reduce_axis((0, 64), name="k")
>>> B = compute((4,), lambda i: sum(A[i, k], axis=k), name="B")
>>> s = create_schedule(B.op)
>>> ko, ki = s[B].split(k, factor=16)
>>> s[B].bind(ki, thread_axis("threadIdx.x"))
>>> print(schedule_to_stmt(s))
realize B[0:4]:
    for i in range(4):
        reduce_temp0 = allocate([1], 'float32', 'local')
        with attr(iter_var(threadIdx.x, None, 'thread_index', 'threadIdx.x'), 'thread_extent', 16):
            normal_reduce_temp0 = allocate([1], 'float32', 'local')
            normal_reduce_temp0[0] = 0.0
            for k.outer in range(4):
                normal_reduce_temp0[0] = normal_reduce_temp0[0] + A[i, k.outer * 16 + threadIdx.x]
            with attr(comm_reducer(lambda x, y: (x + y), identity=(0.0)), 'reduce_scope', 0):
                thread_allreduce(uint32(1), normal_reduce_temp0[0], True, 0.0, reduce_temp0, threadIdx.x, dtype='handle')
        with attr(iter_var(threadIdx.x, None, 'thread_index', 'threadIdx.x'), 'thread_extent', 16):
            if threadIdx.x == 0:
                B[i] = reduce_temp0[0]
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LoomError, LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir.buffer import Buffer, decl_buffer
from ..ir.functor import post_order_visit, substitute
from ..ir.producer import ProducerStore
from ..ir.reduce import Reduce
from ..ir.structural import structural_equal
from ..ir.stmt import Allocate, AttrStmt, BufferStore, IfThenElse, LetStmt, Stmt, seq
from ..transform._util import uses_vars
from ..transform.lower_thread_allreduce import thread_allreduce
from .loop_nest import if_nest, make_bound_check, make_loop_nest, merge_nest
from .graph import bind_map
from .relations import pass_down_bitmask
from .tensor import ComputeOp

__all__ = ["thread_reduce_leaves", "lower_cross_thread", "check_store_predicate", "store_predicates",
           "predicate_guard"]

_TRUE = E.IntImm("bool", 1)
#: Wraps a store in its conditions: ``guard(preds, store)``.
Guard = Callable[[list[E.PrimExpr], Stmt], Stmt]


def _flags(stage: Any) -> dict[E.IterVar, int]:
    """1 for loops derived from data axes, 2 from reduction axes (3: fused from both)."""
    op = stage.op
    flags = {iv: 2 for iv in op.reduce_axis}
    flags.update({iv: 1 for iv in op.axis})
    pass_down_bitmask(stage, flags)
    return flags


def thread_reduce_leaves(stage: Any) -> list[E.IterVar]:
    """The stage's reduction loops bound to threads, in loop order (empty: an ordinary reduction)."""
    op = stage.op
    if not isinstance(op, ComputeOp) or not op.reduce_axis or not stage.iter_var_attrs:
        return []
    flags = _flags(stage)
    out = []
    for iv in stage.leaf_iter_vars:
        attr = stage.iter_var_attrs.get(iv)
        if attr is not None and attr.bind_thread is not None and flags.get(iv, 0) & 2:
            if flags[iv] & 1:
                raise LoomValueError(f"{op.name}: loop {iv.var.name}, bound to {attr.bind_thread.thread_tag}, fuses a "
                                     f"data axis with a reduction axis; bind a loop of the reduction only")
            out.append(iv)
    return out


def check_store_predicate(stage: Any, predicate: Any) -> E.PrimExpr:
    """``predicate`` as a boolean expression, or a clear error."""
    try:
        e = ops.convert_expr(predicate)
    except LoomTypeError as err:
        raise LoomTypeError(f"set_store_predicate on {stage.op.name}: {err}") from err
    if not e.dtype.is_bool or e.dtype.lanes != 1:
        raise LoomTypeError(f"set_store_predicate on {stage.op.name}: the predicate must be a boolean condition, "
                            f"got dtype {e.dtype}")
    return e


def store_predicates(stage: Any) -> list[E.PrimExpr]:
    """The stage's store predicate as a list of conditions (empty when there is none)."""
    pred = getattr(stage, "store_predicate", None)
    return [] if pred is None else [pred]


def predicate_guard(stage: Any, bounds: Any) -> Guard:
    """``if_nest`` for the stage's stores, inside attrs binding the threads its store predicate names.

    ``set_store_predicate(tx.var.equal(0))`` on a stage none of whose loops is bound
    to ``tx`` (it runs inside the group of a stage that is) names a variable nothing
    binds around the store: the store is wrapped in that thread's own attr, so
    that exactly the threads where the predicate holds store, however threads run.
    """
    pred = getattr(stage, "store_predicate", None)
    if pred is None:
        return if_nest
    binds = bind_map(bounds.schedule)
    known = {id(t.var): t for t in binds.values()}
    around = {id(a.bind_thread.var) for a in stage.iter_var_attrs.values() if a.bind_thread is not None}
    around |= {id(binds[iv].var) for iv in bounds.paths.get(stage, []) if iv in binds}
    free: list[E.IterVar] = []

    def visit(n: Any) -> None:
        if isinstance(n, E.Var) and id(n) in known and id(n) not in around and known[id(n)] not in free:
            free.append(known[id(n)])

    post_order_visit(pred, visit)
    threads = [(t, bounds[t].extent) for t in free if t in bounds]

    def guard(preds: list[E.PrimExpr], body: Stmt) -> Stmt:
        body = if_nest(preds, body)
        for t, extent in reversed(threads):
            body = AttrStmt(t, "thread_extent", extent, body)
        return body

    return guard


def _uses(e: E.PrimExpr, ids: set[int]) -> bool:
    return bool(ids) and uses_vars(e, lambda v: id(v) in ids)


def _temps(op: ComputeOp, red: Reduce, prefix: str) -> list[Buffer]:
    return [decl_buffer((1,), s.dtype, f"{prefix}{k}", scope="local") for k, s in enumerate(red.source)]


def _allocate(bufs: list[Buffer], body: Stmt) -> Stmt:
    for b in reversed(bufs):
        body = Allocate(b.data, b.dtype, [1], ops.const(True), body, "local")
    return body


def _accumulate(red: Reduce, bufs: list[Buffer], sources: list[E.PrimExpr]) -> Stmt:
    """``bufs[0] = combine(bufs[0], sources)``; a tuple computes every value before storing any."""
    zero = ops.const(0, "int32")
    values = red.combiner([E.BufferLoad(b, [zero]) for b in bufs], sources)
    if len(bufs) == 1:
        return BufferStore(bufs[0], values[0], [zero])
    temps = [E.Var(f"{b.name}.v", v.dtype) for b, v in zip(bufs, values)]
    body = seq(*(BufferStore(b, t, [zero]) for b, t in zip(bufs, temps)))
    for t, v in reversed(list(zip(temps, values))):
        body = LetStmt(t, v, body)
    return body


def lower_cross_thread(stage: Any, bodies: tuple[E.PrimExpr, ...], dom_map: Any, declared: Any,
                       attach: Callable[[E.IterVar, Stmt], Stmt], guard: Guard = if_nest) -> Stmt:
    """The statement computing a stage whose reduction loops are (partly) bound to threads (module docstring)."""
    op: ComputeOp = stage.op
    red = bodies[0]
    if not isinstance(red, Reduce):
        raise LoomError(f"{op.name} has reduction axes but its body is not a reduction")
    bound = thread_reduce_leaves(stage)
    flags = _flags(stage)
    leaves = stage.leaf_iter_vars
    begin = next(k for k, iv in enumerate(leaves) if flags.get(iv, 0) & 2)
    late = [iv.var.name for iv in leaves[begin:] if not flags.get(iv, 0) & 2]
    if late:
        raise LoomValueError(f"{op.name}: its reduction is bound to threads, so its data loops must come before "
                             f"its reduction loops, but {late[0]} comes after {leaves[begin].var.name}; reorder them")
    normal = [iv for iv in leaves[begin:] if iv not in bound]
    threads = [stage.iter_var_attrs[iv].bind_thread for iv in bound]
    values: dict[E.IterVar, E.PrimExpr] = {}
    main = make_loop_nest(stage, dom_map, 0, False, set(normal), values, attach)
    preds = make_bound_check(stage, dom_map, values, False, set(), declared)
    vmap = {iv.var: v for iv, v in values.items() if v is not iv.var}
    normal_ids = {id(iv.var) for iv in normal}
    thread_ids = {id(t.var) for t in threads}
    update_preds = [p for p in preds if _uses(p, normal_ids)]
    contrib_preds = [p for p in preds if not _uses(p, normal_ids) and _uses(p, thread_ids)]
    data_preds = [p for p in preds if not _uses(p, normal_ids) and not _uses(p, thread_ids)]
    cond = substitute(red.condition, vmap)
    cond_list = [] if isinstance(cond, E.IntImm) and cond.value == 1 else [cond]
    sources = [substitute(s, vmap) for s in red.source]
    results = _temps(op, red, "reduce_temp")
    if normal:
        # Each thread first reduces its share over the unbound reduction loops.
        temps = _temps(op, red, "normal_reduce_temp")
        zero = ops.const(0, "int32")
        acc = _accumulate(red, temps, sources)
        update = if_nest(data_preds + update_preds, IfThenElse(cond, acc) if cond_list else acc)
        inner_nest = make_loop_nest(stage, dom_map, 0, False, set(leaves) - set(normal), {}, attach)
        init = seq(*(BufferStore(t, v, [zero]) for t, v in zip(temps, red.combiner.identity_element)))
        reduce_cond = ops.all(*(data_preds + contrib_preds)) if data_preds + contrib_preds else _TRUE
        allreduce = thread_allreduce(red.combiner, [E.BufferLoad(t, [zero]) for t in temps], reduce_cond,
                                     _inits(red, vmap), [b.data for b in results], [t.var for t in threads])
        per_thread = _allocate(temps, seq(init, merge_nest(inner_nest, update), allreduce))
    else:
        conds = data_preds + contrib_preds + cond_list
        per_thread = thread_allreduce(red.combiner, sources, ops.all(*conds) if conds else _TRUE, _inits(red, vmap),
                                      [b.data for b in results], [t.var for t in threads])
    reducing = merge_nest(main[begin + 1:], per_thread)
    # The group's first thread stores the result: every reduction thread at 0, in regions of their own.
    outputs = [stage.origin_op.output(k) for k in range(op.num_outputs)]
    index = [substitute(iv.var, vmap) for iv in op.axis]
    zero = ops.const(0, "int32")
    store: Stmt = seq(*(ProducerStore(t, E.BufferLoad(b, [zero]), index) for t, b in zip(outputs, results)))
    firsts = [ops.eq(t.var, ops.const(0, t.var.dtype)) for t in threads]
    extra = [p for p in store_predicates(stage) if not any(structural_equal(p, f) for f in firsts)]
    store = if_nest(data_preds, IfThenElse(ops.all(*firsts), guard(extra, store)))
    for iv, t in reversed(list(zip(bound, threads))):
        store = AttrStmt(t, "thread_extent", dom_map[iv].extent, store)
    return merge_nest(main[:begin + 1], _allocate(results, seq(reducing, store)))


def _inits(red: Reduce, vmap: dict[E.Var, E.PrimExpr]) -> list[E.PrimExpr]:
    return [substitute(v, vmap) for v in (red.init or red.combiner.identity_element)]
