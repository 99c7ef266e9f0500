"""Compile C source with the system compiler and load it with ctypes.

The command is ``{compiler} -ffp-contract=off {flags} -fwrapv [-fopenmp] -shared
-fPIC -o lib.so source.c -lm``: ``-fwrapv`` gives signed integers the IR's
wrap-around semantics, which plain C leaves undefined, and ``-ffp-contract=off``
rounds every float operation as the IR (and numpy) does instead of fusing
``a * b + c`` into one FMA; it comes before ``flags``, so
``-flags="-O3 -ffp-contract=fast"`` opts back in.  A failure raises
:class:`CompileError` with the command and the compiler's messages.

>>> lib = compile_source("int answer(void) { return 42; }", flags="-O0", openmp=False)
>>> import ctypes; lib.cdll.answer.restype = ctypes.c_int; lib.cdll.answer()
42
"""

from __future__ import annotations

import ctypes
import os
import shlex
import subprocess
import tempfile
from typing import Sequence

from loom.errors import LoomError

__all__ = ["CompileError", "SharedLibrary", "compile_source", "invoke"]

_WORDS = ctypes.POINTER(ctypes.c_uint64)
_ERROR = ctypes.POINTER(ctypes.c_char_p)


class CompileError(LoomError):
    """The C compiler failed (or is missing); the message holds its command and output."""


class SharedLibrary:
    """A compiled, loaded shared library; its files live until this object is collected."""

    def __init__(self, tmpdir: tempfile.TemporaryDirectory, path: str, command: list[str]) -> None:
        self._tmpdir = tmpdir
        self.path = path
        self.command = command
        self.cdll = ctypes.CDLL(path)

    def function(self, symbol: str) -> ctypes._CFuncPtr:
        """The ABI function ``int32_t symbol(const uint64_t *args, const char **error)``."""
        try:
            fn = getattr(self.cdll, symbol)
        except AttributeError:
            raise LoomError(f"{self.path}: no symbol {symbol!r} in the compiled library") from None
        fn.argtypes = [_WORDS, _ERROR]
        fn.restype = ctypes.c_int32
        return fn


def compile_source(source: str, compiler: str = "cc", flags: str = "-O3 -march=native",
                   openmp: bool = True) -> SharedLibrary:
    """Compile ``source`` into a shared library and load it."""
    tmpdir = tempfile.TemporaryDirectory(prefix="loom_c_")
    src, lib = os.path.join(tmpdir.name, "module.c"), os.path.join(tmpdir.name, "module.so")
    with open(src, "w", encoding="utf-8") as fh:
        fh.write(source)
    command = [*shlex.split(compiler), "-ffp-contract=off", *shlex.split(flags), "-fwrapv",
               *(["-fopenmp"] if openmp else []), "-shared", "-fPIC", "-o", lib, src, "-lm"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as err:
        raise CompileError(f"cannot run the C compiler: {err}\ncommand: {shlex.join(command)}") from None
    if done.returncode != 0:
        raise CompileError(f"the C compiler failed with exit status {done.returncode}\n"
                           f"command: {shlex.join(command)}\n{done.stderr.strip()}")
    return SharedLibrary(tmpdir, lib, command)


def invoke(fn: ctypes._CFuncPtr, words: Sequence[int]) -> tuple[int, str | None]:
    """Call an ABI function on packed argument words: (status, error message or None)."""
    args = (ctypes.c_uint64 * max(len(words), 1))(*words)
    error = ctypes.c_char_p(None)
    status = fn(args, ctypes.byref(error))
    return status, (error.value.decode("utf-8", "replace") if status != 0 and error.value is not None else None)
