"""The statements and intrinsics of ``loom.language``: ``T.serial``, ``T.alloc_shared``, ``T.exp``...

Each is a :class:`Keyword` object that the hybrid-script parser recognizes by
identity, however it is reached (``T.serial``, ``from loom.language import
serial``): it stands for a keyword of the hybrid language (docs/hybrid.md) with
TVMScript's and TileLang's spelling.  Called from plain Python (emulation), a
keyword does what its hybrid counterpart does on numpy: loops are ranges,
allocations are zero-filled arrays, math is numpy's.

>>> serial(2, 5), list(grid(2, 2))
(range(2, 5), [(0, 0), (0, 1), (1, 0), (1, 1)])
>>> alloc_shared((2,), "float32")
array([0., 0.], dtype=float32)
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Optional

import numpy as np

from ..errors import LoomTypeError
from ..hybrid import runtime as emulation
from ..hybrid.loops import THREAD_TAGS

__all__ = ["Keyword", "serial", "parallel", "vectorized", "unroll", "thread_binding", "grid", "alloc_shared",
           "alloc_local", "alloc_fragment", "exp", "log", "sqrt", "tanh", "sigmoid", "floor", "ceil", "power",
           "abs", "max", "min", "likely", "cast", "KEYWORDS"]

# (parser, call node, args, kwargs) -> (args, kwargs) in the hybrid keyword's own form.
Adapter = Callable[[Any, Any, list, dict], "tuple[list, dict]"]


class Keyword:
    """A ``loom.language`` keyword: the hybrid keyword ``hybrid`` under the name ``name``.

    ``loop`` keywords only appear as a ``for`` loop's iterator; ``adapt`` maps the
    arguments of this spelling onto the hybrid keyword's (``T.alloc_shared(shape,
    dtype)`` is ``allocate(shape, dtype, "shared")``).
    """

    __loom_keyword__ = True

    def __init__(self, name: str, hybrid: str, emulate: Callable[..., Any], loop: bool = False,
                 adapt: Optional[Adapter] = None) -> None:
        self.name, self.hybrid, self.emulate, self.loop, self.adapt = name, hybrid, emulate, loop, adapt
        self.__doc__ = f"``T.{name}``: hybrid script's ``{hybrid}`` (see loom.language)."

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.emulate(*args, **kwargs)

    def __repr__(self) -> str:
        return f"T.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickled by reference to this module's attribute


def _with_scope(name: str, scope: str) -> Adapter:
    def adapt(p: Any, node: Any, args: list, kwargs: dict) -> tuple[list, dict]:
        if len(args) > 2 or "scope" in kwargs:
            raise p.error(node, f"T.{name} takes (shape, dtype); its scope is {scope}")
        return list(args), {**kwargs, "scope": scope}

    return adapt


def _thread_binding_args(p: Any, node: Any, args: list, kwargs: dict) -> tuple[list, dict]:
    """``T.thread_binding(extent, thread=tag)`` or ``(0, extent, thread=tag)`` -> ``bind(tag, extent)``."""
    tag = kwargs.pop("thread", None)
    if kwargs:
        raise p.error(node, f"T.thread_binding has no parameter(s) {sorted(kwargs)}")
    if tag is None and len(args) >= 2 and isinstance(args[-1], str):
        tag, args = args[-1], args[:-1]
    if tag is None:
        raise p.error(node, f"T.thread_binding needs thread=, one of {list(THREAD_TAGS)}")
    if not isinstance(tag, str) or tag not in THREAD_TAGS:
        raise p.error(node, f"T.thread_binding(thread=...) is one of {list(THREAD_TAGS)}, got {tag!r}")
    if len(args) == 2:
        begin, extent = args
        if not (isinstance(begin, int) and begin == 0):
            raise p.error(node, "T.thread_binding(begin, end, ...) must begin at 0 (thread indices start there)")
        args = [extent]
    if len(args) != 1:
        raise p.error(node, "T.thread_binding takes (extent, thread=tag) or (0, extent, thread=tag)")
    return [tag, args[0]], {}


def _emulated_range(*args: Any, **kwargs: Any) -> range:
    return range(*(int(a) for a in args))


def _emulated_binding(*args: Any, thread: Optional[str] = None) -> range:
    args = tuple(a for a in args if not isinstance(a, str))
    return range(*(int(a) for a in args))


def _emulated_grid(*extents: Any) -> Any:
    return itertools.product(*(range(int(e)) for e in extents))


def _alloc(scope: str) -> Callable[..., np.ndarray]:
    def alloc(shape: Any, dtype: Any = "float32") -> np.ndarray:
        return emulation.allocate(shape, dtype, "local" if scope == "local.fragment" else scope)

    return alloc


def _cast(value: Any, dtype: Any) -> Any:
    from .dtypes import normalize_dtype

    t = normalize_dtype(dtype, "T.cast")
    if t == "bfloat16":
        raise LoomTypeError("numpy has no bfloat16: T.cast(x, 'bfloat16') works inside kernels only")
    return np.dtype(str(t)).type(value)


serial = Keyword("serial", "serial", _emulated_range, loop=True)
parallel = Keyword("parallel", "parallel", _emulated_range, loop=True)
vectorized = Keyword("vectorized", "vectorize", _emulated_range, loop=True)
unroll = Keyword("unroll", "unroll", _emulated_range, loop=True)
thread_binding = Keyword("thread_binding", "bind", _emulated_binding, loop=True, adapt=_thread_binding_args)
grid = Keyword("grid", "grid", _emulated_grid, loop=True)
alloc_shared = Keyword("alloc_shared", "allocate", _alloc("shared"), adapt=_with_scope("alloc_shared", "shared"))
alloc_local = Keyword("alloc_local", "allocate", _alloc("local"), adapt=_with_scope("alloc_local", "local"))
alloc_fragment = Keyword("alloc_fragment", "allocate", _alloc("local"), adapt=_with_scope("alloc_fragment", "local"))
exp = Keyword("exp", "exp", np.exp)
log = Keyword("log", "log", np.log)
sqrt = Keyword("sqrt", "sqrt", np.sqrt)
tanh = Keyword("tanh", "tanh", np.tanh)
sigmoid = Keyword("sigmoid", "sigmoid", emulation.sigmoid)
floor = Keyword("floor", "floor", np.floor)
ceil = Keyword("ceil", "ceil", np.ceil)
power = Keyword("power", "power", np.power)
abs = Keyword("abs", "abs", np.abs)  # noqa: A001 - T.abs, as TVMScript spells it
max = Keyword("max", "max", lambda *xs: functools.reduce(np.maximum, xs))  # noqa: A001 - T.max
min = Keyword("min", "min", lambda *xs: functools.reduce(np.minimum, xs))  # noqa: A001 - T.min
likely = Keyword("likely", "likely", emulation.likely)
cast = Keyword("cast", "cast", _cast)

#: Every keyword of ``loom.language`` by name.
KEYWORDS = {k.name: k for k in (serial, parallel, vectorized, unroll, thread_binding, grid, alloc_shared, alloc_local,
                                alloc_fragment, exp, log, sqrt, tanh, sigmoid, floor, ceil, power, abs, max, min,
                                likely, cast)}
