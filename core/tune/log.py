"""The tuning log: one JSON object per line, appended, never rewritten.

Each line is one measured config of one task on one target::

    {"v": 1, "task": "matmul(1024, 1024, 1024, \\"float32\\")", "template": "matmul",
     "args": [1024, 1024, 1024, "float32"], "target": "llvm",
     "config": {"index": 412, "knobs": {"tile_y": [-1, 32], ...}},
     "timings": [0.0121, 0.0120, 0.0122], "cost": 0.0121, "error": null, "error_kind": null,
     "build_s": 0.31, "flop": 2147483648.0, "host": "node7", "time": "2026-11-24T10:31:07Z"}

``cost`` is the median of ``timings`` (seconds per run); a failed trial has
``cost`` null, an ``error`` message and an ``error_kind``: ``build``, ``run``,
``wrong`` (its outputs disagree with the reference), ``timeout``, ``crash`` (the
measuring process died) or ``invalid`` (the config is not in the template's space).
Lines are written whole under a file lock, so several tuning runs may share a log.

:func:`apply_history_best` reads logs into a :class:`History` and makes templates
called without a config (``template(None, *args)``, ``task.instantiate()``) build
the best config logged for their arguments and the target in scope.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Iterable, Iterator, Optional, Union

import filelock

from ..errors import LoomValueError
from ..target import Target
from .space import Config, ConfigError
from .task import pop_dispatch, push_dispatch

__all__ = ["LOG_VERSION", "ERROR_KINDS", "append_records", "read_records", "History", "apply_history_best"]

LOG_VERSION = 1
ERROR_KINDS = ("build", "run", "wrong", "timeout", "crash", "invalid")
PathLike = Union[str, "os.PathLike[str]"]


def append_records(path: PathLike, records: Iterable[dict[str, Any]]) -> None:
    """Append ``records`` to the log at ``path`` (created if missing), whole lines under a lock."""
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    if not lines:
        return
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with filelock.FileLock(path + ".lock"):
        with open(path, "a", encoding="utf-8") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())


def read_records(path: PathLike) -> Iterator[dict[str, Any]]:
    """The records of the log at ``path``; a line that is not a record (a run cut off while
    writing, another tool's line) is skipped."""
    with open(os.fspath(path), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("v") == LOG_VERSION and isinstance(rec.get("task"), str):
                yield rec


def _same_target(logged: str, wanted: Target) -> bool:
    try:
        return str(Target(logged)) == str(wanted)
    except LoomValueError:
        return False


class History:
    """The records of some logs, with the best config per task and target.

    >>> h = History([])
    >>> h.best("matmul(8, 8, 8)", "llvm") is None
    True
    """

    def __init__(self, sources: Union[PathLike, Iterable[Any], "History"] = ()) -> None:
        self.records: list[dict[str, Any]] = []
        if isinstance(sources, History):
            self.records = list(sources.records)
            return
        if isinstance(sources, (str, os.PathLike)):
            sources = [sources]
        for src in sources:
            if isinstance(src, dict):
                self.records.append(src)
            elif os.path.exists(os.fspath(src)):
                self.records.extend(read_records(src))
            else:
                raise LoomValueError(f"apply_history_best: no tuning log at {os.fspath(src)!r}")

    def for_task(self, key: str, target: Optional[Any] = None) -> list[dict[str, Any]]:
        """The records of task ``key`` (on ``target`` when given)."""
        want = Target(target) if isinstance(target, str) else target
        return [r for r in self.records if r["task"] == key and (want is None or _same_target(r.get("target", ""), want))]

    def _succeeded(self, key: str, target: Optional[Any]) -> list[dict[str, Any]]:
        """The successful records of task ``key`` (on ``target`` when given), fastest first."""
        ok = [r for r in self.for_task(key, target) if isinstance(r.get("cost"), (int, float)) and r.get("error") is None]
        return sorted(ok, key=lambda r: r["cost"])

    def best(self, key: str, target: Optional[Any] = None) -> Optional[dict[str, Any]]:
        """The record with the lowest cost of task ``key`` (on ``target`` when given); None if none succeeded."""
        ok = self._succeeded(key, target)
        return ok[0] if ok else None

    def best_config(self, key: str, space: Any, target: Optional[Any] = None) -> Optional[Config]:
        """The best logged config of task ``key`` that is still in ``space``."""
        for rec in self._succeeded(key, target):
            try:
                return space.from_json(rec["config"])
            except ConfigError:
                continue
        return None

    def __len__(self) -> int:
        return len(self.records)


class _Lookup:
    """What a template called without a config asks: the best config for a task key."""

    def __init__(self, history: History) -> None:
        self.history = history

    def __call__(self, key: str, target: Optional[Target]) -> Optional[Config]:
        rec = self.history.best(key, target)
        if rec is None:
            return None
        return _LoggedConfig(rec["config"])


class _LoggedConfig(Config):
    """A logged config read back without its space: the template's ``define_*`` calls
    rebuild the space, and ``cfg[name]`` picks the logged entity from it."""

    def __init__(self, data: dict[str, Any]) -> None:
        from .space import ConfigSpace

        super().__init__(ConfigSpace(), int(data.get("index", -1)), {})
        self._logged = dict(data.get("knobs") or {})

    def _declare(self, name: str, knob: Any) -> None:
        self.space._declare(name, knob)
        if name not in self._logged:
            raise ConfigError(f"the logged config has no knob {name!r}: the template changed since it was tuned")
        try:
            self._entities[name] = knob.entities[knob.index_of(self._logged[name])]
        except ValueError:
            raise ConfigError(f"the logged value {self._logged[name]!r} of knob {name!r} is not among the "
                              "template's candidates: the template changed since it was tuned") from None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "knobs": dict(self._logged)}


@contextlib.contextmanager
def apply_history_best(log: Union[PathLike, Iterable[Any], History]) -> Iterator[History]:
    """A context in which templates called without a config build the best logged one.

    ``log`` is a log's path, several paths, records, or a :class:`History`.  The
    best config is picked per task (template name and arguments) among the records
    for the target in scope (``with loom.Target(...)``; any target when none is).

    >>> import loom
    >>> from loom import tune
    >>> with tune.apply_history_best([]):
    ...     cfg = tune.task.dispatch_config("matmul", (8, 8, 8))
    >>> cfg.is_fallback
    True
    """
    history = log if isinstance(log, History) else History(log)
    token = push_dispatch(_Lookup(history))
    try:
        yield history
    finally:
        pop_dispatch(token)
