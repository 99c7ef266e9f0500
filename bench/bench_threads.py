"""Parallel kernels on a quiet machine and beside a busy process (not a test).

    python bench/bench_threads.py [--rounds 7] [--markdown PATH] [--section threads]

For vector add, the blocked GEMM and conv2d of ``bench/kernels.py``, and a small
vector add (2^14 floats: a parallel region of a few microseconds, called back to
back), each at one and two threads (``LOOM_NUM_THREADS``), llvm target:

* **quiet**: nothing else running;
* **busy**: one competing process spinning on a core (``while True: pass``), as
  on a shared machine.

Two threads are run twice: with Loom's bounded idle spinning (the default: Loom
sets ``GOMP_SPINCOUNT=3000`` before libgomp loads) and with libgomp's own default
(``LOOM_OMP_SPIN=default``, 300000 spins).  Each measurement is a fresh process
(libgomp reads its environment when it loads) that builds the kernel, checks it
runs, and reports the median of ``rounds`` rounds of at least 0.2 s each.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
WORKLOADS = ("vadd", "matmul_blocked", "conv2d", "vadd_small")
TITLES = {"vadd": "vector add 2^24", "matmul_blocked": "blocked GEMM 1024", "conv2d": "conv2d 64x56x56 3x3",
          "vadd_small": "vector add 2^14 (small regions)"}


def child(workload: str, rounds: int) -> None:
    """Build ``workload``, time it, print the median seconds per call."""
    sys.path.insert(0, str(HERE))
    import numpy as np

    import loom

    if workload == "vadd_small":
        from kernels import schedule_vadd

        n = 1 << 14
        f = loom.build(*schedule_vadd(n), target="llvm")
        args = [np.ones(n, "float32"), np.ones(n, "float32"), np.empty(n, "float32")]
    else:
        from kernels import build
        from workloads import get

        f = build(workload, "llvm")
        args = get(workload).inputs(np.random.default_rng(0))
    fn = f.get_function(f.entry_name)
    fn(*args)
    times = []
    for _ in range(rounds):
        calls, start = 0, time.perf_counter()
        while True:
            fn(*args)
            calls += 1
            if time.perf_counter() - start >= 0.2:
                break
        times.append((time.perf_counter() - start) / calls)
    print(statistics.median(times))


def measure(workload: str, threads: int, libgomp_default: bool, rounds: int) -> float:
    env = dict(os.environ, LOOM_NUM_THREADS=str(threads))
    env.pop("GOMP_SPINCOUNT", None)
    env.pop("OMP_WAIT_POLICY", None)
    if libgomp_default:
        env["LOOM_OMP_SPIN"] = "default"
    else:
        env.pop("LOOM_OMP_SPIN", None)
    out = subprocess.run([sys.executable, __file__, "--child", workload, "--rounds", str(rounds)], env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def run(rounds: int) -> dict[tuple[str, str], dict[str, float]]:
    results: dict[tuple[str, str], dict[str, float]] = {}
    for mode in ("quiet", "busy"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if mode == "busy" else None
        try:
            time.sleep(0.5 if busy else 0)
            for wl in WORKLOADS:
                row = {"1": measure(wl, 1, False, rounds), "2": measure(wl, 2, False, rounds),
                       "2 libgomp": measure(wl, 2, True, rounds)}
                results[(mode, wl)] = row
                print(f"{mode:5} {wl:15} " + "  ".join(f"{k}: {v * 1e3:.3f} ms" for k, v in row.items()), flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    return results


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}" if seconds >= 1e-4 else f"{seconds * 1e3:.4f}"


def report(results: dict[tuple[str, str], dict[str, float]]) -> str:
    lines = [f"{os.cpu_count()} logical cores; times are the median of the rounds, in ms.", "",
             "| kernel | quiet: 1 thread | quiet: 2 threads | speed-up | busy: 1 thread | busy: 2 threads "
             "| 2 vs 1 thread, busy | busy: 2 threads, libgomp's spinning | 2 vs 1, libgomp's spinning |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for wl in WORKLOADS:
        q, b = results[("quiet", wl)], results[("busy", wl)]
        lines.append(f"| {TITLES[wl]} | {_ms(q['1'])} | {_ms(q['2'])} | {q['1'] / q['2']:.2f}x | {_ms(b['1'])} | "
                     f"{_ms(b['2'])} | {b['2'] / b['1']:.2f}x the time | {_ms(b['2 libgomp'])} | "
                     f"{b['2 libgomp'] / b['1']:.2f}x the time |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--child", metavar="WORKLOAD", help=argparse.SUPPRESS)
    parser.add_argument("--markdown", type=pathlib.Path, metavar="PATH")
    parser.add_argument("--section", default="threads")
    opts = parser.parse_args()
    if opts.child:
        child(opts.child, opts.rounds)
        return
    text = report(run(opts.rounds))
    print(text)
    if opts.markdown:
        sys.path.insert(0, str(HERE))
        from run import write_markdown

        write_markdown(opts.markdown, text, opts.section, "python bench/bench_threads.py " + " ".join(sys.argv[1:]))
        print(f"wrote {opts.markdown}")


if __name__ == "__main__":
    main()
