"""Random integer programs (:mod:`loom.testing.random_programs`) agree exactly with the interpreter.

Each seed gives a PrimFunc over int32 buffers that mixes serial, unrolled and
vectorized loops, guarded splits (constant or symbolic bounds), lets, local
allocations, selects, ``if_then_else``, branches and statements that do
nothing; ``loom.build`` lowers it for the kind and the outputs must equal the
interpreter's, bit for bit.  The generator's parallel loops may update one
element from several iterations (a race on threads), so they are drawn serial.
A device kind runs each program as one kernel of a single thread (the body is
wrapped in ``blockIdx.x``/``threadIdx.x`` regions of extent 1) on device arrays.
``LOOM_RANDOM_PROGRAMS`` sets the number of seeds (default 60).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import loom
from loom import envvars
from loom.ir import AttrStmt, IRModule, IterVar
from loom.testing.random_programs import random_func

from .harness import KindUnderTest

SEEDS = range(envvars.RANDOM_PROGRAMS.get())


def on_one_thread(func: Any) -> Any:
    """``func`` with its body inside a grid of one block of one thread: a device kernel."""
    body = func.body
    for tag in ("threadIdx.x", "blockIdx.x"):
        body = AttrStmt(IterVar(None, loom.var(tag), "thread_index", tag), "thread_extent", 1, body)
    return func.with_body(body)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program(kind_under_test: KindUnderTest, seed: int) -> None:
    kind = kind_under_test
    func, make_args = random_func(seed, parallel=False)
    want = make_args()
    loom.testing.evaluate(func, *want)
    mod = kind.build(IRModule({f"random{seed}": on_one_thread(func) if kind.on_device else func}))
    got = kind.run(mod, *make_args())
    for k, (w, g) in enumerate(zip(want, got)):
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w, err_msg=f"argument {k} of random program {seed} on {kind}:\n{func}")
