"""Every ``LOOM_*`` environment variable Loom reads, in one place.

Each variable is an :class:`EnvVar` with its documentation and a parser; code
reads it with ``envvars.NAME.get()``, which parses the current value (the
environment may change between calls, tests rely on that) and raises a
:class:`~loom.errors.LoomValueError` naming the variable when the value is
malformed.  ``loom info`` lists :func:`in_effect`.

>>> import os
>>> from loom import envvars
>>> os.environ["LOOM_VERIFY"] = "1"
>>> envvars.VERIFY.get()
True
>>> del os.environ["LOOM_VERIFY"]
>>> envvars.VERIFY.get()
False
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .errors import LoomValueError

__all__ = ["EnvVar", "VARIABLES", "in_effect", "MAX_THREADS",
           "CACHE", "CACHE_DIR", "CACHE_MAX_SIZE", "NUM_THREADS", "OMP_SPIN", "DEBUG", "VERIFY", "PRINT_AFTER",
           "DUMP_DIR", "DISABLE_PLUGIN_AUTOLOAD", "LOG_LEVEL", "E2E_EXAMPLES", "RANDOM_PROGRAMS"]

T = TypeVar("T")

#: All registered variables, by name, in declaration order.
VARIABLES: dict[str, EnvVar[Any]] = {}


class EnvVar(Generic[T]):
    """One ``LOOM_*`` variable: its name, what it does, its default and how its text is read."""

    def __init__(self, name: str, doc: str, parse: Callable[[str], T], default: T) -> None:
        self.name, self.doc, self.parse, self.default = name, doc, parse, default
        VARIABLES[name] = self

    def raw(self) -> str | None:
        """The variable's text with surrounding blanks removed; None when unset or blank."""
        value = os.environ.get(self.name, "").strip()
        return value or None

    def get(self) -> T:
        """The parsed value (the default when unset); a malformed value raises LoomValueError."""
        raw = self.raw()
        if raw is None:
            return self.default
        try:
            return self.parse(raw)
        except LoomValueError as err:
            raise LoomValueError(f"{self.name}={raw!r}: {err}") from None

    def __repr__(self) -> str:
        return f"EnvVar({self.name})"


_FALSE = {"0", "false", "off", "no"}


def _flag(raw: str) -> bool:
    return raw.lower() not in _FALSE


def _text(raw: str) -> str:
    return raw


def _count(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise LoomValueError("expected a non-negative integer") from None
    if value < 0:
        raise LoomValueError("expected a non-negative integer")
    return value


#: The most threads a parallel region may ask for; larger counts are capped (loom.runtime.threads).
MAX_THREADS = max(256, 8 * (os.cpu_count() or 1))


def _threads(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise LoomValueError("expected a non-negative integer (0: one thread per core)") from None
    if value < 0:
        raise LoomValueError("expected a non-negative integer (0: one thread per core)")
    return value  # capped at MAX_THREADS, with a warning, where a module binds it (loom.runtime.threads)


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "tib": 1 << 40}


def parse_size(raw: str) -> int:
    """A byte count from text such as ``"512M"``, ``"2GiB"`` or ``"1000"`` (units are powers of 1024).

    >>> parse_size("2G"), parse_size("1.5k"), parse_size("100")
    (2147483648, 1536, 100)
    """
    text = raw.strip().lower().replace(" ", "")
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(number):]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _SIZE_UNITS or not value >= 0 or value == float("inf"):
        raise LoomValueError(f"expected a size such as 500M or 2G, got {raw!r}")
    return int(value * _SIZE_UNITS[unit])


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _level(raw: str) -> str:
    if raw.upper() not in _LEVELS:
        raise LoomValueError(f"expected one of {', '.join(_LEVELS)}")
    return raw.upper()


CACHE = EnvVar("LOOM_CACHE", "Set to 0/false/off/no to turn the on-disk compile cache off.", _flag, True)
CACHE_DIR = EnvVar("LOOM_CACHE_DIR", "The compile cache folder (default: the user cache folder of loom). "
                   "It must belong to the current user and not be writable by group or others.",
                   _text, "")
CACHE_MAX_SIZE = EnvVar("LOOM_CACHE_MAX_SIZE", "The compile cache's size cap, such as 2G; beyond it the "
                        "least recently used entries are evicted.", parse_size, 2 << 30)
NUM_THREADS = EnvVar("LOOM_NUM_THREADS", "Threads per parallel region of compiled code (0 or unset: one per "
                     "core; capped at MAX_THREADS).", _threads, 0)
OMP_SPIN = EnvVar("LOOM_OMP_SPIN", "Set to 'default' to keep libgomp's own idle spinning; otherwise Loom sets "
                  "GOMP_SPINCOUNT=3000 before libgomp loads, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set "
                  "(idle threads then sleep after a few microseconds instead of holding a core).", _text, "")
DEBUG = EnvVar("LOOM_DEBUG", "Keep Loom's internal frames in frontend error tracebacks.", _flag, False)
VERIFY = EnvVar("LOOM_VERIFY", "Check the IR's well-formedness after every pass.", _flag, False)
PRINT_AFTER = EnvVar("LOOM_PRINT_AFTER", "Print the IR after the named passes (comma-separated; 'all' for every "
                     "pass) to stderr.", _text, "")
DUMP_DIR = EnvVar("LOOM_DUMP_DIR", "Write the IR after every pass, and every backend stage's output, into this "
                  "folder.", _text, "")
DISABLE_PLUGIN_AUTOLOAD = EnvVar("LOOM_DISABLE_PLUGIN_AUTOLOAD", "Do not load plugins from entry points (only "
                                 "the built-in one).", _flag, False)
LOG_LEVEL = EnvVar("LOOM_LOG_LEVEL", "Print the 'loom' logger's records of this level and above to stderr "
                   "(DEBUG shows every pass with its time, cache hits and compiler commands).", _level, "")
E2E_EXAMPLES = EnvVar("LOOM_E2E_EXAMPLES", "Testing: examples per property test in the conformance suite.",
                      _count, 0)
RANDOM_PROGRAMS = EnvVar("LOOM_RANDOM_PROGRAMS", "Testing: random programs per conformance run.", _count, 60)


def in_effect() -> dict[str, str]:
    """Every ``LOOM_*`` variable set in the environment, known or not, with its text.

    >>> import os
    >>> os.environ["LOOM_VERIFY"] = "1"
    >>> in_effect()["LOOM_VERIFY"]
    '1'
    >>> del os.environ["LOOM_VERIFY"]
    """
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith("LOOM_")}
