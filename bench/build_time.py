"""How long ``loom.build`` takes, cold and from the compile cache, each in a fresh process.

    python bench/build_time.py [--kernel matmul_blocked] [--target llvm --target c] [--runs 3]

For each target, a private cache folder is emptied; then ``runs`` fresh
processes each build the kernel once: the first compiles (cold), the others find
the artifact on disk and only lower, render and load (warm).  A process is
started, imports Loom and creates the target before the clock starts, so the
times are those of the ``build`` call alone.  ``loom.backend.stats()`` in each
child confirms what happened (compiles and cache hits).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent

_CHILD = """
import json, sys, time
sys.path.insert(0, {here!r})
import loom, kernels
from loom.backend import stats
loom.target.Target({target!r})  # plugin loading and host queries happen once per process, before the clock
s, args = getattr(kernels, "schedule_" + {kernel!r})()
start = time.perf_counter()
loom.build(s, args, target={target!r})
print(json.dumps({{"seconds": time.perf_counter() - start, **stats()}}))
"""


def measure(kernel: str, target: str, runs: int) -> list[dict]:
    cache = tempfile.mkdtemp(prefix="loom-build-time-")
    env = {**os.environ, "LOOM_CACHE_DIR": cache}
    env.pop("LOOM_CACHE", None)
    code = _CHILD.format(here=str(HERE), kernel=kernel, target=target)
    try:
        out = []
        for _ in range(runs):
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            out.append(json.loads(done.stdout.strip().splitlines()[-1]))
        return out
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="matmul_blocked", help="a schedule_<name> of bench/kernels.py")
    parser.add_argument("--target", action="append", help="target kinds (default: llvm and c)")
    parser.add_argument("--runs", type=int, default=4, help="fresh processes per target (the first is cold)")
    args = parser.parse_args()
    print("| target | cold build (compiles) | warm build (cache hit) | warm / cold |\n|---|---:|---:|---:|")
    for target in args.target or ["llvm", "c"]:
        rows = measure(args.kernel, target, args.runs)
        cold, warm = rows[0], rows[1:]
        assert cold["compiles"] == 1 and all(r["compiles"] == 0 and r["cache_hits"] == 1 for r in warm), rows
        best = min(r["seconds"] for r in warm)
        print(f"| {target} | {cold['seconds'] * 1e3:.0f} ms | {best * 1e3:.0f} ms | {best / cold['seconds']:.2f} |")


if __name__ == "__main__":
    main()
