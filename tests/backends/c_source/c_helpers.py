"""Render, compile and run PrimFuncs through the native ABI, next to the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np

import loom
from loom.ir.function import IRModule, PrimFunc
from loom.runtime import ArgumentChecker
from loom.runtime.abi import abi_vars, pack_values
from loom_c.cc import compile_source, invoke
from loom_c.codegen import generate

FLAGS = "-O1"


def entry(mod: IRModule | PrimFunc, name: str | None = None) -> tuple[str, PrimFunc]:
    if isinstance(mod, PrimFunc):
        return name or "default_function", mod
    fname = name or next(iter(mod.functions))
    return fname, mod[fname]


def run_c(mod: IRModule | PrimFunc, *args: Any, openmp: bool = False, name: str | None = None) -> tuple[int, Any]:
    """Compile ``mod`` and call its function on ``args``: (status, error message)."""
    fname, func = entry(mod, name)
    src = generate(mod, openmp=openmp, name=fname)
    fn = compile_source(src.text, flags=FLAGS, openmp=openmp).function(src.symbols[fname])
    with ArgumentChecker(func, fname).bind(list(args)) as call:
        return invoke(fn, pack_values(abi_vars(func), call))


def check_against_interp(mod: IRModule | PrimFunc, *arrays: np.ndarray, openmp: bool = False,
                         name: str | None = None, **tol: float) -> list[np.ndarray]:
    """Run on the interpreter and natively from the same inputs; assert equal outputs."""
    fname, func = entry(mod, name)
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    loom.testing.evaluate(mod if isinstance(mod, PrimFunc) else mod, *ref,
                          **({} if isinstance(mod, PrimFunc) else {"entry": fname}))
    status, message = run_c(mod, *got, openmp=openmp, name=fname)
    assert (status, message) == (0, None)
    for r, g in zip(ref, got):
        if isinstance(r, np.ndarray):
            if tol:
                np.testing.assert_allclose(g, r, **tol)
            else:
                np.testing.assert_array_equal(g, r)
    return got
