"""Passes and the pass context.

A :class:`Pass` turns an :class:`~loom.ir.IRModule` into another.  Concrete passes
are built with the decorators :func:`prim_func_pass` (a function applied to every
PrimFunc of the module) and :func:`module_pass`, and combined with
:class:`Sequential`.  A :class:`PassContext` (``with PassContext(...):``) carries
the optimisation level, required/disabled pass names, instruments and the
configuration options that passes read with :meth:`PassContext.get_config`.

Every configuration option is declared once with :func:`register_config_option`
(name, type, default); an unknown option is an error that lists the known ones.

>>> import loom
>>> from loom.transform import prim_func_pass, PassContext
>>> @prim_func_pass(name="Identity")
... def identity(func, mod, ctx):
...     return func
>>> identity.info.name
'Identity'
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable, Sequence

import attrs

from ..errors import LoomError, LoomTypeError, LoomValueError
from ..ir.function import IRModule, PrimFunc

__all__ = [
    "PassInfo", "Pass", "ModulePass", "PrimFuncPass", "Sequential", "PassContext", "PassInstrument",
    "module_pass", "prim_func_pass", "register_config_option", "list_config_options", "ConfigOption",
]

_log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# configuration options


@attrs.frozen
class ConfigOption:
    """A declared configuration option: its key, Python type, default and meaning."""

    key: str
    type: type | tuple[type, ...]
    default: Any
    doc: str = ""

    def check(self, value: Any) -> Any:
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        if bool in types and isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            return bool(value)
        if int in types and isinstance(value, bool) and bool not in types:
            raise LoomTypeError(f"config option {self.key!r} expects {_names(types)}, got bool")
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            return value
        if not isinstance(value, types):
            raise LoomTypeError(f"config option {self.key!r} expects {_names(types)}, got {type(value).__name__}")
        return value


def _names(types: tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in types)


_OPTIONS: dict[str, ConfigOption] = {}


def register_config_option(key: str, type_: type | tuple[type, ...], default: Any, doc: str = "") -> ConfigOption:
    """Declare a configuration option that passes read through :meth:`PassContext.get_config`."""
    if key in _OPTIONS:
        raise LoomError(f"config option {key!r} is already registered")
    opt = ConfigOption(key, type_, default, doc)
    _OPTIONS[key] = opt
    return opt


def list_config_options() -> dict[str, ConfigOption]:
    """Every declared option, by key."""
    return dict(_OPTIONS)


# The classic build_config options (seed 003), as ``tir.<name>`` keys.  The defaults
# are the seed's: where classic TVM's code differed from its docstring, the seed wins.
_BUILD_CONFIG_OPTIONS: list[tuple[str, type | tuple[type, ...], Any, str]] = [
    ("auto_unroll_max_step", int, 0, "unroll loops whose total step count is at most this (0: off)"),
    ("auto_unroll_max_depth", int, 8, "the deepest loop nest level that may be unrolled automatically"),
    ("auto_unroll_max_extent", int, 0, "unroll constant loops with at most this extent (0: off)"),
    ("unroll_explicit", bool, True, "unroll in the IR (True) or leave an unroll hint for codegen"),
    ("detect_global_barrier", bool, True, "detect barriers across thread blocks"),
    ("partition_const_loop", bool, False, "split constant loops at their guard conditions"),
    ("data_alignment", int, -1, "alignment of argument buffers in bytes (-1: 64)"),
    ("offset_factor", int, 0, "factor of argument buffers' elem_offset (0: no offset field)"),
    ("restricted_func", bool, True, "buffer arguments never overlap (restrict / noalias)"),
    ("double_buffer_split_loop", int, 2, "split double-buffered loops by this factor (0: no split)"),
    ("add_lower_pass", (list, tuple), (), "extra passes: [(phase, pass), ...]"),
    ("dump_pass_ir", bool, False, "write the IR after every pass to numbered files"),
    ("disable_vectorize", bool, False, "lower vectorized loops to serial loops"),
    ("instrument_bound_checkers", bool, False, "check every buffer access against its bounds at run time"),
]
for _key, _type, _default, _doc in _BUILD_CONFIG_OPTIONS:
    register_config_option(f"tir.{_key}", _type, _default, _doc)

# Read by every loom.arith.Analyzer made without an explicit choice, so passes see it.
register_config_option("arith.assume_no_overflow", bool, False,
                       "simplify as if signed integer arithmetic never overflowed (TVM's index assumption)")


# ---------------------------------------------------------------------------
# pass context


class PassInstrument:
    """Hooks around passes.  Subclass and override what you need.

    ``should_run`` returning False skips the pass.  The ``run_*`` hooks receive the
    module and the pass's :class:`PassInfo`.
    """

    def enter_pass_ctx(self) -> None: ...
    def exit_pass_ctx(self) -> None: ...

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None: ...
    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None: ...


_STATE = threading.local()


class PassContext:
    """The configuration passes run under.  ``with PassContext(...):`` makes it current.

    :param opt_level: passes with a higher ``opt_level`` are skipped unless required.
    :param required_pass: names of passes that always run.
    :param disabled_pass: names of passes that never run.
    :param instruments: :class:`PassInstrument` objects.
    :param config: ``{option key: value}``; every key must be a declared option.
    """

    def __init__(self, opt_level: int = 2, required_pass: Iterable[str] = (), disabled_pass: Iterable[str] = (),
                 instruments: Sequence[PassInstrument] = (), config: dict[str, Any] | None = None) -> None:
        self.opt_level = opt_level
        self.required_pass = frozenset(required_pass)
        self.disabled_pass = frozenset(disabled_pass)
        self.instruments = list(instruments)
        self.config: dict[str, Any] = {}
        for key, v in (config or {}).items():
            opt = _OPTIONS.get(key)
            if opt is None:
                known = ", ".join(sorted(_OPTIONS))
                raise LoomValueError(f"unknown config option {key!r}; known options: {known}")
            self.config[key] = opt.check(v)

    def get_config(self, key: str, default: Any = attrs.NOTHING) -> Any:
        """The value of ``key`` here, else ``default``, else the option's declared default."""
        if key in self.config:
            return self.config[key]
        if default is not attrs.NOTHING:
            return default
        opt = _OPTIONS.get(key)
        if opt is None:
            raise LoomValueError(f"unknown config option {key!r}")
        return opt.default

    def pass_enabled(self, info: PassInfo) -> bool:
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return info.opt_level <= self.opt_level

    @staticmethod
    def current() -> PassContext:
        """The innermost active context (a default one when none is active)."""
        stack = getattr(_STATE, "stack", None)
        if stack:
            return stack[-1]
        default = getattr(_STATE, "default", None)
        if default is None:
            default = _STATE.default = PassContext()
        return default

    def __enter__(self) -> PassContext:
        stack = getattr(_STATE, "stack", None)
        if stack is None:
            stack = _STATE.stack = []
        stack.append(self)
        for inst in self.instruments:
            inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc: Any) -> None:
        for inst in self.instruments:
            inst.exit_pass_ctx()
        _STATE.stack.pop()

    def __repr__(self) -> str:
        return f"PassContext(opt_level={self.opt_level}, config={self.config})"


# ---------------------------------------------------------------------------
# passes


@attrs.frozen
class PassInfo:
    """A pass's name, the optimisation level it needs, and passes it requires."""

    name: str
    opt_level: int = 0
    required: tuple[str, ...] = ()


def _name_pass(err: LoomError, name: str) -> None:
    """Say in ``err``'s message which pass raised it (the innermost one, once)."""
    if getattr(err, "pass_name", None) is not None:
        return
    err.pass_name = name  # type: ignore[attr-defined]
    if err.args and isinstance(err.args[0], str):
        err.args = (f"{err.args[0]} (in pass {name})", *err.args[1:])


class Pass:
    """A transformation of an IRModule.  Call it with a module (or a PrimFunc)."""

    info: PassInfo

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, mod: IRModule | PrimFunc) -> Any:
        if isinstance(mod, PrimFunc):
            return self(IRModule({"main": mod}))["main"]
        if not isinstance(mod, IRModule):
            raise LoomTypeError(f"pass {self.info.name} expects an IRModule or a PrimFunc, got {type(mod).__name__}")
        ctx = PassContext.current()
        if not ctx.pass_enabled(self.info) or not all(i.should_run(mod, self.info) for i in ctx.instruments):
            return mod
        for inst in ctx.instruments:
            inst.run_before_pass(mod, self.info)
        start = time.perf_counter()
        try:
            out = self.transform(mod, ctx)
        except LoomError as err:
            _name_pass(err, self.info.name)
            raise
        except Exception as err:  # name the pass that broke
            wrapped = LoomError(f"pass {self.info.name} failed: {type(err).__name__}: {err}")
            wrapped.pass_name = self.info.name  # type: ignore[attr-defined]
            raise wrapped from err
        if not isinstance(out, IRModule):
            raise LoomTypeError(f"pass {self.info.name} returned a {type(out).__name__}, not an IRModule")
        _log.debug("pass %s: %.3f ms", self.info.name, (time.perf_counter() - start) * 1e3)
        for inst in ctx.instruments:
            inst.run_after_pass(out, self.info)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name})"


class ModulePass(Pass):
    """A pass from a function ``fn(mod, ctx) -> mod``."""

    def __init__(self, fn: Callable[[IRModule, PassContext], IRModule], info: PassInfo) -> None:
        self.fn, self.info = fn, info

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fn(mod, ctx)


class PrimFuncPass(Pass):
    """A pass from a function ``fn(func, mod, ctx) -> func`` applied to every PrimFunc.

    Returning None drops the function from the module.
    """

    def __init__(self, fn: Callable[[PrimFunc, IRModule, PassContext], PrimFunc | None], info: PassInfo) -> None:
        self.fn, self.info = fn, info

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        funcs: dict[str, Any] = {}
        changed = False
        for name, f in mod.functions.items():
            if isinstance(f, PrimFunc):
                new = self.fn(f, mod, ctx)
                changed |= new is not f
                if new is not None:
                    funcs[name] = new
            else:
                funcs[name] = f
        return mod.with_(functions=funcs) if changed else mod


class Sequential(Pass):
    """Run passes in order (each one still subject to the context's enable rules)."""

    def __init__(self, passes: Sequence[Pass], opt_level: int = 0, name: str = "sequential") -> None:
        for p in passes:
            if not isinstance(p, Pass):
                raise LoomTypeError(f"Sequential takes Pass objects, got {type(p).__name__}")
        self.passes = list(passes)
        self.info = PassInfo(name, opt_level)

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            mod = p(mod)
        return mod


def _decorator(kind: type, fn: Any, opt_level: int, name: str | None, required: Sequence[str]) -> Any:
    def wrap(f: Any) -> Pass:
        return kind(f, PassInfo(name or f.__name__, opt_level, tuple(required)))

    return wrap(fn) if fn is not None else wrap


def module_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                required: Sequence[str] = ()) -> Any:
    """Make a module pass from ``fn(mod, ctx) -> mod`` (usable with or without arguments)."""
    return _decorator(ModulePass, pass_func, opt_level, name, required)


def prim_func_pass(pass_func: Any = None, opt_level: int = 0, name: str | None = None,
                   required: Sequence[str] = ()) -> Any:
    """Make a pass from ``fn(func, mod, ctx) -> func`` applied to every PrimFunc."""
    return _decorator(PrimFuncPass, pass_func, opt_level, name, required)
