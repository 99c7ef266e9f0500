"""Running a launch region with GPU semantics: blocks, threads, barriers, shared memory, races.

A :class:`Region` is built while compiling (see ``_gpu``) and run once per
entry.  Every thread runs the whole region body in its own copy of the frame;
frame slot ``Region.thr_slot`` holds its :class:`Thread`, through which shared
allocations find their block's memory, barriers find the scheduler and shared
accesses find the block's race record.

Without barriers the threads of a block simply run one after another (a valid
schedule).  With barriers each thread is a greenlet: the scheduler runs every
thread until it finishes or waits at a barrier, then releases a barrier once
every thread of the block (of the grid, for a ``global`` barrier) waits at it.
Warp shuffles wait like barriers, but only for the lanes their mask names
(see ``_warp``): they are released first, warp by warp.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import math
from typing import Any, Callable, Iterator

import numpy as np
from greenlet import GreenletExit, greenlet

from ._errors import BarrierError, RaceError
from ._warp import release_shuffles

__all__ = ["Region", "Block", "Thread", "track_read", "track_write"]

#: How many threads an error message lists before it abbreviates.
_SHOWN = 4


class Region:
    """One launch region of a function: its tags, barriers and shared allocations."""

    def __init__(self, fname: str, block_tags: list[str], thread_tags: list[str]) -> None:
        self.fname = fname
        self.block_tags = block_tags
        self.thread_tags = thread_tags
        self.coord_slots: dict[str, int] = {}
        self.thr_slot = -1
        self.barriers: list[str] = []  # the scope of each barrier, by index ("global" syncs the grid)
        self.shuffles: dict[int, str] = {}  # barrier index -> the op of a warp shuffle waiting there
        self.shared_vars: set[int] = set()  # ids of the handle Vars of shared allocations
        self.nshared = 0
        self.extents: list[list[Callable[[list], Any]]] = []  # per tag (blocks, then threads)

    def add_barrier(self, scope: str) -> int:
        self.barriers.append(scope)
        return len(self.barriers) - 1

    def add_shuffle(self, op: str) -> int:
        """A warp shuffle (``op``, its name) waits like a barrier, at its own index."""
        index = self.add_barrier("warp shuffle")
        self.shuffles[index] = op
        return index

    def barrier_text(self, index: int) -> str:
        if index in self.shuffles:
            return f"warp shuffle #{index} of the launch ({self.shuffles[index]})"
        return f"barrier #{index} of the launch (tvm_storage_sync('{self.barriers[index]}'))"

    def run(self, body: Callable[[list], Any], f: list) -> None:
        exts = [max([0, *(int(e(f)) for e in fns)]) for fns in self.extents]
        nb = len(self.block_tags)
        bshape, tshape = tuple(exts[:nb]), tuple(exts[nb:])
        if 0 in exts:
            return
        blocks = (Block(self, coords, tshape) for coords in itertools.product(*map(range, bshape)))
        if not self.barriers:
            for blk in blocks:
                for tf in blk.frames(f):
                    body(tf)
        elif "global" in self.barriers:
            _schedule(self, body, [(blk, list(blk.frames(f))) for blk in blocks])
        else:
            for blk in blocks:
                _schedule(self, body, [(blk, list(blk.frames(f)))])


class Block:
    """One thread block of a launch: its shared memory and the accesses of its current epoch."""

    __slots__ = ("region", "coords", "tshape", "shared", "epoch", "threads")

    def __init__(self, region: Region, coords: tuple[int, ...], tshape: tuple[int, ...]) -> None:
        self.region = region
        self.coords = coords
        self.tshape = tshape
        self.shared: dict[int, Any] = {}  # allocation number -> Memory
        # memory -> {flat offset: [writer, reader, another reader]} since the last barrier
        self.epoch: dict[Any, dict[int, list]] = {}
        self.threads: list[Thread] = []

    def frames(self, f: list) -> Iterator[list]:
        """A frame per thread (row-major over the thread tags), its coordinates and Thread set."""
        region = self.region
        bf = f.copy()
        for tag, c in zip(region.block_tags, self.coords):
            bf[region.coord_slots[tag]] = c
        tslots = [region.coord_slots[t] for t in region.thread_tags]
        extent = dict(zip(region.thread_tags, self.tshape))
        nx, ny = extent.get("threadIdx.x", 1), extent.get("threadIdx.y", 1)
        step = {"threadIdx.x": 1, "threadIdx.y": nx, "threadIdx.z": nx * ny}  # CUDA's linear order: x fastest
        strides = [step.get(t, 0) for t in region.thread_tags]
        for tid, coords in enumerate(itertools.product(*map(range, self.tshape))):
            tf = bf.copy()
            for slot, c in zip(tslots, coords):
                tf[slot] = c
            thr = Thread(self, tid, sum(c * k for c, k in zip(coords, strides)))
            self.threads.append(thr)
            tf[region.thr_slot] = thr
            yield tf

    def text(self) -> str:
        if not self.coords:
            return "the only block"
        return "block (" + _pairs(self.region.block_tags, self.coords) + ")"

    def thread_text(self, tid: int) -> str:
        coords = np.unravel_index(tid, self.tshape) if self.tshape else ()
        return "(" + (_pairs(self.region.thread_tags, [int(c) for c in coords]) or "the only thread") + ")"

    def threads_text(self, threads: list[Thread]) -> str:
        shown = ", ".join(self.thread_text(t.tid) for t in threads[:_SHOWN])
        more = f" and {len(threads) - _SHOWN} more" if len(threads) > _SHOWN else ""
        return f"{len(threads)} thread{'s' if len(threads) != 1 else ''} {shown}{more}"


def _pairs(tags: list[str], coords: Any) -> str:
    return ", ".join(f"{t}={c}" for t, c in sorted(zip(tags, coords)))


class Thread:
    """A thread of a launch: its block, its index in the block (``tid``, row-major over the region's thread
    tags; ``hw``, CUDA's linear index: threadIdx.x fastest, then y, then z), and where it waits."""

    __slots__ = ("block", "tid", "hw", "wait", "glet", "shfl", "got")

    def __init__(self, block: Block, tid: int, hw: int = 0) -> None:
        self.block = block
        self.tid = tid
        self.hw = hw
        self.wait = -1
        self.glet: Any = None
        self.shfl: tuple[Any, ...] = ()  # the operands of the warp shuffle it waits at
        self.got: Any = None  # what that shuffle gave it

    def sync(self, index: int) -> int:
        """Wait at barrier ``index`` until the scheduler releases it."""
        self.wait = index
        self.glet.parent.switch()
        return 0

    def shuffle(self, index: int, down: bool, mask: int, value: Any, lane: int, width: int, warp_size: int) -> Any:
        """Wait at warp shuffle ``index`` with its operands; the value of the source lane (see ``_warp``)."""
        self.wait = index
        self.shfl = (down, int(mask), value, int(lane), int(width), int(warp_size))
        self.glet.parent.switch()
        return self.got


# ---------------------------------------------------------------------------
# scheduling


def _schedule(region: Region, body: Callable[[list], Any], blocks: list[tuple[Block, list[list]]]) -> None:
    """Run the threads of ``blocks`` together, releasing barriers as they fill."""
    live: list[Block] = []
    runnable: list[Thread] = []
    for blk, frames in blocks:
        for thr, tf in zip(blk.threads, frames):
            thr.glet = greenlet(functools.partial(body, tf))
            thr.glet.gr_context = contextvars.copy_context()  # numpy's errstate lives in the context
            runnable.append(thr)
        live.append(blk)
    try:
        while runnable:
            for thr in runnable:
                thr.glet.switch()
            runnable = _release(region, live)
    finally:
        for blk in live:
            for thr in blk.threads:
                if thr.glet and not thr.glet.dead:
                    thr.glet.throw(GreenletExit)


def _release(region: Region, live: list[Block]) -> list[Thread]:
    """The threads the next round runs: those of every barrier that every participant reached."""
    runnable: list[Thread] = []
    at_global: list[tuple[Block, int]] = []
    finished = 0
    for blk in live:
        waiting = [t for t in blk.threads if not t.glet.dead]
        if not waiting:
            finished += 1
            continue
        if region.shuffles and any(t.wait in region.shuffles for t in waiting):
            runnable += release_shuffles(region, blk, waiting)  # barriers wait until no shuffle is pending
            continue
        index = _same_barrier(region, blk, waiting)
        if region.barriers[index] == "global":
            at_global.append((blk, index))
        else:
            blk.epoch.clear()
            runnable += waiting
    if runnable or not at_global:
        return runnable
    indices = sorted({i for _, i in at_global})
    if len(indices) > 1:
        where = "; ".join(f"{blk.text()} waits at {region.barrier_text(i)}" for blk, i in at_global[:_SHOWN])
        raise BarrierError(f"{region.fname}: global barrier divergence: blocks wait at different barriers: {where}")
    if finished:
        done = [blk.text() for blk in live if all(t.glet.dead for t in blk.threads)]
        raise BarrierError(
            f"{region.fname}: deadlock at {region.barrier_text(indices[0])}: {len(done)} block(s) finished without "
            f"reaching it ({', '.join(done[:_SHOWN])}) while {len(at_global)} block(s) wait there")
    for blk, _ in at_global:
        blk.epoch.clear()
        runnable += blk.threads
    return runnable


def _same_barrier(region: Region, blk: Block, waiting: list[Thread]) -> int:
    """The barrier every thread of ``blk`` waits at; a BarrierError when they diverge or some finished."""
    fname = region.fname
    done = [t for t in blk.threads if t.glet.dead]
    groups: dict[int, list[Thread]] = {}
    for t in waiting:
        groups.setdefault(t.wait, []).append(t)
    if len(groups) > 1:
        parts = "; ".join(f"{blk.threads_text(ts)} wait at {region.barrier_text(i)}" for i, ts in sorted(groups.items()))
        raise BarrierError(f"{fname}: barrier divergence in {blk.text()}: {parts}")
    index = waiting[0].wait
    if done:
        raise BarrierError(
            f"{fname}: deadlock at {region.barrier_text(index)} in {blk.text()}: {blk.threads_text(done)} finished "
            f"without reaching it while {blk.threads_text(waiting)} wait there")
    return index


# ---------------------------------------------------------------------------
# race detection


def _cells(thr: Thread, mem: Any) -> dict[int, list[Any]]:
    """This epoch's ``{offset: [writer, reader, another reader]}`` of shared ``mem`` in ``thr``'s block."""
    epoch = thr.block.epoch
    cells = epoch.get(mem)
    if cells is None:
        cells = epoch[mem] = {}
    return cells


def track_read(thr: Thread, mem: Any, off: int, buf: Any) -> None:
    """Record a load of element ``off`` of shared ``mem``; a RaceError when another thread wrote it this epoch."""
    cells = _cells(thr, mem)
    cell = cells.get(off)
    t = thr.tid
    if cell is None:
        cells[off] = [None, t, None]
        return
    w = cell[0]
    if w is not None and w != t:
        _race(thr, w, mem, off, buf, "reads", "wrote", "read/write")
    r = cell[1]
    if r is None:
        cell[1] = t
    elif r != t and cell[2] is None:
        cell[2] = t


def track_write(thr: Thread, mem: Any, off: int, buf: Any) -> None:
    """Record a store to element ``off`` of shared ``mem``; a RaceError when another thread touched it this epoch."""
    cells = _cells(thr, mem)
    cell = cells.get(off)
    t = thr.tid
    if cell is None:
        cells[off] = [t, None, None]
        return
    w = cell[0]
    if w is not None and w != t:
        _race(thr, w, mem, off, buf, "writes", "wrote", "write/write")
    for r in (cell[1], cell[2]):
        if r is not None and r != t:
            _race(thr, r, mem, off, buf, "writes", "read", "read/write")
    cell[0] = t


def track_lanes(track: Callable[..., None], thr: Thread, mem: Any, offsets: Any, buf: Any) -> None:
    """Track every lane of a vector access."""
    for off in np.asarray(offsets).reshape(-1).tolist():
        track(thr, mem, off, buf)


def _race(thr: Thread, other: int, mem: Any, off: int, buf: Any, verb: str, past: str, kind: str) -> None:
    blk = thr.block
    raise RaceError(
        f"{blk.region.fname}: {kind} race on shared memory {buf.name}, element {off}{_indices(buf, off)}, in "
        f"{blk.text()}: thread {blk.thread_text(thr.tid)} {verb} it after thread {blk.thread_text(other)} "
        f"{past} it with no barrier between")


def _indices(buf: Any, off: int) -> str:
    """`` [i, j]`` for a flat offset of a compact buffer of constant shape, else nothing."""
    try:
        dims = [int(s.value) for s in buf.shape]
        lanes = buf.dtype.lanes
        if buf.strides or int(buf.elem_offset.value) != 0 or off // lanes >= math.prod(dims) or not dims:
            return ""
        return " (" + buf.name + str([int(i) for i in np.unravel_index(off // lanes, dims)]) + ")"
    except (AttributeError, TypeError, ValueError):
        return ""
