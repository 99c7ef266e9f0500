"""Devices: a DLPack device type plus an ordinal (``cpu(0)``, ``cuda(1)``).

Device type numbers follow DLPack's ``DLDeviceType`` so arrays can be exchanged
with numpy, torch or cupy through ``__dlpack_device__`` without translation.

>>> import loom
>>> loom.cuda(1), loom.device("cpu"), loom.device(2, 0)
(cuda(1), cpu(0), cuda(0))
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from ..errors import TargetError

__all__ = [
    "DeviceType", "Device", "cpu", "cuda", "device", "device_type_of", "device_type_name",
    "kDLCPU", "kDLCUDA", "kDLCUDAHost", "kDLOpenCL", "kDLVulkan", "kDLMetal", "kDLVPI", "kDLROCM",
    "kDLROCMHost", "kDLExtDev", "kDLCUDAManaged", "kDLOneAPI", "kDLWebGPU", "kDLHexagon",
]


class DeviceType(enum.IntEnum):
    """DLPack's ``DLDeviceType`` values."""

    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    VULKAN = 7
    METAL = 8
    VPI = 9
    ROCM = 10
    ROCM_HOST = 11
    EXT_DEV = 12
    CUDA_MANAGED = 13
    ONEAPI = 14
    WEBGPU = 15
    HEXAGON = 16


# The C spellings, for readers coming from DLPack or TVM.
kDLCPU = DeviceType.CPU
kDLCUDA = DeviceType.CUDA
kDLCUDAHost = DeviceType.CUDA_HOST
kDLOpenCL = DeviceType.OPENCL
kDLVulkan = DeviceType.VULKAN
kDLMetal = DeviceType.METAL
kDLVPI = DeviceType.VPI
kDLROCM = DeviceType.ROCM
kDLROCMHost = DeviceType.ROCM_HOST
kDLExtDev = DeviceType.EXT_DEV
kDLCUDAManaged = DeviceType.CUDA_MANAGED
kDLOneAPI = DeviceType.ONEAPI
kDLWebGPU = DeviceType.WEBGPU
kDLHexagon = DeviceType.HEXAGON

#: Canonical short name of each device type (what ``repr(Device)`` prints).
_NAMES: dict[int, str] = {
    1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
    10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu",
    16: "hexagon",
}
#: Names accepted by :func:`device` and by every device-type argument.
_ALIASES: dict[str, int] = {**{n: t for t, n in _NAMES.items()}, "gpu": 2, "cl": 4, "mtl": 8}


def device_type_name(device_type: int) -> str:
    """The short name of a DLPack device type (``1 -> "cpu"``); unknown types print as numbers."""
    return _NAMES.get(int(device_type), str(int(device_type)))


def device_type_of(value: Any) -> int:
    """Normalise a device type given as an int, a name (``"cuda"``), or a :class:`Device`.

    A name that is not a device name but an installed target kind (``"llvm"``)
    resolves to that kind's device type.

    >>> device_type_of("gpu"), device_type_of(1)
    (2, 1)
    """
    if isinstance(value, Device):
        return value.device_type
    if isinstance(value, bool):
        raise TargetError(f"a device type must be an int or a device name, got bool {value!r}")
    if isinstance(value, int):
        if int(value) not in _NAMES:
            raise TargetError(
                f"unknown DLPack device type {int(value)}; known types: "
                + ", ".join(f"{n}={t}" for t, n in _NAMES.items())
            )
        return int(value)
    if isinstance(value, str):
        name = value.strip().split(" ", 1)[0].lower()  # "cuda -arch=sm_90" names a device too
        if name in _ALIASES:
            return _ALIASES[name]
        from .kind import find_kind  # lazy: kinds come from plugins

        kind = find_kind(name)
        if kind is not None:
            return kind.device_type
        from .kind import list_kinds

        raise TargetError(
            f"unknown device {value!r}; expected a device name ({', '.join(sorted(_ALIASES))}) "
            f"or an installed target kind ({', '.join(list_kinds()) or 'none installed'})"
        )
    raise TargetError(f"a device type must be an int or a device name, got {type(value).__name__} {value!r}")


def _check_id(_inst: Any, _attr: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TargetError(f"a device id must be a non-negative int, got {value!r}")


@attrs.frozen(repr=False)
class Device:
    """A concrete device: DLPack device type and device ordinal.

    Devices are plain values: equal when type and id are equal, usable as keys.

    >>> Device(2, 1)
    cuda(1)
    >>> Device(2, 1) == cuda(1)
    True
    """

    device_type: int = attrs.field(converter=device_type_of)
    device_id: int = attrs.field(default=0, validator=_check_id)

    @property
    def name(self) -> str:
        """The short name of the device type (``"cuda"``)."""
        return device_type_name(self.device_type)

    @property
    def exist(self) -> bool:
        """Whether the device is there: a plugin serves its memory and says it exists (TVM's ``dev.exist``).

        >>> cpu(0).exist, device("vulkan", 0).exist
        (True, False)
        """
        from ..errors import LoomError
        from ..runtime.device_api import get_device_api  # lazy: the runtime imports the targets

        try:
            return bool(get_device_api(self.device_type).exists(self))
        except LoomError:
            return False

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, self.device_id)

    def __repr__(self) -> str:
        return f"{self.name}({self.device_id})"

    __str__ = __repr__


def cpu(dev_id: int = 0) -> Device:
    """The CPU device ``dev_id`` (``cpu(0)``)."""
    return Device(DeviceType.CPU, dev_id)


def cuda(dev_id: int = 0) -> Device:
    """The CUDA GPU ``dev_id`` (``cuda(0)``)."""
    return Device(DeviceType.CUDA, dev_id)


def device(dev_type: int | str | Device, dev_id: int = 0) -> Device:
    """A device from a type (int, name such as ``"cuda"``/``"gpu"``, or target kind) and an id.

    >>> device("cuda", 1), device(1)
    (cuda(1), cpu(0))
    """
    return Device(device_type_of(dev_type), dev_id)


#: TVM's classic names: ``tvm.context(...)`` and ``tvm.gpu(...)``.
context = device
gpu = cuda
