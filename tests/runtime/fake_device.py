"""A fake device for the runtime tests: DLPack type 12 (ext_dev), memory of its own on the host, copies counted.

The module is a plugin (its ``loom_device_api`` hook serves the fake); the
``ext_dev`` fixture registers it around one test with a fresh API and yields
that API.  Test modules import the fixture: ``from fake_device import ext_dev``.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections import Counter
from typing import Any, Iterator

import numpy as np
import pytest

import loom
from loom.plugins import hookimpl
from loom.runtime.device_api import DeviceAPI, HostMemoryTable
from loom.target.devices import Device

EXT_DEV = 12
DEV = Device(EXT_DEV, 0)
PLUGIN_NAME = "loom-tests-fake-ext-dev"


class FakeDeviceAPI(DeviceAPI):
    """ext_dev memory in a :class:`HostMemoryTable`; every operation counted, every copy bounds-checked."""

    device_type = EXT_DEV

    def __init__(self) -> None:
        self.table = HostMemoryTable()
        self.counts: Counter[str] = Counter()

    def _inside(self, address: int, nbytes: int, what: str) -> None:
        found = self.table.find(address)
        if nbytes and (found is None or address + nbytes > found[0] + found[1].shape[0]):
            raise AssertionError(f"fake ext_dev: {what} of {nbytes} bytes at {address:#x} leaves every allocation")

    def allocate(self, device: Device, nbytes: int, alignment: int) -> int:
        assert device.device_type == EXT_DEV
        self.counts["alloc"] += 1
        return self.table.allocate(nbytes, alignment)

    def free(self, device: Device, address: int) -> None:
        self.counts["free"] += 1
        self.table.free(address)

    def copy_from_host(self, dst: int, device: Device, src: np.ndarray) -> None:
        assert src.flags.c_contiguous
        self._inside(dst, src.nbytes, "copy_from_host")
        self.counts["to_device"] += 1
        ctypes.memmove(dst, src.ctypes.data, src.nbytes)

    def copy_to_host(self, dst: np.ndarray, src: int, device: Device) -> None:
        assert dst.flags.c_contiguous
        self._inside(src, dst.nbytes, "copy_to_host")
        self.counts["to_host"] += 1
        ctypes.memmove(dst.ctypes.data, src, dst.nbytes)

    def copy_within(self, dst: int, src: int, nbytes: int, device: Device) -> None:
        self._inside(src, nbytes, "copy_within source")
        self._inside(dst, nbytes, "copy_within destination")
        self.counts["within"] += 1
        ctypes.memmove(dst, src, nbytes)

    def synchronize(self, device: Device) -> None:
        self.counts["sync"] += 1

    def copies(self) -> dict[str, int]:
        """The copy counts only (``to_device``, ``to_host``, ``within``), zeros left out."""
        return {k: v for k, v in self.counts.items() if k in ("to_device", "to_host", "within") and v}

    def live(self) -> int:
        """Allocations not yet freed (after a garbage collection)."""
        gc.collect()
        return len(self.table)


API: FakeDeviceAPI | None = None


@hookimpl
def loom_device_api(device_type: int) -> Any:
    return API if device_type == EXT_DEV else None


@pytest.fixture
def ext_dev() -> Iterator[FakeDeviceAPI]:
    """Serve ext_dev with a fresh :class:`FakeDeviceAPI` for one test; yields it."""
    global API
    API = FakeDeviceAPI()
    name = loom.plugins.register(sys.modules[__name__], name=PLUGIN_NAME)
    try:
        yield API
    finally:
        loom.plugins.unregister(name)
        API = None


class DLPackObject:
    """A foreign DLPack producer: hands out ``array``'s capsules and claims ``device``."""

    def __init__(self, array: Any, device: tuple[int, int] | None = None) -> None:
        self.array = array
        self.device = device or array.__dlpack_device__()
        self.calls: list[dict[str, Any]] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


class CapsuleHolder:
    """Hands one existing capsule to a consumer that asks through ``__dlpack__`` (numpy)."""

    def __init__(self, capsule: Any, device: tuple[int, int]) -> None:
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device
