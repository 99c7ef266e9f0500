"""Loom's benchmark suite: every kernel on numpy, Loom (llvm and c) and Apache TVM, in one run.

    python bench/run.py [--quick] [--only NAME ...] [--markdown PATH] [--no-tvm]

(``make bench`` runs it with Loom's environment.)  For each workload of
``workloads.py`` it prepares numpy's form, the Loom kernel of ``kernels.py`` for
every installed native target and, when ``bench/.venv-tvm`` exists (``make
bench-env``), the same kernel with the same schedule in TVM's API
(``tvm_kernels.py``, in a process of that environment: ``tvm_client.py``).
Kernels that call math functions (``FAST_MATH``: the softmax's ``exp``) are also
built for ``llvm -fast_math`` and ``c -fast_math`` (``loom.ir.fast_math``).
Each output is checked against a float64 numpy reference, then the
implementations are timed in turns (``harness.interleave``).  It prints the
machine, a markdown table (time, GFLOP/s or GB/s, speed relative to numpy and
to TVM), the targets Loom aims for, and the per-call overhead against a raw
ctypes call.

``--markdown PATH`` also writes that report as markdown: into PATH between the
lines ``<!-- bench:SECTION:begin -->`` and ``<!-- bench:SECTION:end -->`` when
it has them (as ``docs/benchmarks.md`` does; ``--section``, default
``results``), else as the whole file.

Every implementation gets the same threads: ``LOOM_NUM_THREADS`` (default: one
per core) is passed on as ``TVM_NUM_THREADS``, ``OMP_NUM_THREADS`` and numpy's
BLAS (``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``) unless those are set.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
TVM_PYTHON = HERE / ".venv-tvm" / "bin" / "python"

# Threads must be fixed before OpenMP or BLAS start: set them before importing numpy.
_THREADS = os.environ.get("LOOM_NUM_THREADS") or str(os.cpu_count() or 1)
for _knob in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
    os.environ.setdefault(_knob, _THREADS)
# OpenBLAS's idle threads busy-wait about 2^28 cycles (~0.1 s) after each call, which
# would slow down whichever kernel takes its turn right after numpy's matmul.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import harness  # noqa: E402  (after the thread settings)
import workloads  # noqa: E402
from harness import Result  # noqa: E402
from tvm_client import TvmClient, TvmUnavailable  # noqa: E402

#: (workload, Loom implementation, compared with, speed ratio needed, description): the targets for Loom's
#: llvm backend.
TARGETS = [
    ("matmul_blocked", "loom llvm", "tvm", 0.9, "blocked matmul >= 0.9x TVM (same schedule)"),
    ("matmul_blocked", "loom llvm", "numpy", 0.5, "blocked matmul >= 0.5x numpy (BLAS)"),
    ("vadd", "loom llvm", "numpy", 0.8, "vector add >= 0.8x numpy"),
    ("softmax", "loom llvm -fast_math", "numpy", 2.0, "row softmax, `-fast_math`, >= 2x numpy"),
    ("softmax", "loom llvm -fast_math", "tvm", 2.0, "row softmax, `-fast_math`, >= 2x TVM with `te.exp`"),
]

#: Workloads whose kernels call math functions: also built with ``-fast_math`` (loom.ir.fast_math).
FAST_MATH = frozenset({"softmax"})


def native_targets() -> list[str]:
    import loom

    return [k for k in ("llvm", "c") if k in loom.target.list_kinds()]


def measure_all(names: list[str], quick: bool, tvm: TvmClient | None, log=print) -> list[Result]:
    """Every implementation of each workload in ``names``: built, checked, then timed in turns."""
    import kernels

    policy = workloads.timing(quick)
    targets = native_targets()
    results = []
    for name in names:
        wl = workloads.get(name)
        variants = [v for t in targets for v in ([t, f"{t} -fast_math"] if name in FAST_MATH else [t])]
        candidates = [harness.numpy_candidate(wl, policy),
                      *(harness.loom_candidate(wl, t, kernels.build, policy) for t in variants),
                      *([tvm.candidate(wl)] if tvm else [])]
        batch = harness.interleave(candidates, policy, slow=wl.slow)
        for r in batch:
            log(f"  {name:<15} {r.impl:<20} " + (f"{r.seconds * 1e3:9.2f} ms" if r.seconds else r.failed))
        results += batch
    return results


def targets_report(results: list[Result]) -> str:
    by_key = {(r.workload, r.impl): r.seconds for r in results}
    lines = []
    for name, impl, versus, needed, what in TARGETS:
        if (name, impl) not in by_key:
            continue
        got = harness.ratio(by_key.get((name, versus)), by_key.get((name, impl)))
        verdict = "n/a" if got is None else ("met" if got >= needed else "NOT met")
        lines.append(f"- {what}: {'-' if got is None else f'{got:.2f}x'} ({verdict})")
    return "\n".join(lines)


def report(names: list[str], results: list[Result], tvm_version: str, overhead: str | None) -> str:
    info = harness.machine_info()
    info["TVM"] = tvm_version
    knobs = ("LOOM_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS")
    info["threads"] = ", ".join(f"{k}={os.environ.get(k, _THREADS)}" for k in knobs)
    parts = ["Machine:", "", *(f"- {k}: {v}" for k, v in info.items()), "",
             harness.markdown_table(harness.table_rows([workloads.get(n) for n in names], results)), ""]
    broken = harness.failures(results)
    if broken:
        parts += ["Failed:", "", *(f"- {b}" for b in broken), ""]
    goals = targets_report(results)
    if goals:
        parts += ["Targets (Loom llvm):", "", goals, ""]
    if overhead:
        parts += ["Per-call overhead (`bench/call_overhead.py`), 3 arrays of 64 float32:", "", overhead, ""]
    return "\n".join(parts)


def write_markdown(path: pathlib.Path, text: str, section: str, command: str) -> None:
    """Put ``text`` between the section's markers in ``path`` (the whole file when it has none)."""
    begin, end = f"<!-- bench:{section}:begin -->", f"<!-- bench:{section}:end -->"
    stamped = f"{begin}\n_Measured {time.strftime('%Y-%m-%d')} with `{command}`._\n\n{text}{end}"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        path.write_text(head + stamped + rest.split(end, 1)[1], encoding="utf-8")
    else:
        path.write_text(stamped + "\n", encoding="utf-8")


def _command(opts: argparse.Namespace) -> str:
    """The command line that reproduces this run (for the markdown's stamp)."""
    words = [f"LOOM_NUM_THREADS={os.environ['LOOM_NUM_THREADS']}"] if "LOOM_NUM_THREADS" in os.environ else []
    words += ["python bench/run.py", *(["--quick"] if opts.quick else []),
              *(f"--only {n}" for n in opts.only or []), *(["--no-tvm"] if opts.no_tvm else []),
              *(["--no-overhead"] if opts.no_overhead else [])]
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (3 rounds of 3 calls)")
    parser.add_argument("--only", action="append", choices=list(workloads.WORKLOADS), metavar="NAME",
                        help=f"run only this workload (repeatable): {', '.join(workloads.WORKLOADS)}")
    parser.add_argument("--markdown", type=pathlib.Path, metavar="PATH", help="also write the report here")
    parser.add_argument("--section", default="results", help="the marked section of PATH to replace")
    parser.add_argument("--no-overhead", action="store_true", help="skip the per-call overhead table")
    parser.add_argument("--no-tvm", action="store_true", help="skip Apache TVM even when installed")
    opts = parser.parse_args(argv)
    names = opts.only or list(workloads.WORKLOADS)

    tvm, tvm_version = None, "skipped (--no-tvm)"
    if not opts.no_tvm:
        tvm_version = "not installed (run `make bench-env`)"
        if TVM_PYTHON.exists():
            try:
                tvm = TvmClient(TVM_PYTHON, opts.quick)
                tvm_version = tvm.version
            except TvmUnavailable as err:
                tvm_version = f"failed to start: {err}"
    impls = ", ".join([*native_targets(), *(["Apache TVM"] if tvm else [])])
    print(f"Timing {', '.join(names)} on numpy, {impls} ...", flush=True)
    try:
        results = measure_all(names, opts.quick, tvm, log=lambda s: print(s, flush=True))
    finally:
        if tvm:
            tvm.close()
    overhead = None
    if not (opts.only or opts.no_overhead):
        import call_overhead

        overhead = call_overhead.markdown(call_overhead.measure() + call_overhead.measure_tvm())
    text = report(names, results, tvm_version, overhead)
    print("\n" + text)
    if opts.markdown:
        write_markdown(opts.markdown, text, opts.section, _command(opts))
        print(f"wrote {opts.markdown}")
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
