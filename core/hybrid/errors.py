"""Errors of hybrid scripts, each pointing at the user's file, line and column.

A :class:`HybridSyntaxError` message reads like a compiler's::

    /home/me/kernels.py:12:19: unknown name 'foo' (in hybrid function outer_product)
        c[i, j] = a[i] * foo(b[j])
                         ^~~~~~~~~

:class:`Source` holds a function's text and maps positions of its AST (parsed
from the dedented text) back to the file.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import envvars
from ..errors import LoomError, LoomTypeError

__all__ = ["HybridSyntaxError", "HybridArgumentError", "Source", "debug_tracebacks"]


def debug_tracebacks() -> bool:
    """Whether errors keep Loom's internal frames (``LOOM_DEBUG=1``); by default they are cut."""
    return envvars.DEBUG.get()


class HybridSyntaxError(LoomError):
    """A hybrid script breaks a rule of the language.

    ``reason`` is the bare explanation; ``filename``, ``lineno`` and ``col``
    (both 1-based) locate it, and ``source_line`` is the line of the file.
    """

    def __init__(self, reason: str, filename: str = "<unknown>", lineno: int = 0, col: int = 0,
                 source_line: str = "", width: int = 1, function: str = "") -> None:
        self.reason, self.filename, self.lineno, self.col = reason, filename, lineno, col
        self.source_line, self.width, self.function = source_line, max(1, width), function
        super().__init__(self._format())

    def _format(self) -> str:
        # ``function`` is a hybrid function's name, or says itself what it is ("loom.jit kernel add").
        kind = "" if " " in self.function else "hybrid function "
        where = f" (in {kind}{self.function})" if self.function else ""
        if not self.lineno:
            return f"{self.reason}{where}"
        head = f"{self.filename}:{self.lineno}:{self.col}: {self.reason}{where}"
        if not self.source_line:
            return head
        line = self.source_line.rstrip()
        caret = " " * (self.col - 1) + "^" + "~" * (min(self.width, max(1, len(line) - self.col + 1)) - 1)
        return f"{head}\n    {line}\n    {caret}"

    def __reduce__(self) -> Any:  # picklable across processes (pytest-xdist, multiprocessing)
        return (type(self), (self.reason, self.filename, self.lineno, self.col, self.source_line, self.width,
                             self.function))


class HybridArgumentError(HybridSyntaxError, LoomTypeError):
    """A hybrid function was called with an argument of a kind it cannot take (located at the parameter)."""


@dataclass(frozen=True)
class Source:
    """A function's source: the file's lines, where they start, and the dedented text ``ast`` parses."""

    filename: str
    lines: tuple[str, ...]
    first_line: int
    indent: int
    function: str

    @staticmethod
    def of(func: Callable[..., Any]) -> Source:
        """The source of ``func``; an error when Python cannot find it (a function typed at a bare REPL)."""
        name = getattr(func, "__name__", "?")
        try:
            lines, first = inspect.getsourcelines(func)
            filename = inspect.getsourcefile(func) or inspect.getfile(func)
        except (OSError, TypeError) as err:
            raise HybridSyntaxError(
                f"cannot read the source of hybrid function {name} ({err}); hybrid functions must be defined "
                f"in a file, a notebook cell or a doctest, where Python keeps their source") from None
        blank = [ln for ln in lines if ln.strip()]
        indent = min((len(ln) - len(ln.lstrip()) for ln in blank), default=0)
        return Source(filename, tuple(lines), max(first, 1), indent, name)

    @property
    def text(self) -> str:
        """The dedented text (every line loses the same number of columns, so columns map back)."""
        return "".join(ln[self.indent:] if ln.strip() else "\n" for ln in self.lines)

    def parse(self) -> ast.FunctionDef:
        """The function's definition node (decorators included)."""
        tree = ast.parse(self.text)
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if len(defs) != 1:
            raise HybridSyntaxError(f"expected the source of one function for {self.function}", self.filename,
                                    self.first_line, 1, self.line(1), function=self.function)
        return defs[0]

    def line(self, lineno: int) -> str:
        """Line ``lineno`` of the dedented text, as the file has it."""
        k = lineno - 1
        return self.lines[k].rstrip("\n") if 0 <= k < len(self.lines) else ""

    def error(self, node: Optional[ast.AST], reason: str, cls: type = HybridSyntaxError) -> HybridSyntaxError:
        """An error of class ``cls`` at ``node`` (the function's first line when None)."""
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end = getattr(node, "end_col_offset", None)
        width = (end - col) if end is not None and getattr(node, "end_lineno", lineno) == lineno else 1
        return cls(reason, self.filename, self.first_line + lineno - 1, col + self.indent + 1, self.line(lineno),
                   width, self.function)
