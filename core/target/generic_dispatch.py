"""``generic_func``: a Python function with per-target-key overrides, as TVM's classic API had.

The function called depends on the target in scope (``with loom.Target(...)``): the
first of the target's keys (``-device`` name first, then the user keys, then the
kind's default keys) that has an override wins; with no target, or no matching key,
the generic definition runs.

>>> import loom
>>> @loom.target.generic_func
... def schedule_name(x):
...     return f"generic {x}"
>>> @schedule_name.register(["cpu"])
... def _(x):
...     return f"cpu {x}"
>>> schedule_name(1)
'generic 1'
>>> with loom.Target("llvm"):
...     schedule_name(2)
'cpu 2'
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Union

from ..errors import TargetError
from .target import Target

__all__ = ["GenericFunc", "generic_func", "create", "current_target"]


class GenericFunc:
    """A generic definition plus overrides keyed by target key; see :func:`generic_func`."""

    def __init__(self, fdefault: Callable[..., Any]) -> None:
        if not callable(fdefault):
            raise TargetError(f"generic_func expects a function, got {type(fdefault).__name__}")
        self.fdefault = fdefault
        self.overrides: dict[str, Callable[..., Any]] = {}
        self.__name__: str = getattr(fdefault, "__name__", "generic_func")
        functools.update_wrapper(self, fdefault)

    def register(self, key: Union[str, list[str], tuple[str, ...]], func: Callable[..., Any] | None = None,
                 override: bool = False) -> Any:
        """Use ``func`` for targets with any of ``key`` (a key or a list); usable as a decorator.

        Registering a key twice is a TargetError unless ``override=True``.
        """
        keys = [key] if isinstance(key, str) else list(key)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise TargetError(f"{self.__name__}.register expects target keys (non-empty strings), got {key!r}")

        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            taken = [k for k in keys if k in self.overrides and not override]
            if taken:
                raise TargetError(f"{self.__name__} already has an override for target key(s) {taken}; "
                                  "pass override=True to replace it")
            for k in keys:
                self.overrides[k] = f
            return f

        return add if func is None else add(func)

    def dispatch(self, target: Target | None = None) -> Callable[..., Any]:
        """The function that runs for ``target`` (default: the target in scope)."""
        target = Target.current() if target is None else target
        for k in () if target is None else target.keys:
            if k in self.overrides:
                return self.overrides[k]
        return self.fdefault

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dispatch()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<generic_func {self.__name__} overrides={sorted(self.overrides)}>"


def generic_func(fdefault: Callable[..., Any]) -> GenericFunc:
    """Make ``fdefault`` a generic function: ``.register(keys)`` adds per-target overrides."""
    return GenericFunc(fdefault)


def create(target: Any) -> Target:
    """TVM's ``tvm.target.create``: the same as ``loom.Target(target)``.

    >>> import loom
    >>> loom.target.create("llvm -model=x86").model
    'x86'
    """
    return Target(target)


def current_target(allow_none: bool = True) -> Target | None:
    """The target in scope (TVM's ``tvm.target.current_target``); see :meth:`Target.current`."""
    return Target.current(allow_none)
