"""Loom's logging: stdlib :mod:`logging` under the ``loom`` logger.

Every module logs to ``logging.getLogger(__name__)`` (``loom.transform.pass_base``,
``loom.backend.stages``...), and the backends to ``loom.backends.<kind>``, so
``logging.getLogger("loom")`` controls them all.  What is logged:

* DEBUG: each lowering and build phase and each pass with its time, each backend
  stage (options, render, compile, load) with its time, compile-cache hits and
  misses, the compiler and linker command lines;
* WARNING: a request that is not honoured, e.g. a ``vectorize`` that falls back
  to a serial loop, a ``parallel`` loop that runs serially, a ``target_host``
  that a CPU target does not use.

As a library Loom only adds a :class:`logging.NullHandler`: the application
decides where records go (``logging.basicConfig(level=logging.DEBUG)`` shows
everything).  Without touching the code, ``LOOM_LOG_LEVEL=DEBUG`` (or INFO,
WARNING...) makes ``import loom`` add a stderr handler at that level; see
:func:`configure`.

>>> import logging
>>> logging.getLogger("loom").handlers[0].__class__.__name__
'NullHandler'
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import TextIO

from . import envvars
from .errors import LoomValueError

__all__ = ["LOGGER_NAME", "configure", "configure_from_env"]

#: The logger every Loom module (and backend) logs under.
LOGGER_NAME = "loom"
_FORMAT = "[%(levelname)s %(name)s] %(message)s"

logger = logging.getLogger(LOGGER_NAME)
logger.addHandler(logging.NullHandler())


class _StderrHandler(logging.StreamHandler):
    """The handler :func:`configure` adds (told apart from the application's own handlers)."""


def configure(level: str | int | None, stream: TextIO | None = None) -> logging.Handler | None:
    """Send the ``loom`` logger's records of ``level`` and above to ``stream`` (stderr by default).

    Replaces the handler an earlier call added; ``level=None`` removes it and
    gives the logger's level back to the application.  Returns the handler.
    Records still propagate to the root logger, so an application's own
    handlers see them too.
    """
    if isinstance(level, str):
        name = level.strip().upper()
        if not isinstance(logging.getLevelName(name), int):
            raise LoomValueError(f"unknown log level {level!r}; use DEBUG, INFO, WARNING, ERROR or CRITICAL")
        level = name
    for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(old)
    if level is None:
        logger.setLevel(logging.NOTSET)
        return None
    handler = _StderrHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler


def configure_from_env() -> logging.Handler | None:
    """Apply ``LOOM_LOG_LEVEL`` (done once when ``loom`` is imported); nothing when it is unset.

    A value that is not a level name is reported with a warning instead of
    breaking ``import loom``.
    """
    try:
        level = envvars.LOG_LEVEL.get()
    except LoomValueError as err:
        warnings.warn(f"{err}; Loom's log records are not printed", RuntimeWarning, stacklevel=2)
        return None
    return configure(level) if level else None


configure_from_env()
