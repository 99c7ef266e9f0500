"""The ``loom`` entry point of loom-llvm: the ``llvm`` target kind, its backend and its loader.

Host-dependent defaults (triple, CPU name, CPU features, core count) are filled
in when a target is created, not when the plugin loads: ``llvmlite.binding``
costs a noticeable import and ``loom plugins`` should not pay for it.  They
describe the host only when the target is for the host: ``llvm -mcpu=znver4``
on another machine gets no host feature list, since the CPU name implies its own.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from loom.plugins import hookimpl


@functools.cache
def host_cpu() -> tuple[str, str, tuple[str, ...]]:
    """``(triple, cpu_name, enabled_features)`` of this machine, asked once from LLVM."""
    import llvmlite.binding as llvm

    from .target_check import host_feature_table

    # An empty table: LLVM cannot query the features on this host; the CPU name suffices
    enabled = tuple(sorted(f"+{name}" for name, on in host_feature_table().items() if on))
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), enabled


def _num_cores() -> int:
    # The cores this process may run on (a container's CPU set), not the machine's.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def host_defaults(given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults for the attributes not in ``given``, taken from the host when it is the target."""
    from .target_check import check_values, validate_attrs

    check_values(given)
    out: dict[str, Any] = {"num_cores": _num_cores()}
    if all(k in given for k in ("mtriple", "mcpu", "mattr")):
        # A complete target (e.g. read back from an exported library): no need to ask LLVM.  Its
        # names are checked by the backend's options stage, before LLVM compiles anything.
        return {k: v for k, v in out.items() if k not in given}
    validate_attrs(given, host_cpu())
    triple, cpu, features = host_cpu()
    if given.get("mtriple", triple) == triple:  # otherwise cross compiling: the host is irrelevant
        out["mtriple"] = triple
        out["mcpu"] = cpu
        if given.get("mcpu", cpu) == cpu:
            out["mattr"] = features
    return {k: v for k, v in out.items() if k not in given}


@hookimpl
def loom_target_kinds() -> list[Any]:
    """The ``llvm`` kind: native CPU code through LLVM."""
    from loom.target import AttrSpec, TargetKind

    return [TargetKind(
        "llvm", "cpu",
        {
            "mtriple": AttrSpec(str, doc="LLVM target triple (default: the host's)"),
            "mcpu": AttrSpec(str, doc="CPU name, e.g. znver4 (default: the host CPU)"),
            "mattr": AttrSpec(list, doc="CPU features, e.g. +avx2,+fma (default: the host's)"),
            "opt_level": AttrSpec(int, 3, doc="LLVM optimisation level 0-3"),
            "fp_contract": AttrSpec(bool, True, doc="fuse float a * b + c into FMA instructions (one rounding)"),
            "fast_math": AttrSpec(bool, False, doc="exp, log, tanh, sigmoid, erf as vectorizable polynomials "
                                                   "(loom.fast_exp...: 1-2 ulp) instead of llvm.exp / libm"),
            "num_cores": AttrSpec(int, doc="threads for parallel loops unless LOOM_NUM_THREADS is set (default: usable cores)"),
        },
        default_keys=("cpu",),
        default_attrs=host_defaults,
        doc="native CPU code generated with LLVM (llvmlite)",
    )]


@hookimpl
def loom_backend(target_kind: str) -> Any:
    """The ``llvm`` backend: LLVM IR, optimized and compiled to an object, mapped into the process."""
    if target_kind != "llvm":
        return None
    from .runtime import LLVMBackend

    return LLVMBackend()


@hookimpl
def loom_load_module(path: str, fmt: str) -> Any:
    """Load a shared library exported by an :class:`~loom_llvm.runtime.LLVMModule`."""
    if fmt != "llvm":
        return None
    from loom.runtime.native_library import LibraryModule

    return LibraryModule(path)


@hookimpl
def loom_intrinsic_rules(target: Any) -> Any:
    """How each math op is computed on ``llvm`` targets: LLVM intrinsics (vector forms included) or libm."""
    if target.kind.name != "llvm":
        return None
    from .intrinsic_rules import rules_for

    return rules_for(target)
