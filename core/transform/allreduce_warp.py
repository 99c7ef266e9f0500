"""The warp-shuffle strategy of ``LowerThreadAllreduce`` (TVM's classic allreduce on CUDA).

Used in ``"gpu"`` mode when the kernel's target has an integer
``thread_warp_size`` (cuda: 32), the reduction's only thread is
``threadIdx.x``, its extent ``n`` is a power of two and every value is a
16/32/64-bit scalar (shuffles move those; bool and 8-bit values keep the
shared-memory tree).  The lanes of a warp are threads ``threadIdx.x`` fastest,
so with ``n`` a power of two each group (the threads sharing ``threadIdx.y``
and ``.z``) is ``n`` consecutive lanes:

- ``n <= warp size``: every thread holds its contribution (the identity where
  ``cond`` is false) in a local buffer and combines it with
  ``tvm_warp_shuffle_down(mask, v, offset, n, warp_size)`` for offsets
  ``n/2 ... 1``: lane 0 of each segment of ``n`` lanes ends with the group's
  value; no shared memory, no barrier;
- ``n`` a multiple of the warp size, up to its square: each warp reduces so,
  lane 0 of each warp writes its value to a ``shared`` staging buffer (one slot
  per warp of the block), a barrier, then every warp reloads its group's
  ``n / warp_size`` slots (the identity past them) and reduces them by shuffles
  of that width, so that every thread of the block runs every shuffle (the
  uniform control flow CUDA needs);
- otherwise: ``None``, the caller keeps the tree.

The mask names the lanes of the caller's warp that have a thread: all of them
(``0xffffffff`` for 32) unless the block's constant thread count leaves the
last warp partial.  Multi-value combiners shuffle each value.

>>> import loom
>>> from loom.ir import BufferStore
>>> from loom.ir.reduce import CommReducer
>>> x, y = loom.var("x", "float32"), loom.var("y", "float32")
>>> add = CommReducer([x], [y], [x + y], [loom.const(0.0)])
>>> A, out = loom.decl_buffer((4,), "float32", name="A"), loom.decl_buffer((1,), "float32", name="out")
>>> tx = loom.var("tx")
>>> print(warp_allreduce(add, [A[tx]], loom.const(True), tx, 4, [(tx, 4)], 32, lambda t: BufferStore(out, t[0], [0])))
red_buf0 = allocate([1], 'float32', 'local')
red_buf0[0] = A[tx]
red_buf0.shfl: float32 = tvm_warp_shuffle_down(uint32(15), red_buf0[0], 2, 4, 32, dtype='float32')
red_buf0[0] = red_buf0[0] + red_buf0.shfl
red_buf0.shfl_1: float32 = tvm_warp_shuffle_down(uint32(15), red_buf0[0], 1, 4, 32, dtype='float32')
red_buf0[0] = red_buf0[0] + red_buf0.shfl_1
if tx == 0:
    out[0] = red_buf0[0]
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir import expr as E
from ..ir import expr_ops as ops
from ..ir import stmt as S
from ..ir.buffer import Buffer, decl_buffer
from ..ir.op import Op
from ..ir.reduce import CommReducer
from .thread_sync import storage_sync

__all__ = ["warp_allreduce", "combine_into", "store_all"]

_SHUFFLE_DOWN = "tir.tvm_warp_shuffle_down"


def combine_into(combiner: CommReducer, bufs: Sequence[Buffer], index: E.PrimExpr, rhs: Sequence[E.PrimExpr],
                 lhs: Sequence[E.PrimExpr] | None = None) -> S.Stmt:
    """``bufs[index] = combine(lhs or bufs[index], rhs)``: every value computed before any is stored."""
    left = [E.BufferLoad(b, [index]) for b in bufs] if lhs is None else list(lhs)
    values = combiner(left, list(rhs))
    if len(bufs) == 1:
        return S.BufferStore(bufs[0], values[0], [index])
    temps = [E.Var(f"{b.name}.v", v.dtype) for b, v in zip(bufs, values)]
    body = S.seq(*(S.BufferStore(b, t, [index]) for b, t in zip(bufs, temps)))
    for t, v in reversed(list(zip(temps, values))):
        body = S.LetStmt(t, v, body)
    return body


def store_all(bufs: Sequence[Buffer], index: E.PrimExpr, values: Sequence[E.PrimExpr]) -> S.Stmt:
    """``bufs[k][index] = values[k]`` for each k."""
    return S.seq(*(S.BufferStore(b, v, [index]) for b, v in zip(bufs, values)))


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _shufflable(t: Any) -> bool:
    return t.lanes == 1 and t.bits in (16, 32, 64) and (t.is_float or t.is_integer)


def _mask(hw: E.PrimExpr, nthreads: int, ws: int) -> E.PrimExpr:
    """The lanes of the caller's warp that have a thread, as a constant where every warp has as many."""
    dtype = "uint32" if ws <= 32 else "uint64"
    full = ops.const((1 << min(ws, nthreads)) - 1, dtype)
    if nthreads <= ws or nthreads % ws == 0:
        return full
    last = ops.const((1 << (nthreads % ws)) - 1, dtype)
    return ops.select(ops.eq(ops.floordiv(hw, ws), nthreads // ws), last, full)


def _shuffle_steps(combiner: CommReducer, vals: list[Buffer], mask: E.PrimExpr, width: int, ws: int) -> list[S.Stmt]:
    """Halve the live lanes of each segment of ``width`` lanes: its lane 0 ends with the segment's value."""
    zero = ops.const(0, "int32")
    steps: list[S.Stmt] = []
    offset = width // 2
    while offset >= 1:
        temps = [E.Var(f"{b.name}.shfl", b.dtype) for b in vals]
        step = combine_into(combiner, vals, zero, temps)
        for t, b in reversed(list(zip(temps, vals))):
            args = [mask, E.BufferLoad(b, [zero]), ops.const(offset, "int32"), ops.const(width, "int32"),
                    ops.const(ws, "int32")]
            step = S.LetStmt(t, E.Call(b.dtype, Op.get(_SHUFFLE_DOWN), args), step)
        steps.append(step)
        offset //= 2
    return steps


def warp_allreduce(combiner: CommReducer, sources: Sequence[E.PrimExpr], cond: E.PrimExpr, tx: E.Var, size: int,
                   dims: Sequence[tuple[E.Var, int]], ws: int,
                   finish: Callable[[list[E.PrimExpr]], S.Stmt]) -> S.Stmt | None:
    """The shuffle reduction of ``sources`` over ``tx`` (``size`` threads), or None where it does not apply.

    ``dims`` are the block's thread indices with their extents, ``threadIdx.x``
    first then ``.y``, ``.z``; ``finish(totals)`` is what thread ``tx == 0`` of
    each group runs with the group's combined values.
    """
    dtypes = [x.dtype for x in sources]
    if not (_pow2(ws) and ws > 1 and _pow2(size) and size > 1 and all(map(_shufflable, dtypes))):
        return None
    if size > ws and size > ws * ws:
        return None
    hw: E.PrimExpr = ops.const(0, "int32")
    nthreads = 1
    for v, n in reversed(list(dims)):  # z, then y, then x: x fastest
        iv = v if v.dtype == hw.dtype else ops.cast(v, "int32")
        hw = iv if nthreads == 1 and isinstance(hw, E.IntImm) else hw * n + iv
        nthreads *= n
    mask = _mask(hw, nthreads, ws)
    zero = ops.const(0, "int32")
    vals = [decl_buffer((1,), t, f"red_buf{k}", scope="local") for k, t in enumerate(dtypes)]
    contribute = store_all(vals, zero, sources)
    if not (isinstance(cond, E.IntImm) and cond.value == 1):
        contribute = S.IfThenElse(cond, contribute, store_all(vals, zero, combiner.identity_element))
    body = [contribute, *_shuffle_steps(combiner, vals, mask, min(size, ws), ws)]
    staged: list[Buffer] = []
    if size > ws:
        warps = size // ws  # per group
        staged = [decl_buffer((nthreads // ws,), t, f"red_stage{k}", scope="shared") for k, t in enumerate(dtypes)]
        base = ops.floordiv(hw, size) * warps if nthreads > size else ops.const(0, "int32")  # the group's slots
        mine = [E.BufferLoad(b, [zero]) for b in vals]
        body += [S.IfThenElse(ops.eq(ops.floormod(tx, ws), 0), store_all(staged, ops.floordiv(hw, ws), mine)),
                 storage_sync("shared"),
                 S.IfThenElse(ops.lt(tx, warps), store_all(vals, zero, [E.BufferLoad(b, [base + tx]) for b in staged]),
                              store_all(vals, zero, combiner.identity_element))]
        body += _shuffle_steps(combiner, vals, mask, warps, ws)
    body.append(S.IfThenElse(ops.eq(tx, 0), finish([E.BufferLoad(b, [zero]) for b in vals])))
    out = S.seq(*body)
    for b in reversed(staged):
        out = S.Allocate(b.data, b.dtype, [nthreads // ws], ops.const(True), out, "shared")
    for b in reversed(vals):
        out = S.Allocate(b.data, b.dtype, [1], ops.const(True), out, "local")
    return out
