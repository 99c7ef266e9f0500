"""``loom.tune.tune``: measure configs of a task until the trial budget is spent.

>>> import loom, tempfile, os
>>> from loom import tune
>>> @tune.template
... def double(cfg, n):
...     A = loom.placeholder((n,), name="A")
...     B = loom.compute((n,), lambda i: A[i] * 2.0, name="B")
...     s = loom.create_schedule(B.op)
...     cfg.define_split("split", n, num_outputs=2, filter=lambda e: e.size[-1] in (4, 8))
...     _, inner = cfg["split"].apply(s, B, B.op.axis[0])
...     s[B].vectorize(inner)
...     return s, [A, B]
>>> log = os.path.join(tempfile.mkdtemp(), "double.jsonl")
>>> result = tune.tune(tune.Task(double, (64,), "llvm"), trials=2, strategy="grid", log=log)
>>> result.trials, result.failures, sorted(r["config"]["knobs"]["split"][1] for r in result.records)
(2, 0, [4, 8])
>>> with tune.apply_history_best(log):
...     s, args = double(None, 64)            # the faster of the two
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime
import os
import statistics
import sys
import time
from typing import Any, Optional, Union

import attrs
import numpy as np

from ..errors import LoomValueError
from . import log as tlog
from .executors import as_executor, parallelism_of
from .measure import run_trial
from .progress import Progress
from .space import Config, ConfigError
from .strategy import Strategy, make_strategy
from .task import Task, json_value

__all__ = ["tune", "TuneResult"]


@attrs.define
class TuneResult:
    """What a :func:`tune` run found: the best record (this run's or the log's), this
    run's records, and how many of them failed."""

    task: Task
    best: Optional[dict[str, Any]]
    records: list[dict[str, Any]]
    failures: int
    elapsed: float
    log: Optional[str] = None

    @property
    def trials(self) -> int:
        """Configs measured by this run."""
        return len(self.records)

    @property
    def best_cost(self) -> Optional[float]:
        """Seconds per run of the best config, or None when none succeeded."""
        return None if self.best is None else float(self.best["cost"])

    @property
    def best_config(self) -> Optional[Config]:
        return None if self.best is None else self.task.space.from_json(self.best["config"])

    @property
    def best_gflops(self) -> Optional[float]:
        flop = self.task.flop
        return None if self.best is None or not flop else flop / self.best["cost"] / 1e9


def _record(task: Task, config: Config, result: dict[str, Any]) -> dict[str, Any]:
    timings = [float(t) for t in result.get("timings") or []]
    failed = result.get("error") is not None
    return {
        "v": tlog.LOG_VERSION, "task": task.key, "template": task.name, "args": json_value(list(task.args)),
        "target": task.target_text, "config": config.to_json(), "timings": timings,
        "cost": None if failed or not timings else statistics.median(timings),
        "error": result.get("error"), "error_kind": result.get("error_kind"),
        "build_s": result.get("build_s"), "flop": task.flop or None, "host": result.get("host"),
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class _Checker:
    """Without a reference: the first valid candidate's output fingerprint is the reference."""

    def __init__(self, rtol: float, atol: float) -> None:
        self.rtol, self.atol = rtol, atol
        self.reference: Optional[list[dict[str, Any]]] = None

    def __call__(self, check: Optional[list[dict[str, Any]]]) -> Optional[str]:
        if check is None:
            return None
        if self.reference is None:
            self.reference = check
            return None
        for k, (got, ref) in enumerate(zip(check, self.reference)):
            scale = max(ref["scale"], 1e-30)
            a, b = np.asarray(got["values"]), np.asarray(ref["values"])
            bad = ~np.isclose(a, b, rtol=self.rtol, atol=self.atol * scale)
            if bad.any():
                j = int(np.argmax(bad))
                return (f"output {k} differs from the first valid candidate's at {int(bad.sum())} of "
                        f"{bad.size} sampled points (e.g. {a[j]!r} against {b[j]!r})")
        return None


def tune(task: Task, trials: int = 100, strategy: Union[str, Strategy] = "model", executor: Any = None,
         log: Optional[str] = None, *, n_parallel: Optional[int] = None, timeout: float = 10.0,
         number: int = 1, repeat: int = 3, min_repeat_ms: float = 50.0, num_threads: Optional[int] = None,
         early_stopping: Optional[int] = None, progress: Optional[bool] = None, seed: int = 0,
         rtol: float = 1e-3, atol: float = 1e-4, exclusive: bool = True) -> TuneResult:
    """Measure up to ``trials`` configs of ``task`` and log every result.

    - ``strategy``: ``"model"`` (default), ``"random"``, ``"grid"`` or a Strategy.
    - ``executor``: None (local measuring processes, ``n_parallel`` at a time), a Dask
      ``distributed.Client``, ``"ray"``, or any executor whose ``submit`` returns futures.
    - ``log``: a JSON-lines file results are appended to.  Configs already logged for
      this task and target are not measured again and count against ``trials``, so
      running the same call again resumes an interrupted run.
    - Each candidate is built, run once on random inputs, checked (against
      ``task.reference``, else against the first valid candidate: ``rtol``/``atol``
      relative to the output's magnitude), then timed with ``time_evaluator``
      (``number``, ``repeat``, ``min_repeat_ms``) while holding the machine's measuring
      lock (``exclusive``).  Each phase may take ``timeout`` seconds.
    - ``num_threads``: the measuring processes' ``LOOM_NUM_THREADS``.
    - ``early_stopping``: stop after that many trials without a better config.
    - ``progress``: the progress bar (None: only on a terminal).
    """
    if not isinstance(task, Task):
        raise LoomValueError(f"loom.tune.tune: expected a loom.tune.Task, got {type(task).__name__}")
    if not isinstance(trials, int) or trials < 0:
        raise LoomValueError(f"loom.tune.tune: trials must be a non-negative int, got {trials!r}")
    start = time.perf_counter()
    space = task.space
    search = make_strategy(strategy, space, seed)
    old = _logged(task, log)
    best: Optional[dict[str, Any]] = None
    for index, rec in old.items():
        search.observe(index, rec.get("cost"))
        if rec.get("cost") is not None and (best is None or rec["cost"] < best["cost"]):
            best = rec
    budget = max(0, min(trials, len(space)) - len(old))
    blob = _pickle_task(task)
    spec_base = {"task": blob, "timeout": timeout, "number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                 "num_threads": num_threads, "seed": seed, "rtol": rtol, "atol": atol, "exclusive": exclusive}
    checker = _Checker(rtol, atol)
    records: list[dict[str, Any]] = []
    failures, since_best = 0, 0
    bar = Progress(min(trials, len(space)), len(old), task.key, task.flop, progress)
    ex, owned = as_executor(executor, n_parallel)
    width = parallelism_of(ex, n_parallel)
    in_flight: dict[Any, int] = {}
    submitted = 0
    try:
        while True:
            stop = early_stopping is not None and since_best >= early_stopping
            want = 0 if stop else min(width - len(in_flight), budget - submitted)
            for index in (search.propose(want) if want > 0 else []):
                in_flight[ex.submit(run_trial, dict(spec_base, index=index))] = index
                submitted += 1
            if not in_flight:
                break
            done, _ = cf.wait(list(in_flight), return_when=cf.FIRST_COMPLETED)
            finished = []
            for fut in done:
                index = in_flight.pop(fut)
                try:
                    result = fut.result()
                except Exception as err:  # noqa: BLE001 - the executor lost the trial (a worker died)
                    result = {"error_kind": "crash", "error": f"the executor lost the trial: {type(err).__name__}: {err}"}
                wrong = checker(result.get("check")) if result.get("error") is None else None
                if wrong is not None:
                    result.update(error_kind="wrong", error=wrong, timings=[])
                rec = _record(task, space.get(index), result)
                finished.append(rec)
                search.observe(index, rec["cost"])
                if rec["cost"] is None:
                    failures += 1
                    since_best += 1
                elif best is None or rec["cost"] < best["cost"]:
                    best, since_best = rec, 0
                else:
                    since_best += 1
            records.extend(finished)
            if log is not None:
                tlog.append_records(log, finished)
            bar.update(len(finished), failures, None if best is None else best["cost"])
    finally:
        for fut in in_flight:
            fut.cancel()
        bar.close()
        if owned:
            ex.shutdown(wait=True, cancel_futures=True)
    return TuneResult(task, best, records, failures, time.perf_counter() - start, log)


def _pickle_task(task: Task) -> bytes:
    """The task as the measuring processes get it: the template's own module travels by value
    (a script, a test file, a notebook's module: workers of a cluster need not be able to import it)."""
    import cloudpickle

    func = getattr(task.template, "__wrapped__", task.template)
    module = sys.modules.get(getattr(func, "__module__", "") or "")
    by_value = module is not None and module.__name__ not in ("__main__",) and not module.__name__.startswith("loom.")
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(task)
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _logged(task: Task, log: Optional[str]) -> dict[int, dict[str, Any]]:
    """The records of ``task`` already in ``log``, by config index (the latest per config)."""
    if log is None or not os.path.exists(log):
        return {}
    out: dict[int, dict[str, Any]] = {}
    for rec in tlog.History(log).for_task(task.key, task.target):
        try:
            out[task.space.from_json(rec["config"]).index] = rec
        except (ConfigError, KeyError, TypeError):
            continue
    return out
