"""The core's own plugin: the ``interp`` target kind, its backend, and the CPU's memory.

It is registered through the same plugin manager as the installed backends
(pytest's ``default_plugins`` pattern), so the core has no second code path.
``interp`` runs a lowered program on the reference interpreter: slow, but it
needs no compiler or GPU, and it is the oracle every backend is tested against.
"""

from __future__ import annotations

from typing import Any

from loom.plugins import hookimpl


@hookimpl
def loom_target_kinds() -> list[Any]:
    """Contribute the ``interp`` kind (device cpu, no attributes)."""
    from loom.target import TargetKind

    return [TargetKind("interp", "cpu", {}, default_keys=("cpu", "interp"),
                       doc="reference interpreter: runs any lowered program, no compiler needed")]


@hookimpl
def loom_backend(target_kind: str) -> Any:
    """The ``interp`` backend: lowered IRModules run on the reference interpreter."""
    if target_kind != "interp":
        return None
    from loom.runtime.interp_module import InterpBackend

    return InterpBackend()


@hookimpl
def loom_load_module(path: str, fmt: str) -> Any:
    """Load a module file exported by an ``interp`` Module."""
    from loom.runtime.interp_module import FORMAT, InterpModule

    if fmt != FORMAT:
        return None
    return InterpModule.load(path)


@hookimpl
def loom_device_api(device_type: int) -> Any:
    """The CPU's memory (DLPack device type 1): aligned host buffers."""
    if device_type != 1:
        return None
    from loom.runtime.device_api import CPU_DEVICE_API

    return CPU_DEVICE_API
