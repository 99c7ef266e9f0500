"""Errors the reference interpreter raises while running a program.

Argument mistakes (count, dtype, shape...) are plain ``LoomTypeError`` /
``LoomValueError``; what goes wrong *inside* the program is an
:class:`InterpreterError`.
"""

from __future__ import annotations

from ..errors import LoomError

__all__ = ["InterpreterError", "OutOfBoundsError", "AssertionFailed", "DivisionByZero"]


class InterpreterError(LoomError):
    """The program did something with no defined result (or hit an interpreter limit)."""


class OutOfBoundsError(InterpreterError, IndexError):
    """A load or store outside a buffer's shape or outside its memory."""


class AssertionFailed(InterpreterError):
    """An ``AssertStmt`` condition was false; ``message`` is the statement's text."""

    def __init__(self, message: str, function: str = "") -> None:
        self.message = message
        self.function = function
        super().__init__(f"{function}: assertion failed: {message}" if function else message)


class DivisionByZero(InterpreterError, ZeroDivisionError):
    """An integer division or remainder by zero."""
