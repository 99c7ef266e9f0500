"""Where trials run: any ``concurrent.futures.Executor``-like object.

- ``None`` or ``"local"``: :class:`LocalExecutor`, local measuring processes.
- A Dask ``distributed.Client``: its ``get_executor()``; each Dask worker runs
  trials in measuring processes of its own, on its own machine.
- ``"ray"`` or :class:`RayExecutor`: Ray tasks (``ray.init()`` first, or let it
  start a local Ray).
- Anything else with ``submit(fn, *args)`` returning ``concurrent.futures.Future``
  objects (a ``ProcessPoolExecutor``, a ``ThreadPoolExecutor``, mpi4py's...).

>>> ex, owned = as_executor(None, n_parallel=2)
>>> type(ex).__name__, owned
('LocalExecutor', True)
>>> ex.shutdown()
"""

from __future__ import annotations

import concurrent.futures
import os
from typing import Any, Callable, Optional

from ..errors import LoomValueError

__all__ = ["LocalExecutor", "RayExecutor", "as_executor", "default_parallelism"]


def default_parallelism() -> int:
    """Trials in flight on this machine by default: one per core (at most 8), builds
    overlapping while the measuring lock keeps timings one at a time."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


class LocalExecutor(concurrent.futures.ThreadPoolExecutor):
    """``n_parallel`` threads, each driving a measuring process of its own (the default)."""

    def __init__(self, n_parallel: Optional[int] = None) -> None:
        super().__init__(max_workers=n_parallel or default_parallelism(), thread_name_prefix="loom-tune")

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        threads = list(self._threads)
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        from .measure import shutdown_sandboxes

        shutdown_sandboxes(threads)  # the measuring processes die with the threads that drove them


class RayExecutor:
    """Trials as Ray tasks: ``submit`` returns the ``concurrent.futures.Future`` of an ObjectRef.

    On a Ray cluster: ``ray.init(address="auto")``, then
    ``loom.tune.tune(task, executor=RayExecutor())`` (or ``executor="ray"``).
    """

    def __init__(self, num_cpus: float = 1, **ray_options: Any) -> None:
        try:
            import ray
        except ImportError:
            raise LoomValueError("the Ray executor needs Ray: pip install 'loom-compiler[ray]'") from None
        if not ray.is_initialized():
            ray.init()
        self._ray = ray
        self._options = dict(num_cpus=num_cpus, **ray_options)
        self._remote: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(**self._options)(fn)
        return remote.remote(*args, **kwargs).future()

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self._remote.clear()


def as_executor(executor: Any, n_parallel: Optional[int] = None) -> tuple[Any, bool]:
    """``(executor, owned)``: an executor for ``executor`` as given to ``tune``; ``owned``
    when tune made it and must shut it down."""
    if executor is None or executor == "local":
        return LocalExecutor(n_parallel), True
    if executor == "ray":
        return RayExecutor(), True
    if hasattr(executor, "get_executor") and hasattr(executor, "scheduler_info"):  # a distributed.Client
        # pure=False: two trials of equal specs (a re-measure) are two tasks, not one cached result.
        return executor.get_executor(pure=False), False
    if callable(getattr(executor, "submit", None)):
        return executor, False
    raise LoomValueError(f"loom.tune: executor must be None, 'local', 'ray', a Dask Client or an object with "
                         f"submit(fn, *args) returning futures; got {executor!r}")


def parallelism_of(executor: Any, requested: Optional[int]) -> int:
    """How many trials to keep in flight on ``executor``."""
    if requested:
        return requested
    n = getattr(executor, "_max_workers", None)  # concurrent.futures' pools
    if isinstance(n, int) and n > 0:
        return n
    client = getattr(executor, "_client", None)  # Dask's ClientExecutor
    if client is not None:
        try:
            return max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
        except Exception:  # noqa: BLE001 - a scheduler that does not answer: fall back
            pass
    return default_parallelism()
