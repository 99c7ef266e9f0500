"""Schedules for topi's operators, chosen by the target in scope (TVM's ``topi.generic``).

Each ``schedule_*`` takes the output tensor (or a list of them) and returns a new
schedule.  Injective stages that are not outputs (padding, elementwise chains)
are inlined into their consumers; every other stage is scheduled for the target:

* a target with the ``cpu`` key (``llvm``, ``c``): the loops outside the innermost
  output axis are fused and run in parallel, reductions go between them and the
  innermost axis, and that axis is vectorized (split by a vector width when it is
  longer; a 1-D output runs its vector chunks in parallel); an NCHW convolution
  with output channels and columns in multiples of 8 accumulates 8 x 8 register
  blocks in a cache, its padding computed first;
* a target with the ``gpu`` key (``cuda``): each stage's output axes are fused and
  split over ``blockIdx.x`` / ``threadIdx.x`` (the target's ``max_num_threads``,
  at most 256 per block), reductions run inside each thread;
* any other target, or none: the output stages' axes are fused, nothing else.

Each is a :func:`loom.target.generic_func`, so a backend or a user registers a
better schedule for its target key with ``schedule_conv2d_nchw.register("mykey")``.

>>> import loom, numpy as np
>>> from loom import topi
>>> A = loom.placeholder((4, 32), name="A")
>>> B = topi.nn.relu(A - 1.0)
>>> with loom.Target("llvm"):
...     s = topi.generic.schedule_injective(B)
>>> f = loom.build(s, [A, B], "llvm")
>>> a = np.arange(128, dtype="float32").reshape(4, 32) / 64; b = np.empty_like(a)
>>> f(a, b); bool(np.allclose(b, np.maximum(a - 1, 0)))
True
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

from ..arith import Analyzer
from ..errors import LoomTypeError
from ..ir import expr as E
from ..target.generic_dispatch import GenericFunc, generic_func
from ..target.target import Target
from ..te import create_schedule, thread_axis
from ..te.auto_inline import is_injective
from ..te.schedule import Schedule, Stage
from ..te.tensor import ComputeOp, Tensor
from . import tag

__all__ = ["schedule_injective", "schedule_elemwise", "schedule_broadcast", "schedule_reduce",
           "schedule_conv2d_nchw", "schedule_conv2d_nhwc", "schedule_pool"]

Outputs = Union[Tensor, Sequence[Tensor]]
#: Bytes of one vector register the CPU schedules fill (AVX2; wider units still profit).
VECTOR_BYTES = 32
#: Output channels and columns of one register block of the CPU convolution schedule.
CONV_TILE = 8
#: Threads per block of the GPU schedules, when the target allows as many.
GPU_BLOCK = 256


def _outputs(outs: Outputs) -> list[Tensor]:
    tensors = [outs] if isinstance(outs, Tensor) else list(outs)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise LoomTypeError(f"a topi schedule takes an output tensor or a list of them, got {outs!r}")
    return tensors


def _schedule(outs: Outputs, stage_schedule: Callable[[Schedule, ComputeOp], None]) -> Schedule:
    """Inline the injective stages that are not outputs; schedule every other compute stage."""
    tensors = _outputs(outs)
    s = create_schedule([t.op for t in tensors])
    outputs = {id(t.op) for t in tensors}
    # the schedule's stages are the graph's operations; extern, scan and hybrid ones keep their own loops
    ops = [st.op for st in s.stages if isinstance(st.op, ComputeOp)]
    for op in ops:
        if is_injective(op) and id(op) not in outputs:
            s[op].compute_inline()
    for op in ops:
        if s[op].attach_type != "inline":
            stage_schedule(s, op)
    return s


def _const_extent(*axes: E.IterVar) -> int | None:
    """The number of iterations of the (original, ranged) ``axes`` together, when constant."""
    total = 1
    for iv in axes:
        if iv.dom is None:
            return None
        extent = Analyzer().simplify(iv.dom.extent)
        if not isinstance(extent, E.IntImm):
            return None
        total *= int(extent.value)
    return total


def _lanes(op: ComputeOp) -> int:
    bits = op.output(0).dtype.bits
    return max(1, VECTOR_BYTES * 8 // max(8, bits))


def _plain_stage(s: Schedule, op: ComputeOp) -> None:
    if not op.reduce_axis and len(op.axis) > 1:
        s[op].fuse(*op.axis)


def _cpu_stage(s: Schedule, op: ComputeOp) -> None:
    """Parallel over the outer output axes, reductions next, a vector of the innermost output axis inside."""
    if op.tag == tag.CONV2D_NCHW and _cpu_conv2d_nchw(s, op):
        return
    stage = s[op]
    spatial, reduce = list(op.axis), list(op.reduce_axis)
    if not spatial:
        return
    outer, inner = spatial[:-1], spatial[-1]
    inner_outer, vector = _split_for_vectors(stage, inner, _const_extent(inner), _lanes(op))
    stage.reorder(*outer, *inner_outer, *reduce, vector)
    if outer:
        stage.parallel(stage.fuse(*outer) if len(outer) > 1 else outer[0])
    elif inner_outer:
        stage.parallel(inner_outer[0])
    stage.vectorize(vector)


def _split_for_vectors(stage: Stage, axis: E.IterVar, extent: int | None, lanes: int) -> tuple[list[E.IterVar], E.IterVar]:
    """``axis`` as (loops outside the vector, the vector loop): split when longer than ``lanes``."""
    if extent is not None and extent <= lanes:
        return [], axis
    outer, vector = stage.split(axis, factor=lanes)
    return [outer], vector


def _cpu_conv2d_nchw(s: Schedule, op: ComputeOp) -> bool:
    """Register blocks of ``CONV_TILE`` output channels x columns, accumulated over the whole reduction.

    The padded input is computed first, in parallel over rows; the output rows run
    in parallel; each block accumulates in a small cache with its columns
    vectorized.  Only for constant channel and column counts the tile divides
    (False otherwise: the generic reduction schedule applies).
    """
    _, channels, _, columns = (_const_extent(iv) for iv in op.axis)
    if channels is None or columns is None or channels % CONV_TILE or columns % CONV_TILE:
        return False
    padded = op.input_tensors[0]
    if isinstance(padded.op, ComputeOp):  # padding: its own parallel stage, not inlined into every read
        pad = s[padded]
        pad.compute_root()
        pb, pc, py, px = padded.op.axis
        pad.reorder(pb, py, pc, px)
        pad.parallel(pad.fuse(pb, py))
    conv = op.output(0)
    acc = s.cache_write(conv, "global")
    stage = s[conv]
    b, f, y, x = conv.op.axis
    fo, fi = stage.split(f, factor=CONV_TILE)
    xo, xi = stage.split(x, factor=CONV_TILE)
    stage.reorder(b, y, fo, xo, fi, xi)
    stage.parallel(stage.fuse(b, y))
    stage.vectorize(xi)
    s[acc].compute_at(stage, xo)
    _, af, _, ax = s[acc].op.axis
    s[acc].reorder(*s[acc].op.reduce_axis, af, ax)
    s[acc].unroll(af)
    s[acc].vectorize(ax)
    return True


def _gpu_stage(s: Schedule, op: ComputeOp) -> None:
    stage = s[op]
    target = Target.current()
    limit = target.get_attr("max_num_threads", GPU_BLOCK) if target is not None else GPU_BLOCK
    fused = stage.fuse(*op.axis)  # no axis: a singleton loop to bind
    block, thread = stage.split(fused, factor=min(int(limit), GPU_BLOCK))
    stage.bind(block, thread_axis("blockIdx.x"))
    stage.bind(thread, thread_axis("threadIdx.x"))


def _generic_schedule(name: str, what: str) -> GenericFunc:
    def default(outs: Outputs) -> Schedule:
        return _schedule(outs, _plain_stage)

    default.__name__ = name
    default.__qualname__ = name
    default.__doc__ = (f"A schedule for {what} (``outs``: the output tensor or a list), "
                       "for the target in scope; see :mod:`loom.topi.generic`.")
    func = generic_func(default)
    func.register("cpu", lambda outs: _schedule(outs, _cpu_stage))
    func.register("gpu", lambda outs: _schedule(outs, _gpu_stage))
    return func


schedule_injective = _generic_schedule("schedule_injective", "injective operators")
schedule_elemwise = _generic_schedule("schedule_elemwise", "elementwise operators")
schedule_broadcast = _generic_schedule("schedule_broadcast", "broadcasting operators")
schedule_reduce = _generic_schedule("schedule_reduce", "reductions")
schedule_conv2d_nchw = _generic_schedule("schedule_conv2d_nchw", "an NCHW convolution and its elementwise consumers")
schedule_conv2d_nhwc = _generic_schedule("schedule_conv2d_nhwc", "an NHWC convolution and its elementwise consumers")
schedule_pool = _generic_schedule("schedule_pool", "a pooling and its elementwise consumers")
