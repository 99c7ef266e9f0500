"""Names of a hybrid script: what each stands for and the block that declares it.

A name is declared by its first assignment (a loop declares its variable) and
lives in the block that declares it and the blocks nested inside, never after
that block ends, unlike Python.  Kinds:

- ``input``: a tensor argument (a store to it writes the caller's tensor);
- ``buffer``: a tensor the script writes (``output_tensor``, ``allocate``, a
  called hybrid function's result);
- ``var``: a mutable scalar, stored in a one-element tensor;
- ``value``: an immutable value (an argument, or a name assigned once);
- ``loop``: a loop variable (a ``Var``, or an int under ``const_range``).

>>> s = Scopes()
>>> s.declare("n", Symbol("value", 4, None))
>>> s.push(); s.declare("t", Symbol("value", 1, None)); _ = s.pop()
>>> s.lookup("n").value, s.lookup("t"), s.retired["t"] is None
(4, None, True)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["Symbol", "Frame", "Scopes"]


@dataclass
class Symbol:
    """What a name stands for; ``node`` is the AST node that declared it (None for arguments)."""

    kind: str
    value: Any
    node: Optional[ast.AST]


@dataclass
class Frame:
    """One block: its names, and the tensors it declares, to be realized around it (tensor, scope)."""

    symbols: dict[str, Symbol] = field(default_factory=dict)
    realize: list[tuple[Any, str]] = field(default_factory=list)


class Scopes:
    """A stack of blocks; ``retired`` remembers names whose block has ended (for a clear error)."""

    def __init__(self) -> None:
        self.frames: list[Frame] = [Frame()]
        self.retired: dict[str, Optional[ast.AST]] = {}

    @property
    def depth(self) -> int:
        """1 at the function's top level, one more per enclosing loop or branch."""
        return len(self.frames)

    @property
    def top(self) -> Frame:
        return self.frames[-1]

    def push(self) -> None:
        self.frames.append(Frame())

    def pop(self) -> Frame:
        frame = self.frames.pop()
        for name, sym in frame.symbols.items():
            if self.lookup(name) is None:
                self.retired[name] = sym.node
        return frame

    def lookup(self, name: str) -> Optional[Symbol]:
        for frame in reversed(self.frames):
            found = frame.symbols.get(name)
            if found is not None:
                return found
        return None

    def declare(self, name: str, symbol: Symbol) -> None:
        self.top.symbols[name] = symbol
        self.retired.pop(name, None)
