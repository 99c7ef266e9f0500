"""The compiler: variables to frame slots, nodes to closures, functions to programs.

Compilation walks the IR once.  Each variable gets a slot in a flat frame
list; the compiler tracks which variables are in scope, so a use outside its
binding (or of a free variable) is an error before anything runs.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import LoomTypeError, LoomValueError
from ..ir import expr as E
from ..ir import stmt as S
from ..ir.function import IRModule, PrimFunc
from ..ir.recursion import deep_recursion
from ._args import Binder
from ._codegen import Code
from ._device import word_args
from ._expr import EXPR_RULES
from ._launch import Region
from ._stmt import STMT_RULES

__all__ = ["Context", "Program", "ImportResolver"]

def _deep() -> contextlib.AbstractContextManager[None]:
    """Long expression chains (an unrolled sum) compile and run as deep recursion; past the limit, a LoomError."""
    return deep_recursion("the interpreter")


def _rule(table: dict[type, Callable[[Any, Any], Code]], cls: type, what: str) -> Callable[[Any, Any], Code]:
    found = table.get(cls)
    if found is None:
        found = next((table[k] for k in cls.__mro__ if k in table), None)
        if found is None:
            raise LoomTypeError(f"the interpreter cannot evaluate {what} of type {cls.__name__}")
        table[cls] = found
    return found


class Compiler:
    """Compiles the nodes of one function."""

    def __init__(self, ctx: Context, fname: str) -> None:
        self.ctx = ctx
        self.fname = fname
        self.check_dims = ctx.check_dims
        self.slots: dict[int, int] = {}
        self._live: dict[int, int] = {}
        self._tags: dict[int, str | None] = {}
        self._keep: list[E.Var] = []  # ids stay unique while compiling
        self.region: Region | None = None  # the launch region being compiled (see _gpu)
        self.device_vars: set[int] = set()  # ids of handle Vars that hold device pointers

    # -- variables -------------------------------------------------------------
    def bind(self, var: E.Var, memory_tag: str | None = None) -> int:
        """Enter ``var``'s scope; a handle var also records its memory's dtype tag (None: unknown)."""
        key = id(var)
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = len(self.slots)
            self._keep.append(var)
        self._live[key] = self._live.get(key, 0) + 1
        if var.dtype.is_handle:
            self._tags[key] = memory_tag if self._tags.get(key, memory_tag) == memory_tag else None
        return slot

    def unbind(self, var: E.Var) -> None:
        key = id(var)
        self._live[key] -= 1
        if not self._live[key]:
            del self._live[key]

    def in_scope(self, var: E.Var) -> bool:
        return id(var) in self._live

    def slot_of(self, var: E.Var) -> int:
        if id(var) not in self._live:
            raise LoomValueError(f"{self.fname}: variable {var.name} ({var.dtype}) is used where nothing binds it "
                                 "(not a parameter, loop, let or allocation around this use)")
        return self.slots[id(var)]

    def data_slot(self, buf: Any) -> int:
        if id(buf.data) not in self._live:
            raise LoomValueError(f"{self.fname}: buffer {buf.name} is accessed, but its data pointer "
                                 f"{buf.data.name} is not bound by a parameter or an Allocate around the access")
        return self.slots[id(buf.data)]

    def memory_tag(self, var: E.Var) -> str | None:
        return self._tags.get(id(var))

    # -- nodes -----------------------------------------------------------------
    def expr(self, node: E.PrimExpr) -> Code:
        return _rule(EXPR_RULES, type(node), "an expression")(self, node)

    def stmt(self, node: S.Stmt) -> Code:
        return _rule(STMT_RULES, type(node), "a statement")(self, node)


class Program:
    """One compiled function: an argument binder and a body closure."""

    def __init__(self, func: PrimFunc, fname: str, ctx: Context) -> None:
        comp = Compiler(ctx, fname)
        self.name = fname
        self.func = func
        with _deep():
            self.binder = Binder(comp, func)
            self.body = comp.stmt(func.body).fn
        self.nslots = len(comp.slots)

    def run(self, args: tuple[Any, ...]) -> None:
        frame: list[Any] = [None] * self.nslots
        self.binder.bind(frame, args)
        self._execute(frame)

    def run_checked(self, call: Any) -> None:
        """Run on a ``BoundCall`` the runtime's argument checker already made for this function."""
        frame: list[Any] = [None] * self.nslots
        self.binder.bind_checked(frame, call)
        self._execute(frame)

    def _execute(self, frame: list[Any]) -> None:
        with np.errstate(all="ignore"), _deep():
            self.body(frame)

    def run_internal(self, args: tuple[Any, ...]) -> None:
        frame: list[Any] = [None] * self.nslots
        self.binder.bind_internal(frame, args)
        self.body(frame)

    def run_words(self, words: Sequence[int], device: Any) -> None:
        """Run on one 64-bit word per parameter; handle words are addresses in ``device``'s memory."""
        args = word_args(self.name, self.func, words, device)
        frame: list[Any] = [None] * self.nslots
        self.binder.bind_internal(frame, tuple(args))
        self._execute(frame)


class _Callee:
    """A function of the module, compiled on its first call (so recursion compiles)."""

    def __init__(self, ctx: Context, name: str) -> None:
        self.ctx, self.name = ctx, name
        self.program: Program | None = None

    def run_internal(self, args: tuple[Any, ...]) -> None:
        if self.program is None:
            func = self.ctx.module[self.name] if self.ctx.module is not None else None
            assert isinstance(func, PrimFunc)  # Context.callee checked it
            self.program = Program(func, self.name, self.ctx)
        self.program.run_internal(args)


#: Finds a function another module defines: ``name -> fn(words)``, None when unknown.
ImportResolver = Callable[[str], "Callable[[list[int]], None] | None"]


class Context:
    """What every function of one interpreter shares: module, externs, imports, options."""

    def __init__(self, module: IRModule | None, externs: dict[str, Callable[..., Any]] | None,
                 max_while_iterations: int, check_dims: bool, imports: ImportResolver | None = None) -> None:
        if imports is not None and not callable(imports):
            raise LoomTypeError(f"imports must be a callable name -> function (or None), got {type(imports).__name__}")
        self.imports = imports
        self.module = module
        self.externs = dict(externs or {})
        for name, fn in self.externs.items():
            if not callable(fn):
                raise LoomTypeError(f"externs[{name!r}] must be callable, got {type(fn).__name__}")
        if max_while_iterations < 0:
            raise LoomValueError(f"max_while_iterations must be >= 0, got {max_while_iterations}")
        self.max_while_iterations = max_while_iterations
        self.check_dims = check_dims
        self._callees: dict[str, _Callee] = {}

    def callee(self, name: str, caller: str) -> _Callee:
        if self.module is None:
            raise LoomValueError(f"{caller} calls the global function {name!r}; evaluate the IRModule that "
                                 "holds both functions instead of a lone PrimFunc (or give imports=)")
        if name not in self.module:
            raise LoomValueError(f"{caller} calls {name!r}, which the module does not define "
                                 f"(it has {sorted(self.module.functions)}) and no imports resolver is given")
        if not isinstance(self.module[name], PrimFunc):
            raise LoomTypeError(f"{caller} calls {name!r}, a {type(self.module[name]).__name__}, not a PrimFunc")
        found = self._callees.get(name)
        if found is None:
            found = self._callees[name] = _Callee(self, name)
        return found
