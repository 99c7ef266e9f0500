"""Helpers of the LoopPartition tests: the pass as TVM's tests run it, and runs on every CPU target."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import loom
from loom.ir import PrimFunc, collect
from loom.transform import PassContext
from loom.transform.loop_partition import LoopPartition
from loom.transform.simplify import Simplify

TARGETS = ["interp", "llvm", "c"]


def partitioned(f: PrimFunc, const: bool = False) -> Any:
    """``f``'s body after LoopPartition and Simplify, as TVM's tests run them."""
    with PassContext(config={"tir.partition_const_loop": const}):
        g = Simplify()(LoopPartition()(f))
    loom.verify_well_formed(g)
    return g.body


def scheduled(s: Any, args: list, const: bool = False) -> Any:
    """The schedule's loop nest (``lower`` in simple mode: not partitioned yet), partitioned."""
    (f,) = loom.lower(s, args, simple_mode=True).functions.values()
    return partitioned(f, const)


def count(node: Any, kind: type) -> int:
    """How many nodes of ``kind`` ``node`` holds."""
    return len(collect(node, lambda x: isinstance(x, kind)))


def on_targets(program: Any, args: list | None, arrays: list[Any], const: bool,
               check: Callable[[list[Any]], None]) -> None:
    """Build ``program`` for each target under ``partition_const_loop=const``; check a run on copies of ``arrays``."""
    for target in TARGETS:
        with loom.build_config(partition_const_loop=const):
            f = loom.build(program, args, target=target)
        run = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        f(*run)
        check(run)


def pfunc(bufs: list, scalars: list, body: Any) -> PrimFunc:
    """A PrimFunc over buffers (then scalars)."""
    return PrimFunc([b.data for b in bufs] + scalars, body, buffer_map={b.data: b for b in bufs})
