"""The ``loom`` entry point of loom-cuda: the ``cuda`` target kind and its launch-limit check.

The defaults describe an NVIDIA Hopper GPU (``sm_90``) because that is what the
project is benchmarked on; pass ``-arch=sm_80`` (or any ``sm_XY``) for other
GPUs.  ``max_shared_memory_per_block`` is the 48 KiB every architecture grants
without an opt-in; kernels that need more must ask for it explicitly.
"""

from __future__ import annotations

from typing import Any

from loom.plugins import hookimpl


@hookimpl
def loom_target_kinds() -> list[Any]:
    """The ``cuda`` kind (DLPack device type 2)."""
    from loom.target import AttrSpec, TargetKind

    return [TargetKind(
        "cuda", "cuda",
        {
            "arch": AttrSpec(str, "sm_90", doc="compute capability, sm_XY (default: Hopper)"),
            "max_num_threads": AttrSpec(int, 1024, doc="threads per block"),
            "thread_warp_size": AttrSpec(int, 32, doc="threads per warp"),
            "max_shared_memory_per_block": AttrSpec(int, 49152, doc="bytes of shared memory per block"),
        },
        default_keys=("cuda", "gpu"),
        doc="NVIDIA GPUs (target kind and launch limits only: CUDA code generation is not implemented yet)",
    )]


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
