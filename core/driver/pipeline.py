"""The lowering and build pipelines, as plain lists read top to bottom.

Each entry is ``(name, factory)``; a factory returns a fresh
:class:`~loom.transform.Pass`.  Factories import their pass module only when
called, so importing the driver stays cheap and a missing pass module is an
error naming the module, not an ImportError from deep inside ``lower``.

Plugin passes (the ``loom_lower_passes(target, phase)`` hook) run before or after
the built-in passes of their phase, as the plugin asks, and user passes
(``build_config(add_lower_pass=...)``) last: plugin "before", built-in, plugin
"after", user.

>>> [name for name, _ in PHASE_2]
['LoopPartition', 'VectorizeLoop', 'InjectVirtualThread', 'InjectDoubleBuffer', 'StorageRewrite', 'UnrollLoop']
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from ..errors import LoomError, LoomTypeError
from ..transform.pass_base import Pass

__all__ = [
    "PassFactory", "lazy_pass", "PHASE_0", "PHASE_1", "PHASE_2", "PHASE_3", "API", "PHASES",
    "SIMPLE_MODE_SKIPS", "DEVICE_SPLIT", "DEVICE_BUILD", "HOST_BUILD", "HOST_BUILD_GPU_THREADS", "host_build", "instantiate",
]

PassFactory = Callable[[], Pass]


def lazy_pass(module: str, factory: str, *args: Any) -> PassFactory:
    """``loom.transform.<module>.<factory>(*args)``, imported when first needed."""

    def make() -> Pass:
        full = f"loom.transform.{module}"
        try:
            mod = importlib.import_module(full)
        except ModuleNotFoundError as err:
            if err.name is not None and full.startswith(err.name):
                raise LoomError(f"the lowering pipeline needs pass {factory} from module {full}, "
                                f"which is not installed ({err})") from None
            raise
        fn = getattr(mod, factory, None)
        if fn is None:
            raise LoomError(f"the lowering pipeline needs pass {factory}, but module {full} does not define it")
        p = fn(*args)
        if not isinstance(p, Pass):
            raise LoomTypeError(f"{full}.{factory}() returned a {type(p).__name__}, not a Pass")
        return p

    make.__qualname__ = f"{factory}({', '.join(map(repr, args))})"
    return make


# Phase 0 has no built-in passes: it is the slot right after the schedule becomes IR.
PHASE_0: list[tuple[str, PassFactory]] = []

PHASE_1 = [
    ("InjectPrefetch", lazy_pass("inject_prefetch", "InjectPrefetch")),  # reads te tensors: before flattening
    ("StorageFlatten", lazy_pass("storage_flatten", "StorageFlatten")),
    ("CanonicalSimplify", lazy_pass("simplify", "CanonicalSimplify")),  # canonical form of the flat indices
    # Before LoopPartition: a split's tail is still one guard, from which the ranges are exact and short.
    ("EntryAccessChecks", lazy_pass("entry_checks", "EntryAccessChecks")),
]

PHASE_2 = [
    ("LoopPartition", lazy_pass("loop_partition", "LoopPartition")),
    ("VectorizeLoop", lazy_pass("vectorize", "VectorizeLoop")),  # honours disable_vectorize itself
    ("InjectVirtualThread", lazy_pass("inject_virtual_thread", "InjectVirtualThread")),
    ("InjectDoubleBuffer", lazy_pass("double_buffer", "InjectDoubleBuffer")),
    ("StorageRewrite", lazy_pass("storage_rewrite", "StorageRewrite")),
    ("UnrollLoop", lazy_pass("unroll", "UnrollLoop")),
]

PHASE_3 = [
    ("Simplify", lazy_pass("simplify", "Simplify")),
    ("RemoveNoOp", lazy_pass("remove_no_op", "RemoveNoOp")),
    ("RewriteUnsafeSelect", lazy_pass("rewrite_unsafe_select", "RewriteUnsafeSelect")),
]

# After phase 3: bind the arguments (skipped in simple_mode).
API = [
    ("MakeAPI", lazy_pass("make_api", "MakeAPI")),
]

# After MakeAPI, for a schedule whose stages run on different devices: a function per stage,
# and the copies between devices in the host function.
DEVICE_SPLIT = [
    ("SplitDevices", lazy_pass("split_devices", "SplitDevices")),
]

PHASES = (PHASE_0, PHASE_1, PHASE_2, PHASE_3)

#: What ``lower(..., simple_mode=True)`` leaves out (seed 003).
SIMPLE_MODE_SKIPS = frozenset({"EntryAccessChecks", "LoopPartition", "UnrollLoop", "MakeAPI"})

# build(), for a device target: split the kernels out, put the host code's buffers on the
# device, then barriers and intrinsics.  Every function of the split module goes through
# these (each pass looks at the function's own attrs; host functions have no barriers to insert).
DEVICE_BUILD = [
    ("SplitHostDevice", lazy_pass("split_host_device", "SplitHostDevice")),
    ("PlanDeviceMemory", lazy_pass("device_memory", "PlanDeviceMemory")),
    ("LowerThreadAllreduce", lazy_pass("lower_thread_allreduce", "LowerThreadAllreduce", "gpu")),
    ("ThreadSync", lazy_pass("thread_sync", "ThreadSync", "global")),  # only under detect_global_barrier
    ("ThreadSync", lazy_pass("thread_sync", "ThreadSync", "shared")),
    ("LowerIntrin", lazy_pass("lower_intrin", "LowerIntrin")),
]

# build(), for a CPU target whose backend runs thread-bound code as blocks of threads (interp).
HOST_BUILD_GPU_THREADS = [
    ("LowerThreadAllreduce", lazy_pass("lower_thread_allreduce", "LowerThreadAllreduce", "gpu")),
    ("ThreadSync", lazy_pass("thread_sync", "ThreadSync", "global")),
    ("ThreadSync", lazy_pass("thread_sync", "ThreadSync", "shared")),
    ("LowerIntrin", lazy_pass("lower_intrin", "LowerIntrin")),
]

# build(), for a CPU target whose backend runs bound threads one after another (llvm, c):
# a program that needs a barrier cannot run that way, and says so.
HOST_BUILD = [
    ("LowerThreadAllreduce", lazy_pass("lower_thread_allreduce", "LowerThreadAllreduce", "serial")),
    ("RefuseThreadBarriers", lazy_pass("device_memory", "RefuseThreadBarriers")),
    ("LowerIntrin", lazy_pass("lower_intrin", "LowerIntrin")),
]


def host_build(thread_semantics: str) -> list[tuple[str, PassFactory]]:
    """The build pipeline of a CPU target whose backend has ``thread_semantics`` (``"gpu"`` or ``"serial"``)."""
    return HOST_BUILD_GPU_THREADS if thread_semantics == "gpu" else HOST_BUILD


def instantiate(entries: list[tuple[str, PassFactory]], skip: frozenset[str] = frozenset()) -> list[Pass]:
    """Fresh passes for ``entries``, leaving out the names in ``skip``."""
    return [make() for name, make in entries if name not in skip]
