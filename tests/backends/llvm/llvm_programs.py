"""Shared helpers of the LLVM codegen tests: compile through jit.py and call through the native ABI."""

from __future__ import annotations

import ctypes

from loom.ir import IRModule
from loom.runtime import ArgumentChecker
from loom.runtime.abi import abi_vars, pack_values
from loom_llvm.codegen import codegen_module
from loom_llvm.jit import compile_module

_SIG = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_char_p))


def build(mod_or_func, name="f"):
    """A Python callable running the compiled function: returns (rc, error message)."""
    mod = mod_or_func if isinstance(mod_or_func, IRModule) else IRModule({name: mod_or_func})
    func = mod[name]
    jit = compile_module(codegen_module(mod, None))
    native = _SIG(jit.address(str(func.attrs.get("global_symbol", name))))
    checker, slots = ArgumentChecker(func), abi_vars(func)

    def run(*args):
        with checker.bind(args) as call:
            words = pack_values(slots, call)
            err = ctypes.c_char_p()
            rc = native((ctypes.c_uint64 * max(1, len(words)))(*words), ctypes.byref(err))
        return rc, (err.value.decode() if err.value else None)
    run.jit = jit
    return run
