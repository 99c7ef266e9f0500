"""What a ``@loom.jit`` call costs (not a test): cache hits against built Modules, and first calls.

    python bench/bench_jit.py [--quick] [--markdown PATH] [--section jit]

Everything runs on the llvm target, in one run:

* **(a) a cache hit with three arrays**: ``vadd(a, b, c)``, a ``@loom.jit`` vector
  add of 64 float32 (the work is a few nanoseconds: the time is the call path),
  against the Module ``vadd.compile(a, b, c)`` returns and against a Module built
  by hand from the same computation in te (``loom.build``);
* **(b) a cache hit with a static parameter and a ``T.dyn`` scalar**: ``axpy(x, y,
  z, n)`` with ``alpha: float = 2.0`` left to its default, passed positionally and
  passed by keyword, against its Module;
* **(c) the first call in a fresh process**: this script started again with
  ``--child``, once with an empty cache (the call compiles) and once more on the
  cache that process filled (the call loads the entry from disk). Each child
  imports Loom and decorates the kernel before the clock starts: the time is the
  first call's alone.

Per-call times: the calls of a table take turns, ``rounds`` times, each measuring
the mean of ``number`` calls; each keeps the median of its rounds. First calls:
the cold and warm processes alternate, ``processes`` pairs, and each keeps the
median. Every output is checked against numpy before anything is timed. The
target: a cache-hit call costs at most 2x the call of its Module.

The parent uses a private cache folder (removed at the end), so the user's cache
is neither read nor filled. ``--markdown PATH`` writes the report between the
lines ``<!-- bench:SECTION:begin -->`` and ``<!-- bench:SECTION:end -->`` of PATH
(``docs/benchmarks.md``), as ``run.py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from typing import Any, Callable

# Threads must be fixed before OpenMP or BLAS start (run.py's settings): set them before importing numpy.
_THREADS = os.environ.get("LOOM_NUM_THREADS") or str(os.cpu_count() or 1)
for _knob in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
    os.environ.setdefault(_knob, _THREADS)

import numpy as np  # noqa: E402

import loom  # noqa: E402
import loom.language as T  # noqa: E402

LENGTH = 64
#: The acceptance figure: a cache-hit call over the call of the kernel's own Module.
TARGET_RATIO = 2.0


# Annotations named once: linters read strings inside annotations as forward references ("N" undefined).
Vec = T.Tensor[("N",), "float32"]
Size = T.dyn["N"]


@loom.jit(target="llvm")
def vadd(A: Vec, B: Vec, C: Vec):
    for i in T.serial(A.shape[0]):
        C[i] = A[i] + B[i]


@loom.jit(target="llvm")
def axpy(X: Vec, Y: Vec, Z: Vec, n: Size, alpha: float = 2.0):
    for i in T.serial(n):
        Z[i] = alpha * X[i] + Y[i]


def te_vadd() -> Any:
    """The same vector add from te, built by hand: the Module a TVM user would call."""
    n = loom.var("n")
    A = loom.placeholder((n,), name="A")
    B = loom.placeholder((n,), name="B")
    C = loom.compute((n,), lambda i: A[i] + B[i], name="C")
    return loom.build(loom.create_schedule(C.op), [A, B, C], target="llvm", name="vadd")


def take_turns(calls: dict[str, Callable[[], object]], number: int, rounds: int) -> dict[str, float]:
    """Microseconds per call of each entry: the median over ``rounds`` of a mean of ``number`` calls."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            samples[name].append(timeit.timeit(call, number=number) / number * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def _checked(what: str, got: np.ndarray, want: np.ndarray) -> None:
    if not np.allclose(got, want):
        raise SystemExit(f"bench_jit: {what} computed a wrong result; nothing timed")


def cache_hits(number: int, rounds: int) -> list[tuple[str, float, float]]:
    """Rows ``(call, us/call, multiple of its Module's call)`` of measurements (a) and (b)."""
    a, b = np.arange(LENGTH, dtype="float32"), np.ones(LENGTH, "float32")
    c = np.empty(LENGTH, "float32")
    jit_mod, te_mod = vadd.compile(a, b, c), te_vadd()
    for what, call in (("vadd", lambda: vadd(a, b, c)), ("vadd.compile()", lambda: jit_mod(a, b, c)),
                       ("te vadd", lambda: te_mod(a, b, c))):
        c[:] = 0
        call()
        _checked(what, c, a + b)
    first = take_turns({
        "module": lambda: jit_mod(a, b, c),
        "te": lambda: te_mod(a, b, c),
        "jit": lambda: vadd(a, b, c),
    }, number, rounds)

    z = np.empty(LENGTH, "float32")
    ax_mod = axpy.compile(a, b, z, LENGTH)
    for what, call in (("axpy", lambda: axpy(a, b, z, LENGTH)), ("axpy.compile()", lambda: ax_mod(a, b, z, LENGTH)),
                       ("axpy, alpha=2.0", lambda: axpy(a, b, z, LENGTH, alpha=2.0))):
        z[:] = 0
        call()
        _checked(what, z, 2.0 * a + b)
    second = take_turns({
        "module": lambda: ax_mod(a, b, z, LENGTH),
        "default": lambda: axpy(a, b, z, LENGTH),
        "positional": lambda: axpy(a, b, z, LENGTH, 2.0),
        "keyword": lambda: axpy(a, b, z, LENGTH, alpha=2.0),
    }, number, rounds)
    if axpy.cache_info().size != 1 or vadd.cache_info().size != 1:
        raise SystemExit("bench_jit: a timed call compiled a second specialization")

    m1, m2 = first["module"], second["module"]
    return [
        ("(a) Module from `vadd.compile(a, b, c)`: `mod(a, b, c)`", m1, 1.0),
        ("(a) Module built from te (`loom.build`): `mod(a, b, c)`", first["te"], first["te"] / m1),
        ("(a) `@loom.jit` cache hit: `vadd(a, b, c)`", first["jit"], first["jit"] / m1),
        ("(b) Module from `axpy.compile(...)`: `mod(x, y, z, n)`", m2, 1.0),
        ("(b) cache hit, default filled in: `axpy(x, y, z, n)`", second["default"], second["default"] / m2),
        ("(b) cache hit, positional: `axpy(x, y, z, n, 2.0)`", second["positional"], second["positional"] / m2),
        ("(b) cache hit, keyword: `axpy(x, y, z, n, alpha=2.0)`", second["keyword"], second["keyword"] / m2),
    ]


# -- (c) first calls in fresh processes ------------------------------------------------------------------


def child() -> None:
    """Make the first call of ``vadd`` in this process; print its seconds and the cache counters as JSON."""
    a, b = np.arange(LENGTH, dtype="float32"), np.ones(LENGTH, "float32")
    c = np.empty(LENGTH, "float32")
    start = time.perf_counter()
    vadd(a, b, c)
    seconds = time.perf_counter() - start
    _checked("vadd (first call)", c, a + b)
    print(json.dumps({"seconds": seconds, **vadd.cache_info()._asdict()}))


def _run_child(cache: str) -> dict[str, Any]:
    env = {**os.environ, "LOOM_CACHE_DIR": cache}
    env.pop("LOOM_CACHE", None)
    done = subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "--child"], capture_output=True,
                          text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_jit: the child process failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_calls(processes: int) -> list[tuple[str, float, float]]:
    """Rows ``(first call, ms, multiple of the cold call)`` of measurement (c)."""
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(processes):
        folder = tempfile.mkdtemp(prefix="loom-bench-jit-")
        try:
            got_cold, got_warm = _run_child(folder), _run_child(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if got_cold["compiles"] != 1 or got_warm["compiles"] != 0 or got_warm["disk_loads"] != 1:
            raise SystemExit(f"bench_jit: expected a compile, then a disk load; got {got_cold} and {got_warm}")
        cold.append(got_cold["seconds"] * 1e3)
        warm.append(got_warm["seconds"] * 1e3)
    c, w = statistics.median(cold), statistics.median(warm)
    return [("(c) cold: empty cache, the call compiles", c, 1.0),
            ("(c) warm: the entry on disk, the call loads it", w, w / c)]


# -- the report ----------------------------------------------------------------------------------------------


def report(hits: list[tuple[str, float, float]], firsts: list[tuple[str, float, float]], number: int, rounds: int,
           processes: int) -> str:
    import harness

    info = harness.machine_info()
    info["threads"] = ", ".join(f"{k}={os.environ.get(k, _THREADS)}" for k in ("LOOM_NUM_THREADS", "OMP_NUM_THREADS"))
    info["Python bytecode cache"] = "not written (PYTHONDONTWRITEBYTECODE is set: a module without an up-to-date " \
        ".pyc is compiled from source in every child)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    lines = ["Machine:", "", *(f"- {k}: {v}" for k, v in info.items()), "",
             f"Cache hits, {LENGTH} float32 per array (median of {rounds} rounds of {number} calls):", "",
             "| call | us/call | vs its Module |", "|---|---:|---:|",
             *(f"| {what} | {us:.2f} | {ratio:.2f}x |" for what, us, ratio in hits), "",
             f"First call in a fresh process (median of {processes} processes each):", "",
             "| first call | ms | vs cold |", "|---|---:|---:|",
             *(f"| {what} | {ms:.1f} | {ratio:.2f}x |" for what, ms, ratio in firsts), "",
             f"Targets (cache hit <= {TARGET_RATIO:g}x its Module's call):", ""]
    for label, row in (("vector add", 2), ("axpy, static default and T.dyn", 4)):
        got = hits[row][2]
        lines.append(f"- {label}: {got:.2f}x ({'met' if got <= TARGET_RATIO else 'NOT met'})")
    return "\n".join(lines) + "\n"


def _command(opts: argparse.Namespace) -> str:
    words = [f"LOOM_NUM_THREADS={os.environ['LOOM_NUM_THREADS']}"] if "LOOM_NUM_THREADS" in os.environ else []
    return " ".join([*words, "python bench/bench_jit.py", *(["--quick"] if opts.quick else [])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (3 rounds of 2000 calls, 3 processes)")
    parser.add_argument("--markdown", type=pathlib.Path, metavar="PATH", help="also write the report here")
    parser.add_argument("--section", default="jit", help="the marked section of PATH to replace")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        child()
        return 0
    number, rounds, processes = (2000, 3, 3) if opts.quick else (20000, 7, 5)

    own_cache = tempfile.mkdtemp(prefix="loom-bench-jit-")
    os.environ["LOOM_CACHE_DIR"] = own_cache
    try:
        print(f"Timing cache hits ({rounds} rounds of {number} calls) ...", flush=True)
        hits = cache_hits(number, rounds)
        print(f"Timing first calls ({processes} cold and {processes} warm processes) ...", flush=True)
        firsts = first_calls(processes)
    finally:
        shutil.rmtree(own_cache, ignore_errors=True)
    text = report(hits, firsts, number, rounds, processes)
    print("\n" + text)
    if opts.markdown:
        from run import write_markdown

        write_markdown(opts.markdown, text, opts.section, _command(opts))
        print(f"wrote {opts.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
