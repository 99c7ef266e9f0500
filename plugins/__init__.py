"""``loom.plugins``: the hooks a backend implements and the manager that finds them.

A plugin is a module of functions marked :data:`hookimpl` and named after the
hooks in :mod:`loom.plugins.hookspecs`.  Installed plugins are found through the
``loom`` entry-point group; :func:`register` adds one at run time.

>>> import loom.plugins as plugins
>>> "interp" in plugins.collect_target_kinds()
True
"""

from __future__ import annotations

import pluggy

from .calls import call_first
from .hookspecs import hookspec
from .manager import (
    PluginInfo, PluginLoadWarning, broken_plugins, collect_target_kinds, get_plugin_manager,
    list_plugins, register, reset_plugin_manager, unregister,
)

#: Marks a function as the implementation of the hook it is named after.
hookimpl = pluggy.HookimplMarker("loom")

__all__ = [
    "hookimpl",
    "hookspec",
    "get_plugin_manager",
    "register",
    "unregister",
    "list_plugins",
    "broken_plugins",
    "collect_target_kinds",
    "call_first",
    "reset_plugin_manager",
    "PluginInfo",
    "PluginLoadWarning",
]
