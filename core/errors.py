"""The exception hierarchy.

Every error Loom raises on purpose is a :class:`LoomError`.  Subclasses that
correspond to a built-in category also inherit from it (``LoomTypeError`` is a
``TypeError``), so callers can catch either.
"""

from __future__ import annotations

__all__ = [
    "LoomError",
    "LoomTypeError",
    "LoomValueError",
    "ExprTruthError",
    "IRError",
    "VerifyError",
    "SerializationError",
    "TargetError",
    "PluginError",
]


class LoomError(Exception):
    """Base class of every error raised by Loom."""


class LoomTypeError(LoomError, TypeError):
    """A value of the wrong kind was given (wrong node type, wrong dtype)."""


class LoomValueError(LoomError, ValueError):
    """A value of the right kind but an invalid content was given."""


class ExprTruthError(LoomTypeError, ValueError):
    """An IR expression was used as a Python bool (``if x > 1:``): a TypeError, and a ValueError
    as in TVM, whose tests expect that."""


class IRError(LoomValueError):
    """An IR node was constructed or combined in an invalid way."""


class VerifyError(LoomError):
    """The IR well-formedness verifier found a problem."""


class SerializationError(LoomValueError):
    """``load_json`` was given malformed, truncated or hostile input."""


class TargetError(LoomValueError):
    """A target string, kind or attribute is invalid."""


class PluginError(LoomError):
    """A plugin failed to load or broke the plugin contract."""
