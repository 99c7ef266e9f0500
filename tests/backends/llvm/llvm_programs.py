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


def run_python(code: str, *args: str, env: dict | None = None, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter (``sys.argv[1:]`` = ``args``); return its stdout.

    For what could crash the process, and for what needs a process of its own.
    Fails the test with the child's output when it exits non-zero.
    """
    import os
    import subprocess
    import sys

    full_env = {**os.environ, **(env or {})}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)
    assert done.returncode == 0, f"child exited with {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout
