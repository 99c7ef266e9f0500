"""Errors the reference interpreter raises while running a program.

Argument mistakes (count, dtype, shape...) are plain ``LoomTypeError`` /
``LoomValueError``; what goes wrong *inside* the program is an
:class:`InterpreterError`.
"""

from __future__ import annotations

from ..errors import LoomError

__all__ = ["InterpreterError", "OutOfBoundsError", "AssertionFailed", "DivisionByZero", "RaceError", "BarrierError"]


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


class RaceError(InterpreterError):
    """Two threads of a block touched one shared-memory element between barriers, at least one writing.

    >>> import loom
    >>> from loom.ir import Allocate, AttrStmt, BufferStore, IterVar, PrimFunc
    >>> S = loom.decl_buffer((1,), "float32", name="S", scope="shared")
    >>> tx = IterVar(None, loom.var("tx"), "thread_index", "threadIdx.x")
    >>> body = Allocate(S.data, "float32", [1], True, BufferStore(S, loom.const(1.0), [0]), "shared")
    >>> try:
    ...     loom.testing.evaluate(PrimFunc([], AttrStmt(tx, "thread_extent", 2, body)))
    ... except RaceError as err:
    ...     print(err)
    main: write/write race on shared memory S, element 0 (S[0]), in the only block: thread (threadIdx.x=1) writes it
    after thread (threadIdx.x=0) wrote it with no barrier between
    """


class BarrierError(InterpreterError):
    """Threads of a block (or of the grid) cannot all meet at one barrier: divergence or deadlock."""
