"""Timing, checking and the results table, shared by ``run.py`` and ``examples/demo.py``.

Each implementation of a workload becomes a :class:`Candidate`: its kernel is
built, run once and checked against the workload's float64 numpy reference (a
wrong kernel is reported, never timed), and it keeps a timer.  :func:`interleave`
then runs the candidates' timers in turns, ``rounds`` times, and keeps each
one's best round (see :class:`workloads.Timing`).  Loom kernels are timed with
``Module.time_evaluator`` (argument checks included, as a user's call pays
them); numpy with the same loop around its own call.  A ``slow`` workload (the
naive matmul: seconds per call) reports the time of its one checked call.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import time
from typing import Callable, Iterable, Sequence

import numpy as np

from workloads import Timing, Workload, check

__all__ = ["Result", "Candidate", "numpy_candidate", "loom_candidate", "interleave", "table_rows", "failures",
           "markdown_table", "text_table", "machine_info", "ratio", "IMPLS", "HEADER"]

#: Column order of the implementations in tables (``-fast_math`` rows only for kernels with math functions).
IMPLS = ("numpy", "loom llvm", "loom llvm -fast_math", "loom c", "loom c -fast_math", "tvm")


@dataclasses.dataclass(frozen=True)
class Result:
    """One implementation of one workload: seconds per call, or why there is none."""

    workload: str
    impl: str
    seconds: float | None = None
    error: float | None = None  # largest error relative to the reference's magnitude
    failed: str = ""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A built and checked implementation: ``timer()`` measures it once more
    (seconds per call); ``first`` is the time of the checked call; ``settle``
    the seconds its threads keep the cores busy after a measurement (the next
    turn waits them out)."""

    workload: str
    impl: str
    timer: Callable[[], float] | None = None
    first: float | None = None
    error: float | None = None
    failed: str = ""
    settle: float = 0.0


def _best_mean(call: Callable[[], object], number: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            call()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def _once(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def failure_text(err: BaseException) -> str:
    """A one-line description of ``err`` for a table's failure list."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:160]


def numpy_candidate(wl: Workload, timing: Timing) -> Candidate:
    """numpy's form of ``wl`` (``numpy_run``), checked against the float64 reference."""
    args = wl.inputs(np.random.default_rng(0))
    first = _once(lambda: wl.numpy_run(args))
    error = check(np.asarray(wl.numpy_run(args)), wl.reference(args), wl.rtol)
    return Candidate(wl.name, "numpy", lambda: _best_mean(lambda: wl.numpy_run(args), timing.number, timing.repeat),
                     first, error)


def loom_candidate(wl: Workload, target: str, build: Callable[[str, str], object], timing: Timing) -> Candidate:
    """``wl`` built with ``build(name, target)``, checked, and timed with ``time_evaluator``.

    The implementation is called ``loom <kind>``, plus ``-fast_math`` when the target has it.
    """
    import loom

    impl = f"loom {target.split()[0]}" + (" -fast_math" if "-fast_math" in target.split() else "")
    try:
        module = build(wl.name, target)
        host = wl.inputs(np.random.default_rng(0))
        args = [loom.nd.array(a) for a in host]
        func = module[wl.name]
        first = _once(lambda: func(*args))
        error = check(args[-1].numpy(), wl.reference(host), wl.rtol)
    except Exception as err:  # one broken kernel must not hide the rest of the table
        return Candidate(wl.name, impl, failed=failure_text(err))
    evaluate = module.time_evaluator(wl.name, loom.cpu(0), number=timing.number, repeat=timing.repeat)
    return Candidate(wl.name, impl, lambda: evaluate(*args).min, first, error)


def interleave(candidates: Sequence[Candidate], timing: Timing, slow: bool = False) -> list[Result]:
    """Time the candidates in turns for ``timing.rounds`` rounds; each one's best round.

    A ``slow`` workload is not timed again: its result is the checked call's time.
    """
    best = {c.impl: (c.first if slow else float("inf")) for c in candidates}
    for _ in range(0 if slow else timing.rounds):
        for c in candidates:
            if c.timer is not None:
                best[c.impl] = min(best[c.impl], c.timer())
                time.sleep(c.settle)
    return [Result(c.workload, c.impl, failed=c.failed) if c.failed else
            Result(c.workload, c.impl, best[c.impl], c.error) for c in candidates]


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` when both are known: a time ratio, >1 when the denominator is faster."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


HEADER = ("kernel", "implementation", "time (ms)", "rate", "vs numpy", "vs TVM")


def table_rows(workloads: Sequence[Workload], results: Iterable[Result],
               impls: Sequence[str] = IMPLS) -> list[tuple[str, ...]]:
    """One row per workload and implementation (see :data:`HEADER`).

    The ratios are speeds, the other's time over this one's: ``1.00x`` is a tie,
    ``0.50x`` half as fast.  A failed result reads "failed" (:func:`failures` says why).
    """
    by_key = {(r.workload, r.impl): r for r in results}
    rows = []
    for wl in workloads:
        base = by_key.get((wl.name, "numpy"))
        tvm = by_key.get((wl.name, "tvm"))
        for impl in impls:
            r = by_key.get((wl.name, impl))
            if r is None:
                continue
            if r.seconds is None:
                rows.append((wl.title, impl, "failed", "", "", ""))
                continue
            rows.append((wl.title, impl, f"{r.seconds * 1e3:.2f}", f"{wl.rate(r.seconds):.1f} {wl.metric}",
                         _fmt_ratio(ratio(base.seconds if base else None, r.seconds)),
                         _fmt_ratio(ratio(tvm.seconds if tvm else None, r.seconds))))
    return rows


def failures(results: Iterable[Result]) -> list[str]:
    """``"<workload>, <impl>: <why>"`` for every failed result."""
    return [f"{r.workload}, {r.impl}: {r.failed}" for r in results if r.failed]


def markdown_table(rows: Sequence[tuple[str, ...]], header: Sequence[str] = HEADER) -> str:
    """``rows`` as a markdown table, numbers right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * (len(header) - 2)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(rows: Sequence[tuple[str, ...]], header: Sequence[str] = HEADER, indent: str = "  ") -> str:
    """``rows`` as aligned plain text for a terminal."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    def line(row: Sequence[str]) -> str:
        cells = [str(c).ljust(w) if k < 2 else str(c).rjust(w) for k, (c, w) in enumerate(zip(row, widths))]
        return (indent + "  ".join(cells)).rstrip()
    return "\n".join([line(header), *(line(r) for r in rows)])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _blas() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # numpy builds differ in what they report
        return "unknown"


def _cc_version() -> str:
    try:
        out = subprocess.run(["cc", "--version"], capture_output=True, text=True, check=False, timeout=10)
        return out.stdout.splitlines()[0] if out.stdout else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "not found"


def machine_info() -> dict[str, str]:
    """What the numbers were measured on: CPU, cores, LLVM's host CPU name, numpy and its BLAS, cc."""
    info = {"CPU": f"{_cpu_model()} ({os.cpu_count()} logical cores)", "Python": platform.python_version(),
            "numpy": f"{np.__version__} with {_blas()}", "C compiler": _cc_version()}
    try:
        import llvmlite
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        info["LLVM"] = (f"{'.'.join(map(str, llvm.llvm_version_info))} (llvmlite {llvmlite.__version__}), "
                        f"host CPU {llvm.get_host_cpu_name()}")
    except ImportError:
        pass
    return info
