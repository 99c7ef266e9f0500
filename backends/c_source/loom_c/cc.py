"""Compile C source with the system compiler, cache the library on disk, load it with ctypes.

The command is ``{compiler} -ffp-contract=off {flags} -fwrapv [-fopenmp] -shared
-fPIC -o lib.so source.c -lm``: ``-fwrapv`` gives signed integers the IR's
wrap-around semantics, which plain C leaves undefined, and ``-ffp-contract=off``
rounds every float operation as the IR (and numpy) does instead of fusing
``a * b + c`` into one FMA; it comes before ``flags``, so
``-flags="-O3 -ffp-contract=fast"`` opts back in.  A failure raises
:class:`CompileError` with the command and the compiler's messages.

Libraries are cached in the ``c`` namespace of :class:`loom.runtime.disk_cache.DiskCache`,
keyed by the source, the command, the compiler's ``--version`` and, for
``-march=native``-style flags, what the compiler resolves them to on this host.

>>> lib = compile_source("int answer(void) { return 42; }", flags="-O0", openmp=False)
>>> import ctypes; lib.cdll.answer.restype = ctypes.c_int; lib.cdll.answer()
42
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import Any, Sequence

from loom.errors import LoomError
from loom.runtime.abi import library_function
from loom.runtime.disk_cache import CacheError, DiskCache

__all__ = ["CompileError", "SharedLibrary", "c_flags", "compile_source", "compiler_version", "invoke"]

#: The cache namespace (a subfolder of the Loom cache) of compiled C libraries.
CACHE_NAMESPACE = "c"


class CompileError(LoomError):
    """The C compiler failed (or is missing); the message holds its command and output.

    ``command`` is the argument list, ``output`` the compiler's messages and
    ``source`` the C text that failed (None when the compiler could not run).
    """

    def __init__(self, message: str, command: Sequence[str] = (), output: str = "",
                 source: str | None = None) -> None:
        super().__init__(message)
        self.command = list(command)
        self.output = output
        self.source = source


class SharedLibrary:
    """A compiled, loaded shared library (in the cache, or in a folder that lives as long as this object)."""

    def __init__(self, path: str, command: Sequence[str], keep: Any = None) -> None:
        self._keep = keep  # the TemporaryDirectory of an uncached build
        self.path = path
        self.command = list(command)
        try:
            self.cdll = ctypes.CDLL(path)
        except OSError as err:  # e.g. a cache folder on a noexec mount
            raise LoomError(f"cannot load the compiled library {path!r}: {err}") from None

    def function(self, symbol: str) -> ctypes._CFuncPtr:
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


def _command(compiler: str, flags: str, openmp: bool, output: str, source: str) -> list[str]:
    return [*shlex.split(compiler), *c_flags(flags), *(["-fopenmp"] if openmp else []),
            "-shared", "-fPIC", "-o", output, source, "-lm"]


def _compile(source: str, compiler: str, flags: str, openmp: bool, output: str) -> list[str]:
    """Compile ``source`` into the shared library ``output``; the command on success."""
    with tempfile.TemporaryDirectory(prefix="loom_c_") as work:
        src = os.path.join(work, "module.c")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(source)
        command = _command(compiler, flags, openmp, output, src)
        done = _run(command, "")
        if done.returncode != 0:
            raise CompileError(f"the C compiler failed with exit status {done.returncode}\n"
                               f"command: {shlex.join(command)}\n{done.stderr.strip()}",
                               command, done.stderr, source)
    return command


def _key(source: str, compiler: str, flags: str, openmp: bool) -> list[str]:
    """Everything the library depends on: the source, the command, the compiler and the host."""
    version = compiler_version(compiler)  # first: a missing compiler fails here, clearly
    where = shutil.which(shlex.split(compiler)[0]) or ""
    return ["loom-c", sys.platform, platform.machine(), compiler, where, version,
            _host_specific(compiler, tuple(shlex.split(flags))),
            *_command(compiler, flags, openmp, "lib.so", "module.c"), source]


def compile_source(source: str, compiler: str = "cc", flags: str = "-O3 -march=native",
                   openmp: bool = True, cache: DiskCache | bool = True) -> SharedLibrary:
    """Compile ``source`` into a shared library and load it.

    :param compiler: the compiler command (may hold arguments, e.g. ``"ccache cc"``).
    :param flags: extra flags, between ``-ffp-contract=off`` and ``-fwrapv``.
    :param openmp: compile with ``-fopenmp``.
    :param cache: ``True``: the default on-disk cache (off when ``LOOM_CACHE=0``);
        ``False``: compile into a temporary folder; or a :class:`DiskCache`.
        An unusable cache folder warns and compiles without the cache.
    :raises CompileError: the compiler failed or is missing (``.command``,
        ``.output`` and ``.source`` say what ran on what).
    """
    disk = DiskCache.default(CACHE_NAMESPACE, suffix=".so") if cache is True else cache or None
    if disk is not None:
        def build(output: str) -> None:
            _compile(source, compiler, flags, openmp, output)

        key = _key(source, compiler, flags, openmp)
        try:
            path = disk.get_or_create(key, build)
            return SharedLibrary(path, _command(compiler, flags, openmp, path, "module.c"))
        except CacheError as err:
            warnings.warn(f"{err}; compiling without the cache", RuntimeWarning, stacklevel=2)
    work = tempfile.TemporaryDirectory(prefix="loom_c_")
    lib = os.path.join(work.name, "module.so")
    return SharedLibrary(lib, _compile(source, compiler, flags, openmp, lib), keep=work)


def invoke(fn: ctypes._CFuncPtr, words: Sequence[int]) -> tuple[int, str | None]:
    """Call an ABI function on packed argument words: (status, error message or None)."""
    args = (ctypes.c_uint64 * max(len(words), 1))(*words)
    error = ctypes.c_char_p(None)
    status = fn(args, ctypes.byref(error))
    return status, (error.value.decode("utf-8", "replace") if status != 0 and error.value is not None else None)
