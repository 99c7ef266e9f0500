"""What tuning finds (not a test): loom.tune's shipped templates against hand schedules and numpy.

    python bench/bench_tune.py [--trials 300] [--conv-trials 200] [--quick] [--markdown PATH] [--section tune]

At one thread (``LOOM_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``, set before
numpy and Loom load), in one run:

* **GEMM 1024^3 float32**: ``loom.tune.templates.matmul`` tuned for ``--trials``
  trials with the model-guided strategy, against the hand-written register-blocked
  schedule (B packed as ``[N/32][K][32]``, an 8 x 32 accumulator tile in a
  ``cache_write(C, "local")``, k outermost in the tile, rows unrolled, columns
  vectorized, column panels outside row tiles) and numpy (OpenBLAS).
* **conv2d NCHW 1x64x56x56, 64x64x3x3, pad 1**: ``conv2d_nchw`` tuned for
  ``--conv-trials`` trials, against ``bench/kernels.py``'s hand schedule and numpy's
  im2col + BLAS.

The tuning logs go to a temporary folder (``--log-dir`` keeps them, and a second
run with the same folder resumes instead of measuring again).  The best configs
are built through ``apply_history_best`` and timed with the others in turns
(``rounds`` rounds, each the mean of several calls; the best round is kept).
Each output is checked against numpy first.  ``--markdown PATH`` writes the
report between ``<!-- bench:SECTION:begin/end -->`` lines of PATH.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("LOOM_NUM_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import loom  # noqa: E402
from loom import tune  # noqa: E402
from loom.tune import templates  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from workloads import im2col_conv2d  # noqa: E402

GEMM = (1024, 1024, 1024)
CONV = dict(N=1, CI=64, H=56, W=56, CO=64, KH=3, KW=3, stride=1, pad=1)


def hand_gemm(M: int, N: int, K: int, rows: int = 8, bn: int = 32) -> tuple:
    """The hand-written register-blocked GEMM (see the module docstring)."""
    A = loom.placeholder((M, K), name="A")
    B = loom.placeholder((K, N), name="B")
    r = loom.reduce_axis((0, K), name="k")
    packed = loom.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = loom.compute((M, N), lambda i, j: loom.sum(A[i, r] * packed[j // bn, r, j % bn], axis=r), name="C")
    s = loom.create_schedule(C.op)
    acc = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], rows, bn)
    s[C].reorder(yo, xo, xi, yi)
    s[acc].compute_at(s[C], xo)
    ax, ay = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    s[acc].reorder(ak, ax, ay)
    s[acc].unroll(ax)
    s[acc].vectorize(ay)
    s[C].vectorize(yi)
    s[C].parallel(yo)
    x, _, z = s[packed].op.axis
    s[packed].vectorize(z)
    s[packed].parallel(x)
    return s, [A, B, C]


def _mean_call(call, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number


def race(calls: dict[str, object], rounds: int, min_seconds: float = 0.2) -> dict[str, float]:
    """Seconds per call of each, the best of ``rounds`` rounds taken in turns."""
    numbers = {}
    for name, call in calls.items():
        call()  # warm up
        once = max(_mean_call(call, 1), 1e-6)
        numbers[name] = max(1, int(min_seconds / once))
    best = {name: float("inf") for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            best[name] = min(best[name], _mean_call(call, numbers[name]))
    return best


def _module_call(f, args):
    fn = f.get_function(f.entry_name)
    return lambda: fn(*args)


def trials_to_near_best(log: str, key: str, within: float = 1.05) -> int:
    """How many trials (in log order) it took to find a config within ``within`` of the best."""
    costs = [r["cost"] for r in tune.read_records(log) if r["task"] == key]
    best = min(c for c in costs if c is not None)
    return next(k + 1 for k, c in enumerate(costs) if c is not None and c <= best * within)


def tuning_seconds(log: str, key: str) -> float:
    """Wall time from the first to the last logged trial of ``key`` (a resumed run's figure is the first run's)."""
    import datetime

    stamps = [datetime.datetime.strptime(r["time"], "%Y-%m-%dT%H:%M:%SZ")
              for r in tune.read_records(log) if r["task"] == key]
    return (max(stamps) - min(stamps)).total_seconds()


def tune_task(task: tune.Task, trials: int, log: str) -> tune.TuneResult:
    print(f"tuning {task.key}: {len(task.space)} configs, {trials} trials", flush=True)
    result = tune.tune(task, trials=trials, strategy="model", log=log, num_threads=1, timeout=20)
    logged = sum(1 for r in tune.read_records(log) if r["task"] == task.key)
    failed = sum(1 for r in tune.read_records(log) if r["task"] == task.key and r["cost"] is None)
    print(f"  {result.trials} trials this run ({logged} logged, {failed} failed) in {result.elapsed:.0f} s; "
          f"best {result.best_gflops or 0:.1f} GFLOP/s: {result.best_config}", flush=True)
    return result


def compare(calls: dict, outs: dict, expected: np.ndarray, flop: float, rounds: int) -> tuple[list[tuple], dict]:
    """Check each call's output against ``expected``, then time them in turns: the rows and the times."""
    for name, call in calls.items():
        call()
        err = np.abs(outs[name] - expected).max() / np.abs(expected).max()
        assert err < 1e-4, f"{name}: relative error {err}"
    t = race(calls, rounds)
    return [(name, t[name], flop / t[name] / 1e9) for name in ("numpy", "hand", "tuned")], t


def log_facts(prefix: str, log: str, key: str, result: tune.TuneResult) -> dict:
    """What the log says of a task's tuning: trials, failures, time, how soon near the best, the best."""
    records = [r for r in tune.read_records(log) if r["task"] == key]
    return {f"{prefix}_elapsed": tuning_seconds(log, key), f"{prefix}_logged": len(records),
            f"{prefix}_failed": sum(1 for r in records if r["cost"] is None),
            f"{prefix}_best": str(result.best_config), f"{prefix}_near": trials_to_near_best(log, key)}


def bench_gemm(trials: int, log: str, rounds: int) -> tuple[list[tuple], dict]:
    M, N, K = GEMM
    task = tune.Task(templates.matmul, (M, N, K, "float32"), "llvm")
    result = tune_task(task, trials, log)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype("float32")
    b = rng.uniform(-1, 1, (K, N)).astype("float32")
    expected = a.astype("float64") @ b.astype("float64")
    hand = loom.build(*hand_gemm(M, N, K), target="llvm")
    with tune.apply_history_best(log):
        tuned = loom.build(*task.instantiate(), target="llvm")
    outs = {"tuned": np.zeros((M, N), "float32"), "hand": np.zeros((M, N), "float32")}
    calls = {"numpy": lambda: np.matmul(a, b, out=outs.setdefault("numpy", np.zeros((M, N), "float32"))),
             "tuned": _module_call(tuned, (a, b, outs["tuned"])), "hand": _module_call(hand, (a, b, outs["hand"]))}
    rows, t = compare(calls, outs, expected, 2.0 * M * N * K, rounds)
    facts = {"gemm_tuned_vs_hand": t["hand"] / t["tuned"], "gemm_tuned_vs_numpy": t["numpy"] / t["tuned"],
             **log_facts("gemm", log, task.key, result)}
    return rows, facts


def bench_conv(trials: int, log: str, rounds: int) -> tuple[list[tuple], dict]:
    from kernels import schedule_conv2d

    c = CONV
    task = tune.Task(templates.conv2d_nchw, (c["N"], c["CI"], c["H"], c["W"], c["CO"], c["KH"], c["KW"],
                                             c["stride"], c["pad"], "float32"), "llvm")
    result = tune_task(task, trials, log)
    rng = np.random.default_rng(0)
    data = rng.uniform(-1, 1, (c["N"], c["CI"], c["H"], c["W"])).astype("float32")
    weight = rng.uniform(-1, 1, (c["CO"], c["CI"], c["KH"], c["KW"])).astype("float32")
    expected = im2col_conv2d(data.astype("float64"), weight.astype("float64"), c["pad"])
    hand = loom.build(*schedule_conv2d(), target="llvm")
    with tune.apply_history_best(log):
        tuned = loom.build(*task.instantiate(), target="llvm")
    shape = expected.shape
    outs = {"tuned": np.zeros(shape, "float32"), "hand": np.zeros(shape, "float32"), "numpy": None}

    def numpy_conv() -> None:
        outs["numpy"] = im2col_conv2d(data, weight, c["pad"])

    calls = {"numpy": numpy_conv, "tuned": _module_call(tuned, (data, weight, outs["tuned"])),
             "hand": _module_call(hand, (data, weight, outs["hand"]))}
    flop = 2.0 * c["N"] * c["CO"] * shape[2] * shape[3] * c["CI"] * c["KH"] * c["KW"]
    rows, t = compare(calls, outs, expected, flop, rounds)
    facts = {"conv_tuned_vs_numpy": t["numpy"] / t["tuned"], "conv_tuned_vs_hand": t["hand"] / t["tuned"],
             **log_facts("conv", log, task.key, result)}
    return rows, facts


LABELS = {"numpy": "numpy (OpenBLAS)", "hand": "loom llvm, hand schedule", "tuned": "loom llvm, tuned template"}


def report(gemm: list[tuple], conv: list[tuple], facts: dict, trials: int, conv_trials: int) -> str:
    from harness import machine_info

    lines = ["Machine: " + "; ".join(f"{k} {v}" for k, v in machine_info().items()), "",
             "One thread (LOOM_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1).", "",
             "| kernel | implementation | time (ms) | GFLOP/s | vs numpy |", "|---|---|---:|---:|---:|"]
    for title, rows in (("GEMM 1024^3 float32", gemm), ("conv2d 1x64x56x56, 64x64x3x3, pad 1", conv)):
        base = rows[0][1]
        for name, seconds, gflops in rows:
            lines.append(f"| {title} | {LABELS[name]} | {seconds * 1e3:.2f} | {gflops:.1f} | {base / seconds:.2f}x |")
    lines += ["",
              f"- GEMM: tuned {facts['gemm_tuned_vs_hand']:.2f}x the hand schedule (target >= 0.95x) and "
              f"{facts['gemm_tuned_vs_numpy']:.2f}x numpy (target >= 0.9x); {facts['gemm_logged']} trials logged "
              f"(budget {trials}), {facts['gemm_failed']} failed, tuning took {facts['gemm_elapsed']:.0f} s, "
              f"the search was within 5% of its best after {facts['gemm_near']} trials; "
              f"best {facts['gemm_best']}",
              f"- conv2d: tuned {facts['conv_tuned_vs_numpy']:.2f}x numpy's im2col + BLAS (target >= 1.0x), "
              f"{facts['conv_tuned_vs_hand']:.2f}x the hand schedule; {facts['conv_logged']} trials logged "
              f"(budget {conv_trials}), {facts['conv_failed']} failed, tuning took {facts['conv_elapsed']:.0f} s, "
              f"within 5% of its best after {facts['conv_near']} trials; "
              f"best {facts['conv_best']}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--conv-trials", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="30 trials each, 3 rounds")
    parser.add_argument("--log-dir", type=pathlib.Path, help="keep the tuning logs here (resumes a run)")
    parser.add_argument("--markdown", type=pathlib.Path, metavar="PATH", help="also write the report here")
    parser.add_argument("--section", default="tune")
    opts = parser.parse_args()
    if opts.quick:
        opts.trials, opts.conv_trials, opts.rounds = 30, 30, 3
    folder = opts.log_dir or pathlib.Path(tempfile.mkdtemp(prefix="loom-bench-tune-"))
    folder.mkdir(parents=True, exist_ok=True)
    gemm, gfacts = bench_gemm(opts.trials, str(folder / "gemm.jsonl"), opts.rounds)
    conv, cfacts = bench_conv(opts.conv_trials, str(folder / "conv2d.jsonl"), opts.rounds)
    text = report(gemm, conv, {**gfacts, **cfacts}, opts.trials, opts.conv_trials)
    print(text)
    if opts.markdown:
        from run import write_markdown

        args = " ".join(sys.argv[1:])
        write_markdown(opts.markdown, text, opts.section, f"python bench/bench_tune.py {args}".strip())
        print(f"wrote {opts.markdown}")


if __name__ == "__main__":
    main()
