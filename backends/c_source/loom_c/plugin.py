"""The ``loom`` entry point of loom-c: the ``c`` target kind, its backend and its loader."""

from __future__ import annotations

from typing import Any

from loom.plugins import hookimpl


@hookimpl
def loom_target_kinds() -> list[Any]:
    """The ``c`` kind: C source compiled by the system compiler into a shared library."""
    from loom.target import AttrSpec, TargetKind

    return [TargetKind(
        "c", "cpu",
        {
            "compiler": AttrSpec(str, "cc", doc="C compiler executable"),
            "flags": AttrSpec(str, "-O3 -march=native", doc="flags passed to the compiler"),
            "openmp": AttrSpec(bool, True, doc="compile parallel loops with OpenMP"),
            "fast_math": AttrSpec(bool, False, doc="exp, log, tanh, sigmoid, erf as vectorizable polynomials "
                                                   "(loom.fast_exp...: 1-2 ulp) instead of libm calls per lane"),
        },
        default_keys=("cpu",),
        doc="C source compiled with the system C compiler",
    )]


@hookimpl
def loom_backend(target_kind: str) -> Any:
    """The ``c`` backend: C source compiled by the system compiler (None for other kinds)."""
    if target_kind != "c":
        return None
    from .runtime import CBackend

    return CBackend()


@hookimpl
def loom_load_module(path: str, fmt: str) -> Any:
    """Load a shared library exported by a ``c`` module (None for other formats)."""
    if fmt != "c":
        return None
    from loom.runtime.native_library import LibraryModule

    return LibraryModule(path)


@hookimpl
def loom_intrinsic_rules(target: Any) -> Any:
    """How each math op is computed on ``c`` targets: math.h functions of the operand's precision."""
    if target.kind.name != "c":
        return None
    from .intrinsic_rules import rules_for

    return rules_for(target)
