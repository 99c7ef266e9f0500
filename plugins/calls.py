"""Calling a first-result hook so that a plugin's bug names the plugin.

pluggy runs a ``firstresult`` hook's implementations itself and lets any
exception escape as it is; :func:`call_first` walks them in pluggy's order
instead, so that an implementation that raises something other than a
``LoomError`` becomes a :class:`~loom.errors.PluginError` naming the plugin
and the hook call.
"""

from __future__ import annotations

from typing import Any

from loom.errors import LoomError, PluginError

from .manager import get_plugin_manager

__all__ = ["call_first"]


def call_first(hook: str, **kwargs: Any) -> tuple[Any, str | None]:
    """Call a first-result hook as pluggy would, naming the plugin when its implementation breaks.

    Returns ``(answer, plugin name)`` of the first implementation (most recently
    registered first, ``tryfirst``/``trylast`` honoured) that answers something
    other than None; ``(None, None)`` when none does.  A LoomError from a plugin
    passes through; any other exception becomes a :class:`PluginError` naming
    the plugin and the hook.

    >>> call_first("loom_backend", target_kind="no-such-kind")
    (None, None)
    """
    caller = getattr(get_plugin_manager().hook, hook)
    for impl in reversed(caller.get_hookimpls()):
        if impl.hookwrapper or impl.wrapper:
            continue
        try:
            answer = impl.function(*[kwargs[a] for a in impl.argnames])
        except LoomError:
            raise
        except Exception as err:  # noqa: BLE001 - the plugin's bug, named
            raise PluginError(f"plugin {impl.plugin_name!r} raised in {hook}"
                              f"({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}): "
                              f"{type(err).__name__}: {err}") from err
        if answer is not None:
            return answer, impl.plugin_name
    return None, None
