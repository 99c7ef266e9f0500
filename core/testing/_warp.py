"""Warp shuffles: ``tvm_warp_shuffle_down`` and ``tvm_warp_shuffle`` with CUDA's ``__shfl_*_sync`` semantics.

A thread's *lane* is its linear index in the block (threadIdx.x fastest, then
y, then z: :attr:`Thread.hw`) modulo the call's ``warp_size``; its warp is that
index divided by ``warp_size``.  Lanes are split into segments of ``width``
lanes; ``shuffle_down(mask, v, delta, width, warp_size)`` gives lane ``l`` the
``v`` of lane ``l + delta`` when that lane is in ``l``'s segment, else ``l``'s
own ``v``; ``shuffle(mask, v, src, width, warp_size)`` gives it the ``v`` of lane
``src % width`` of its segment.

A shuffle is a collective of the lanes its ``mask`` names: each thread that
reaches one deposits its operands and waits, as at a barrier (``_launch``).
Once every lane of the mask waits at the same shuffle, each gets its source
lane's value and runs on; threads of other warps, or lanes outside the mask,
need not be there.  What CUDA leaves undefined is an error: a width that is
not a power of two up to the warp size, a mask that does not name the caller or
names lanes with no thread, lanes of one warp with different masks, a source
lane outside the mask, and a divergent warp (a lane of the mask that finished,
or waits elsewhere while no other shuffle can proceed: a
:class:`~loom.testing.BarrierError`).  Unlike a barrier, a shuffle orders no
memory: the block's race record is kept across it.
"""

from __future__ import annotations

from typing import Any

from ._errors import BarrierError, InterpreterError

__all__ = ["release_shuffles"]


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check(region: Any, blk: Any, t: Any, nthreads: int) -> None:
    """The operands of ``t``'s shuffle are ones CUDA defines."""
    down, mask, _, lane, width, ws = t.shfl
    where = f"{region.fname}: {region.barrier_text(t.wait)} in {blk.text()}, thread {blk.thread_text(t.tid)}"
    if not _pow2(ws):
        raise InterpreterError(f"{where}: the warp size must be a power of two, got {ws}")
    if not _pow2(width) or width > ws:
        raise InterpreterError(f"{where}: the width must be a power of two from 1 to the warp size {ws}, got {width}")
    if down and lane < 0:
        raise InterpreterError(f"{where}: a negative shuffle delta {lane}")
    base = t.hw - t.hw % ws
    present = min(ws, nthreads - base)  # lanes of this warp that have a thread
    if mask < 0 or mask >> present:
        raise InterpreterError(f"{where}: the mask {mask:#x} names lanes past the {present} lane(s) that warp "
                               f"{t.hw // ws} has (a block of {nthreads} threads)")
    if not mask >> (t.hw % ws) & 1:
        raise InterpreterError(f"{where}: the mask {mask:#x} does not name the caller's own lane {t.hw % ws}")


def _source(t: Any) -> int:
    """The lane whose value ``t`` gets."""
    down, _, _, arg, width, ws = t.shfl
    lane = t.hw % ws
    start = lane - lane % width
    if not down:
        return start + arg % width
    return lane + arg if lane + arg < start + width else lane


def release_shuffles(region: Any, blk: Any, waiting: list[Any]) -> list[Any]:
    """Complete every shuffle of ``blk`` whose mask's lanes all wait at it; the threads it releases.

    A BarrierError when none can complete (the warp diverged), or a lane of a
    waiting shuffle finished.
    """
    nthreads = len(blk.threads)
    by_hw = {t.hw: t for t in blk.threads}
    groups: dict[tuple[int, int, int], list[Any]] = {}
    for t in waiting:
        if t.wait in region.shuffles:
            _check(region, blk, t, nthreads)
            ws = t.shfl[5]
            groups.setdefault((t.wait, ws, t.hw // ws), []).append(t)
    released: list[Any] = []
    stuck: list[tuple[int, list[Any], list[Any]]] = []
    for (index, ws, warp), ts in groups.items():
        masks = sorted({t.shfl[1] for t in ts})
        if len(masks) > 1:
            raise InterpreterError(f"{region.fname}: the lanes of warp {warp} in {blk.text()} reach "
                                   f"{region.barrier_text(index)} with different masks "
                                   f"({', '.join(hex(m) for m in masks)})")
        base, members = warp * ws, {t.hw for t in ts}
        absent = [by_hw[base + k] for k in range(ws) if masks[0] >> k & 1 and base + k not in members]
        done = [t for t in absent if t.glet.dead]
        if done:
            raise BarrierError(f"{region.fname}: divergent warp {warp} in {blk.text()}: {blk.threads_text(done)} "
                               f"finished without reaching {region.barrier_text(index)}, while "
                               f"{blk.threads_text(ts)} of its mask wait there")
        if absent:
            stuck.append((index, ts, absent))
            continue
        values = {t.hw % ws: t.shfl[2] for t in ts}
        for t in ts:
            src = _source(t)
            if src not in values:
                raise InterpreterError(f"{region.fname}: thread {blk.thread_text(t.tid)} of {blk.text()} reads lane "
                                       f"{src} at {region.barrier_text(index)}, which its mask "
                                       f"{masks[0]:#x} does not name")
            t.got = values[src]
        released += ts
    if not released and stuck:
        index, ts, absent = stuck[0]
        elsewhere = "; ".join(f"{blk.thread_text(t.tid)} waits at {region.barrier_text(t.wait)}" for t in absent[:4])
        raise BarrierError(f"{region.fname}: divergent warp in {blk.text()}: {blk.threads_text(ts)} wait at "
                           f"{region.barrier_text(index)} but {len(absent)} lane(s) of its mask never come: "
                           f"{elsewhere}")
    for t in released:
        t.wait, t.shfl = -1, ()
    return released
