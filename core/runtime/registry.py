"""The process's global functions: Python callables registered by name.

``register_func(name, f)`` makes ``f`` the global function ``name``;
``get_global_func(name)`` returns it as a :class:`~loom.runtime.PackedFunc`
(one object per registration; calling it converts arguments and result as
:mod:`loom.runtime.packed_func` says).  Kernels call global functions with
:func:`loom.ir.intrin.call_packed`, and IR refers to one with
:class:`loom.ir.env_func.EnvFunc`; both look the name up when the call
happens, so a function registered (or replaced) after a build is the one that
runs, and an exported library calls whatever the loading process registered
under the name.

>>> @register_func("doc.registry.twice")
... def twice(x):
...     return 2 * x
>>> f = get_global_func("doc.registry.twice")
>>> f(21), f
(42, <loom.runtime.PackedFunc doc.registry.twice>)
>>> "doc.registry.twice" in list_global_func_names()
True
>>> get_global_func("doc.registry.missing", allow_missing=True) is None
True
>>> remove_global_func("doc.registry.twice")
"""

from __future__ import annotations

import threading
from typing import Any, Callable, overload

from ..errors import LoomTypeError, LoomValueError
from .packed_func import PackedFunc

__all__ = ["GlobalFuncError", "register_func", "get_global_func", "list_global_func_names", "remove_global_func",
           "lookup", "missing_message"]

_FUNCS: dict[str, PackedFunc] = {}
_LOCK = threading.Lock()


class GlobalFuncError(LoomValueError):
    """A global function name is missing, taken, or malformed."""


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str):
        raise LoomTypeError(f"{what}: the function name must be a str, got {type(name).__name__}")
    if not name:
        raise LoomValueError(f"{what}: the function name must not be empty")
    return name


@overload
def register_func(func_name: Callable[..., Any], f: None = None, override: bool = False) -> Callable[..., Any]: ...
@overload
def register_func(func_name: str, f: None = None,
                  override: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...
@overload
def register_func(func_name: str, f: Callable[..., Any], override: bool = False) -> Callable[..., Any]: ...
def register_func(func_name: Any, f: Any = None, override: bool = False) -> Any:
    """Register ``f`` as the global function ``func_name``; usable as a decorator.

    ``@register_func`` alone registers the function under its ``__name__``;
    ``@register_func("my.name")`` under ``"my.name"``.  Returns ``f`` itself;
    :func:`get_global_func` gives it wrapped in a :class:`PackedFunc` (a
    PackedFunc, such as ``module["name"]``, is registered as it is).

    :raises GlobalFuncError: when ``func_name`` is taken and ``override`` is false.
    :raises LoomTypeError: when ``f`` is not callable or the name is not a str.

    >>> register_func("doc.register.add", lambda a, b: a + b) is not None
    True
    >>> register_func("doc.register.add", lambda a, b: a - b)
    Traceback (most recent call last):
      ...
    loom.runtime.registry.GlobalFuncError: global function 'doc.register.add' is already registered; pass ...
    >>> remove_global_func("doc.register.add")
    """
    if callable(func_name) and f is None:  # @register_func without arguments
        name = func_name.name if isinstance(func_name, PackedFunc) else getattr(func_name, "__name__", "")
        return register_func(name, func_name, override)
    name = _check_name(func_name, "register_func")

    def add(func: Any) -> Any:
        if not callable(func):
            raise LoomTypeError(f"register_func({name!r}) needs a callable, got {type(func).__name__}")
        with _LOCK:
            if name in _FUNCS and not override:
                raise GlobalFuncError(f"global function {name!r} is already registered; pass override=True "
                                      "to replace it")
            _FUNCS[name] = func if isinstance(func, PackedFunc) else PackedFunc(func, name)
        return func

    return add if f is None else add(f)


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The global function ``name`` as a :class:`PackedFunc`; None when it is missing and ``allow_missing``.

    :raises GlobalFuncError: naming the function (and a few registered names) when it is missing.

    >>> get_global_func("doc.no.such.function")
    Traceback (most recent call last):
      ...
    loom.runtime.registry.GlobalFuncError: no global function 'doc.no.such.function' is registered (register ...
    """
    _check_name(name, "get_global_func")
    found = _FUNCS.get(name)
    if found is None and not allow_missing:
        raise GlobalFuncError(missing_message(name))
    return found


def missing_message(name: str) -> str:
    """Why ``name`` cannot be called: not registered (with close names when there are some)."""
    near = [n for n in sorted(_FUNCS) if n.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]][:5]
    hint = f"; registered with the same last part: {', '.join(near)}" if near else ""
    return f"no global function {name!r} is registered (register it with loom.register_func){hint}"


def list_global_func_names() -> list[str]:
    """The names of every registered global function, sorted.

    >>> names = list_global_func_names()
    >>> names == sorted(names)
    True
    """
    return sorted(_FUNCS)


def remove_global_func(name: str) -> None:
    """Unregister the global function ``name``.

    :raises GlobalFuncError: when it is not registered.

    >>> _ = register_func("doc.remove.me", print)
    >>> remove_global_func("doc.remove.me"); get_global_func("doc.remove.me", allow_missing=True) is None
    True
    """
    _check_name(name, "remove_global_func")
    with _LOCK:
        if _FUNCS.pop(name, None) is None:
            raise GlobalFuncError(f"cannot remove global function {name!r}: it is not registered")


def lookup(name: str) -> Callable[..., Any]:
    """The callable a kernel's packed call of ``name`` runs now, unconverted (:attr:`PackedFunc.func`).

    :raises GlobalFuncError: when ``name`` is not registered.
    """
    found = _FUNCS.get(name)
    if found is None:
        raise GlobalFuncError(missing_message(name))
    return found.func

