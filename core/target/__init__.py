"""Targets, devices, virtual devices and the compilation configuration.

* :class:`Target` (``Target("llvm -mcpu=znver4")``) and the plugin-contributed
  :class:`TargetKind` registry (:func:`list_kinds`, :func:`get_kind`).
* :class:`Device` (``cpu(0)``, ``cuda(1)``, ``device("cuda", 0)``) with DLPack
  device type numbers.
* :class:`VirtualDevice` and :class:`CompilationConfig` for heterogeneous builds.
* :class:`MemoryInfo`, which a backend registers for a special memory (a tagged
  storage scope such as ``"local.L0A"``).
"""

from __future__ import annotations

from .compilation_config import FALLBACK_DEVICE_TYPE_KEY, CompilationConfig
from .devices import (
    Device, DeviceType, cpu, cuda, device, device_type_name, device_type_of, kDLCPU, kDLCUDA,
    kDLCUDAHost, kDLCUDAManaged, kDLExtDev, kDLHexagon, kDLMetal, kDLOneAPI, kDLOpenCL, kDLROCM,
    kDLROCMHost, kDLVPI, kDLVulkan, kDLWebGPU,
)
from .kind import (
    AttrSpec, TargetKind, find_kind, get_kind, list_kinds, override_kinds,
    register_target_kind, reset_kind_cache, unregister_target_kind,
)
from .target import Target, TargetLike
from .generic_dispatch import GenericFunc, create, current_target, generic_func
from .virtual_device import VirtualDevice
from .memory_info import MemoryInfo, memory_info, special_memory

__all__ = [
    "MemoryInfo", "memory_info", "special_memory",
    "Target", "TargetLike", "GenericFunc", "generic_func", "create", "current_target", "TargetKind", "AttrSpec", "list_kinds", "get_kind", "find_kind",
    "register_target_kind", "unregister_target_kind", "reset_kind_cache", "override_kinds",
    "VirtualDevice", "CompilationConfig", "FALLBACK_DEVICE_TYPE_KEY",
    "Device", "DeviceType", "cpu", "cuda", "device", "device_type_of", "device_type_name",
    "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLOpenCL", "kDLVulkan", "kDLMetal", "kDLVPI", "kDLROCM",
    "kDLROCMHost", "kDLExtDev", "kDLCUDAManaged", "kDLOneAPI", "kDLWebGPU", "kDLHexagon",
]
