"""Random well-formed programs (loom.testing.random_programs): C agrees with the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import loom
from loom.ir.function import IRModule
from loom.runtime import ArgumentChecker
from loom.runtime.abi import abi_vars, pack_values
from loom.testing.random_programs import random_func
from loom_c.cc import compile_source, invoke
from loom_c.codegen import generate

SEEDS = range(60)


@pytest.fixture(scope="module")
def programs() -> tuple:
    funcs = {f"p{seed}": random_func(seed) for seed in SEEDS}
    mod = IRModule({name: f for name, (f, _) in funcs.items()})
    # Serial: the generator's parallel loops may write one element from several iterations.
    src = generate(mod, openmp=False)
    return funcs, src, compile_source(src.text, flags="-O1", openmp=False)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_program(seed: int, programs: tuple) -> None:
    funcs, src, lib = programs
    func, make_args = funcs[f"p{seed}"]
    want, got = make_args(), make_args()
    loom.testing.evaluate(func, *want)
    with ArgumentChecker(func, f"p{seed}").bind(got) as call:
        assert invoke(lib.function(src.symbols[f"p{seed}"]), pack_values(abi_vars(func), call)) == (0, None)
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w)
