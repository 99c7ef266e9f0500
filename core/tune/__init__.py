"""``loom.tune``: schedules found by measurement (docs/tuning.md).

A template declares a space of schedules (:func:`template`, AutoTVM's
``cfg.define_split``/``define_knob``/``define_reorder``/``define_annotate``);
:func:`tune` measures configs of a :class:`Task` in child processes, through any
``concurrent.futures`` executor (local processes by default, a Dask
``distributed.Client``, Ray), and appends every result to a JSON-lines log;
:func:`apply_history_best` makes templates build the best logged config.
``@loom.autotune`` (:mod:`loom.tune.autotune`) picks among the static
parameters of a ``@loom.jit`` kernel, Triton style.

Modules: :mod:`~loom.tune.knobs`, :mod:`~loom.tune.space` (knobs, spaces,
configs); :mod:`~loom.tune.task` (templates, tasks); :mod:`~loom.tune.tuner`
(the search loop); :mod:`~loom.tune.strategy` and :mod:`~loom.tune.model`
(what to measure next); :mod:`~loom.tune.executors`, :mod:`~loom.tune.measure`
and :mod:`~loom.tune.sandbox` (where and how a trial runs);
:mod:`~loom.tune.log` (the log, the history); :mod:`~loom.tune.templates`
(shipped templates).
"""

from .knobs import AnnotateEntity, OtherOptionEntity, ReorderEntity, SplitEntity
from .space import Config, ConfigError, ConfigSpace, FallbackConfig
from .task import Task, template
from .log import History, apply_history_best, read_records
from .strategy import GridStrategy, ModelStrategy, RandomStrategy, Strategy
from .executors import LocalExecutor, RayExecutor
from .tuner import TuneResult, tune

__all__ = ["ConfigSpace", "Config", "FallbackConfig", "ConfigError", "SplitEntity", "ReorderEntity",
           "AnnotateEntity", "OtherOptionEntity", "Task", "template", "tune", "TuneResult", "History",
           "apply_history_best", "read_records", "Strategy", "GridStrategy", "RandomStrategy", "ModelStrategy",
           "LocalExecutor", "RayExecutor"]
