"""How long building a kernel takes: Loom cold, Loom from the compile cache, and Apache TVM 0.27.

    python bench/build_time.py [--kernel NAME ...] [--target llvm] [--runs 5] [--no-tvm]

For every kernel of ``kernels.py`` (the schedules ``bench/run.py`` times), each
measurement is one fresh process:

* **Loom cold**: ``loom.build`` with an empty private compile cache (a new
  folder per process), so it lowers, renders, compiles and loads;
* **Loom warm**: ``loom.build`` of the same schedule once a cold build has
  filled the cache (a hit: ``loom.backend.stats()`` must show no compile);
* **TVM**: ``tvm.compile`` of the same schedule (``tvm_kernels.py``) in
  ``bench/.venv-tvm``'s Python, then ``.jit()`` and the lookup of ``main``,
  where TVM's LLVM module generates its machine code; the column says "not
  installed" without that environment (``make bench-env``).

A process imports its compiler, creates the target and builds the schedule
(the ``s[...]`` primitives) before the clock starts, then collects garbage, so
the times are those of the build call alone (a full collection of the objects
the imports made costs about 10 ms in whichever call comes first, on either
side).  Python bytecode is cached as an installation would have it, in a
private folder (``PYTHONPYCACHEPREFIX``) that a first, untimed process fills.
Cold, warm and TVM processes take turns, ``--runs`` rounds; each column is the
best of its rounds (the machine may be busy with other work).
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
TVM_PYTHON = HERE / ".venv-tvm" / "bin" / "python"
sys.path.insert(0, str(HERE))

from kernels import SCHEDULES  # noqa: E402  (after the path)

_LOOM_CHILD = """
import gc, json, sys, time
sys.path.insert(0, {here!r})
import loom, kernels
from loom.backend import stats
loom.target.Target({target!r})  # plugin loading and host queries happen once per process, before the clock
loom.backend.get_backend({kind!r})  # and the backend's own modules, as `import tvm` loads TVM's before its clock
s, args = kernels.SCHEDULES[{kernel!r}]()
gc.collect()
start = time.perf_counter()
loom.build(s, args, target={target!r})
print(json.dumps({{"seconds": time.perf_counter() - start, **stats()}}))
"""

_TVM_CHILD = """
import gc, json, sys, time
sys.path.insert(0, {here!r})
import tvm, tvm_kernels
target = tvm_kernels.host_target()
sch = tvm_kernels.SCHEDULES[{kernel!r}]()
gc.collect()
start = time.perf_counter()
tvm.compile(sch.mod, target=target).jit()["main"]
print(json.dumps({{"seconds": time.perf_counter() - start}}))
"""


def _run(python: str | pathlib.Path, code: str, env: dict[str, str]) -> dict:
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"a measuring process failed ({done.returncode}): {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Bench:
    """Fresh processes with a private bytecode cache; ``close()`` removes the temporary folders."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.work = tempfile.mkdtemp(prefix="loom-build-time-")
        self.env = {**os.environ, "PYTHONPYCACHEPREFIX": os.path.join(self.work, "pycache")}
        for name in ("LOOM_CACHE", "PYTHONDONTWRITEBYTECODE", "LOOM_DUMP_DIR", "LOOM_PRINT_AFTER"):
            self.env.pop(name, None)
        self._caches = 0

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def new_cache(self) -> str:
        self._caches += 1
        path = os.path.join(self.work, f"cache-{self._caches}")
        os.makedirs(path, mode=0o700)
        return path

    def loom(self, kernel: str, cache: str) -> dict:
        code = _LOOM_CHILD.format(here=str(HERE), kernel=kernel, target=self.target, kind=self.target.split()[0])
        return _run(sys.executable, code, {**self.env, "LOOM_CACHE_DIR": cache})

    def tvm(self, kernel: str) -> float:
        return _run(TVM_PYTHON, _TVM_CHILD.format(here=str(HERE), kernel=kernel), self.env)["seconds"]


def measure(bench: Bench, kernel: str, runs: int, with_tvm: bool) -> dict[str, float | None]:
    """Best cold, warm and TVM seconds of ``runs`` rounds for ``kernel``."""
    warm_cache = bench.new_cache()
    bench.loom(kernel, warm_cache)  # fills the cache the warm processes hit (and the bytecode cache)
    if with_tvm:
        bench.tvm(kernel)  # TVM's own first-run costs (its bytecode) stay out of the rounds
    cold, warm, tvm = [], [], []
    for _ in range(runs):
        row = bench.loom(kernel, bench.new_cache())
        assert row["compiles"] == 1 and row["cache_hits"] == 0, row
        cold.append(row["seconds"])
        row = bench.loom(kernel, warm_cache)
        assert row["compiles"] == 0 and row["cache_hits"] == 1, row
        warm.append(row["seconds"])
        if with_tvm:
            tvm.append(bench.tvm(kernel))
    return {"cold": min(cold), "warm": min(warm), "tvm": min(tvm) if tvm else None}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 0.01 else f"{seconds * 1e3:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", choices=list(SCHEDULES),
                        help="kernels to build (default: all of kernels.py)")
    parser.add_argument("--target", default="llvm", help="Loom's target (TVM builds for llvm only)")
    parser.add_argument("--runs", type=int, default=5, help="rounds of fresh processes (best of them counts)")
    parser.add_argument("--no-tvm", action="store_true", help="skip Apache TVM even when installed")
    opts = parser.parse_args()
    with_tvm = not opts.no_tvm and opts.target.split()[0] == "llvm" and TVM_PYTHON.exists()
    missing = "skipped" if opts.no_tvm or opts.target.split()[0] != "llvm" else "not installed"
    print(f"| kernel | Loom cold ({opts.target}) | Loom warm (cache hit) | TVM 0.27 | Loom cold / TVM |\n"
          "|---|---:|---:|---:|---:|", flush=True)
    bench = Bench(opts.target)
    try:
        for kernel in opts.kernel or list(SCHEDULES):
            row = measure(bench, kernel, opts.runs, with_tvm)
            tvm = row["tvm"]
            ratio = f"{row['cold'] / tvm:.2f}" if tvm else "-"
            print(f"| {kernel} | {_ms(row['cold'])} | {_ms(row['warm'])} | {_ms(tvm) if tvm else missing} "
                  f"| {ratio} |", flush=True)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
