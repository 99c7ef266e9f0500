"""Compile C source into a shared library with the system compiler, and load libraries with ctypes.

The command is ``{compiler} -ffp-contract=off {flags} -fwrapv [-fopenmp] -shared
-fPIC -o lib.so source.c -lm``: ``-fwrapv`` gives signed integers the IR's
wrap-around semantics, which plain C leaves undefined, and ``-ffp-contract=off``
rounds every float operation as the IR (and numpy) does instead of fusing
``a * b + c`` into one FMA; it comes before ``flags``, so
``-flags="-O3 -ffp-contract=fast"`` opts back in.  A failure raises
:class:`CompileError` with the command and the compiler's messages.

:func:`compile_library` returns the library's bytes: the c backend's ``compile``
stage, whose output the core caches on disk.  :func:`compiler_identity` is what
the cache key needs to know about the compiler: its path, its ``--version`` and,
for ``-march=native``-style flags, what it resolves them to on this host.

>>> import ctypes, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "answer.so")
>>> _ = open(path, "wb").write(compile_library("int answer(void) { return 42; }", flags="-O0", openmp=False))
>>> lib = SharedLibrary(path); lib.cdll.answer.restype = ctypes.c_int; lib.cdll.answer()
42
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Sequence

from loom.backend import ToolchainError
from loom.errors import LoomError
from loom.runtime.abi import library_function

__all__ = ["CompileError", "SharedLibrary", "c_flags", "compile_library", "compile_source", "compiler_identity",
           "compiler_version", "invoke"]

#: Under ``loom`` (``logging.getLogger("loom")`` controls it): the compiler commands at DEBUG.
log = logging.getLogger("loom.backends.c")


class CompileError(ToolchainError):
    """The C compiler failed (or is missing); the message holds its command and output.

    ``command`` is the argument list, ``output`` the compiler's messages and
    ``source`` the text that failed (None when the compiler could not run).
    """


class SharedLibrary:
    """A loaded shared library (``keep``: what must live as long as it, e.g. its temporary folder)."""

    def __init__(self, path: str, keep: Any = None) -> None:
        self._keep = keep
        self.path = path
        try:
            from loom.runtime.threads import prepare_openmp

            prepare_openmp()  # before libgomp loads with the library
            self.cdll = ctypes.CDLL(path)
        except OSError as err:  # e.g. a cache folder on a noexec mount
            raise LoomError(f"cannot load the compiled library {path!r}: {err}") from None

    def function(self, symbol: str) -> Callable[..., int]:
        """The ABI function ``int32_t symbol(const uint64_t *args, const char **error)``."""
        return library_function(self.cdll, symbol, self.path)


def c_flags(flags: str) -> list[str]:
    """The flags of every C build: the IR's float rounding, ``flags``, wrapping signed integers.

    >>> c_flags("-O2 -march=native")
    ['-ffp-contract=off', '-O2', '-march=native', '-fwrapv']
    """
    return ["-ffp-contract=off", *shlex.split(flags), "-fwrapv"]


def _run(command: list[str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as err:
        raise CompileError(f"cannot run the C compiler{what}: {err}\ncommand: {shlex.join(command)}",
                           command) from None


@functools.lru_cache(maxsize=None)
def compiler_version(compiler: str = "cc") -> str:
    """What ``compiler --version`` prints (run once per compiler and process).

    :raises CompileError: when the compiler cannot run or fails.
    """
    command = [*shlex.split(compiler), "--version"]
    done = _run(command, "")
    if done.returncode != 0:
        raise CompileError(f"`{shlex.join(command)}` failed with exit status {done.returncode}\n"
                           f"{done.stderr.strip()}", command, done.stderr)
    return done.stdout.strip()


@functools.lru_cache(maxsize=None)
def _host_specific(compiler: str, flags: tuple[str, ...]) -> str:
    """What the compiler makes of host-dependent flags (``-march=native``...), else ``""``.

    ``-###`` prints the internal commands with ``native`` resolved to this CPU's
    model and features.  Tokens holding a ``/`` are paths, some of them random
    temporaries, and are dropped so the text is stable across runs.
    """
    if not any("native" in f for f in flags):
        return ""
    command = [*shlex.split(compiler), *flags, "-###", "-x", "c", "-c", os.devnull, "-o", os.devnull]
    done = _run(command, "")
    try:
        words = shlex.split(done.stderr) if done.returncode == 0 else []
    except ValueError:  # unbalanced quotes in some line: plain words are stable too
        words = done.stderr.split()
    return " ".join(w for w in words if "/" not in w) or f"{platform.node()} {platform.processor()}"


def _command(compiler: str, flags: str, openmp: bool, output: str, source: str, *more: str) -> list[str]:
    return [*shlex.split(compiler), *c_flags(flags), *(["-fopenmp"] if openmp else []),
            "-shared", "-fPIC", "-o", output, source, *more, "-lm"]


def _compile(source: str, compiler: str, flags: str, openmp: bool, output: str,
             extra: Sequence[str] = ()) -> list[str]:
    """Compile ``source`` (and the ``extra`` translation units) into the shared library ``output``; the command."""
    with tempfile.TemporaryDirectory(prefix="loom_c_") as work:
        src = os.path.join(work, "module.c")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(source)
        more = []
        for k, text in enumerate(extra):
            more.append(os.path.join(work, f"import_c_{k}.c"))
            with open(more[-1], "w", encoding="utf-8") as fh:
                fh.write(text)
        command = _command(compiler, flags, openmp, output, src, *more)
        start = time.perf_counter()
        done = _run(command, "")
        log.debug("%s (exit status %d, %.3f s)", shlex.join(command), done.returncode, time.perf_counter() - start)
        if done.returncode != 0:
            raise CompileError(f"the C compiler failed with exit status {done.returncode}\n"
                               f"command: {shlex.join(command)}\n{done.stderr.strip()}",
                               command, done.stderr, source)
    return command


def compiler_identity(compiler: str, flags: str) -> str:
    """Everything about the compiler and host that changes a library built with ``flags``.

    :raises CompileError: when the compiler cannot run (checked first, so a missing compiler fails clearly).
    """
    version = compiler_version(compiler)
    where = shutil.which(shlex.split(compiler)[0]) or ""
    return "\n".join([sys.platform, platform.machine(), compiler, where, version,
                      _host_specific(compiler, tuple(shlex.split(flags)))])


def compile_library(source: str, compiler: str = "cc", flags: str = "-O3 -march=native",
                    openmp: bool = True, extra: Sequence[str] = ()) -> bytes:
    """Compile ``source`` into a shared library; its bytes.

    ``extra`` are further C translation units linked in (code imported with ``pragma import_c``).

    :param compiler: the compiler command (may hold arguments, e.g. ``"ccache cc"``).
    :param flags: extra flags, between ``-ffp-contract=off`` and ``-fwrapv``.
    :param openmp: compile with ``-fopenmp``.
    :raises CompileError: the compiler failed or is missing (``.command``,
        ``.output`` and ``.source`` say what ran on what).
    """
    with tempfile.TemporaryDirectory(prefix="loom_c_") as work:
        out = os.path.join(work, "module.so")
        if extra:
            _compile(source, compiler, flags, openmp, out, extra)
        else:  # the common case keeps _compile's original five-argument call
            _compile(source, compiler, flags, openmp, out)
        with open(out, "rb") as fh:
            return fh.read()


def compile_source(source: str, compiler: str = "cc", flags: str = "-O3 -march=native",
                   openmp: bool = True) -> SharedLibrary:
    """Compile ``source`` into a temporary folder and load it (no cache: tests and one-off C).

    Built modules go through the c backend's stages instead, which the core caches.
    """
    work = tempfile.TemporaryDirectory(prefix="loom_c_")
    path = os.path.join(work.name, "module.so")
    _compile(source, compiler, flags, openmp, path)
    return SharedLibrary(path, keep=work)


def invoke(fn: Callable[..., int], words: Sequence[int]) -> tuple[int, str | None]:
    """Call an ABI function on packed argument words: (status, error message or None)."""
    args = (ctypes.c_uint64 * max(len(words), 1))(*words)
    error = ctypes.c_char_p(None)
    status = fn(args, ctypes.byref(error))
    return status, (error.value.decode("utf-8", "replace") if status != 0 and error.value is not None else None)
