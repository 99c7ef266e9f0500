"""The ``loom`` entry point of loom-cuda: the ``cuda`` target kind, its backend, device API and rules.

``arch`` defaults to the compute capability of the visible GPU (``cuda(0)``)
when a driver answers, else to ``sm_90`` (Hopper, what the project is
benchmarked on); an unknown ``arch`` is an error listing the valid ones.
``max_shared_memory_per_block`` is the 48 KiB every architecture grants without
an opt-in.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from loom.plugins import hookimpl

from .nvcc import KNOWN_ARCHS

_CUDA = 2
_FALLBACK_ARCH = "sm_90"


@functools.lru_cache(maxsize=1)
def detected_arch() -> str | None:
    """``sm_XY`` of ``cuda(0)`` when a CUDA driver and GPU answer, else None (asked once per process)."""
    from .driver import compute_capability

    found = compute_capability(0)
    return None if found is None else f"sm_{found[0]}{found[1]}"


def _defaults(given: Mapping[str, Any]) -> dict[str, Any]:
    from loom.errors import TargetError

    arch = given.get("arch")
    if arch is None:
        return {"arch": detected_arch() or _FALLBACK_ARCH}
    if arch not in KNOWN_ARCHS:
        raise TargetError(f"unknown GPU architecture arch={arch!r}; valid: {', '.join(KNOWN_ARCHS)}")
    return {}


@hookimpl
def loom_target_kinds() -> list[Any]:
    """The ``cuda`` kind (DLPack device type 2)."""
    from loom.target import AttrSpec, TargetKind

    return [TargetKind(
        "cuda", "cuda",
        {
            "arch": AttrSpec(str, doc="compute capability, sm_XY (default: the visible GPU's, else sm_90)"),
            "max_num_threads": AttrSpec(int, 1024, doc="threads per block"),
            "thread_warp_size": AttrSpec(int, 32, doc="threads per warp"),
            "max_shared_memory_per_block": AttrSpec(int, 49152, doc="bytes of shared memory per block"),
            "fast_math": AttrSpec(bool, False, doc="fast approximate float32 math (__expf...) and FMA contraction"),
            "nvcc_flags": AttrSpec(str, doc="extra flags passed to nvcc"),
        },
        default_keys=("cuda", "gpu"),
        default_attrs=_defaults,
        doc="NVIDIA GPUs through CUDA C, compiled by nvcc to a cubin and PTX (run with loom-cuda[gpu])",
    )]


@hookimpl
def loom_backend(target_kind: str) -> Any:
    """The ``cuda`` backend: CUDA C compiled by nvcc (None for other kinds)."""
    if target_kind != "cuda":
        return None
    from .runtime import CUDABackend

    return CUDABackend()


@hookimpl
def loom_device_api(device_type: int) -> Any:
    """GPU memory through pycuda (device type 2)."""
    if device_type != _CUDA:
        return None
    from .driver import device_api

    return device_api()


@hookimpl
def loom_intrinsic_rules(target: Any) -> Any:
    """How each math op is computed on ``cuda`` targets: CUDA's device math functions."""
    if target.kind.name != "cuda":
        return None
    from .intrinsic_rules import rules_for

    return rules_for(target)


@hookimpl
def loom_load_module(path: str, fmt: str) -> Any:
    """Load a file exported by a :class:`~loom_cuda.runtime.CUDAModule` alone."""
    if fmt != "cuda":
        return None
    from .runtime import load_exported

    return load_exported(path)


@hookimpl
def loom_lower_passes(target: Any, phase: int) -> Any:
    """Refuse kernels a GPU of this target cannot launch (threads and shared memory per block).

    Runs after phase 3's built-in passes, when the launch configuration and the
    shared allocations are final.
    """
    if target.kind.name != "cuda" or phase != 3:
        return None
    from loom.transform.verify_device import VerifyDeviceLimits

    return {"after": [VerifyDeviceLimits(int(target.attrs["max_num_threads"]),
                                         int(target.attrs["max_shared_memory_per_block"]))]}
