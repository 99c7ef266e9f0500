"""The hook specifications: everything a Loom plugin can contribute.

A plugin is a module (or object) with functions marked ``@loom.plugins.hookimpl``
and named after a hook below.  Backends ship as separate distributions and are
found through the ``loom`` entry-point group; see ``docs/backend-authors.md``.

Hooks marked *firstresult* stop at the first implementation that returns
something other than None; the others collect every plugin's answer in a list.

Errors name the plugin that caused them: ``loom_lower_passes``,
``loom_intrinsic_rules`` and ``loom_backend`` (and the passes, rules and backend
stages they return) raising something other than a :class:`loom.LoomError` give a
:class:`loom.errors.PluginError` naming it (a LoomError passes through as raised);
a ``loom_target_kinds`` that raises or breaks its contract gets the plugin
reported broken (``loom.plugins.broken_plugins()``).
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("loom")


@hookspec
def loom_target_kinds() -> list[Any]:
    """Contribute target kinds.

    :return: a list of :class:`loom.target.TargetKind` (name, device type,
        attribute schema with types and defaults, default keys).  A kind name
        may be contributed by one plugin only: a plugin contributing a kind an
        earlier plugin has (the built-in one first) is reported broken by
        ``loom.plugins.broken_plugins()`` and unregistered.
    """


@hookspec
def loom_intrinsic_rules(target: Any) -> dict[str, Any] | None:
    """Contribute lowering rules for intrinsic ops when compiling for ``target``.

    LowerIntrin applies them before code generation; a rule may read the
    target's attributes (a fast-math flag, the architecture).

    :param target: the :class:`loom.target.Target` being compiled for.
    :return: ``{op_name: rule}`` where ``rule(call) -> PrimExpr`` rewrites a
        ``Call`` of that op into something the backend emits (another op, a
        ``call_pure_extern``...), or None for the kinds this plugin does not serve.
    """


@hookspec
def loom_lower_passes(target: Any, phase: int) -> Any:
    """Contribute lowering passes to run for ``target`` at ``phase`` (0-3).

    :param target: the :class:`loom.target.Target` being built for.
    :param phase: the classic lowering phase; see ``loom.lower``.
    :return: None; or a list of passes (``Pass`` objects or ``Stmt -> Stmt``
        callables) that run after the phase's built-in passes; or a dict
        ``{"before": [...], "after": [...]}`` placing passes on either side of them.
        A pass that raises (other than a LoomError) fails the build with a
        PluginError naming it, the plugin and the phase.
    """


@hookspec(firstresult=True)
def loom_backend(target_kind: str) -> Any:
    """The backend that builds ``target_kind``: a :class:`loom.backend.Backend`.

    *firstresult*: the first plugin that serves the kind answers; the others
    return None.  The core drives its stages (options, render, compile, load)
    and caches what ``compile`` returns on disk.

    :param target_kind: the kind name (``"llvm"``, ``"cuda"``...).
    :return: a Backend, or None when this plugin does not build the kind.
    """


@hookspec(firstresult=True)
def loom_device_api(device_type: int) -> Any:
    """The memory of a DLPack device type: a :class:`loom.runtime.device_api.DeviceAPI`.

    *firstresult*.  The core serves the CPU (type 1).

    :param device_type: DLPack device type (cpu=1, cuda=2, ext_dev=12).
    :return: a DeviceAPI (allocate, free, copies, synchronize), or None when
        this plugin does not serve it.
    """


@hookspec(firstresult=True)
def loom_load_module(path: str, fmt: str) -> Any:
    """Load a module exported by ``export_library``.

    *firstresult*.

    :param path: the file written by ``export_library``.
    :param fmt: the format recorded in the file (``"llvm"``, ``"c"``, ``"interp"``...).
    :return: a runtime Module, or None when this plugin does not read ``fmt``.
    """
