"""Pass instruments: timing, printing, verifying and dumping the IR around passes.

An instrument is a :class:`~loom.transform.PassInstrument` given to a
:class:`~loom.transform.PassContext`; every pass run under that context calls its
hooks.  The driver adds some on its own (see :func:`env_instruments`):

* ``LOOM_PRINT_AFTER=all`` (or ``=StorageFlatten,Simplify``) prints the IR after
  those passes to stderr (numba's ``NUMBA_DEBUG_PRINT_AFTER``);
* ``LOOM_VERIFY=1`` runs :func:`loom.verify_well_formed` after every pass;
* ``build_config(dump_pass_ir=True)`` writes each pass's IR to numbered files,
  and ``loom.build`` adds every backend stage's output (options, sources, the
  compiled artifact, the module's metadata) to the same sequence;
  ``LOOM_DUMP_DIR=<folder>`` does both without changing the code.

>>> import io, loom
>>> from loom.transform import PassContext, prim_func_pass
>>> @prim_func_pass(name="Nothing")
... def nothing(func, mod, ctx):
...     return func
>>> timing = PassTimingInstrument()
>>> with PassContext(instruments=[timing]):
...     _ = nothing(loom.ir.IRModule({}))
>>> [name for name, _, _ in timing.timings]
['Nothing']
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterable, TextIO

from .. import envvars
from ..errors import LoomValueError, VerifyError
from ..ir.function import IRModule
from .pass_base import PassContext, PassInfo, PassInstrument

__all__ = ["PassTimingInstrument", "PrintAfter", "VerifyAfter", "DumpIR", "env_instruments", "extend_context",
           "ENV_DUMP_DIR"]

PRINT_AFTER_ENV = "LOOM_PRINT_AFTER"
VERIFY_ENV = "LOOM_VERIFY"


def _pass_names(passes: str | Iterable[str]) -> frozenset[str] | None:
    """``"all"`` -> None (every pass); ``"A,B"`` or ``["A", "B"]`` -> the set of names."""
    if isinstance(passes, str):
        passes = [p.strip() for p in passes.split(",")]
    names = frozenset(p for p in passes if p)
    if not names:
        raise LoomValueError("a pass selection needs 'all' or at least one pass name, got nothing")
    return None if "all" in names else names


class PassTimingInstrument(PassInstrument):
    """Records how long each pass took, nested passes included.

    ``timings`` is a list of ``(pass name, seconds, depth)`` in completion order;
    ``depth`` is 0 for a pass run directly and grows inside a ``Sequential``.
    """

    def __init__(self) -> None:
        self.timings: list[tuple[str, float, int]] = []
        self._open: list[tuple[str, float]] = []

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._open.append((info.name, time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        # A pass that raised never reaches here; drop the entries it left open.
        while self._open:
            name, start = self._open.pop()
            if name == info.name:
                self.timings.append((name, time.perf_counter() - start, len(self._open)))
                return

    def total(self) -> float:
        """Seconds spent in the outermost passes."""
        return sum(t for _, t, depth in self.timings if depth == 0)

    def render(self) -> str:
        """One line per pass, indented by nesting depth, slowest information last."""
        lines = [f"{'  ' * depth}{name}: {seconds * 1e3:.3f} ms" for name, seconds, depth in self.timings]
        lines.append(f"total: {self.total() * 1e3:.3f} ms")
        return "\n".join(lines)


class PrintAfter(PassInstrument):
    """Prints the module after the named passes (``"all"`` for every pass).

    :param passes: ``"all"``, a comma-separated string, or an iterable of pass names.
    :param stream: where to print (stderr by default, looked up at print time).
    """

    def __init__(self, passes: str | Iterable[str] = "all", stream: TextIO | None = None) -> None:
        self.names = _pass_names(passes)
        self.stream = stream

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.names is None or info.name in self.names:
            out = self.stream if self.stream is not None else sys.stderr
            print(f"# IR after {info.name}\n{mod}", file=out)

    @classmethod
    def from_env(cls) -> PrintAfter | None:
        """The instrument ``LOOM_PRINT_AFTER`` asks for, or None when it is unset."""
        value = envvars.PRINT_AFTER.get()
        return cls(value) if value else None


#: Built-in passes whose output still reads tensors (StorageFlatten has not run): not checked for well-formedness.
PRE_FLATTEN_PASSES = ("InjectPrefetch",)


class VerifyAfter(PassInstrument):
    """Checks the module with :func:`loom.verify_well_formed` after every pass.

    A problem raises :class:`~loom.errors.VerifyError` naming the pass that
    produced the ill-formed IR.  ``skip`` names passes whose output is not
    checked (e.g. passes that run before storage flattening, whose IR still
    holds tensor-level nodes).
    """

    def __init__(self, skip: Iterable[str] = ()) -> None:
        self.skip = frozenset(skip)

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        from ..ir.verify import verify_well_formed

        if info.name in self.skip:
            return
        try:
            verify_well_formed(mod)
        except VerifyError as err:
            new = VerifyError(f"after pass {info.name}: {err}")
            new.problems = getattr(err, "problems", [])  # type: ignore[attr-defined]
            raise new from None

    @staticmethod
    def env_enabled() -> bool:
        """True when ``LOOM_VERIFY`` is set to something other than ``""``/``0``."""
        return envvars.VERIFY.get()


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class DumpIR(PassInstrument):
    """Writes ``str(mod)`` after every pass to ``<directory>/<NN>_<pass name>.txt``.

    Files are numbered from 00 in the order they are written; characters that
    are not safe in file names become ``_``.  ``files`` lists what was written.
    :meth:`write` adds other files (backend stage outputs) to the same sequence.
    """

    def __init__(self, directory: str | os.PathLike[str] = ".") -> None:
        self.directory = Path(directory)
        self.files: list[Path] = []

    def write(self, name: str, suffix: str, data: str | bytes) -> Path:
        """Write ``data`` as the next numbered file, ``<NN>_<name><suffix>``; its path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stem = _UNSAFE.sub("_", name).strip("_") or "dump"
        path = self.directory / f"{len(self.files):02d}_{stem}{suffix}"
        if isinstance(data, str):
            path.write_text(data)
        else:
            path.write_bytes(data)
        self.files.append(path)
        return path

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.write(info.name, ".txt", f"{mod}\n")


#: Folder that turns on :class:`DumpIR` for every ``lower``/``build`` (pass IR and backend stages).
ENV_DUMP_DIR = "LOOM_DUMP_DIR"


def env_instruments() -> list[PassInstrument]:
    """The instruments the environment asks for (``LOOM_PRINT_AFTER``, ``LOOM_VERIFY``, ``LOOM_DUMP_DIR``)."""
    out: list[PassInstrument] = []
    printer = PrintAfter.from_env()
    if printer is not None:
        out.append(printer)
    if VerifyAfter.env_enabled():
        out.append(VerifyAfter(skip=PRE_FLATTEN_PASSES))
    folder = envvars.DUMP_DIR.get()
    if folder:
        out.append(DumpIR(folder))
    return out


class _ExtendedContext(PassContext):
    """``base`` plus extra instruments; entering it enters only the extras.

    The base context's own instruments are already entered (the base is
    current), so entering them again would, e.g., reset a timing instrument.
    """

    def __init__(self, base: PassContext, extra: list[PassInstrument]) -> None:
        super().__init__(base.opt_level, base.required_pass, base.disabled_pass,
                         [*base.instruments, *extra], dict(base.config))
        self._extra = extra

    def __enter__(self) -> PassContext:
        everything, self.instruments = self.instruments, self._extra
        try:
            super().__enter__()
        finally:
            self.instruments = everything
        return self

    def __exit__(self, *exc: Any) -> None:
        everything, self.instruments = self.instruments, self._extra
        try:
            super().__exit__(*exc)
        finally:
            self.instruments = everything


def extend_context(extra: Iterable[PassInstrument], base: PassContext | None = None) -> PassContext:
    """A context like ``base`` (the current one by default) with ``extra`` instruments added.

    Use it as ``with extend_context([...]):``; it restores ``base`` on exit.
    """
    return _ExtendedContext(base if base is not None else PassContext.current(), list(extra))
