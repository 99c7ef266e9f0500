"""``LowerThreadAllreduce``: combine values across the threads of a block.

A cross-thread reduction (a reduction loop bound to ``threadIdx.*``, see
:mod:`loom.te.cross_thread`) lowers to

``AttrStmt(combiner, "reduce_scope", 0, Evaluate(tir.thread_allreduce(n, sources..., cond, inits..., results..., threads...)))``

inside the regions binding the reduction's ``threads``.  Its meaning: over the
threads of a group (those sharing the values of every other ``threadIdx.*``),
each contributes its ``n`` ``sources`` where ``cond`` holds; the combination,
combined into the ``inits``, is stored into the one-element ``results``
buffers (their data vars) of the group's first thread (every reduction thread
at 0).  Unlike TVM's ``tvm_thread_allreduce``, the call carries the initial
values and defines the result in the first thread only, which is all the
store after it reads; so that one form runs either way threads run:

- ``"gpu"`` (interp, device targets: a block's threads run together): each
  thread writes its contribution (or the identity) to a ``shared`` staging
  buffer of one slot per thread, and after a barrier a tree halves the live
  slots, combining slot ``r`` with slot ``r + offset``, a barrier after each
  step; a thread count that is not a power of two first folds the slots past
  the largest power of two below it.  The thread constraints need constant
  extents (the staging buffer's size).  When the kernel's target has an integer
  ``thread_warp_size`` (cuda) and the reduction runs over ``threadIdx.x`` alone,
  with a power-of-two extent, warp shuffles replace the tree (see
  :mod:`loom.transform.allreduce_warp`);
- ``"serial"`` (llvm, c: bound threads run one after another as loops): the
  first thread stores the inits, then every thread combines its contribution
  into the results; no barrier is needed.

>>> import loom
>>> from loom.ir import AttrStmt, Allocate, PrimFunc, seq
>>> from loom.ir.reduce import CommReducer
>>> x, y = loom.var("x", "float32"), loom.var("y", "float32")
>>> add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
>>> A = loom.decl_buffer((4,), "float32", name="A")
>>> R = loom.decl_buffer((1,), "float32", name="R", scope="local")
>>> tx = loom.thread_axis((0, 4), "threadIdx.x")
>>> red = thread_allreduce(add, [A[tx.var]], loom.const(True), [loom.const(0.0)], [R.data], [tx.var])
>>> body = Allocate(R.data, "float32", [1], True, AttrStmt(tx, "thread_extent", 4, red), "local")
>>> print(LowerThreadAllreduce("serial")(PrimFunc([A.data], body, buffer_map={A.data: A})).body)
R = allocate([1], 'float32', 'local')
with attr(iter_var(threadIdx.x, range(0, 4), 'thread_index', 'threadIdx.x'), 'thread_extent', 4):
    if threadIdx.x == 0:
        R[0] = 0.0
    R[0] = R[0] + A[threadIdx.x]
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import LoomError, LoomValueError
from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.buffer import Buffer, decl_buffer
from ..ir.functor import Mutator, post_order_visit
from ..ir.op import Op, list_ops, register_op
from ..ir.reduce import CommReducer
from ..ir.structural import structural_equal
from ..target import Target
from ._util import const_int, is_op_call
from .allreduce_warp import combine_into as _combine
from .allreduce_warp import store_all as _stores
from .allreduce_warp import warp_allreduce
from ._util2 import is_thread_attr
from .pass_base import Pass, PassContext, prim_func_pass
from .thread_sync import storage_sync

__all__ = ["LowerThreadAllreduce", "thread_allreduce", "REDUCE_SCOPE"]

#: The AttrStmt key around an allreduce call; its node is the CommReducer.
REDUCE_SCOPE = "reduce_scope"
_OP = "tir.thread_allreduce"

if _OP not in list_ops():
    register_op(_OP, -1, None, pure=False,
                doc="combine values across the threads of a block (lowered by LowerThreadAllreduce)")


def thread_allreduce(combiner: CommReducer, sources: Sequence[E.PrimExpr], cond: E.PrimExpr,
                     inits: Sequence[E.PrimExpr], results: Sequence[E.Var], threads: Sequence[E.Var]) -> S.Stmt:
    """The statement reducing ``sources`` across ``threads`` into ``results`` (see the module docstring)."""
    n = len(sources)
    if not (n == len(inits) == len(results) == len(combiner.lhs)) or not threads:
        raise LoomValueError(f"thread_allreduce: {n} sources, {len(inits)} inits and {len(results)} results for a "
                             f"{len(combiner.lhs)}-value combiner over {len(threads)} threads")
    args = [ops.const(n, "uint32"), *sources, cond, *inits, *results, *threads]
    call = E.Call("handle", Op.get(_OP), args)
    return S.AttrStmt(combiner, REDUCE_SCOPE, ops.const(0, "int32"), S.Evaluate(call))


def _parse(call: E.Call) -> tuple[list[Any], Any, list[Any], list[E.Var], list[E.Var]]:
    n = const_int(call.args[0])
    if n is None or len(call.args) < 3 * n + 3:
        raise LoomError(f"malformed {_OP} call: {call}")
    a = list(call.args)
    return a[1:n + 1], a[n + 1], a[n + 2:2 * n + 2], a[2 * n + 2:3 * n + 2], a[3 * n + 2:]


class _Lower(Mutator):
    def __init__(self, mode: str, buffers: dict[int, Buffer], fname: str, warp_size: int | None = None) -> None:
        self.mode, self.buffers, self.fname, self.warp_size = mode, buffers, fname, warp_size
        self.threads: list[tuple[E.IterVar, E.PrimExpr]] = []  # enclosing thread attrs, outermost first
        self.launch_tags: set[str] = set()
        self.launch_extents: dict[str, set[int | None]] = {}  # threadIdx tag -> the extents its attrs give it

    def visit_Buffer(self, b: Any) -> Any:
        return b

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.attr_key == REDUCE_SCOPE and isinstance(s.body, S.Evaluate) and is_op_call(s.body.value, _OP):
            return self.lower(s.node, s.body.value)
        if not is_thread_attr(s, ("thread_extent",)):
            return self.generic_visit(s)
        outermost = not self.threads
        if outermost:
            self.launch_extents = _thread_extents(s)
            self.launch_tags = set(self.launch_extents)
        self.threads.append((s.node, s.value))
        try:
            return self.generic_visit(s)
        finally:
            self.threads.pop()

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        if is_op_call(s.value, _OP):
            raise LoomError(f"{self.fname}: a {_OP} call outside an AttrStmt {REDUCE_SCOPE!r} naming its combiner")
        return self.generic_visit(s)

    def result_buffers(self, results: list[E.Var], dtypes: list[Any]) -> list[Buffer]:
        out = []
        for k, (v, t) in enumerate(zip(results, dtypes)):
            buf = self.buffers.get(id(v))
            out.append(buf if buf is not None else decl_buffer((1,), t, v.name, data=v, scope="local"))
        return out

    def lower(self, combiner: Any, call: E.Call) -> S.Stmt:
        if not isinstance(combiner, CommReducer):
            raise LoomError(f"{self.fname}: the {REDUCE_SCOPE!r} attr of a {_OP} call must name its CommReducer")
        sources, cond, inits, results, threads = _parse(call)
        sources = [self.visit(x) for x in sources]
        cond = self.visit(cond)
        res = self.result_buffers(results, [x.dtype for x in sources])
        zero = ops.const(0, "int32")
        first = ops.all(*(ops.eq(t, ops.const(0, t.dtype)) for t in threads))
        if self.mode == "serial":
            add = _combine(combiner, res, zero, sources)
            return S.seq(S.IfThenElse(first, _stores(res, zero, inits)),
                         add if const_int(cond) == 1 else S.IfThenElse(cond, add))
        return self.lower_gpu(combiner, sources, cond, inits, res, threads)

    def lower_gpu(self, combiner: CommReducer, sources: list[Any], cond: Any, inits: list[Any],
                  res: list[Buffer], threads: list[E.Var]) -> S.Stmt:
        enclosing: dict[str, tuple[E.Var, int]] = {}
        for iv, extent in self.threads:
            if iv.thread_tag.startswith("threadIdx."):
                n = const_int(extent)
                if n is None:
                    raise LoomError(f"{self.fname}: a cross-thread reduction needs constant thread extents, but "
                                    f"{iv.thread_tag} has extent {extent}")
                enclosing[iv.thread_tag] = (iv.var, n)
        by_var = {id(v): (tag, n) for tag, (v, n) in enclosing.items()}
        for t in threads:
            if id(t) not in by_var:
                raise LoomError(f"{self.fname}: the reduction thread {t.name} is not bound to threadIdx.* around "
                                f"its cross-thread reduction")
        missing = sorted(self.launch_tags - set(enclosing))
        if missing:
            raise LoomError(f"{self.fname}: the block also runs threads along {', '.join(missing)}, bound outside the "
                            f"cross-thread reduction; those threads would reduce into the same slots. Bind "
                            f"{', '.join(missing)} in the reducing stage too (or compute it elsewhere)")
        reduce_tags = [by_var[id(t)][0] for t in threads]
        group_tags = sorted(set(enclosing) - set(reduce_tags))
        r_index, size = _linear([enclosing[t] for t in reduce_tags])
        g_index, groups = _linear([enclosing[t] for t in group_tags])
        zero = ops.const(0, "int32")
        if size == 1:  # one thread per group: no staging
            return S.seq(_stores(res, zero, inits), S.IfThenElse(cond, _combine(combiner, res, zero, sources)))
        if self.warp_size is not None and self.uniform(enclosing) and reduce_tags == ["threadIdx.x"]:
            dims = [enclosing[t] for t in ("threadIdx.x", "threadIdx.y", "threadIdx.z") if t in enclosing]
            warp = warp_allreduce(combiner, sources, cond, threads[0], size, dims, self.warp_size,
                                  lambda total: self.finish(combiner, res, inits, total))
            if warp is not None:
                return warp
        dtypes = [x.dtype for x in sources]
        bufs = [decl_buffer((groups * size,), t, f"red_buf{k}", scope="shared") for k, t in enumerate(dtypes)]
        base = g_index * size if groups > 1 else zero
        slot = base + r_index
        contribute = _stores(bufs, slot, sources)
        if const_int(cond) != 1:
            contribute = S.IfThenElse(cond, contribute, _stores(bufs, slot, combiner.identity_element))
        body: list[S.Stmt] = [contribute, storage_sync("shared")]
        for offset, active in _tree_steps(size):
            body.append(S.IfThenElse(ops.lt(r_index, ops.const(active, "int32")),
                                     _combine(combiner, bufs, slot, [E.BufferLoad(b, [slot + offset]) for b in bufs])))
            body.append(storage_sync("shared"))
        total = [E.BufferLoad(b, [base]) for b in bufs]
        body.append(S.IfThenElse(ops.eq(r_index, zero), self.finish(combiner, res, inits, total)))
        out = S.seq(*body)
        for b, t in reversed(list(zip(bufs, dtypes))):
            out = S.Allocate(b.data, t, [groups * size], ops.const(True), out, "shared")
        return out

    def finish(self, combiner: CommReducer, res: list[Buffer], inits: list[Any], total: list[Any]) -> S.Stmt:
        """The first thread's store of the group's ``total`` combined into the ``inits``."""
        zero = ops.const(0, "int32")
        if all(structural_equal(a, b) for a, b in zip(inits, combiner.identity_element)):
            return _stores(res, zero, total)  # combining with the identity changes nothing
        return _combine(combiner, res, zero, total, lhs=inits)

    def uniform(self, enclosing: dict[str, tuple[E.Var, int]]) -> bool:
        """Every attr of the launch gives each thread tag the extent it has here: the block is exactly the
        threads around the reduction, so its warps are made of them (shuffles need every lane of a mask)."""
        return all(self.launch_extents.get(t) == {n} for t, (_, n) in enclosing.items())


def _linear(dims: list[tuple[E.Var, int]]) -> tuple[E.PrimExpr, int]:
    """A row-major index over ``dims`` (the first outermost) and its count."""
    index: E.PrimExpr = ops.const(0, "int32")
    count = 1
    for v, n in dims:
        iv = v if v.dtype == index.dtype else ops.cast(v, "int32")
        index = iv if count == 1 and const_int(index) == 0 else index * n + iv
        count *= n
    return index, count


def _tree_steps(size: int) -> list[tuple[int, int]]:
    """``(offset, active threads)`` per step: fold down to a power of two, then halve to one slot."""
    half = 1
    while half * 2 < size:
        half *= 2
    steps = [(half, size - half)]
    while half > 1:
        half //= 2
        steps.append((half, half))
    return steps


def _thread_extents(s: S.Stmt) -> dict[str, set[int | None]]:
    """The ``threadIdx.*`` tags of a launch, each with the extents its attrs give it (None: not a constant)."""
    found: dict[str, set[int | None]] = {}

    def visit(n: Any) -> None:
        if is_thread_attr(n, ("thread_extent",)) and n.node.thread_tag.startswith("threadIdx."):
            found.setdefault(n.node.thread_tag, set()).add(const_int(n.value))

    post_order_visit(s, visit)
    return found


def _buffers_by_var(body: S.Stmt) -> dict[int, Buffer]:
    found: dict[int, Buffer] = {}

    def visit(n: Any) -> None:
        if isinstance(n, (E.BufferLoad, S.BufferStore)):
            found.setdefault(id(n.buffer.data), n.buffer)

    post_order_visit(body, visit)
    return found


def _warp_size(target: Any) -> int | None:
    """The target's integer ``thread_warp_size`` attribute, if it has one."""
    ws = target.attrs.get("thread_warp_size") if isinstance(target, Target) else None
    return ws if isinstance(ws, int) and not isinstance(ws, bool) else None


def LowerThreadAllreduce(mode: str = "gpu") -> Pass:  # noqa: N802 - classic factory name
    """The pass for threads that run together (``"gpu"``) or one after another (``"serial"``); see the module docstring."""
    if mode not in ("gpu", "serial"):
        raise LoomValueError(f"LowerThreadAllreduce: mode must be 'gpu' or 'serial', got {mode!r}")

    def run(func: Any, mod: Any, ctx: PassContext) -> Any:
        calls: list[Any] = []
        post_order_visit(func.body, lambda n: calls.append(n) if is_op_call(n, _OP) else None)
        if not calls:
            return func
        name = func.attrs.get("global_symbol", "the function")
        warp = _warp_size(func.attrs.get("target")) if mode == "gpu" else None
        body = _Lower(mode, _buffers_by_var(func.body), name, warp).visit(func.body)
        return func.with_body(body)

    return prim_func_pass(run, name="LowerThreadAllreduce")
