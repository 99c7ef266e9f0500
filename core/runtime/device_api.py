"""Device APIs: who owns the memory of each device type, and how to copy into and out of it.

Every :class:`~loom.runtime.ndarray.NDArray` lives on a device, and its memory
belongs to the :class:`DeviceAPI` of that device's DLPack type.  Plugins serve
device types through the ``loom_device_api(device_type)`` hook; the core's
built-in plugin serves the CPU with :class:`CPUDeviceAPI`.

Memory is named by integer addresses, as a driver names it: ``allocate``
returns one, ``free`` takes it back, and the copy functions move bytes between
host numpy arrays and device addresses.  A device whose memory the host can
read (the CPU, the ``ext_dev`` test device) also answers :meth:`DeviceAPI.host_view`,
which is how the reference interpreter runs kernels on it.

>>> import numpy as np
>>> api = get_device_api(1)
>>> dev = cpu_device()
>>> addr = api.allocate(dev, 16, 64)
>>> api.copy_from_host(addr, dev, np.arange(4, dtype="int32"))
>>> out = np.zeros(4, "int32"); api.copy_to_host(out, addr, dev); out
array([0, 1, 2, 3], dtype=int32)
>>> api.free(dev, addr)
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from typing import Any

import attrs
import numpy as np

from ..errors import LoomValueError
from ..target.devices import Device, device_type_name

__all__ = ["DeviceAPI", "CPUDeviceAPI", "DevicePointer", "HostMemoryTable", "get_device_api", "cpu_device",
           "CPU_DEVICE_API", "reset_device_apis"]

_CPU = 1


def cpu_device() -> Device:
    """``cpu(0)``."""
    return Device(_CPU, 0)


@attrs.frozen
class DevicePointer:
    """An address in a device's memory, as host code holds it: passed on, never dereferenced.

    The interpreter binds buffer arguments that live on a device to one of these
    when it runs host code, so that host code can hand them to kernels but a load
    or store through them is an error (host code must not touch device memory).
    """

    address: int
    device: Device

    def __int__(self) -> int:
        return self.address


class DeviceAPI:
    """The memory and synchronization of one DLPack device type (base class; see module docstring).

    Subclasses set :attr:`device_type` and implement the methods; every method
    takes the concrete :class:`~loom.target.devices.Device` (type and ordinal).
    """

    #: The DLPack device type served.
    device_type: int = 0

    @property
    def name(self) -> str:
        return device_type_name(self.device_type)

    def exists(self, device: Device) -> bool:
        """Whether ``device`` is present (the CPU always is)."""
        return True

    def unavailable_reason(self, device: Device) -> str | None:
        """Why ``device`` cannot be used (no driver, no such GPU...), for error messages; None when it can.

        The default: None when :meth:`exists`, else a generic sentence.
        """
        return None if self.exists(device) else f"{device} is not present on this machine"

    def timer(self, device: Device) -> Any:
        """An object with ``start()`` and ``stop() -> seconds`` timing work queued on ``device`` (a GPU's
        events), or None: time on the host's clock after :meth:`synchronize` (the default)."""
        return None

    def allocate(self, device: Device, nbytes: int, alignment: int) -> int:
        """``nbytes`` of uninitialised memory aligned to ``alignment``; its address.

        :raises LoomError: when the device is out of memory or absent.
        """
        raise NotImplementedError

    def free(self, device: Device, address: int) -> None:
        """Give back memory :meth:`allocate` returned."""
        raise NotImplementedError

    def copy_from_host(self, dst: int, device: Device, src: np.ndarray) -> None:
        """Copy the bytes of the C-contiguous host array ``src`` to ``dst``."""
        raise NotImplementedError

    def copy_to_host(self, dst: np.ndarray, src: int, device: Device) -> None:
        """Fill the C-contiguous host array ``dst`` from the bytes at ``src``."""
        raise NotImplementedError

    def copy_within(self, dst: int, src: int, nbytes: int, device: Device) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst``, both on ``device``."""
        raise NotImplementedError

    def synchronize(self, device: Device) -> None:
        """Wait for work queued on ``device`` (nothing to wait for on synchronous devices)."""

    def host_view(self, address: int, device: Device) -> np.ndarray | None:
        """A ``uint8`` numpy view from ``address`` to the end of the allocation holding it.

        None when the memory is not readable from the host (a real GPU) or the
        address is not inside an allocation this API knows.
        """
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for {self.name} (device type {self.device_type})>"


class HostMemoryTable:
    """Allocations in host memory, found by any address inside them (thread-safe).

    Device APIs whose memory is ordinary host memory (the CPU's, the ``ext_dev``
    test device's) keep their allocations here: numpy ``uint8`` arrays, aligned.

    >>> table = HostMemoryTable()
    >>> addr = table.allocate(10, 16)
    >>> table.view(addr + 4).shape, table.view(addr + 10), table.view(addr - 1)
    ((6,), None, None)
    >>> table.free(addr)
    """

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._arrays: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def allocate(self, nbytes: int, alignment: int) -> int:
        if nbytes < 0:
            raise LoomValueError(f"cannot allocate {nbytes} bytes")
        alignment = max(1, int(alignment))
        raw = np.empty(int(nbytes) + alignment, dtype=np.uint8)
        start = (-raw.ctypes.data) % alignment
        arr = raw[start:start + int(nbytes)]
        address = raw.ctypes.data + start
        with self._lock:
            # Zero-byte allocations share addresses with their neighbours: keep the first.
            if address not in self._arrays:
                bisect.insort(self._starts, address)
            self._arrays[address] = arr
        return address

    def free(self, address: int) -> None:
        with self._lock:
            if self._arrays.pop(address, None) is None:
                raise LoomValueError(f"free of address {address:#x}, which is not an allocation of this device")
            self._starts.remove(address)

    def find(self, address: int) -> tuple[int, np.ndarray] | None:
        """``(start, array)`` of the allocation holding ``address``, else None (a zero-byte
        allocation holds its own start: a kernel given an empty array still gets its memory)."""
        with self._lock:
            k = bisect.bisect_right(self._starts, address) - 1
            if k < 0:
                return None
            start = self._starts[k]
            arr = self._arrays[start]
        return (start, arr) if address < start + arr.shape[0] or address == start else None

    def view(self, address: int) -> np.ndarray | None:
        """The bytes from ``address`` to the end of its allocation, else None."""
        found = self.find(address)
        if found is None:
            return None
        start, arr = found
        return arr[address - start:]

    def __len__(self) -> int:
        return len(self._arrays)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(a.shape[0] for a in self._arrays.values())


class CPUDeviceAPI(DeviceAPI):
    """The host's memory: aligned numpy buffers, copied with ``memmove``."""

    device_type = _CPU

    def __init__(self) -> None:
        self.table = HostMemoryTable()

    def allocate(self, device: Device, nbytes: int, alignment: int) -> int:
        return self.table.allocate(nbytes, alignment)

    def free(self, device: Device, address: int) -> None:
        self.table.free(address)

    def copy_from_host(self, dst: int, device: Device, src: np.ndarray) -> None:
        src = np.ascontiguousarray(src)
        ctypes.memmove(dst, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src: int, device: Device) -> None:
        if not dst.flags.c_contiguous:
            raise LoomValueError("copy_to_host needs a C-contiguous destination array")
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)

    def copy_within(self, dst: int, src: int, nbytes: int, device: Device) -> None:
        ctypes.memmove(dst, src, nbytes)

    def host_view(self, address: int, device: Device) -> np.ndarray | None:
        return self.table.view(address)


#: The CPU's device API (one per process).
CPU_DEVICE_API = CPUDeviceAPI()


_apis: dict[int, DeviceAPI] = {}


def reset_device_apis() -> None:
    """Forget the device APIs found so far (after plugins are registered or removed)."""
    _apis.clear()


def get_device_api(device_type: int | Device) -> DeviceAPI:
    """The device API serving ``device_type`` (asked from the plugins' ``loom_device_api`` hook, then cached).

    :raises LoomValueError: when no installed plugin serves the device type.
    """
    dt = device_type.device_type if isinstance(device_type, Device) else int(device_type)
    found = _apis.get(dt)
    if found is not None:
        return found
    from ..errors import PluginError
    from ..plugins import call_first  # lazy: the plugin manager imports loom

    api, plugin = call_first("loom_device_api", device_type=dt)
    if api is None:
        raise LoomValueError(f"no installed plugin provides memory on {device_type_name(dt)} devices (DLPack device "
                             f"type {dt}); install its backend, or register the plugin that serves it")
    if not isinstance(api, DeviceAPI):
        raise PluginError(f"plugin {plugin!r} serving device type {dt} returned a {type(api).__name__} from "
                          "loom_device_api; expected a loom.runtime.device_api.DeviceAPI")
    _apis[dt] = api
    return api
