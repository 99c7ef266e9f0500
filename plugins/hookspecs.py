"""The hook specifications: everything a Loom plugin can contribute.

A plugin is a module (or object) with functions marked ``@loom.plugins.hookimpl``
and named after a hook below.  Backends ship as separate distributions and are
found through the ``loom`` entry-point group; see ``docs/backend-authors.md``.

Hooks marked *firstresult* stop at the first implementation that returns
something other than None; the others collect every plugin's answer in a list.
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
        may be contributed by one plugin only.
    """


@hookspec
def loom_intrinsic_rules(target_kind: str) -> dict[str, Any] | None:
    """Contribute lowering rules for intrinsic ops on ``target_kind``.

    :param target_kind: the kind being compiled for (``"llvm"``, ``"cuda"``...).
    :return: ``{op_name: rule}`` where ``rule(call) -> PrimExpr`` rewrites a
        ``Call`` of that op into something the backend emits, or None.
    """


@hookspec
def loom_lower_passes(target: Any, phase: int) -> list[Any] | None:
    """Contribute lowering passes to run for ``target`` at ``phase`` (0-3).

    :param target: the :class:`loom.target.Target` being built for.
    :param phase: the classic lowering phase; see ``loom.lower``.
    :return: passes (``Pass`` objects or ``Stmt -> Stmt`` callables), or None.
    """


@hookspec(firstresult=True)
def loom_codegen(mod: Any, target: Any) -> Any:
    """Turn a lowered IRModule into a runtime Module for ``target``.

    *firstresult*: the first plugin that handles ``target.kind.name`` answers;
    the others return None.

    :param mod: the lowered :class:`loom.ir.IRModule` (device or host part).
    :param target: the :class:`loom.target.Target`.
    :return: a runtime Module, or None when this plugin does not handle the kind.
    """


@hookspec(firstresult=True)
def loom_device_api(device_type: int) -> Any:
    """The device API (allocate, copy, synchronize) for a DLPack device type.

    *firstresult*.

    :param device_type: DLPack device type (cpu=1, cuda=2).
    :return: a DeviceAPI object, or None when this plugin does not serve it.
    """


@hookspec(firstresult=True)
def loom_load_module(path: str, fmt: str) -> Any:
    """Load a module exported by ``export_library``.

    *firstresult*.

    :param path: the file written by ``export_library``.
    :param fmt: the format recorded in the file (``"so"``, ``"cubin"``...).
    :return: a runtime Module, or None when this plugin does not read ``fmt``.
    """
